"""Constant folding of weight-only subgraphs (`do_constant_folding=True`): exporter.optimize's
`fold_weights` pass with `optimize=False`, its `fold_constants` pass with `optimize=True`.

Each folded node must give what onnx's ReferenceEvaluator computes for the node; recurrent
layers lose their gate-reordering nodes and weights, keep their provenance, and run the same
numbers; a whole FX node folded away still gets a row that compares its initializer with torch.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import exporter
import exporter.write.external_data
import harness
from exporter.translate.graph import Graph
from exporter.optimize import FOLDED_VALUES_KEY, PASSES, WEIGHT_FOLDING, optimize
from exporter.write.serialize import to_model
from harness.runtime import prepare

OPSET = 18
W = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5


def _graph_with(op_type: str, constants: list[np.ndarray], **attrs):
    """A graph computing `op_type` on the weight W and `constants`; returns it and its output."""
    graph = Graph(OPSET)
    weight = graph.add_initializer("w", W)
    inputs = [weight] + [graph.constant(c) for c in constants]
    out = graph.op(op_type, *inputs, **attrs)
    relu = graph.op("Relu", out)  # something reads the folded value, so it is not a graph output
    relu.name = "y"
    graph.outputs.append(relu)
    return graph, out


FOLDED = [
    ("Transpose", [], {"perm_i": [1, 0]}),
    ("Gather", [np.array([3, 0, -1], dtype=np.int64)], {"axis_i": 0}),
    ("Gather", [np.array([[1, 2]], dtype=np.int64)], {"axis_i": 1}),
    ("Concat", [np.ones((2, 6), np.float32)], {"axis_i": 0}),
    ("Unsqueeze", [np.array([0, -1], dtype=np.int64)], {}),
    ("Reshape", [np.array([0, 3, -1], dtype=np.int64)], {}),
    ("Flatten", [], {"axis_i": 0}),
    ("Slice", [np.array([1, 0]), np.array([100, -1]), np.array([0, 1]), np.array([1, 2])], {}),
    ("Slice", [np.array([-1]), np.array([-100]), np.array([0]), np.array([-2])], {}),
    ("Cast", [], {"to_i": onnx.TensorProto.FLOAT16}),
]


def _fold(graph: Graph) -> tuple[onnx.ModelProto, dict[str, int]]:
    """`graph` through the fold_weights pass: the model (weights inline) and what changed."""
    done = optimize(to_model(graph, graph_name="g", producer_version="test"), {}, WEIGHT_FOLDING)
    return exporter.write.external_data.with_weights(done.skeleton, done.weights), done.changes.get("fold_weights", {})


@pytest.mark.parametrize("op_type, constants, attrs", FOLDED, ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(FOLDED)])
def test_each_folded_node_computes_what_the_reference_computes(op_type, constants, attrs):
    graph, out = _graph_with(op_type, constants, **attrs)
    reference = _reference_value(graph, out.name)
    model, changes = _fold(graph)
    assert changes.get(f"-{op_type}") == 1 and not any(n.op_type == op_type for n in model.graph.node)
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert out.name in initializers and "w" not in initializers  # the weight went with it
    folded = initializers[out.name]
    assert folded.dtype == reference.dtype and folded.shape == reference.shape
    np.testing.assert_array_equal(folded, reference)


def _reference_value(graph: Graph, name: str) -> np.ndarray:
    model = to_model(graph, graph_name="g", producer_version="test")
    model.graph.output.append(onnx.ValueInfoProto(name=name))
    return ReferenceEvaluator(model).run([name], {})[0]


def test_nothing_folds_that_is_an_output_constants_only_or_grows():
    graph, out = _graph_with("Transpose", [], perm_i=[1, 0])
    graph.outputs.append(out)  # a graph output stays computed
    assert _fold(graph)[1] == {}

    graph = Graph(OPSET)
    x = graph.add_input("x", torch.float32, (2,))
    shape = graph.op("Concat", graph.constant([1]), graph.constant([2]), axis_i=0)  # constants only
    y = graph.op("Reshape", x, shape)
    graph.outputs.append(y)
    assert _fold(graph)[1] == {}

    graph, _ = _graph_with("Gather", [np.zeros(40, dtype=np.int64)], axis_i=0)  # 40 rows out of 4
    assert _fold(graph)[1] == {}


class _Recurrent(torch.nn.Module):
    def __init__(self, kind: type[torch.nn.RNNBase]) -> None:
        super().__init__()
        self.rnn = kind(6, 8, num_layers=2, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_recurrent_gate_reordering_is_folded_into_initializers(kind):
    torch.manual_seed(0)
    model = _Recurrent(kind).eval()
    x = torch.randn(5, 3, 6)
    folded = exporter.export(model, (x,))
    unfolded = exporter.export(model, (x,), do_constant_folding=False)

    def weight_preprocessing(m: onnx.ModelProto) -> list[str]:
        initializers = {t.name for t in m.graph.initializer}
        return [n.op_type for n in m.graph.node if n.op_type in ("Gather", "Unsqueeze", "Concat")
                and any(i in initializers for i in n.input)]

    assert weight_preprocessing(unfolded) and not weight_preprocessing(folded)
    names = {t.name for t in folded.graph.initializer}
    assert not any(name.startswith("rnn.weight") for name in names)  # the torch-ordered weights are gone
    recurrent = [n for n in folded.graph.node if n.op_type == kind.__name__]
    for node in recurrent:
        meta = {p.key: p.value for p in node.metadata_props}
        assert meta["roundtrip.fx_node"] and meta["roundtrip.scope"].endswith(f"{kind.__name__}[rnn]")
    expected = prepare(unfolded, "CPU").run(x.numpy())[0]
    actual = prepare(folded, "CPU").run(x.numpy())[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(actual, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_recurrent_model_verifies_per_op_after_folding():
    torch.manual_seed(0)
    model = _Recurrent(torch.nn.LSTM).eval()
    verification = harness.verify(model, (torch.randn(5, 3, 6),))
    assert verification.passed
    lstm = next(op for op in verification.ops if op.aten.startswith("aten.lstm"))
    assert lstm.isolated is not None and lstm.isolated.passed and "LSTM" in lstm.onnx_ops


class _TransposedWeight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        return torch.relu(x @ self.w.t())


def test_an_fx_node_folded_away_keeps_a_row_comparing_its_initializer():
    torch.manual_seed(0)
    model = _TransposedWeight().eval()
    x = torch.randn(3, 8)
    result = exporter.export_program(model, (x,))
    folded = json.loads({p.key: p.value for p in result.skeleton.metadata_props}[FOLDED_VALUES_KEY])
    assert folded == {"t": "t"} and "Transpose" not in [n.op_type for n in result.skeleton.graph.node]
    np.testing.assert_array_equal(result.weights["t"], model.w.detach().numpy().T)

    verification = harness.verify(model, (x,))
    assert verification.passed
    row = next(op for op in verification.ops if op.fx_node == "t")
    assert row.onnx_nodes == [] and "folded into the initializer 't'" in row.not_isolable
    assert row.accumulated is not None and row.accumulated.max_abs == 0
    assert all(op.isolated is not None for op in verification.ops if op.fx_node != "t")


def test_folding_can_be_turned_off():
    model = _TransposedWeight().eval()
    onnx_model = exporter.export(model, (torch.randn(3, 8),), do_constant_folding=False)
    assert "Transpose" in [n.op_type for n in onnx_model.graph.node]
    assert not any(p.key == FOLDED_VALUES_KEY for p in onnx_model.metadata_props)
    assert [numpy_helper.to_array(t).shape for t in onnx_model.graph.initializer] == [(16, 8)]


def test_folded_model_passes_the_checker():
    model = _Recurrent(torch.nn.GRU).eval()
    onnx.checker.check_model(exporter.export(model, (torch.randn(5, 3, 6),)), full_check=True)


def test_a_folded_row_keeps_its_initializer_comparison_on_several_backends():
    """With several backends the rows are measured per backend (instrumented and isolation as one
    joint run); the folded row's accumulated error is still its initializer's."""
    torch.manual_seed(0)
    model = _TransposedWeight().eval()
    verification = harness.verify(model, (torch.randn(3, 8),),
                                  backends=["onnxruntime:level=disabled", "onnxruntime:level=all"])
    row = next(op for op in verification.ops if op.fx_node == "t")
    assert row.accumulated is not None and row.accumulated.max_abs == 0
