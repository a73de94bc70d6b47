"""Cast-wrapping of nodes ONNX or onnxruntime's CPU provider cannot run in float16/bfloat16
(exporter.optimize.legalize_dtypes): before/after on hand-made graphs, and exports of small bfloat16
and float16 models that onnxruntime loads."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import exporter
from exporter.optimize.legalize_dtypes import legalize_dtypes, undefined_types
from exporter.contract.keys import CAST_KEY, FX_NODE_KEY
from harness.backend import prepare

BF16, FP16, FP32 = TensorProto.BFLOAT16, TensorProto.FLOAT16, TensorProto.FLOAT


def _conv_model(elem: int = BF16) -> onnx.ModelProto:
    """x (1,2,5,5) -> Conv(w, b) -> y, every value in `elem`, with the exporter's provenance."""
    rng = np.random.default_rng(0)
    np_type = helper.tensor_dtype_to_np_dtype(elem)
    weight = rng.standard_normal((3, 2, 3, 3)).astype(np.float32).astype(np_type)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv2d", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    entry = conv.metadata_props.add()
    entry.key, entry.value = FX_NODE_KEY, "conv2d"
    graph = helper.make_graph(
        [conv], "g", [helper.make_tensor_value_info("x", elem, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("y", elem, [1, 3, 5, 5])],
        initializer=[helper.make_tensor("w", elem, weight.shape, weight.view(np.uint16).tobytes(), raw=True)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_bfloat16_conv_is_refused_before_and_loads_after_wrapping():
    model = _conv_model()
    with pytest.raises(Exception, match="INVALID_GRAPH|bfloat16"):
        _session(model)
    wrapped = legalize_dtypes(model)

    assert [w.op_type for w in wrapped] == ["Conv"]
    onnx.checker.check_model(model, full_check=True)
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    notes = {p.key: p.value for p in conv.metadata_props}
    assert notes[CAST_KEY].startswith("bfloat16->float32: ONNX Conv (opset 18) does not define tensor(bfloat16)")
    assert [n.op_type for n in model.graph.node] == ["Cast", "Cast", "Conv", "Cast"]
    assert all({p.key: p.value for p in n.metadata_props}[FX_NODE_KEY] == "conv2d" for n in model.graph.node)
    assert model.graph.node[-1].output[0] == "y"  # the FX-named value keeps its name and type

    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(ml_dtypes.bfloat16)
    (actual,) = prepare(model, "CPU").run(x)  # inputs and outputs travel as bfloat16 OrtValues
    assert actual.dtype == np.dtype(ml_dtypes.bfloat16)
    weight = torch.from_numpy(onnx.numpy_helper.to_array(model.graph.initializer[0]).astype(np.float32))
    expected = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)), weight, padding=1)
    rounded_once = expected.to(torch.bfloat16).float().numpy()  # float32 math, rounded to bfloat16 once
    np.testing.assert_array_equal(actual.astype(np.float32), rounded_once)


def test_wrapping_is_idempotent_and_leaves_float32_alone():
    model = _conv_model()
    legalize_dtypes(model)
    assert legalize_dtypes(model) == []
    float_model = _conv_model(FP32)
    assert legalize_dtypes(float_model) == []
    assert [n.op_type for n in float_model.graph.node] == ["Conv"]


def test_onnxruntime_kernel_check_can_be_turned_off():
    """Gemm is defined in bfloat16 (opset 13 on) but onnxruntime's CPU provider has no kernel:
    it is wrapped for onnxruntime only; Conv, which ONNX does not define, always."""
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], name="linear")
    graph = helper.make_graph([gemm], "g", [helper.make_tensor_value_info("x", BF16, [2, 4]),
                                            helper.make_tensor_value_info("w", BF16, [4, 3])],
                              [helper.make_tensor_value_info("y", BF16, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    assert legalize_dtypes(onnx.ModelProto.FromString(model.SerializeToString()), onnxruntime_cpu=False) == []
    (wrapped,) = legalize_dtypes(model)
    assert "onnxruntime's CPU provider has no tensor(bfloat16) kernel for Gemm" in wrapped.reason
    _session(model)


@pytest.mark.parametrize("op_type, opset, types, undefined", [
    ("Conv", 18, [BF16, BF16], "tensor(bfloat16) for input X"),
    ("Conv", 18, [FP16, FP16], ""),
    ("MaxPool", 18, [BF16], "tensor(bfloat16) for input X"),
    ("Add", 13, [BF16, BF16], ""),      # Add-13 added bfloat16
    ("Add", 12, [BF16, BF16], "tensor(bfloat16) for input A"),
    ("Gather", 13, [BF16, TensorProto.INT64], ""),
    ("Concat", 13, [BF16, BF16, BF16], ""),  # variadic: the last formal covers the rest
])
def test_undefined_types_follow_the_schema_at_the_opset(op_type, opset, types, undefined):
    assert undefined_types(op_type, opset, types, []) == undefined


class _Small(torch.nn.Module):
    """conv + batch norm + pooling + transposed conv + attention + linear, the ops a bfloat16
    export must wrap."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.up = torch.nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.avg = torch.nn.AdaptiveAvgPool2d(2)
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = self.avg(self.up(self.pool(torch.relu(self.bn(self.conv(x))))))
        tokens = y.flatten(2).transpose(1, 2)
        tokens, _ = self.attention(tokens, tokens, tokens)
        return torch.nn.functional.gelu(self.fc(tokens)).softmax(-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_small_low_precision_models_export_to_graphs_onnxruntime_loads(dtype):
    torch.manual_seed(0)
    module = _Small().eval().to(dtype)
    x = torch.randn(2, 3, 8, 8, dtype=dtype)
    model = exporter.export(module, (x,))
    onnx.checker.check_model(model, full_check=True)
    _session(model)  # raises when onnxruntime refuses the graph
    casts = [n for n in model.graph.node if any(p.key == CAST_KEY for p in n.metadata_props)]
    if dtype == torch.bfloat16:
        assert {"Conv", "ConvTranspose", "MaxPool", "Gemm", "Softmax"} <= {n.op_type for n in casts}
    else:  # onnxruntime's CPU provider runs (or casts by itself) every float16 node ONNX defines
        assert casts == []


def _bfloat16_linear(monkeypatch=None):
    torch.manual_seed(0)
    module = torch.nn.Linear(64, 32).eval().to(torch.bfloat16)
    x = torch.randn(2, 7, 64, dtype=torch.bfloat16)  # 3-d: MatMul then Add, one FX node
    return module, x, exporter.export(module, (x,))


def _within_half_an_ulp(model, module, x) -> bool:
    """Whether every output is the float64 result rounded once to bfloat16 (half a bfloat16 ulp,
    plus float32 summation noise)."""
    (actual,) = prepare(model, "CPU").run(x.float().numpy().astype(ml_dtypes.bfloat16))
    with torch.no_grad():
        truth = torch.nn.functional.linear(x.double(), module.weight.double(), module.bias.double()).numpy()
    ulp = np.spacing(np.abs(truth).astype(ml_dtypes.bfloat16)).astype(np.float64)
    return bool(np.all(np.abs(actual.astype(np.float64) - truth) <= 0.5 * ulp + 1e-6 * np.abs(truth)))


def test_an_op_of_several_wrapped_nodes_rounds_once(monkeypatch):
    """A bfloat16 linear on a 3-d input is MatMul then Add: the value between them stays float32
    (no Cast back and up), so the op rounds once, as torch's kernel does."""
    module, x, model = _bfloat16_linear()
    assert [n.op_type for n in model.graph.node] == ["Cast", "Cast", "MatMul", "Cast", "Add", "Cast"]
    matmul = next(n for n in model.graph.node if n.op_type == "MatMul")
    add = next(n for n in model.graph.node if n.op_type == "Add")
    assert matmul.output[0] in add.input and model.graph.node[-1].output[0] == "linear"
    assert _within_half_an_ulp(model, module, x)

    import exporter.optimize.legalize_dtypes as legalize

    monkeypatch.setattr(legalize, "_round_once_per_op", lambda nodes, *rest: nodes)
    _, _, rounded_twice = _bfloat16_linear()
    assert [n.op_type for n in rounded_twice.graph.node].count("Cast") == 6
    assert not _within_half_an_ulp(rounded_twice, module, x)  # what the pass prevents


def test_failed_type_inference_names_the_nodes_it_leaves_unwrapped(monkeypatch):
    """A MaxPool reading an undeclared value (a Relu's output) needs onnx's type inference to
    be found bfloat16; when inference fails, the MaxPool cannot be wrapped, and an
    ExportWarning says so and names it."""
    relu = helper.make_node("Relu", ["x"], ["t"], name="relu")
    pool = helper.make_node("MaxPool", ["t"], ["y"], name="max_pool2d", kernel_shape=[1, 1])
    graph = helper.make_graph([relu, pool], "g", [helper.make_tensor_value_info("x", BF16, [1, 2, 3, 3])],
                              [helper.make_tensor_value_info("y", BF16, [1, 2, 3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    inferred = legalize_dtypes(onnx.ModelProto.FromString(model.SerializeToString()), onnxruntime_cpu=False)
    assert [w.op_type for w in inferred] == ["MaxPool"]

    def planted(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("planted inference failure")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", planted)
    with pytest.warns(exporter.ExportWarning, match=r"planted inference failure.*MaxPool 'max_pool2d'"):
        assert legalize_dtypes(model, onnxruntime_cpu=False) == []
    assert [n.op_type for n in model.graph.node] == ["Relu", "MaxPool"]
