"""`harness.verify_onnx` on the onnx wheel's own test data, and on small hand-made models.

onnx ships `backend/test/data/pytorch-converted/<case>/{model.onnx, test_data_set_*/...}` and
`backend/test/data/light/light_<model>.onnx` (+ `_output_0.pb`; inputs are generated the way
onnx's backend runner does: arange(n)/n). Measured on onnxruntime 1.31.1 CPU, onnx 1.23:

* pytorch-converted: 59 of 82 cases pass. The other 23 are opset-6 models that onnxruntime
  1.31 refuses ("Could not find an implementation for BatchNormalization(6)", AveragePool(1),
  Mul(6), Add(6), Gemm(6), PRelu(6)): a backend gap, reported as such, not a harness error.
* light: all 9 models pass at the outputs (which the stored `_output_0.pb` files hold). Per
  node, onnx's ReferenceEvaluator disagrees with onnxruntime on four op types, where
  onnxruntime follows the spec (checked against the spec formula in numpy, or against the
  stored outputs) and the reference does not: LRN (its window sum), BatchNormalization in
  opset 9 (off by up to 150% of scale), Softmax before opset 13 (applied on one axis instead
  of the input coerced to 2-D: 1.0 where the stored output has 0.001) and Dropout before
  opset 10 (its mask output is bool, the spec's is the input type T).
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import harness

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
PYTORCH_CONVERTED = sorted(glob.glob(os.path.join(DATA, "pytorch-converted", "*")))
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "*.onnx")))

PYTORCH_CONVERTED_PASS_FLOOR = 59  # measured: 59/82 (onnxruntime 1.31.1 CPU)
LIGHT_PASS_FLOOR = 9  # measured: 9/9
ORT_MISSING_KERNEL = "NOT_IMPLEMENTED : Could not find an implementation for"
# onnxruntime 1.31 has no kernels for the opset-6 versions above; a model of opset 7 or later
# that it cannot load is a finding, not this known gap.
ORT_MISSING_KERNELS_BELOW_OPSET = 7
# (op type, the opsets [first, last] at which the evaluator departs from the spec): the light
# models are all opset 9, which is where each of these was measured.
KNOWN_REFERENCE_DISAGREEMENTS = {
    "LRN": ((1, 12), "onnx ReferenceEvaluator's LRN departs from the spec; onnxruntime and torch agree with it"),
    "BatchNormalization": ((9, 9), "onnx ReferenceEvaluator's opset-9 BatchNormalization departs from the spec formula"),
    "Dropout": ((1, 9), "onnx ReferenceEvaluator returns a bool mask where opset < 10 specifies the input type"),
    "Softmax": ((1, 12), "onnx ReferenceEvaluator applies opset < 13 Softmax on one axis instead of the coerced 2-D input"),
}


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _excused(op_type: str, opset: int) -> bool:
    """Whether a per-node disagreement is the evaluator's documented bug at this opset."""
    known = KNOWN_REFERENCE_DISAGREEMENTS.get(op_type)
    return known is not None and known[0][0] <= opset <= known[0][1]


def _load(path: str) -> np.ndarray:
    tensor = onnx.TensorProto()
    with open(path, "rb") as handle:
        tensor.ParseFromString(handle.read())
    return numpy_helper.to_array(tensor)


def _pytorch_converted_cases() -> list[tuple[str, str, list[np.ndarray], list[np.ndarray]]]:
    cases = []
    for case in PYTORCH_CONVERTED:
        for data_set in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
            inputs = [_load(p) for p in sorted(glob.glob(os.path.join(data_set, "input_*.pb")))]
            outputs = [_load(p) for p in sorted(glob.glob(os.path.join(data_set, "output_*.pb")))]
            cases.append((os.path.basename(case), os.path.join(case, "model.onnx"), inputs, outputs))
    return cases


def _light_case(path: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Inputs as onnx's backend runner makes them for light models; the stored outputs."""
    model = onnx.load(path)
    initializers = {i.name for i in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in value.type.tensor_type.shape.dim)
        count = int(np.prod(shape))
        inputs.append((np.arange(count).reshape(shape) / count).astype(np.float32))
    stem = os.path.splitext(path)[0]
    outputs = [_load(f"{stem}_output_{i}.pb") for i in range(len(model.graph.output))]
    return inputs, outputs


def _node_disagreements(verification) -> list[str]:
    """Per-node rows that fail, beyond the documented reference-evaluator bugs at their opsets."""
    opset = _opset(verification.onnx_model)
    return [
        f"{op.fx_node} ({op.onnx_ops[0]}): {op.isolated.note or op.isolated.tolerance_ratio if op.isolated else op.not_isolable}"
        for op in verification.ops
        if op.passed is False and not _excused(op.onnx_ops[0], opset)
    ]


def test_pytorch_converted_models_pass_floor():
    passed, failures, unexpected = 0, {}, {}
    for name, path, inputs, outputs in _pytorch_converted_cases():
        verification = harness.verify_onnx(path, inputs, outputs)
        if verification.passed:
            passed += 1
            problems = _node_disagreements(verification)
            if problems:
                unexpected[name] = problems
            assert verification.ops and all(op.isolated is not None for op in verification.ops), name
        else:
            failures[name] = verification.notes
            known_gap = _opset(onnx.load(path)) < ORT_MISSING_KERNELS_BELOW_OPSET and any(
                ORT_MISSING_KERNEL in note for note in verification.notes)
            if not known_gap:
                unexpected[name] = verification.notes or [c.to_dict() for c in verification.outputs]
    assert not unexpected, unexpected
    assert passed >= PYTORCH_CONVERTED_PASS_FLOOR, failures
    assert passed + len(failures) == len(PYTORCH_CONVERTED)


def test_a_refused_model_is_reported_not_raised():
    name, path, inputs, outputs = next(c for c in _pytorch_converted_cases() if c[0] == "test_BatchNorm2d_eval")
    verification = harness.verify_onnx(path, inputs, outputs)
    assert not verification.passed and verification.outputs == []
    assert any(ORT_MISSING_KERNEL in note and "BatchNormalization(6)" in note for note in verification.notes)
    bn = next(op for op in verification.ops if op.onnx_ops == ["BatchNormalization"])
    assert "cannot run its subgraph alone" in bn.not_isolable  # the isolation says why per node


def _verify_light(path: str):
    inputs, outputs = _light_case(path)
    return harness.verify_onnx(path, inputs, outputs)


def test_light_alexnet_per_node_against_the_reference():
    """Always on: the light model that shows two of the reference's documented bugs."""
    verification = _verify_light(os.path.join(DATA, "light", "light_bvlc_alexnet.onnx"))
    assert verification.passed and verification.op_reference == "onnx.reference"
    assert not _node_disagreements(verification)
    failing = {op.onnx_ops[0] for op in verification.ops if op.passed is False}
    assert failing == {"LRN", "Dropout"}
    conv = [op for op in verification.ops if op.onnx_ops == ["Conv"]]
    assert conv and all(op.passed and op.accumulated is not None for op in conv)


@pytest.mark.nightly  # the nine light zoo models, per node (~100 s): alexnet above runs in every CI run
def test_light_models_pass_floor():
    passed, problems = 0, {}
    for path in LIGHT:
        verification = _verify_light(path)
        passed += verification.passed
        if _node_disagreements(verification) or not verification.passed:
            problems[os.path.basename(path)] = _node_disagreements(verification) or verification.notes
    assert passed >= LIGHT_PASS_FLOOR and not problems, problems


# --- small hand-made models --------------------------------------------------------------------


def _model(nodes, inputs, outputs, opset=18):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def test_without_expected_outputs_the_reference_is_expected(tmp_path):
    model = _model([helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
                    helper.make_node("Mul", ["t", "x"], ["y"], name="mul")], [_vi("x", [3])], [_vi("y", [3])])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    verification = harness.verify_onnx(str(path), {"x": np.array([-1, 0, 2], np.float32)})
    assert verification.passed and verification.checker.passed
    assert [op.fx_node for op in verification.ops] == ["tanh", "mul"]
    assert [op.aten for op in verification.ops] == ["onnx::Tanh", "onnx::Mul"]
    assert all(op.isolated.passed and op.accumulated.passed for op in verification.ops)


def test_wrong_expected_outputs_fail():
    model = _model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                    helper.make_node("Neg", ["r"], ["y"], name="neg")], [_vi("x", [2])], [_vi("y", [2])])
    x = np.array([-1.0, 3.0], np.float32)
    assert not harness.verify_onnx(model, [x], [np.array([0.0, 3.0], np.float32)]).passed
    assert harness.verify_onnx(model, [x], [np.array([0.0, -3.0], np.float32)]).passed


def test_a_model_the_reference_cannot_run_is_noted():
    node = helper.make_node("Relu", ["x"], ["y"], name="custom", domain="com.example")
    model = helper.make_model(helper.make_graph([node], "g", [_vi("x", [2])], [_vi("y", [2])]),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)],
                              ir_version=10)
    verification = harness.verify_onnx(model, [np.ones(2, np.float32)])
    assert not verification.passed
    assert any("ReferenceEvaluator cannot run" in note for note in verification.notes)


def test_a_reference_evaluator_failure_is_raised_in_strict_mode(monkeypatch):
    """Beyond an op it lacks, an error of onnx.reference is a note only outside strict mode."""
    from harness.analysis import onnx_rows

    def broken(model, feeds):
        raise TypeError("the evaluator tripped")

    monkeypatch.setattr(onnx_rows, "reference_values", broken)
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(TypeError, match="the evaluator tripped"):
        harness.verify_onnx(model, [np.ones(2, np.float32)], strict=True)
    verification = harness.verify_onnx(model, [np.ones(2, np.float32)], strict=False)
    assert any("ReferenceEvaluator cannot run the model: TypeError: the evaluator tripped" in n
               for n in verification.notes), verification.notes
