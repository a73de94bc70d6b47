"""Per-op verification: accumulated (one instrumented run), isolated (one batched run), fp64
truth and attribution. Unit tests of the pieces and end-to-end checks on small models."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

import exporter
import harness
from harness.analysis.accumulated import compare_with_production, run_instrumented
from harness.metrics.comparison import compare
from harness.analysis.isolated import isolate
from harness.onnxgraph import INPUT_PREFIX, Subgraph, build, topological
from harness.records import CheckerResult, OpRecord, Verification
from harness.analysis.truth import Replayer, no_truth_reason, reduction_length
from harness.metrics.noise import NoiseModel, attribute, load_noise_model, unit_roundoff
from harness.runtime import DeviceSpec, model_runner
from harness import verification as verification_module


def _cpu_runner():
    return model_runner(DeviceSpec.parse("cpu"), False, None)


def _model(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape, elem=onnx.TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# --- isolation batching ----------------------------------------------------------------------


def _chain_model():
    """x -> Relu(a) -> Mul(b, by w) -> Add(c, b + a): three ops, a shared input and an initializer."""
    w = onnx.numpy_helper.from_array(np.full((4,), 2.0, np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Mul", ["a", "w"], ["b"], name="b"),
        helper.make_node("Add", ["b", "a"], ["c"], name="c"),
    ]
    return _model(nodes, [_vi("x", [4])], [_vi("c", [4])], [w])


def _single_node_subgraphs(model):
    return [Subgraph(node.name, [node], list(node.output)) for node in model.graph.node]


def test_all_subgraphs_run_in_one_batched_model_fed_reference_values():
    model = _chain_model()
    reference = {"x": np.array([-1, 0, 1, 2], np.float32)}
    reference["a"] = np.array([5, 5, 5, 5], np.float32)  # not relu(x): isolation must use it as given
    reference["b"] = np.array([1, 1, 1, 1], np.float32)
    calls = []

    def run(m, feeds):
        calls.append((m, dict(feeds)))
        return _cpu_runner()(m, feeds)

    result = isolate(model, _single_node_subgraphs(model), lambda n: reference.get(n, f"no {n}"), run)

    assert result.runs == 1 and len(calls) == 1
    batched, feeds = calls[0]
    assert sorted(feeds) == sorted(f"{INPUT_PREFIX}{n}" for n in ("x", "a", "b"))  # 'a' fed once, shared
    assert [i.name for i in batched.graph.initializer] == ["w"]
    np.testing.assert_array_equal(result.outputs["a"][0], [0, 0, 1, 2])
    np.testing.assert_array_equal(result.outputs["b"][0], [10, 10, 10, 10])  # 5 * 2: fed reference 'a'
    np.testing.assert_array_equal(result.outputs["c"][0], [6, 6, 6, 6])  # 1 + 5
    assert set(result.inputs["c"]) == {"a", "b"}  # what the reproducer of c is fed: the reference values
    for name in ("a", "b"):
        np.testing.assert_array_equal(result.inputs["c"][name], reference[name])


def test_unknown_reference_value_makes_the_op_not_isolable_with_the_reason():
    model = _chain_model()
    reference = {"x": np.zeros(4, np.float32), "a": np.zeros(4, np.float32)}
    # 'b' is produced by another subgraph's node, so it is borrowed: c computes Mul too
    result = isolate(model, _single_node_subgraphs(model)[2:], lambda n: reference.get(n, "unknown"), _cpu_runner())
    assert result.borrowed == {"c": ["b"]} and "c" in result.outputs
    # with no producer to borrow and no value, the op is not isolable
    lonely = Subgraph("c", [model.graph.node[2]], ["c"])
    bare = _model([model.graph.node[2]], [_vi("b", [4]), _vi("a", [4])], [_vi("c", [4])])
    result = isolate(bare, [lonely], lambda n: "torch has no value for it" if n == "b" else np.zeros(4, np.float32),
                     _cpu_runner())
    assert "c" not in result.outputs
    assert result.not_isolable["c"] == "input 'b' has no reference value: torch has no value for it"


@pytest.mark.parametrize("subgraph, reason", [
    (Subgraph("empty", [], ["x"]), "no ONNX nodes compute it"),
    (Subgraph("no outputs", [helper.make_node("Relu", ["x"], ["y"])], []), "none of its values is in the ONNX model"),
    (Subgraph("alias", [helper.make_node("Relu", ["x"], ["y"])], ["x"]), "not computed by its own nodes"),
])
def test_structural_reasons(subgraph, reason):
    result = isolate(_chain_model(), [subgraph], lambda n: np.zeros(4, np.float32), _cpu_runner())
    assert reason in result.not_isolable[subgraph.key]


def test_a_subgraph_the_backend_cannot_run_is_found_by_splitting_the_batch():
    model = _chain_model()
    broken = helper.make_node("Relu", ["x"], ["d"], name="d")
    broken.op_type = "NoSuchOp"
    model.graph.node.append(broken)
    reference = {n: np.ones(4, np.float32) for n in ("x", "a", "b")}
    result = isolate(model, _single_node_subgraphs(model), lambda n: reference.get(n, "none"), _cpu_runner())
    assert set(result.outputs) == {"a", "b", "c"}
    assert "cannot run its subgraph alone" in result.not_isolable["d"] and "NoSuchOp" in result.not_isolable["d"]
    assert result.runs > 1


def test_duplicated_nodes_are_renamed_and_inputs_keep_names_in_a_reproducer():
    model = _chain_model()
    a = model.graph.node[0]
    twice = [Subgraph("one", [a], ["a"]), Subgraph("two", [a], ["a"])]
    built = build(model, twice, {"one": {"x": np.zeros(4, np.float32)}, "two": {"x": np.zeros(4, np.float32)}})
    outputs = [o.name for o in built.model.graph.output]
    assert len(set(outputs)) == 2 and built.outputs["one"] != built.outputs["two"]
    single = build(model, twice[:1], {"one": {"x": np.zeros(4, np.float32)}}, rename_inputs=False)
    assert [i.name for i in single.model.graph.input] == ["x"]


def test_topological_order():
    nodes = [helper.make_node("Relu", ["t"], ["u"]), helper.make_node("Relu", ["x"], ["t"])]
    assert [n.output[0] for n in topological(nodes)] == ["t", "u"]


# --- end to end on small models -------------------------------------------------------------


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 5 * 5, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        return torch.softmax(self.fc(y.reshape(y.shape[0], -1)), dim=-1)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return Small().eval(), (torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(3)),)


def test_every_op_has_accumulated_isolated_and_truth(small):
    verification = harness.verify(*small)
    assert verification.passed and verification.op_reference == "torch"
    tensor_ops = [op for op in verification.ops if op.accumulated is not None]
    assert {op.aten for op in tensor_ops} >= {"aten.conv2d.default", "aten.relu.default", "aten.linear.default",
                                               "aten.softmax.int"}
    for op in tensor_ops:
        assert op.isolated is not None and op.passed is True, op.to_dict()
        assert op.truth is not None and op.torch_truth is not None and op.attribution == "both-noise", op.to_dict()
        assert op.noise_bound > 0 and op.reduction_length >= 1
    conv = next(op for op in tensor_ops if op.aten == "aten.conv2d.default")
    assert conv.reduction_length == 3 * 3 * 3
    assert {"accumulated_s", "isolated_s", "truth_s", "per_op_s"} <= set(verification.timings)
    assert verification.environment["noise_model"]["ulps"] == load_noise_model().ulps
    data = json.loads(json.dumps(verification.to_dict()))
    assert data["ops"][0]["isolated"] is not None and data["op_reference"] == "torch"


def test_symint_inputs_are_fed_as_int64_scalars():
    model, args = Small().eval(), (torch.randn(2, 3, 5, 5),)
    # one node per op: the optimised graph reads the view's shape as a constant, no SymInt left
    verification = harness.verify(model, args, dynamic_axes={"x": {0: "batch"}}, optimize=False)
    assert verification.passed
    sym = [op for op in verification.ops if op.aten.startswith("aten.sym_size")]
    assert sym, [op.aten for op in verification.ops]
    assert all(op.isolated is not None and op.isolated.dtype_expected == "int64" for op in sym)
    view = next(op for op in verification.ops if op.aten in ("aten.view.default", "aten.reshape.default"))
    assert view.isolated is not None and view.passed, view.to_dict()
    assert view.artifacts.inputs and any(a.dtype == np.int64 and a.ndim == 0 for a in view.artifacts.inputs.values())
    from harness.onnxgraph import build, Subgraph as _Subgraph

    built = build(verification.onnx_model, [_Subgraph(view.fx_node, view.artifacts.nodes, [view.fx_node])],
                  {view.fx_node: view.artifacts.inputs})
    scalars = [i for i in built.model.graph.input if i.type.tensor_type.elem_type == onnx.TensorProto.INT64]
    assert scalars and all(len(i.type.tensor_type.shape.dim) == 0 for i in scalars)  # fed 0-d, not [1]
    assert all(built.feeds[i.name].ndim == 0 for i in scalars)


def test_per_op_false_skips_the_analysis(small):
    verification = harness.verify(*small, per_op=False)
    assert verification.passed and verification.ops == [] and verification.worst_op is None


def test_reference_backend_verifies_too(small):
    verification = harness.verify(*small, device="reference")
    assert verification.passed and verification.device == "reference"
    measured = [op for op in verification.ops if op.accumulated is not None]
    assert {op.aten for op in measured} >= {"aten.conv2d.default", "aten.relu.default", "aten.linear.default"}
    assert all(op.isolated is not None and op.passed for op in measured), [op.to_dict() for op in measured]


def test_torchscript_models_are_verified_per_onnx_node(small):
    verification = harness.verify(*small, exporter="torchscript")
    assert verification.passed and verification.op_reference == "onnx.reference"
    assert verification.ops and all(op.aten.startswith("onnx::") for op in verification.ops)
    conv = next(op for op in verification.ops if op.onnx_ops == ["Conv"])
    assert conv.isolated is not None and conv.passed and conv.fx_node == conv.onnx_nodes[0]
    assert verification.worst_op is not None


def test_instrumented_run_difference_is_reported(small, monkeypatch):
    real = verification_module.run_production

    def skewed(*args, **kwargs):
        production = real(*args, **kwargs)  # a runtime.ProductionRun
        production.outputs = [o + np.float32(1e-3) for o in production.outputs]
        return production

    monkeypatch.setattr(verification_module, "run_production", skewed)
    verification = harness.verify(*small)
    (final,) = verification.instrumented_vs_production
    assert not final.passed and final.max_abs == pytest.approx(1e-3, rel=1e-2)
    assert any("instrumented run's final outputs differ" in note for note in verification.notes)


def test_instrumented_and_production_agreeing_is_silent():
    model = torch.nn.Sequential(torch.nn.ReLU()).eval()
    verification = harness.verify(model, (torch.randn(3, 4),))
    assert verification.instrumented_vs_production and all(c.passed for c in verification.instrumented_vs_production)
    assert not any("instrumented" in note for note in verification.notes)


def test_compare_with_production_is_exact():
    same = compare_with_production({"y": np.ones(3, np.float32)}, [np.ones(3, np.float32)])
    off = compare_with_production({"y": np.ones(3, np.float32)}, [np.nextafter(np.ones(3, np.float32), 2)])
    assert same[0].passed and not off[0].passed


def test_failed_instrumented_run_is_a_note_not_a_crash():
    from harness.runtime import BackendRunError

    model = _chain_model()

    def failing(m, feeds):  # a ModelRunner reports the backend's failures as runtime.BACKEND_ERRORS
        raise BackendRunError("backend exploded\nsecond line")

    run = run_instrumented(model, ["a", "b"], {"x": np.zeros(4, np.float32)}, failing)
    assert run.values == {} and run.error == "BackendRunError: backend exploded"


# --- truth and attribution -------------------------------------------------------------------


def _cmp(normalized: float, *, shape_match=True, nonfinite=0):
    comparison = compare(np.float32(1.0), np.float32(1.0), atol=0, rtol=0)
    comparison.normalized, comparison.shape_match, comparison.nonfinite_mismatch = normalized, shape_match, nonfinite
    return comparison


MODEL = NoiseModel(ulps=4, dominance=10)
NOISE = 1e-6

ATTRIBUTION = [
    ("both within noise", 5e-7, 9e-7, "both-noise"),
    ("exactly at the bound is noise", NOISE, NOISE, "both-noise"),
    ("backend off, torch within noise", 2e-6, 5e-7, "backend"),
    ("torch off, backend within noise", 5e-7, 2e-6, "torch"),
    ("both off, backend dominates", 1e-3, 1e-5, "backend"),
    ("both off, torch dominates", 1e-5, 1e-3, "torch"),
    ("both off and comparable", 1e-4, 3e-5, "both"),
    ("backend off by far less than a decade over torch off", 2e-6, 1.5e-6, "both"),
]


@pytest.mark.parametrize("backend, torch_side, want", [a[1:] for a in ATTRIBUTION], ids=[a[0] for a in ATTRIBUTION])
def test_attribution_rule(backend, torch_side, want):
    assert attribute(_cmp(backend), _cmp(torch_side), NOISE, MODEL) == want


def test_attribution_counts_shape_and_nan_disagreement_as_divergence():
    assert attribute(_cmp(0.0, shape_match=False), _cmp(0.0), NOISE, MODEL) == "backend"
    assert attribute(_cmp(0.0), _cmp(0.0, nonfinite=1), NOISE, MODEL) == "torch"
    assert attribute(None, _cmp(0.0), NOISE, MODEL) == ""


def test_noise_bound_is_ulps_times_unit_roundoff_times_sqrt_reduction():
    model = load_noise_model()
    assert unit_roundoff(torch.float32) == 2.0 ** -24 == unit_roundoff(np.float32)
    assert unit_roundoff(torch.int64) == 0.0 and unit_roundoff(np.bool_) == 0.0
    assert model.bound(np.float32, 1) == pytest.approx(model.ulps * 2.0 ** -24)
    assert model.bound(np.float32, 400) == pytest.approx(20 * model.ulps * 2.0 ** -24)
    assert model.bound(np.int64, 400) == 0.0
    assert model.ulps_source and model.dominance_source  # the numbers say where they come from


def _fx_node(model, args, target_name):
    program = exporter.export_program(model, args).program
    node = next(n for n in program.graph.nodes if n.op == "call_function" and target_name in str(n.target))
    from harness.analysis.torch_values import record_values

    return node, record_values(program, args)


@pytest.mark.parametrize("module, args, target, length", [
    (torch.nn.Conv2d(4, 6, (3, 2), groups=2), (torch.randn(1, 4, 5, 5),), "conv2d", 2 * 3 * 2),
    (torch.nn.Linear(7, 3), (torch.randn(2, 7),), "linear", 7),
    (torch.nn.Softmax(dim=1), (torch.randn(2, 9),), "softmax", 9),
    (torch.nn.ReLU(), (torch.randn(2, 9),), "relu", 1),
    (torch.nn.AdaptiveAvgPool2d(1), (torch.randn(1, 2, 4, 6),), "adaptive_avg_pool2d", 24),
])
def test_reduction_length(module, args, target, length):
    node, values = _fx_node(module.eval(), args, target)
    replay = Replayer([node], values)
    output, replay_args = replay(node)
    assert reduction_length(node, replay_args, output) == length


def test_replay_is_float64_on_cpu_and_releases_inputs():
    node, values = _fx_node(torch.nn.Linear(3, 2).eval(), (torch.randn(4, 3),), "linear")
    replay = Replayer([node], values)
    output, args = replay(node)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]  # input, weight, bias
    assert output.dtype == torch.float64 and len(tensors) == 3 and all(a.dtype == torch.float64 for a in tensors)
    assert replay._cache == {}  # the converted inputs went after their last use


def test_random_ops_get_no_truth():
    node = torch.fx.Graph().call_function(torch.ops.aten.rand.default, ([2],))
    assert "random" in no_truth_reason(node)


# --- records ---------------------------------------------------------------------------------


def _record(name, isolated=None, accumulated=None):
    return OpRecord(name, "aten.x", [name], ["X"], "", "", accumulated=accumulated, isolated=isolated)


def test_worst_op_ranks_isolated_errors_only():
    big = compare(np.float32(2.0), np.float32(1.0), atol=0, rtol=0.1)
    small = compare(np.float32(1.01), np.float32(1.0), atol=0, rtol=0.1)
    verification = Verification("m", "roundtrip", "cpu", False, CheckerResult(True), [], ops=[
        _record("downstream", isolated=small, accumulated=big),
        _record("culprit", isolated=compare(np.float32(1.2), np.float32(1.0), atol=0, rtol=0.1)),
        _record("not isolable", accumulated=big),
    ])
    assert verification.worst_op.fx_node == "culprit"
    without_isolation = Verification("m", "roundtrip", "cpu", False, CheckerResult(True), [], ops=[
        _record("a", accumulated=small), _record("b", accumulated=big)])
    assert without_isolation.worst_op.fx_node == "b"


def test_op_record_to_dict_is_json():
    record = _record("x", isolated=compare(np.float32(1.0), np.float32(math.inf), atol=0, rtol=0))
    record.artifacts = object()  # not serialised
    data = json.loads(json.dumps(record.to_dict()))
    assert data["isolated"]["nonfinite_mismatch"] == 1 and "artifacts" not in data
