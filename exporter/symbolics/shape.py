"""Shape ops (view, reshape, flatten) and the SymInt arithmetic of dynamic shapes."""

from __future__ import annotations

import operator

import torch

from exporter.graph import Graph, Value
from exporter.registry import symbolic
from exporter.symbolics._helpers import int64_vector, promote, rank_of


@symbolic("aten::view", "aten::reshape", "aten::_unsafe_view")
def view(g: Graph, self: Value, size):
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    allowzero = 1 if any(isinstance(s, int) and s == 0 for s in size) else 0
    return g.op("Reshape", self, int64_vector(g, list(size)), allowzero_i=allowzero)


@symbolic("aten::flatten.using_ints")
def flatten(g: Graph, self: Value, start_dim=0, end_dim=-1):
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)"""
    rank = rank_of(self)
    if rank == 0:
        return g.op("Reshape", self, g.constant([1], torch.int64))
    start, end = start_dim % rank, end_dim % rank
    if end == rank - 1 and start > 0:
        return g.op("Flatten", self, axis_i=start)
    shape = g.op("Shape", self)
    pieces = []
    if start > 0:
        pieces.append(g.op("Slice", shape, g.constant([0]), g.constant([start])))
    pieces.append(g.constant([-1]))
    if end < rank - 1:
        pieces.append(g.op("Slice", shape, g.constant([end + 1]), g.constant([rank])))
    target = pieces[0] if len(pieces) == 1 else g.op("Concat", *pieces, axis_i=0)
    return g.op("Reshape", self, target)


@symbolic("aten::sym_size.int")
def sym_size(g: Graph, self: Value, dim: int):
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    dim = dim % rank_of(self)
    size = g.op("Shape", self, start_i=dim, end_i=dim + 1)
    return g.op("Squeeze", size, g.constant([0]))


@symbolic(
    "aten::_assert_scalar", "aten::sym_constrain_range_for_size", "aten::sym_constrain_range",
    "aten::_assert_tensor_metadata",
)
def runtime_assert(g: Graph, *args, **kwargs):
    """Runtime checks on shapes: torch.export already proved them for the exported range."""
    return None


def _scalar_binary(onnx_op: str):
    def fn(g: Graph, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul}[onnx_op](a, b)
        a, b = promote(g, a, b, dtype=torch.int64)
        return g.op(onnx_op, a, b)

    fn.__doc__ = f"SymInt {onnx_op.lower()}, as int64 scalars"
    return fn


symbolic("_operator.add")(_scalar_binary("Add"))
symbolic("_operator.sub")(_scalar_binary("Sub"))
symbolic("_operator.mul")(_scalar_binary("Mul"))


@symbolic("_operator.floordiv")
def sym_floordiv(g: Graph, a, b):
    """SymInt floor division (sizes are non-negative, so ONNX's truncating Div agrees)."""
    a, b = promote(g, a, b, dtype=torch.int64)
    return g.op("Div", a, b)
