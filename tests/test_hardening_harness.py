"""Every bad input to the harness gets a clear error, and its verdicts fail closed: a failing op
outranks numeric divergence, any input pytree verifies, bad files name their path, mode changes
are said, harness bugs are never blamed on the backend, and a Comparison passes only when
`compare` says so."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

import exporter
import harness
from harness.analysis import isolated as isolated_module
from harness.analysis import truth as truth_module
from harness.analysis.fx_mapping import fx_node_name
from harness.metrics.comparison import Comparison, compare
from harness.records import CheckerResult, OpRecord, Verification


class Net(torch.nn.Module):
    """conv -> relu -> float64: a numeric op, an element-wise op and a cast."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).double()


def _net():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(1)),)


def _altered(model: onnx.ModelProto, op_type: str, alter) -> tuple[onnx.ModelProto, str]:
    """A copy of `model` with its first `op_type` node altered; returns it and the FX node."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    node = next(n for n in copy.graph.node if n.op_type == op_type)
    alter(copy, node)
    return copy, fx_node_name(node)


def _nudge_conv_weight(model: onnx.ModelProto, node: onnx.NodeProto) -> None:
    tensor = next(t for t in model.graph.initializer if t.name == node.input[1])
    tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * np.float32(1.01), tensor.name))


# --- a failing op is the worst op ------------------------------------------------------------


def _unrunnable(model, node):
    node.op_type = "NoSuchOp"


def _wrong_dtype(model, node):
    kept = [a for a in node.attribute if a.name != "to"]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute("to", onnx.TensorProto.FLOAT)])


@pytest.mark.parametrize("op_type, alter, failure", [
    ("Relu", _unrunnable, "did not run"),
    ("Cast", _wrong_dtype, "dtype"),
], ids=["the backend cannot run it", "its output has the wrong dtype"])
def test_a_failing_op_outranks_every_numeric_divergence(op_type, alter, failure):
    model, args = _net()
    original = exporter.export(model, args)
    nudged, conv = _altered(original, "Conv", _nudge_conv_weight)
    broken, culprit = _altered(nudged, op_type, alter)

    verification = harness.verify(model, args, onnx_model=broken)

    rows = {op.fx_node: op for op in verification.ops}
    assert rows[conv].passed is False and rows[conv].isolated.tolerance_ratio > 10  # a real divergence
    assert rows[culprit].passed is False and rows[culprit].failure == failure, rows[culprit].to_dict()
    assert verification.worst_op.fx_node == culprit
    assert verification.to_dict()["worst_op"] == culprit


def test_worst_op_ranks_outright_failures_before_tolerance_ratios():
    def record(name, isolated=None, passed=None, not_isolable=""):
        return OpRecord(name, "aten.x", [name], ["X"], "", "", isolated=isolated, passed=passed, not_isolable=not_isolable)

    far = compare(np.float32(2.0), np.float32(1.0), atol=0, rtol=1e-6)
    nan = compare(np.float32(np.nan), np.float32(1.0), atol=0, rtol=1e-6)
    wrong_dtype = compare(np.float64(1.0), np.float32(1.0), atol=0, rtol=1e-6)
    assert wrong_dtype.tolerance_ratio == 0 and not wrong_dtype.passed
    cases = {
        "did not run": record("unrunnable", passed=False, not_isolable="the backend cannot run its subgraph alone"),
        "dtype": record("dtype", isolated=wrong_dtype, passed=False),
        "non-finite": record("nan", isolated=nan, passed=False),
    }
    for failure, failing in cases.items():
        ops = [record("divergent", isolated=far, passed=False), failing,
               record("unjudged", passed=None, not_isolable="no ONNX nodes compute it")]
        verification = Verification("m", "roundtrip", "cpu", False, CheckerResult(True), [], ops=ops)
        assert failing.failure == failure
        assert verification.worst_op is failing, failure
    assert OpRecord("x", "aten.x", [], [], "", "", isolated=far, passed=False).failure == "tolerance"


def test_an_op_with_nothing_to_compare_is_unjudged_and_says_why():
    from harness.analysis.rows import judge

    record = OpRecord("sizes", "aten.x", ["sizes"], ["Shape"], "", "")
    assert judge(record, []) is None and record.notes == [
        "not judged: none of its outputs is a tensor or number the reference also has"]
    assert record.failure == ""
    close = compare(np.float32(1.0), np.float32(1.0), atol=0, rtol=0)
    assert judge(OpRecord("y", "aten.x", [], [], "", ""), [close]) is True


# --- any input pytree, keyword arguments --------------------------------------------------------


class DictInput(torch.nn.Module):
    def forward(self, inputs):
        return inputs["a"] * 2 + inputs["b"]


class Nested(torch.nn.Module):
    def forward(self, pair, scale=None, *, offset):
        first, (second,) = pair
        return first * second * scale + offset


def _nested_inputs():
    gen = torch.Generator().manual_seed(0)
    return ([torch.randn(3, generator=gen), [torch.randn(3, generator=gen)]],), {
        "offset": torch.randn(3, generator=gen), "scale": torch.randn(3, generator=gen)}


@pytest.mark.parametrize("module, args, kwargs, inputs", [
    (DictInput(), ({"a": torch.randn(2, 3), "b": torch.randn(2, 3)},), None, ["inputs_a", "inputs_b"]),
    (Nested(), *_nested_inputs(), ["pair_0", "pair_1_0", "offset", "scale"]),
], ids=["dict", "nested list and keyword arguments"])
def test_verify_takes_any_input_pytree_and_keyword_arguments(module, args, kwargs, inputs):
    verification = harness.verify(module, args, kwargs=kwargs)
    assert verification.passed, verification.to_dict()
    assert [i.name for i in verification.onnx_model.graph.input] == inputs
    assert verification.ops and all(op.passed for op in verification.ops if op.isolated is not None)


def test_verify_refuses_inputs_of_another_structure_than_the_program():
    result = exporter.export_program(DictInput(), ({"a": torch.randn(3), "b": torch.randn(3)},))
    from harness.exporters import ExportedForVerification
    from harness.verification import verify_exported

    exported = ExportedForVerification(result.model, result.program, "roundtrip")
    with pytest.raises(ValueError, match="(?s)structured as .* but the program was captured with"):
        verify_exported(exported, ({"a": torch.randn(3)},))


# --- bad model files ----------------------------------------------------------------------------


def _linear_model():
    return exporter.export(torch.nn.Linear(3, 2).eval(), (torch.randn(1, 3),))


def _bad_file(kind: str, folder) -> str:
    path = os.path.join(folder, f"{kind}.onnx")
    data = {"empty": b"", "random": bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8)),
            "truncated": _linear_model().SerializeToString()[:100], "text": b"not a model\n"}[kind]
    with open(path, "wb") as handle:
        handle.write(data)
    return path


ENTRY_POINTS = {
    "verify_onnx": lambda path: harness.verify_onnx(path, [np.ones((1, 3), np.float32)]),
    "verify": lambda path: harness.verify(torch.nn.Linear(3, 2).eval(), (torch.randn(1, 3),), onnx_model=path),
    "prepare": lambda path: harness.backend.prepare(path),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kind", ["empty", "random", "truncated", "text"])
def test_a_bad_file_names_its_path(kind, entry, tmp_path):
    from harness.runtime.model_files import ModelFileError

    path = _bad_file(kind, tmp_path)
    with pytest.raises(ModelFileError) as raised:
        ENTRY_POINTS[entry](path)
    assert str(raised.value).startswith(f"{path} is not a valid ONNX model: ")


def _with_external_data(folder) -> str:
    """A model whose weights live in `weights.bin` beside it."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save_model(_linear_model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path


def _relocate(path: str, location: str) -> None:
    model = onnx.load(path, load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    with open(path, "wb") as handle:
        handle.write(model.SerializeToString())


def test_external_data_beside_the_model_is_loaded(tmp_path):
    path = _with_external_data(tmp_path / "model")
    verification = harness.verify_onnx(path, [np.ones((1, 3), np.float32)])
    assert verification.passed


@pytest.mark.parametrize("where, message", [
    ("absolute", "an absolute path; external data must be named relative to the model's folder"),
    ("outside", "which is outside the model's folder"),
    ("symlink", "which goes through the symbolic link"),
    ("missing", "which does not exist"),
])
def test_refused_external_data_is_never_read(where, message, tmp_path, monkeypatch):
    from harness.runtime import model_files

    path = _with_external_data(tmp_path / "model")
    data = os.path.join(tmp_path, "model", "weights.bin")
    if where == "absolute":
        _relocate(path, os.path.abspath(data))
    elif where == "outside":
        os.replace(data, tmp_path / "weights.bin")
        _relocate(path, "../weights.bin")
    elif where == "symlink":
        os.replace(data, tmp_path / "weights.bin")
        os.symlink(tmp_path / "weights.bin", data)
    else:
        os.remove(data)

    def read(*args, **kwargs):
        raise AssertionError("external data was read before its location was checked")

    monkeypatch.setattr(model_files, "load_external_data_for_model", read)
    with pytest.raises(model_files.ModelFileError, match=message) as raised:
        harness.verify_onnx(path, [np.ones((1, 3), np.float32)])
    assert str(raised.value).startswith(f"{path}: initializer ")


# --- mode handling ------------------------------------------------------------------------------


def _training_net():
    return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).train()


@pytest.mark.parametrize("exporter_name", ["roundtrip", "torch.onnx", "torchscript"])
def test_a_module_in_training_mode_is_told_and_left_in_training_mode(exporter_name):
    module = _training_net()
    verification = harness.verify(module, (torch.randn(2, 3),), exporter=exporter_name)
    assert verification.passed
    assert any("was in training mode" in note and "verified in eval mode" in note for note in verification.notes)
    assert module.training and all(m.training for m in module.modules())


def test_a_module_in_eval_mode_gets_no_mode_note():
    verification = harness.verify(_training_net().eval(), (torch.randn(2, 3),))
    assert not any("training mode" in note for note in verification.notes)


# --- harness bugs are not the backend's ------------------------------------------------------------


def _broken(*args, **kwargs):
    raise RuntimeError("a bug in the harness")


def test_an_isolation_build_bug_is_raised_in_strict_mode(monkeypatch):
    monkeypatch.setattr(isolated_module, "build", _broken)
    with pytest.raises(RuntimeError, match="a bug in the harness"):
        harness.verify(*_net(), strict=True)


def test_an_isolation_build_bug_is_a_harness_error_not_the_backends(monkeypatch):
    monkeypatch.setattr(isolated_module, "build", _broken)
    verification = harness.verify(*_net(), strict=False)
    rows = [op for op in verification.ops if op.onnx_nodes]  # the ops with a subgraph to isolate
    assert rows and all(op.not_isolable.startswith("harness error while building the isolation model") for op in rows)
    assert not any("backend cannot run" in op.not_isolable for op in verification.ops)
    assert all(op.passed is None for op in rows)  # nothing judged: the backend was never asked


def test_a_truth_replay_bug_is_raised_in_strict_mode_and_never_called_no_truth(monkeypatch):
    monkeypatch.setattr(truth_module.Replayer, "inputs", _broken)
    with pytest.raises(RuntimeError, match="a bug in the harness"):
        harness.verify(*_net(), strict=True)
    verification = harness.verify(*_net(), strict=False)
    notes = [note for op in verification.ops for note in op.notes]
    assert any(note.startswith("harness error while computing the fp64 truth") for note in notes)
    assert not any(note.startswith("no fp64 truth") for note in notes)


def test_strict_mode_is_on_with_the_environment_variable(monkeypatch):
    from harness.analysis.strictness import STRICT_ENV, is_strict

    monkeypatch.setattr(isolated_module, "build", _broken)
    monkeypatch.setenv(STRICT_ENV, "1")
    assert is_strict() and not is_strict(False)
    with pytest.raises(RuntimeError, match="a bug in the harness"):
        harness.verify(*_net())
    monkeypatch.setenv(STRICT_ENV, "0")
    assert not is_strict()


def test_a_backend_failure_is_still_a_finding_in_strict_mode():
    model, args = _net()
    broken, relu = _altered(exporter.export(model, args), "Relu", _unrunnable)
    verification = harness.verify(model, args, onnx_model=broken, strict=True)
    row = next(op for op in verification.ops if op.fx_node == relu)
    assert "the backend cannot run its subgraph alone" in row.not_isolable and row.passed is False


# --- Comparison fails closed ---------------------------------------------------------------------


def test_a_comparison_not_made_by_compare_does_not_pass():
    assert Comparison("y", [2], [2], "float32", "float32", atol=0.0, rtol=0.0).passed is False
    assert compare(np.ones(2, np.float32), np.ones(2, np.float32), atol=0, rtol=0).passed is True
    assert compare(np.ones(0, np.float32), np.ones(0, np.float32), atol=0, rtol=0).passed is True


class DictOutput(torch.nn.Module):
    """Returns a mapping, as Hugging Face models return a ModelOutput (an OrderedDict)."""

    def forward(self, x):
        return {"logits": x * 2, "hidden": x + 1}


def test_eager_outputs_that_are_mappings_are_compared_in_torch_exports_order():
    from collections import OrderedDict

    from harness.exporters import ExportedForVerification, export_for_verification
    from harness.metrics.arrays import flatten_outputs
    from harness.verification import verify_exported

    assert flatten_outputs(OrderedDict(a=1, b=(2, 3))) == [1, 2, 3]
    module = DictOutput()
    exported = export_for_verification("roundtrip", module, (torch.randn(2, 3),),
                                       dynamic_axes={"x": {0: "batch"}}, input_names=["x"])
    eager_only = ExportedForVerification(exported.model, None, "roundtrip", weights=exported.weights)
    result = verify_exported(eager_only, (torch.randn(5, 3),), module=module, per_op=False)
    assert result.passed, result.notes
    assert [o.name for o in result.outputs] == [o.name for o in exported.model.graph.output]


def _gemm_model(bad: bool = False) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.ones((512, 512), np.float32), "w")
    node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1) if not bad else helper.make_node("Gemm", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 512])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 512])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_the_checker_takes_a_model_too_large_to_serialise(monkeypatch):
    import harness.verification.checker as verification

    monkeypatch.setattr(verification, "PROTOBUF_LIMIT", 2**20)  # the 1 MiB weight stands for > 2 GB
    stubbed = []
    original = verification._without_weight_bytes
    monkeypatch.setattr(verification, "_without_weight_bytes", lambda m: stubbed.append(m) or original(m))
    assert verification.run_checker(_gemm_model()).passed
    assert len(stubbed) == 1 and original(stubbed[0]).ByteSize() < 2**16  # checked without the weight bytes
    failed = verification.run_checker(_gemm_model(bad=True))
    assert not failed.passed and "Gemm" in failed.message


class FixesItsBatch(torch.nn.Module):
    """Declared dynamic in batch, but the state it adds fixes it (as an RNN's initial hidden
    state does): torch.onnx refuses those axes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.ones(2, 3))

    def forward(self, x):
        return x + self.state


def test_a_given_model_is_verified_when_torch_onnx_cannot_capture_the_other_inputs():
    """The other size of a `roundtrip run --exporter torch.onnx` case: the given model is verified
    at its outputs even when torch.onnx refuses the declared axes at these inputs."""
    import harness
    from harness.exporters import torch_onnx_export

    module, x = FixesItsBatch(), torch.randn(2, 3)
    given = torch_onnx_export(module, (x,)).model_proto
    result = harness.verify(module, (x,), per_op=False, onnx_model=given, exporter="torch.onnx",
                            dynamic_axes={"x": {0: "batch"}}, input_names=["x"])
    assert result.passed, result.notes
    assert any("torch.onnx could not capture the module" in note for note in result.notes), result.notes
