"""The optimisation stage's own small rewrite rules, one graph each: what the graph becomes, and
that onnxruntime computes bit for bit the same outputs before and after."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from exporter.optimize import PASSES, optimize

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _int64(name: str, values) -> onnx.TensorProto:
    array = np.asarray(values, dtype=np.int64)
    return helper.make_tensor(name, INT64, array.shape, array.ravel().tolist())


def _node(op_type: str, inputs: list[str], output: str, **attributes) -> onnx.NodeProto:
    node = helper.make_node(op_type, inputs, [output], **attributes)
    entry = node.metadata_props.add()
    entry.key, entry.value = "roundtrip.fx_node", output
    return node


def _model(nodes, inputs, output, element_type, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "rules", inputs, [helper.make_tensor_value_info(output, element_type, None)],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _size_as_vector(x: str, times: int | None = None) -> list[onnx.NodeProto]:
    """x's first dim read as torch's SymInt is: Shape(0, 1), Squeeze to 0-d, (times a constant,)
    then made 1-D again for a target shape."""
    nodes = [_node("Shape", [x], "shape", start=0, end=1), _node("Squeeze", ["shape", "axis0"], "size")]
    scalar = "size"
    if times is not None:
        nodes.append(_node("Mul", ["size", "factor"], "scaled"))
        scalar = "scaled"
    return [*nodes, _node("Reshape", [scalar, "one"], "size_1d")]


def scalar_round_trip():
    nodes = [*_size_as_vector("x"), _node("Concat", ["size_1d", "rest"], "target", axis=0),
             _node("Reshape", ["x", "target"], "view"), _node("Relu", ["view"], "out")]
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["batch", 4])]
    constants = [_int64("axis0", [0]), _int64("one", [1]), _int64("rest", [2, 2])]
    return _model(nodes, inputs, "out", FLOAT, constants), {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


def scalar_arithmetic_round_trip():
    nodes = [*_size_as_vector("x", times=2), _node("Concat", ["size_1d", "rest"], "target", axis=0),
             _node("Reshape", ["x", "target"], "view"), _node("Relu", ["view"], "out")]
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["batch", 4])]
    constants = [_int64("axis0", [0]), _int64("one", [1]), _int64("rest", [2]), _int64("factor", 2)]
    return _model(nodes, inputs, "out", FLOAT, constants), {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


def neutral_operands():
    nodes = [_node("Add", ["x", "zero"], "add"), _node("Mul", ["one", "add"], "mul"), _node("Div", ["mul", "one"], "div"),
             _node("Sub", ["div", "zero"], "sub"), _node("Neg", ["sub"], "out")]
    inputs = [helper.make_tensor_value_info("x", INT64, [5])]
    return _model(nodes, inputs, "out", INT64, [_int64("zero", 0), _int64("one", 1)]), {"x": np.arange(-2, 3)}


def float_plus_zero_is_kept():
    nodes = [_node("Add", ["x", "zero"], "add"), _node("Reciprocal", ["add"], "out")]
    inputs = [helper.make_tensor_value_info("x", FLOAT, [2])]
    zero = helper.make_tensor("zero", FLOAT, [], [0.0])
    return _model(nodes, inputs, "out", FLOAT, [zero]), {"x": np.array([-0.0, 2.0], dtype=np.float32)}


def zero_that_broadcasts_is_kept():
    nodes = [_node("Add", ["x", "zero"], "add"), _node("Neg", ["add"], "out")]
    inputs = [helper.make_tensor_value_info("x", INT64, [3])]
    return _model(nodes, inputs, "out", INT64, [_int64("zero", [[0]])]), {"x": np.arange(3)}


def fill_like_operand():
    fill = helper.make_tensor("fill", INT64, [1], [15])
    nodes = [_node("Shape", ["x"], "shape"), _node("ConstantOfShape", ["shape"], "full_like", value=fill),
             _node("Min", ["x", "full_like"], "out")]
    inputs = [helper.make_tensor_value_info("x", INT64, ["n"])]
    return _model(nodes, inputs, "out", INT64), {"x": np.arange(10, 20)}


def transpose_of_transpose():
    nodes = [_node("Transpose", ["x"], "t1", perm=[0, 2, 1]), _node("Transpose", ["t1"], "t2", perm=[1, 0, 2]),
             _node("Relu", ["t2"], "out")]
    inputs = [helper.make_tensor_value_info("x", FLOAT, [2, 3, 4])]
    return _model(nodes, inputs, "out", FLOAT), {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10}


def small_fill_folded():
    true = helper.make_tensor("true", BOOL, [1], [True])
    nodes = [_node("ConstantOfShape", ["empty"], "full", value=true), _node("And", ["full", "x"], "out")]
    inputs = [helper.make_tensor_value_info("x", BOOL, [3])]
    empty = helper.make_tensor("empty", INT64, [0], [])
    return _model(nodes, inputs, "out", BOOL, [empty]), {"x": np.array([True, False, True])}


# graph, the optimised graph's op histogram
RULES = [
    (scalar_round_trip, {"Shape": 1, "Concat": 1, "Reshape": 1, "Relu": 1}),
    (scalar_arithmetic_round_trip, {"Shape": 1, "Mul": 1, "Concat": 1, "Reshape": 1, "Relu": 1}),
    (neutral_operands, {"Neg": 1}),
    (float_plus_zero_is_kept, {"Add": 1, "Reciprocal": 1}),
    (zero_that_broadcasts_is_kept, {"Add": 1, "Neg": 1}),
    (fill_like_operand, {"Min": 1}),
    (transpose_of_transpose, {"Transpose": 1, "Relu": 1}),
    (small_fill_folded, {"And": 1}),
]


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("build, ops", RULES, ids=[build.__name__ for build, _ in RULES])
def test_rule_rewrites_and_keeps_the_values(build, ops):
    model, feeds = build()
    optimized = optimize(model, {}, PASSES).skeleton
    assert dict(Counter(n.op_type for n in optimized.graph.node)) == ops
    before, after = _run(model, feeds), _run(optimized, feeds)
    assert before.dtype == after.dtype and before.shape == after.shape
    np.testing.assert_array_equal(after, before)
    assert np.array_equal(np.signbit(after), np.signbit(before)) if after.dtype.kind == "f" else True


def test_a_kept_match_stands_for_the_node_it_replaces_only():
    """The size arithmetic made 1-D is the Reshape's work (its FX node); the Squeeze and Mul it
    read are not fused into it, so the new node carries no region."""
    model, _ = scalar_arithmetic_round_trip()
    optimized = optimize(model, {}, PASSES).skeleton
    (mul,) = [n for n in optimized.graph.node if n.op_type == "Mul"]
    metadata = {p.key: p.value for p in mul.metadata_props}
    assert metadata["roundtrip.fx_node"] == "size_1d" and "roundtrip.region" not in metadata
