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
from collections.abc import Callable

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, promote, read_by_checks, reduce, scalar_of
from exporter.translate.symbolics.elementwise import floor_divide
from exporter.translate.symbolics.shape import _is_integral

EmitOp = Callable[[Graph, Value, Value], Value]


def _is_float(value) -> bool:
    return not _is_integral(value)


def _sym_binary(g: Graph, onnx_op: str | EmitOp, python_op, a, b) -> Value | int | bool:
    """A SymInt op: folded when both sides are Python numbers, else on 0-d int64 Values, or
    float64 ones when either side is a float or the result is a SymFloat (SymFloat arithmetic,
    as Python computes it). `onnx_op` is an ONNX op type, or a function emitting the op."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return python_op(a, b)
    is_float = isinstance(g.ctx.output_meta, (float, torch.SymFloat)) or not (_is_integral(a) and _is_integral(b))
    a, b = promote(g, a, b, dtype=torch.float64 if is_float else torch.int64)
    return onnx_op(g, a, b) if callable(onnx_op) else g.op(onnx_op, a, b)


# Python's binary operators on sizes: target -> (the ONNX op, or a function emitting it; the Python
# op folding two numbers; the symbolic's docstring). The comparisons give 0-d bools, read by checks.
_ARITHMETIC: dict[str, tuple[str | EmitOp, Callable, str]] = {
    "_operator.add": ("Add", operator.add, "SymInt a + b, as int64 scalars."),
    "_operator.sub": ("Sub", operator.sub, "SymInt a - b, as int64 scalars."),
    "_operator.mul": ("Mul", operator.mul, "SymInt a * b, as int64 scalars."),
    "_operator.floordiv": (floor_divide, operator.floordiv, "SymInt a // b: Python floors, also for negative values."),
}
_COMPARISONS: dict[str, tuple[str | EmitOp, Callable, str]] = {
    "_operator.eq": ("Equal", operator.eq,
                     "SymInt a == b, a bool scalar (e.g. the check that split sizes read from a tensor add up)."),
    "_operator.lt": ("Less", operator.lt, "SymInt a < b, a bool scalar."),
    "_operator.gt": ("Greater", operator.gt, "SymInt a > b, a bool scalar."),
    "_operator.ge": ("GreaterOrEqual", operator.ge,
                     "SymInt a >= b, a bool scalar (the bounds checks of data-dependent sizes)."),
    "_operator.le": ("LessOrEqual", operator.le,
                     "SymInt a <= b, a bool scalar (the bounds checks of data-dependent sizes)."),
}


def _binary_symbolic(target: str, onnx_op: str | EmitOp, python_op: Callable, doc: str) -> Callable:
    """The symbolic of one of Python's binary operators on sizes, named `sym_<op>`."""

    def sym_binary(g: Graph, a, b) -> Value | int | bool:
        return _sym_binary(g, onnx_op, python_op, a, b)

    sym_binary.__name__ = sym_binary.__qualname__ = f"sym_{target.rsplit('.', 1)[-1]}"
    sym_binary.__doc__ = doc
    return sym_binary


for _target, (_onnx_op, _python_op, _doc) in _ARITHMETIC.items():
    symbolic(_target)(_binary_symbolic(_target, _onnx_op, _python_op, _doc))
for _target, (_onnx_op, _python_op, _doc) in _COMPARISONS.items():
    symbolic(_target)(read_by_checks(_binary_symbolic(_target, _onnx_op, _python_op, _doc)))


@symbolic("_operator.truediv")
def sym_truediv(g: Graph, a, b) -> Value | float:
    """SymInt or SymFloat a / b: a float64 scalar, as Python's true division."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return operator.truediv(a, b)
    a, b = promote(g, a, b, dtype=torch.float64)
    return g.op("Div", a, b)


@symbolic("torch.sym_float")
def sym_float(g: Graph, a) -> Value | float:
    """torch.sym_float(a): a SymInt as a float64 scalar (what `size * 0.5` computes in)."""
    return float(a) if not isinstance(a, Value) else cast_to(g, a, torch.float64)


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


@symbolic("torch.sym_not")
@read_by_checks
def sym_not(g: Graph, a) -> Value | bool:
    """torch.sym_not(a): not a, a bool scalar (`a != b` reaches a check as not (a == b))."""
    return (not a) if not isinstance(a, Value) else g.op("Not", a)


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
