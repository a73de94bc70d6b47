"""Quantized rows in quantization steps (harness.analysis.quant_rows): the rule on planted
integer outputs, the cut at quantized tensors, and the float64 form of torch's quantize."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from harness.analysis.quant_rows import QParams, cut_at_quantized, judge_region
from harness.analysis.truth import _quantize_exact
from harness.metrics.quant_steps import RegionKernel

INT8 = QParams(np.asarray(0.5), np.asarray(0.0), -128, 127, "int8")


def _region(truth, actual, fused=False, noise_steps=0.0, torch_offset=0.0):
    truth = np.asarray(truth, dtype=np.float64)
    torch_int = np.clip(np.rint(truth), -128, 127).astype(np.int8)
    return judge_region(np.asarray(actual, np.int8), torch_int, truth, truth + torch_offset, INT8, fused, noise_steps)


@pytest.mark.parametrize("name, truth, actual, fused, noise, beyond, off, ties", [
    ("exact", [1.2, -3.7, 10.0], [1, -4, 10], False, 0.0, 0, 0, 0),
    ("one step off, not at a tie", [1.2, -3.7, 10.0], [2, -4, 10], False, 0.0, 1, 1, 0),
    ("one step off at an exact tie", [2.5, -3.7], [3, -4], False, 0.0, 0, 1, 1),
    ("one step off within the noise band of a tie", [2.4999, -3.7], [3, -4], False, 1e-3, 0, 1, 1),
    ("one step off outside the noise band", [2.49, -3.7], [3, -4], False, 1e-3, 1, 1, 0),
    ("fused kernel: one step allowed anywhere", [1.2, -3.7], [2, -3], True, 0.0, 0, 2, 0),
    ("fused kernel: two steps are a divergence", [1.2, -3.7], [3, -4], True, 0.0, 1, 1, 0),
    ("fused kernel: two steps at a tie", [2.5, -3.7], [4, -4], True, 0.0, 0, 1, 1),
    ("saturation is no excuse", [300.0, 1.0], [126, 1], False, 0.0, 1, 1, 0),
])
def test_region_rule(name, truth, actual, fused, noise, beyond, off, ties):
    backend, torch_side, allowed, found = _region(truth, actual, fused, noise)
    assert found == beyond, name
    assert backend.off_by_one_or_more == off and backend.at_ties == ties, name
    assert allowed == (1 if fused else 0)
    assert torch_side.max_steps == 0  # torch's integers are the truth rounded here


def test_saturated_element_is_named():
    backend, _, _, beyond = _region([300.0, 1.0], [126, 1])
    assert backend.at_saturation == 1 and backend.max_steps == 1 and beyond == 1


def test_noise_band_follows_torchs_own_distance():
    # torch's own float32 value lies 1e-3 steps from the truth: a tie within 4x that is either side
    *_, beyond = _region([2.4985, 0.0], [3, 0], torch_offset=1e-3)
    assert beyond == 0
    *_, beyond = _region([2.49, 0.0], [3, 0], torch_offset=1e-3)
    assert beyond == 1


def test_per_channel_positions():
    qp = QParams(np.asarray([0.5, 2.0]), np.asarray([0.0, 1.0]), -128, 127, "int8", axis=0)
    values = np.asarray([[1.0, -1.0], [4.0, -2.0]])
    np.testing.assert_array_equal(qp.positions(values), [[2.0, -2.0], [3.0, 0.0]])


def test_quantize_exact_rounds_the_quotient_half_to_even():
    x = torch.tensor([0.25, 0.75, -0.25, 1000.0, -1000.0], dtype=torch.float64)
    q = _quantize_exact(x, 0.5, 1, -128, 127, torch.int8)
    assert q.tolist() == [1, 3, 1, 127, -128]  # 0.5 -> 0 (+1), 1.5 -> 2 (+1), -0.5 -> 0 (+1), clamped


def _model(nodes: list, constant: onnx.TensorProto) -> onnx.ModelProto:
    """x (4 floats) -> `nodes` -> y, with `constant` and the int8 zero point z as initializers."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [constant, helper.make_tensor("z", TensorProto.INT8, [], [0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_cut_at_quantized_feeds_readers_and_keeps_writers():
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="d"),
        helper.make_node("Relu", ["d"], ["r"], name="r"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q2"], name="q2"),
        helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"], name="y"),
    ]
    model = _model(nodes, helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]))
    cut, renamed, feeds = cut_at_quantized(model, {"q": "quantize_per_tensor", "q2": "quantize_per_tensor_1"},
                                           {"q": (4,), "q2": (4,)})
    assert renamed == {"q": "q__quantized_region", "q2": "q2__quantized_region"} and feeds == {}
    # q2's reader (y) is no region's, but stays: the runtime sees every reader the model has
    assert {i.name for i in cut.graph.input} == {"x", "q", "q2"}
    assert [o.name for o in cut.graph.output] == ["q__quantized_region", "q2__quantized_region", "y"]
    onnx.checker.check_model(cut)
    import onnxruntime as ort

    session = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    q, q2, y = session.run(None, {"x": np.asarray([1.0, -1.0, 0.3, 2.0], np.float32),
                                  "q": np.asarray([4, -4, 7, 0], np.int8), "q2": np.asarray([1, 2, 3, 4], np.int8)})
    assert q.tolist() == [2, -2, 1, 4]  # from x
    assert q2.tolist() == [4, 0, 7, 0]  # from the fed integers, not from q
    assert y.tolist() == [0.5, 1.0, 1.5, 2.0]  # from the fed q2


def test_cut_feeds_torchs_run_time_qparams_to_readers_only():
    """A dynamically quantized tensor: its scale is computed from the float values; the cut
    value's DequantizeLinear takes torch's scale, the region's QuantizeLinear keeps its own."""
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="m"),
        helper.make_node("Div", ["m", "c"], ["s"], name="s"),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="y"),
    ]
    model = _model(nodes, helper.make_tensor("c", TensorProto.FLOAT, [], [127.0]))
    torch_scale = (np.asarray([0.25]), np.asarray([0.0]))
    cut, renamed, feeds = cut_at_quantized(model, {"q": "quantize_per_tensor"}, {"q": (4,)}, {"q": torch_scale})
    assert list(feeds) == ["q__torch_scale"] and feeds["q__torch_scale"].dtype == np.float32  # z is constant
    reader = next(n for n in cut.graph.node if n.op_type == "DequantizeLinear")
    writer = next(n for n in cut.graph.node if n.op_type == "QuantizeLinear")
    assert list(reader.input) == ["q", "q__torch_scale", "z"] and list(writer.input) == ["x", "s", "z"]
    import onnxruntime as ort

    session = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    q, y = session.run(None, {"x": np.asarray([127.0, -63.5, 1.0, 0.0], np.float32),
                              "q": np.asarray([4, -4, 7, 0], np.int8), **feeds})
    assert q.tolist() == [127, -64, 1, 0]  # the region's own scale, 1.0 (64 at the tie -63.5: half to even)
    assert y.tolist() == [1.0, -1.0, 1.75, 0.0]  # torch's scale, 0.25


def _float_matmul_then_quantize(tail: str) -> onnx.ModelProto:
    """a (16x128) @ DequantizeLinear(int8 weight, per output channel)^T, then `tail` ('tanh', or
    'add': + r), then QuantizeLinear. onnxruntime at `all` makes MatMulNBits of the weight's DQ
    and the MatMul before Tanh; before the Add it makes a Gemm reading a DequantizeLinear of the
    weight it transposed (a new int8 initializer)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="wd", axis=0),
        helper.make_node("Transpose", ["wd"], ["wt"], name="wt", perm=[1, 0]),
        helper.make_node("MatMul", ["a", "wt"], ["m"], name="m"),
        helper.make_node("Tanh", ["m"], ["y"], name="y") if tail == "tanh" else helper.make_node("Add", ["m", "r"], ["y"], name="y"),
        helper.make_node("QuantizeLinear", ["y", "s", "z"], ["q"], name="q"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [16, 128]),
                     helper.make_tensor_value_info("r", TensorProto.FLOAT, [16, 64])],
        [helper.make_tensor_value_info("q", TensorProto.INT8, [16, 64])],
        [onnx.numpy_helper.from_array(rng.integers(-127, 128, (64, 128)).astype(np.int8), "w"),
         onnx.numpy_helper.from_array(np.full(64, 0.01, np.float32), "ws"),
         onnx.numpy_helper.from_array(np.zeros(64, np.int8), "wz"),
         onnx.numpy_helper.from_array(np.float32(0.02), "s"), onnx.numpy_helper.from_array(np.int8(0), "z")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("tail, level, accuracy, kind", [
    ("tanh", "disabled", None, "ai.onnx::QuantizeLinear"),
    ("tanh", "all", None, "ai.onnx::QuantizeLinear with com.microsoft::MatMulNBits on int8 activations, "
                          "blocks of 32 (accuracy_level 4)"),
    ("tanh", "all", "1", "ai.onnx::QuantizeLinear"),  # float32 arithmetic: nothing below the graph's to name
    ("add", "all", None, "ai.onnx::QuantizeLinear"),  # the weight the runtime transposed is no int32 bias
])
def test_region_kernels_name_what_the_runtime_computes(tail, level, accuracy, kind):
    from harness.analysis.quant_rows import region_kernels
    from harness.runtime import DeviceSpec, model_runner
    from harness.runtime.ort_config import OrtConfig

    entries = {"session.qdq_matmulnbits_accuracy_level": accuracy} if accuracy else {}
    config = OrtConfig.from_dict({"graph_optimization_level": level, "config_entries": entries})
    model = _float_matmul_then_quantize(tail)
    feeds = _feeds(model)
    values, graph = model_runner(DeviceSpec.parse("cpu"), False, None, config).inspect(model, feeds)
    assert graph.optimised is not None and not graph.layers  # onnxruntime's optimised graph, from the run's load
    np.testing.assert_array_equal(values["q"], model_runner(DeviceSpec.parse("cpu"), False, None, config)(model, feeds)["q"])
    found = region_kernels(model, graph, ["q"])["q"]
    assert found.describe() == kind
    assert not found.requantizes  # no step allowed for it


def _feeds(model):
    rng = np.random.default_rng(1)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def test_a_requantizing_kernel_is_named_from_the_load_that_ran_it():
    """onnxruntime at `all` fuses DequantizeLinear -> MatMul -> QuantizeLinear with int8 activations
    into an integer kernel: the record says which, and that it requantizes (one step allowed)."""
    from harness.analysis.quant_rows import INTEGER_KERNELS, region_kernels
    from harness.runtime import DeviceSpec, model_runner
    from harness.runtime.ort_config import OrtConfig

    model = _quantized_matmul()
    config = OrtConfig.from_dict({"graph_optimization_level": "all"})
    _, graph = model_runner(DeviceSpec.parse("cpu"), False, None, config).inspect(model, _feeds(model))
    found = region_kernels(model, graph, ["q"])["q"]
    assert found.requantizes and found.kernel.split("::")[-1] in INTEGER_KERNELS, found
    assert found.to_dict() == {"kernel": found.kernel, "requantizes": True, "below_float32": []}
    _, plain = model_runner(DeviceSpec.parse("cpu"), False, None,
                            OrtConfig.from_dict({"graph_optimization_level": "disabled"})).inspect(model, _feeds(model))
    assert region_kernels(model, plain, ["q"])["q"] == RegionKernel("ai.onnx::QuantizeLinear")  # run as written


def _quantized_matmul():
    """QuantizeLinear -> DequantizeLinear -> MatMul (int8 weight, dequantized) -> QuantizeLinear."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"]),
        helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["ad"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
        helper.make_node("MatMul", ["ad", "wd"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "qs", "z"], ["q"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [16, 128])],
        [helper.make_tensor_value_info("q", TensorProto.UINT8, [16, 64])],
        [onnx.numpy_helper.from_array(rng.integers(-127, 128, (128, 64)).astype(np.int8), "w"),
         onnx.numpy_helper.from_array(np.float32(0.01), "ws"), onnx.numpy_helper.from_array(np.int8(0), "wz"),
         onnx.numpy_helper.from_array(np.float32(0.02), "s"), onnx.numpy_helper.from_array(np.float32(0.5), "qs"),
         onnx.numpy_helper.from_array(np.uint8(128), "z")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("tail", ["add", "tanh"])
def test_openvino_names_fully_connected_layers_that_quantize_their_activations(tail):
    from harness.analysis.quant_rows import OPENVINO_INTEGER, region_kernels
    from harness.runtime import DeviceSpec, model_runner
    from harness.runtime.backends import get_backend

    reason = get_backend("openvino:precision=f32").unavailable_reason("CPU")
    if reason:
        pytest.skip(reason)
    group = get_backend("openvino:precision=f32").prepare(_float_matmul_then_quantize(tail), "CPU") \
        .dynamic_quantization_group()
    if not group:
        pytest.skip("this CPU plugin computes integer-weight FullyConnected layers on float activations "
                    "(DYNAMIC_QUANTIZATION_GROUP_SIZE 0): the test needs a CPU plugin that quantizes them")
    model = _float_matmul_then_quantize(tail)
    runner = model_runner(DeviceSpec.parse("cpu"), False, None, backend=get_backend("openvino:precision=f32"))
    _, graph = runner.inspect(model, _feeds(model))
    assert graph.layers and graph.dynamic_quantization_group == group and graph.optimised is None
    found = region_kernels(model, graph, ["q"])["q"]
    if tail == "tanh":  # one int8 layer holds the MatMul, the Tanh and the QuantizeLinear: it requantizes
        assert found == RegionKernel(f"{OPENVINO_INTEGER} (FullyConnected, int8)", True)
    else:  # the Add and the QuantizeLinear run in float after it: the exact rule, the kernel named
        assert not found.requantizes
        assert found.describe() == (f"ai.onnx::QuantizeLinear with OpenVINO FullyConnected on int8 activations, "
                                    f"groups of {group} (DYNAMIC_QUANTIZATION_GROUP_SIZE)")
