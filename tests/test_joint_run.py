"""The instrumented model and the isolation batch run as one model (one backend load instead of
two): the same values as each run alone, names kept apart, and each alone again when the backend
refuses the joint model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.analysis.joint_run import JointRun
from harness.onnxgraph.isolation import Subgraph, build
from harness.onnxgraph.joint import side_by_side
from harness.runtime import DeviceSpec, model_runner
from harness.runtime.errors import BackendRunError
from harness.runtime.exposure import expose_values

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 4)).astype(np.float32)


def chain() -> onnx.ModelProto:
    """x -> MatMul(W) -> Relu -> Add(x): three nodes whose values collide with an isolation
    batch's (it keeps the source's value names)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
             helper.make_node("Relu", ["mm"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "x"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                              initializer=[numpy_helper.from_array(W, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def isolation_batch(model: onnx.ModelProto, x: np.ndarray):
    """Each node alone, fed values near (not equal to) the chain's own."""
    mm = x @ W + 0.5
    inputs = {"mm": {"x": x}, "relu": {"mm": mm}, "add": {"r": np.maximum(mm, 0), "x": x}}
    subgraphs = [Subgraph(node.name, [node], list(node.output)) for node in model.graph.node]
    return build(model, subgraphs, inputs)


@pytest.fixture
def parts():
    model, x = chain(), RNG.standard_normal((2, 4)).astype(np.float32)
    return model, x, expose_values(model, ["mm", "r"]), isolation_batch(model, x)


def counting(runner, refuse=lambda model: False):
    """`runner` counting its runs; refusing (as a backend would) the models `refuse` names."""
    calls = []

    def run(model, feeds):
        calls.append(len(model.graph.output))
        if refuse(model):
            raise BackendRunError("refused")
        return runner(model, feeds)

    return run, calls


REFERENCE = model_runner(DeviceSpec.parse("reference"), False, None)
ORT = model_runner(DeviceSpec.parse("cpu"), False, None)


@pytest.mark.parametrize("runner", [REFERENCE, ORT], ids=["onnx.reference", "onnxruntime"])
def test_joint_values_equal_each_run_alone(parts, runner):
    model, x, instrumented, batch = parts
    joint = side_by_side(instrumented, {"x": x}, batch.model, batch.feeds)
    first, second = joint.split(runner(joint.model, joint.feeds))
    alone_first, alone_second = runner(instrumented, {"x": x}), runner(batch.model, batch.feeds)
    assert set(first) == set(alone_first) == {"y", "mm", "r"}
    assert set(second) == set(alone_second) == {name for names in batch.outputs.values() for name in names}
    for got, want in [(first, alone_first), (second, alone_second)]:
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    # the batch's values differ from the chain's (other inputs): a mix-up of names would show
    assert not np.array_equal(second[batch.outputs["relu"][0]], first["r"])
    renamed = set(joint.second_outputs.values()) - set(joint.second_outputs)
    assert renamed and all(name.endswith("::joint") for name in renamed)


@pytest.mark.parametrize("change, message", [
    (lambda m: m.graph.initializer[0].CopyFrom(numpy_helper.from_array(W + 1, "w")), "differs between"),
    (lambda m: m.opset_import[0].__setattr__("version", 18), "different opsets"),
])
def test_models_of_different_sources_are_refused(parts, change, message):
    model, x, instrumented, batch = parts
    other = onnx.ModelProto()
    other.CopyFrom(batch.model)
    change(other)
    with pytest.raises(ValueError, match=message):
        side_by_side(instrumented, {"x": x}, other, batch.feeds)


def test_one_backend_run_serves_both(parts):
    model, x, instrumented, batch = parts
    run, calls = counting(ORT)
    joint = JointRun(run, instrumented, {"x": x})
    isolated = joint.isolation(batch.model, batch.feeds)
    values = joint.instrumented(expose_values(model, ["mm", "r"]), {"x": x})
    assert calls == [len(instrumented.graph.output) + len(batch.model.graph.output)] and joint.joint_runs == 1
    np.testing.assert_array_equal(values["r"], ORT(instrumented, {"x": x})["r"])
    assert set(isolated) == set(ORT(batch.model, batch.feeds))
    joint.isolation(batch.model, batch.feeds)  # a later batch (a split) runs alone
    assert calls[-1] == len(batch.model.graph.output)


@pytest.mark.parametrize("refused, failing_part", [
    ("joint", None),  # both run alone afterwards and succeed
    ("instrumented", "instrumented"),  # the failure stays with the instrumented model
    ("isolation", "isolation"),  # ... or with the isolation batch, for isolate() to split
])
def test_a_refused_joint_model_runs_each_alone(parts, refused, failing_part):
    model, x, instrumented, batch = parts
    has_chain = lambda m: any(i.name == "x" for i in m.graph.input)  # noqa: E731
    has_batch = lambda m: any(i.name.startswith("isolated::") for i in m.graph.input)  # noqa: E731
    refuse = {"joint": lambda m: has_chain(m) and has_batch(m), "instrumented": has_chain,
              "isolation": has_batch}[refused]
    run, calls = counting(ORT, refuse)
    joint = JointRun(run, instrumented, {"x": x})
    if failing_part == "isolation":
        with pytest.raises(BackendRunError):
            joint.isolation(batch.model, batch.feeds)
    else:
        assert set(joint.isolation(batch.model, batch.feeds)) == set(ORT(batch.model, batch.feeds))
    if failing_part == "instrumented":
        with pytest.raises(BackendRunError):
            joint.instrumented(instrumented, {"x": x})
    else:
        assert set(joint.instrumented(instrumented, {"x": x})) == {"y", "mm", "r"}
    assert joint.joint_runs == 0 and len(calls) == 3  # the joint attempt, then each alone
