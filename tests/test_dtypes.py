"""float16, bfloat16 and mixed precision through the harness: OrtValue I/O, `verify(dtype=)`,
autocast regions, and the dtype named in the record."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import harness
from harness.runtime.dtypes import cast_for_dtype, parse_dtype, value_dtypes
from harness.runtime.ortvalues import fed_as, from_ortvalue, to_ortvalue, widened

BF16 = np.dtype(ml_dtypes.bfloat16)


def _rows_measured(verification) -> None:
    """Every row that has ONNX nodes was computed and compared by its isolated run."""
    for op in verification.ops:
        if op.onnx_ops:
            assert op.isolated is not None, (op.fx_node, op.not_isolable)
            assert op.computed_by == "onnxruntime"


def test_bfloat16_model_with_shared_weights_verifies():
    """Regression: a bfloat16 model whose weights are handed to onnxruntime as OrtValues
    crashed verify with "Creation of OrtValues is currently only supported from non-string
    numpy arrays" (and its Conv, which ONNX does not define in bfloat16, was refused)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3))
    module = module.eval().to(torch.bfloat16)
    verification = harness.verify(module, (torch.randn(2, 3, 8, 8, dtype=torch.bfloat16),))

    assert verification.checker.passed
    assert not any("refused" in note or "failed" in note for note in verification.notes), verification.notes
    assert verification.outputs and verification.outputs[0].shape_match
    assert verification.environment["dtype"] == "bfloat16"
    assert {op.fx_node for op in verification.ops} >= {"conv2d", "relu", "conv2d_1"}
    _rows_measured(verification)


def _identity_model(elem: int) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], "g",
                              [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("y", elem, [3, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("device", ["CPU", "reference"])
def test_backend_takes_and_returns_bfloat16(device):
    rep = harness.backend.prepare(_identity_model(TensorProto.BFLOAT16), device)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 3
    (y,) = rep.run(x.astype(BF16))
    assert y.dtype == BF16
    np.testing.assert_array_equal(y, x.astype(BF16).T)
    (again,) = rep.run(x.astype(BF16).astype(np.float32))  # the harness's float32 view of bfloat16 values
    np.testing.assert_array_equal(again, y)
    with pytest.raises(ValueError, match="'x' is declared tensor\\(bfloat16\\).*cannot hold exactly"):
        rep.run(x + 1e-3)


def test_ortvalue_round_trip_keeps_bits():
    values = np.array([[1.0, -2.5, np.inf], [np.nan, 3.0e38, 1e-40]], dtype=np.float32).astype(BF16)
    back = from_ortvalue(to_ortvalue(values))
    assert back.dtype == BF16
    np.testing.assert_array_equal(back.view(np.uint16), values.view(np.uint16))
    assert widened(back).dtype == np.float32
    plain = np.ones((2, 2), np.float16)
    assert fed_as(plain, "tensor(float16)", "x") is plain
    assert from_ortvalue(to_ortvalue(plain)).dtype == np.float16


@pytest.mark.parametrize("dtype", ["float16", torch.bfloat16])
def test_verify_casts_a_copy_of_module_and_inputs(dtype):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                 torch.nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    verification = harness.verify(module, (x,), dtype=dtype)

    assert module[0].weight.dtype == torch.float32 and x.dtype == torch.float32  # the user's are untouched
    expected = parse_dtype(dtype)
    assert verification.environment["dtype"] == str(expected).removeprefix("torch.")
    assert verification.outputs[0].dtype_expected == ("float16" if expected == torch.float16 else "float32")
    _rows_measured(verification)


def test_cast_for_dtype_leaves_integer_inputs_and_buffers():
    embedding = torch.nn.Embedding(10, 4)
    module, args, kwargs = cast_for_dtype(embedding, (torch.tensor([1, 2]),), {"scale": torch.ones(2)}, "bfloat16")
    assert module.weight.dtype == torch.bfloat16 and embedding.weight.dtype == torch.float32
    assert args[0].dtype == torch.int64 and kwargs["scale"].dtype == torch.bfloat16
    with pytest.raises(ValueError, match="choose one of float32, float16, bfloat16"):
        parse_dtype("float64")


class _Autocast(torch.nn.Module):
    """A float32 module with a CPU bfloat16 autocast region."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 16)
        self.conv = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.head = torch.nn.Linear(16, 8)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.conv(torch.relu(self.inner(x)).view(x.shape[0], 4, -1))
        return self.head(y.flatten(1).float()).softmax(-1)


def test_autocast_region_verifies_per_op_with_its_casts_in_rows():
    torch.manual_seed(0)
    module = _Autocast().eval()
    verification = harness.verify(module, (torch.randn(2, 16),))

    assert verification.passed, verification.notes
    assert verification.environment["value_dtypes"] == ["bfloat16", "float32"]
    casts = [op for op in verification.ops if op.aten == "aten._to_copy.default"]
    computed = [op for op in casts if op.onnx_ops]  # the weights' casts are folded into initializers
    assert [op.onnx_ops for op in computed] == [["Cast"], ["Cast"]]  # x into the region, y out of it
    assert all(op.isolated is not None and op.passed for op in computed)
    by_name = {op.fx_node: op for op in verification.ops}
    assert "Conv" in by_name["conv1d"].onnx_ops and "Cast" in by_name["conv1d"].onnx_ops  # wrapped: bfloat16 Conv
    _rows_measured(verification)


def test_value_dtypes_of_a_plain_program():
    program = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    assert value_dtypes(program) == ["float32"]
    assert value_dtypes(None) == []


def test_ops_onnxruntime_has_no_kernel_for_are_computed_by_onnx_reference(monkeypatch):
    """A graph ONNX allows but onnxruntime's CPU provider cannot run (bfloat16 Gemm and Relu,
    left unwrapped here): the backend refuses the model, which stays a finding, and each such
    op's row is computed by onnx's ReferenceEvaluator and says so."""
    import exporter.optimize.legalize_dtypes as legalize

    monkeypatch.setattr(legalize, "onnxruntime_cpu_runs", lambda probe: True)  # the schemas alone decide
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval().to(torch.bfloat16)
    verification = harness.verify(module, (torch.randn(2, 8, dtype=torch.bfloat16),))

    assert not verification.passed
    assert any("NOT_IMPLEMENTED" in note for note in verification.notes)
    rows = {op.fx_node: op for op in verification.ops}
    for name in ("linear", "relu"):
        assert rows[name].computed_by == "onnx.reference", rows[name].not_isolable
        assert rows[name].isolated is not None and rows[name].isolated.shape_match
        assert rows[name].isolated.normalized < 1e-2  # bfloat16 rounding, not a wrong value


def test_verify_onnx_on_a_bfloat16_file_keeps_its_inputs_bfloat16():
    """The inputs reach onnxruntime and onnx's ReferenceEvaluator as bfloat16 (a float32 feed
    would make the reference skip the rounding of x*x); outputs compare as float32."""
    from exporter.optimize.legalize_dtypes import legalize_dtypes

    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"], name="square")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    legalize_dtypes(model)
    x = np.array([1.0078125, 3.0, 0.333984375], np.float32).astype(BF16)
    squared = (x.astype(np.float32) ** 2).astype(BF16).astype(np.float32)
    for expected in (None, [squared.astype(BF16)]):
        verification = harness.verify_onnx(model, [x], expected)
        assert verification.passed, verification.notes
        (output,) = verification.outputs
        assert (output.dtype_actual, output.dtype_expected, output.max_abs) == ("float32", "float32", 0.0)
    assert squared[0] != np.float32(1.0078125) ** 2  # the case needs bfloat16 rounding to pass
