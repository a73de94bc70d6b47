"""Python arithmetic on sizes that torch.export records as FX nodes of its own: the `_operator`
and `math` functions and torch's `sym_*` helpers applied to SymInts and SymFloats.

A size reaches a symbolic as a Python number when torch.export fixed it, else as a 0-d int64
Value (a SymInt) or float64 Value (a SymFloat); the result is computed in the graph from the
input's shape, as Python computes it (floor division and modulo round toward minus infinity,
`int()` truncates toward zero). Comparisons give 0-d bools: the bounds checks of
data-dependent sizes read them (their checks are recorded, not emitted).
"""

from __future__ import annotations

import math
import operator

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, read_by_checks, reduce, scalar_of
from exporter.translate.symbolics.shape import _is_integral, _sym_binary


def _is_float(value) -> bool:
    return not _is_integral(value)


@symbolic("_operator.neg")
def sym_neg(g: Graph, a) -> Value | int | float:
    """-a of a SymInt or SymFloat: `x[-x.size(0) + 1:]`, `-(-n // k)`."""
    return -a if not isinstance(a, Value) else g.op("Neg", a)


@symbolic("_operator.mod")
def sym_mod(g: Graph, a, b) -> Value | int | float:
    """a % b as Python computes it: the remainder takes the divisor's sign (ONNX Mod with
    fmod=0 on integers; a - floor(a / b) * b in float64 for a SymFloat)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return operator.mod(a, b)
    if _is_float(a) or _is_float(b) or isinstance(g.ctx.output_meta, (float, torch.SymFloat)):
        a, b = (scalar_of(g, v, torch.float64) for v in (a, b))
        return g.op("Sub", a, g.op("Mul", g.op("Floor", g.op("Div", a, b)), b))
    a, b = (scalar_of(g, v, torch.int64) for v in (a, b))
    return g.op("Mod", a, b, fmod_i=0)


def _comparison(g: Graph, onnx_op: str, python_op, a, b) -> Value | bool:
    return _sym_binary(g, onnx_op, python_op, a, b)


@symbolic("_operator.eq")
@read_by_checks
def sym_eq(g: Graph, a, b) -> Value | bool:
    """SymInt a == b, a bool scalar (e.g. the check that split sizes read from a tensor add up)."""
    return _comparison(g, "Equal", operator.eq, a, b)


@symbolic("torch.sym_not")
@read_by_checks
def sym_not(g: Graph, a) -> Value | bool:
    """torch.sym_not(a): not a, a bool scalar (`a != b` reaches a check as not (a == b))."""
    return (not a) if not isinstance(a, Value) else g.op("Not", a)


@symbolic("_operator.lt")
@read_by_checks
def sym_lt(g: Graph, a, b) -> Value | bool:
    """SymInt a < b, a bool scalar."""
    return _comparison(g, "Less", operator.lt, a, b)


@symbolic("_operator.gt")
@read_by_checks
def sym_gt(g: Graph, a, b) -> Value | bool:
    """SymInt a > b, a bool scalar."""
    return _comparison(g, "Greater", operator.gt, a, b)


def _rounded(g: Graph, onnx_op: str, python_op, a) -> Value | int:
    """A SymFloat rounded by `onnx_op` to a SymInt (int64); a SymInt is its own value."""
    if not isinstance(a, Value):
        return python_op(a)
    if _is_integral(a):
        return a
    return cast_to(g, g.op(onnx_op, scalar_of(g, a, torch.float64)), torch.int64)


@symbolic("math.floor")
def sym_floor(g: Graph, a) -> Value | int:
    """math.floor(SymFloat a) -> SymInt: `math.floor(h * 0.5)` on a dynamic size."""
    return _rounded(g, "Floor", math.floor, a)


@symbolic("math.ceil")
def sym_ceil(g: Graph, a) -> Value | int:
    """math.ceil(SymFloat a) -> SymInt: `math.ceil(w / 3)` on a dynamic size."""
    return _rounded(g, "Ceil", math.ceil, a)


@symbolic("aten::sym_numel")
def sym_numel(g: Graph, self: Value) -> Value:
    """sym_numel(Tensor self) -> SymInt

    The product of the runtime shape: `x.numel()` on an input with a dynamic axis.
    """
    return reduce(g, "ReduceProd", g.op("Shape", self), [0], keepdims=False)
