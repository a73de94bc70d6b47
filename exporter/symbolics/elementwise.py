"""Element-wise arithmetic and activations."""

from __future__ import annotations

from exporter.graph import Graph, Value
from exporter.registry import symbolic
from exporter.symbolics._helpers import promote


@symbolic("aten::add.Tensor", "aten::add.Scalar")
def add(g: Graph, self: Value, other, alpha=1):
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    self, other = promote(g, self, other)
    if alpha != 1:
        (other_scaled,) = promote(g, alpha)
        other = g.op("Mul", other, other_scaled)
    return g.op("Add", self, other)


@symbolic("aten::relu", "aten::relu_")
def relu(g: Graph, self: Value):
    """relu(Tensor self) -> Tensor"""
    return g.op("Relu", self)
