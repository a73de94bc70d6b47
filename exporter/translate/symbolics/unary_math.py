"""Unary math beyond the basic element-wise set: trigonometry, logarithms, rounding, tests.

As in elementwise.py, operands are cast to torch's result dtype (`g.ctx.output_dtype`) first, so
an integer input of a float-valued function (log2 of int64 is float32) computes in float.
Functions ONNX lacks are composed from the ones it has, in forms that keep torch's precision
where the naive composition loses it (log1p, expm1 near zero).
"""

from __future__ import annotations

import math

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, promote, register_one_node_unaries
from exporter.translate.symbolics.elementwise import _remainder, trunc as _trunc


def _is_float(value: Value) -> bool:
    return value.dtype is not None and value.dtype.is_floating_point


def is_infinite(g: Graph, value: Value, dtype: torch.dtype) -> Value:
    """|x| == inf: ONNX IsInf takes float16 and bfloat16 only from opset 20."""
    return g.op("Equal", g.op("Abs", value), g.constant(float("inf"), dtype))


# -- trigonometric and hyperbolic ------------------------------------------------------------

# One ONNX node on the input promoted as torch promotes it (each symbolic's docstring is the schema):
# the trigonometric and hyperbolic functions, erf and the reciprocal.
register_one_node_unaries({
    "aten::tan": "Tan", "aten::asin": "Asin", "aten::acos": "Acos", "aten::atan": "Atan", "aten::sinh": "Sinh",
    "aten::cosh": "Cosh", "aten::asinh": "Asinh", "aten::acosh": "Acosh", "aten::atanh": "Atanh",
    "aten::erf": "Erf", "aten::reciprocal": "Reciprocal",
})


@symbolic("aten::atan2")
def atan2(g: Graph, self: Value, other: Value) -> Value:
    """atan2(Tensor self, Tensor other) -> Tensor

    The angle of (other, self) in (-pi, pi]: atan(self / other), moved by pi into the left half
    plane, +-pi/2 on the vertical axis and 0 at the origin.

    Limits: a negative zero `self` with a negative `other` gives pi where torch gives -pi.
    """
    y, x = promote(g, self, other)
    dtype = g.ctx.output_dtype
    zero = g.constant(0, dtype)
    base = g.op("Atan", g.op("Div", y, x))
    pi = g.constant(math.pi, dtype)
    shift = g.op("Where", g.op("Less", y, zero), g.op("Neg", pi), pi)
    left = g.op("Add", base, shift)
    on_axis = g.op("Mul", g.op("Sign", y), g.constant(math.pi / 2, dtype))
    result = g.op("Where", g.op("Less", x, zero), left, base)
    return g.op("Where", g.op("Equal", x, zero), on_axis, result)


# -- exponentials and logarithms ---------------------------------------------------------------


@symbolic("aten::erfc")
def erfc(g: Graph, self: Value) -> Value:
    """erfc(Tensor self) -> Tensor

    Limits: computed as 1 - erf(x), so far in the right tail (x > ~4 in float32) the result
    underflows to 0 where torch still has a tiny positive value.
    """
    (self,) = promote(g, self)
    return g.op("Sub", g.constant(1, g.ctx.output_dtype), g.op("Erf", self))


@symbolic("aten::exp2")
def exp2(g: Graph, self: Value) -> Value:
    """exp2(Tensor self) -> Tensor"""
    (self,) = promote(g, self)
    return g.op("Pow", g.constant(2, g.ctx.output_dtype), self)


def _log_base(g: Graph, self: Value, base: float) -> Value:
    (self,) = promote(g, self)
    return g.op("Div", g.op("Log", self), g.constant(math.log(base), g.ctx.output_dtype))


@symbolic("aten::log2")
def log2(g: Graph, self: Value) -> Value:
    """log2(Tensor self) -> Tensor"""
    return _log_base(g, self, 2.0)


@symbolic("aten::log10")
def log10(g: Graph, self: Value) -> Value:
    """log10(Tensor self) -> Tensor"""
    return _log_base(g, self, 10.0)


@symbolic("aten::log1p")
def log1p(g: Graph, self: Value) -> Value:
    """log1p(Tensor self) -> Tensor

    log(1 + x) keeping its precision for tiny x: with u = 1 + x rounded, log(u) * x / (u - 1)
    cancels the rounding of u (x itself where u == 1; log(u) where u is infinite).
    """
    (x,) = promote(g, self)
    one = g.constant(1, g.ctx.output_dtype)
    u = g.op("Add", x, one)
    log_u = g.op("Log", u)
    corrected = g.op("Div", g.op("Mul", log_u, x), g.op("Sub", u, one))
    corrected = g.op("Where", is_infinite(g, u, g.ctx.output_dtype), log_u, corrected)
    return g.op("Where", g.op("Equal", u, one), x, corrected)


@symbolic("aten::expm1")
def expm1(g: Graph, self: Value) -> Value:
    """expm1(Tensor self) -> Tensor

    exp(x) - 1 keeping its precision for tiny x (Kahan): with u = exp(x), (u - 1) * x / log(u);
    x itself where u == 1, -1 where u - 1 == -1, u where u is infinite.
    """
    (x,) = promote(g, self)
    one = g.constant(1, g.ctx.output_dtype)
    u = g.op("Exp", x)
    u_minus_one = g.op("Sub", u, one)
    corrected = g.op("Div", g.op("Mul", u_minus_one, x), g.op("Log", u))
    corrected = g.op("Where", g.op("Equal", u_minus_one, g.op("Neg", one)), u_minus_one, corrected)
    corrected = g.op("Where", is_infinite(g, u, g.ctx.output_dtype), u, corrected)
    return g.op("Where", g.op("Equal", u, one), x, corrected)


# -- rounding -------------------------------------------------------------------------------


def _rounded(g: Graph, onnx_op: str, self: Value) -> Value:
    """Floor/Ceil/Round of floats; integers (and bools) are already whole: returned as they are."""
    if not _is_float(self):
        return g.op("Identity", self)
    return g.op(onnx_op, self)


@symbolic("aten::floor")
def floor(g: Graph, self: Value) -> Value:
    """floor(Tensor self) -> Tensor"""
    return _rounded(g, "Floor", self)


@symbolic("aten::ceil")
def ceil(g: Graph, self: Value) -> Value:
    """ceil(Tensor self) -> Tensor"""
    return _rounded(g, "Ceil", self)


@symbolic("aten::round")
def round_(g: Graph, self: Value) -> Value:
    """round(Tensor self) -> Tensor

    Halves round to even, in torch and in ONNX Round.
    """
    return _rounded(g, "Round", self)


@symbolic("aten::round.decimals")
def round_decimals(g: Graph, self: Value, *, decimals: int = 0) -> Value:
    """round.decimals(Tensor self, *, int decimals) -> Tensor

    As torch computes it: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for d < 0.
    """
    if not _is_float(self):
        return g.op("Identity", self)
    scale = g.constant(10.0 ** abs(decimals), self.dtype)
    if decimals >= 0:
        return g.op("Div", g.op("Round", g.op("Mul", self, scale)), scale)
    return g.op("Mul", g.op("Round", g.op("Div", self, scale)), scale)


@symbolic("aten::trunc")
def trunc(g: Graph, self: Value) -> Value:
    """trunc(Tensor self) -> Tensor"""
    if not _is_float(self):
        return g.op("Identity", self)
    return _trunc(g, self)


# -- signs and tests --------------------------------------------------------------------------


@symbolic("aten::sign")
def sign(g: Graph, self: Value) -> Value:
    """sign(Tensor self) -> Tensor

    Bools are their own sign (ONNX Sign has no bool kernel); torch's sign of NaN is 0, where
    onnxruntime's Sign keeps the NaN.
    """
    if self.dtype == torch.bool:
        return g.op("Identity", self)
    if not _is_float(self):
        return g.op("Sign", self)
    return g.op("Where", g.op("IsNaN", self), cast_to(g, 0, self.dtype), g.op("Sign", self))


@symbolic("aten::signbit")
def signbit(g: Graph, self: Value) -> Value:
    """signbit(Tensor self) -> Tensor

    Negative numbers and negative zero (whose reciprocal is -inf).

    Limits: a NaN with its sign bit set reads False (torch: True).
    """
    if self.dtype == torch.bool:
        return g.op("Equal", self, g.op("Not", self))  # all False
    zero = cast_to(g, 0, self.dtype)
    negative = g.op("Less", self, zero)
    if not _is_float(self):
        return negative
    negative_zero = g.op("And", g.op("Equal", self, zero), g.op("Less", g.op("Reciprocal", self), zero))
    return g.op("Or", negative, negative_zero)


def _never(g: Graph, self: Value) -> Value:
    """All False in the shape of an integer or bool tensor (no NaN or inf can be there)."""
    return g.op("Not", g.op("Equal", self, self))


@symbolic("aten::isnan")
def isnan(g: Graph, self: Value) -> Value:
    """isnan(Tensor self) -> Tensor"""
    return g.op("IsNaN", self) if _is_float(self) else _never(g, self)


@symbolic("aten::isinf")
def isinf(g: Graph, self: Value) -> Value:
    """isinf(Tensor self) -> Tensor"""
    return is_infinite(g, self, self.dtype) if _is_float(self) else _never(g, self)


@symbolic("aten::remainder.Scalar_Tensor")
def remainder_scalar_tensor(g: Graph, self, other: Value) -> Value:
    """remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor"""
    return _remainder(g, self, other)
