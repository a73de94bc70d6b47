"""Element-wise arithmetic, comparisons and activations.

Type promotion is torch's: the FX node's result dtype (`g.ctx.output_dtype`) is what torch
decided, so operands are cast to it before the ONNX op; comparisons compute in the operands'
promoted dtype (`result_type`) and yield bool. Python scalars become constants of that dtype.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import (
    cast_to, normalize_dim, promote, rank_of, register_from_schema, register_one_node_unaries, result_type,
)

# -- arithmetic --------------------------------------------------------------------------------

# ONNX has no bool kernels for these; on bools torch's results are the logical forms.
_BOOL_FORMS = {"Add": "Or", "Mul": "And", "Max": "Or", "Min": "And"}


def _binary(g: Graph, onnx_op: str, self: Value, other: Value) -> Value:
    """`onnx_op` on operands already in the result dtype; bools take the logical form."""
    if g.ctx.output_dtype == torch.bool:
        onnx_op = _BOOL_FORMS[onnx_op]
    return g.op(onnx_op, self, other)


def _scaled(g: Graph, other, alpha) -> Value:
    """`alpha * other` in the result dtype (alpha=1 adds nothing)."""
    (other,) = promote(g, other)
    if alpha == 1 or g.ctx.output_dtype == torch.bool:  # a bool alpha can only be True
        return other
    (alpha,) = promote(g, alpha)
    return g.op("Mul", other, alpha)


@symbolic("aten::add.Tensor", "aten::add.Scalar")
def add(g: Graph, self: Value, other, alpha=1) -> Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    (self,) = promote(g, self)
    return _binary(g, "Add", self, _scaled(g, other, alpha))


@symbolic("aten::sub.Tensor", "aten::sub.Scalar")
def sub(g: Graph, self: Value, other, alpha=1) -> Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

    `rsub` (`2 - x`, `torch.rsub`) reaches here as sub.Tensor with swapped operands.
    """
    (self,) = promote(g, self)
    return g.op("Sub", self, _scaled(g, other, alpha))


@symbolic("aten::mul.Tensor", "aten::mul.Scalar")
def mul(g: Graph, self: Value, other) -> Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor"""
    self, other = promote(g, self, other)
    return _binary(g, "Mul", self, other)


@symbolic("aten::div.Tensor", "aten::div.Scalar")
def div(g: Graph, self: Value, other) -> Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor

    True division: integer operands divide as the float result dtype.
    """
    self, other = promote(g, self, other)
    return g.op("Div", self, other)


def trunc(g: Graph, value: Value) -> Value:
    """Round toward zero (ONNX has no Trunc): Ceil below zero, Floor above."""
    negative = g.op("Less", value, cast_to(g, 0, value.dtype))
    return g.op("Where", negative, g.op("Ceil", value), g.op("Floor", value))


def floor_divide(g: Graph, self: Value, other: Value) -> Value:
    """Division rounded down, both operands already in the result dtype.

    Integers: ONNX Div truncates, so divide `a - mod(a, b)` (Mod with fmod=0 is the floored,
    divisor-signed remainder), which is an exact multiple of b.
    """
    if self.dtype is not None and self.dtype.is_floating_point:
        return _floor_divide_float(g, self, other)
    remainder = g.op("Mod", self, other, fmod_i=0)
    return g.op("Div", g.op("Sub", self, remainder), other)


def _floor_divide_float(g: Graph, a: Value, b: Value) -> Value:
    """torch's (and Python's) float floor division, not Floor(a / b): 0.3 // 0.1 is 2.

    div = (a - fmod(a, b)) / b, one less when the remainder's sign differs from b's, then
    floored and rounded to the nearest integer; b == 0 gives a / b (inf or nan).
    """
    dtype = a.dtype
    zero = g.constant(0, dtype)
    remainder = g.op("Mod", a, b, fmod_i=1)
    div = g.op("Div", g.op("Sub", a, remainder), b)
    signs_differ = g.op("Xor", g.op("Less", b, zero), g.op("Less", remainder, zero))
    adjust = g.op("And", g.op("Not", g.op("Equal", remainder, zero)), signs_differ)
    div = g.op("Sub", div, g.op("Cast", adjust, to_i=onnx_type(dtype)))
    floored = g.op("Floor", div)
    round_up = g.op("Greater", g.op("Sub", div, floored), g.constant(0.5, dtype))
    floored = g.op("Add", floored, g.op("Cast", round_up, to_i=onnx_type(dtype)))
    quotient = g.op("Div", a, b)
    signed_zero = g.op("Mul", g.op("Sign", quotient), zero)
    result = g.op("Where", g.op("Equal", div, zero), signed_zero, floored)
    return g.op("Where", g.op("Equal", b, zero), quotient, result)


@symbolic("aten::div.Tensor_mode", "aten::div.Scalar_mode")
def div_mode(g: Graph, self: Value, other, *, rounding_mode=None) -> Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor

    `a // b` reaches here as rounding_mode="floor"; integers divide exactly as torch's do.
    """
    self, other = promote(g, self, other)
    if rounding_mode is None:
        return g.op("Div", self, other)
    if rounding_mode == "floor":
        return floor_divide(g, self, other)
    quotient = g.op("Div", self, other)
    if self.dtype is not None and self.dtype.is_floating_point:
        quotient.dtype = self.dtype
        return trunc(g, quotient)
    return quotient  # ONNX integer Div truncates, as "trunc" asks


# One ONNX node on the input promoted as torch promotes it (each symbolic's docstring is the schema).
register_one_node_unaries({
    "aten::neg": "Neg", "aten::abs": "Abs", "aten::sqrt": "Sqrt", "aten::exp": "Exp", "aten::tanh": "Tanh",
    "aten::sigmoid": "Sigmoid", "aten::log": "Log", "aten::sin": "Sin", "aten::cos": "Cos",
})


@symbolic("aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor")
def pow_tensor(g: Graph, self: Value, exponent) -> Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor"""
    self, exponent = promote(g, self, exponent)
    return g.op("Pow", self, exponent)


@symbolic("aten::pow.Scalar")
def pow_scalar(g: Graph, self, exponent: Value) -> Value:
    """pow.Scalar(Scalar self, Tensor exponent) -> Tensor"""
    self, exponent = promote(g, self, exponent)
    return g.op("Pow", self, exponent)


# -- clamping and element-wise max/min ------------------------------------------------------------


@symbolic("aten::clamp")
def clamp(g: Graph, self: Value, min=None, max=None) -> Value:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    self, low, high = promote(g, self, min, max)
    return g.op("Clip", self, low, high)


@symbolic("aten::clamp_min")
def clamp_min(g: Graph, self: Value, min) -> Value:
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    self, low = promote(g, self, min)
    return g.op("Clip", self, low)


@symbolic("aten::clamp_max")
def clamp_max(g: Graph, self: Value, max) -> Value:
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    self, high = promote(g, self, max)
    return g.op("Clip", self, None, high)


@symbolic("aten::clamp.Tensor")
def clamp_tensor(g: Graph, self: Value, min=None, max=None) -> Value:
    """clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor

    Clip wants scalar bounds, so tensor bounds are Max then Min (torch's order: min wins).
    """
    self, low, high = promote(g, self, min, max)
    if low is not None:
        self = g.op("Max", self, low)
    if high is not None:
        self = g.op("Min", self, high)
    return self


@symbolic("aten::maximum", "aten::max.other")
def maximum(g: Graph, self: Value, other: Value) -> Value:
    """maximum(Tensor self, Tensor other) -> Tensor"""
    self, other = promote(g, self, other)
    return _binary(g, "Max", self, other)


@symbolic("aten::minimum", "aten::min.other")
def minimum(g: Graph, self: Value, other: Value) -> Value:
    """minimum(Tensor self, Tensor other) -> Tensor"""
    self, other = promote(g, self, other)
    return _binary(g, "Min", self, other)


# -- comparisons and selection ----------------------------------------------------------------------

def _compare(g: Graph, onnx_op: str, self: Value, other) -> Value:
    """`onnx_op` on both operands cast to their promoted dtype (torch compares in it), bool out.

    Bools order as 0 < 1: only Equal takes them, so the others compare them as uint8.
    """
    dtype = result_type(g, 0, 1)
    if dtype == torch.bool and onnx_op != "Equal":
        dtype = torch.uint8
    self, other = promote(g, self, other, dtype=dtype)
    return g.op(onnx_op, self, other)


def _comparison(onnx_op: str, negated: bool) -> Any:
    def comparison(g: Graph, self: Value, other) -> Value:
        result = _compare(g, onnx_op, self, other)
        return g.op("Not", result) if negated else result

    return comparison


# torch's comparison -> (the ONNX op, whether its result is negated); each for .Tensor and .Scalar
_COMPARISONS = {"eq": ("Equal", False), "ne": ("Equal", True), "lt": ("Less", False), "le": ("LessOrEqual", False),
                "gt": ("Greater", False), "ge": ("GreaterOrEqual", False)}
for _name, (_onnx_op, _negated) in _COMPARISONS.items():
    register_from_schema([f"aten::{_name}.Tensor", f"aten::{_name}.Scalar"], _comparison(_onnx_op, _negated),
                         name=_name, note=f"{'Not of ' if _negated else ''}ONNX {_onnx_op} on both operands in their "
                                          "promoted dtype.")


@symbolic("aten::where.self")
def where(g: Graph, condition: Value, self: Value, other: Value) -> Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"""
    self, other = promote(g, self, other)
    return g.op("Where", cast_to(g, condition, torch.bool), self, other)


# -- activations ------------------------------------------------------------------------------------


@symbolic("aten::relu")
def relu(g: Graph, self: Value) -> Value:
    """relu(Tensor self) -> Tensor"""
    return g.op("Relu", self)


@symbolic("aten::hardtanh")
def hardtanh(g: Graph, self: Value, min_val=-1, max_val=1) -> Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    self, low, high = promote(g, self, min_val, max_val)
    return g.op("Clip", self, low, high)


@symbolic("aten::relu6")
def relu6(g: Graph, self: Value) -> Value:
    """relu6(Tensor self) -> Tensor"""
    return hardtanh(g, self, 0, 6)


@symbolic("aten::leaky_relu")
def leaky_relu(g: Graph, self: Value, negative_slope=0.01) -> Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return g.op("LeakyRelu", self, alpha_f=negative_slope)


@symbolic("aten::elu")
def elu(g: Graph, self: Value, alpha=1, scale=1, input_scale=1) -> Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor

    ONNX Elu when scale == input_scale == 1; otherwise (selu) torch's formula
    `x > 0 ? scale * x : scale * alpha * (exp(x * input_scale) - 1)`.
    """
    if scale == 1 and input_scale == 1:
        return g.op("Elu", self, alpha_f=alpha)
    dtype = self.dtype
    exp = g.op("Exp", g.op("Mul", self, g.constant(input_scale, dtype)))
    negative = g.op("Mul", g.op("Sub", exp, g.constant(1, dtype)), g.constant(scale * alpha, dtype))
    positive = g.op("Mul", self, g.constant(scale, dtype))
    return g.op("Where", g.op("Greater", self, g.constant(0, dtype)), positive, negative)


@symbolic("aten::threshold")
def threshold(g: Graph, self: Value, threshold, value) -> Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor

    `x > threshold ? x : value`, for any threshold and value.
    """
    limit, replacement = promote(g, threshold, value, dtype=self.dtype)
    return g.op("Where", g.op("Greater", self, limit), self, replacement)


@symbolic("aten::prelu")
def prelu(g: Graph, self: Value, weight: Value) -> Value:
    """prelu(Tensor self, Tensor weight) -> Tensor

    The output has self's shape. One shared weight (shape () or (1,)) becomes a 0-d value,
    which broadcasts without adding an axis (a (1,) weight would make a 0-d input's output
    (1,)); a per-channel weight (channels are dim 1) is reshaped to (C, 1, ..., 1) so that
    ONNX PRelu broadcasts it over the trailing dims.
    """
    rank = rank_of(self)
    count = weight.shape[0] if weight.shape else 1
    if count == 1:
        if weight.rank != 0:
            weight = g.op("Reshape", weight, g.constant([], torch.int64))
    elif rank >= 2:
        weight = g.op("Reshape", weight, g.constant([-1] + [1] * (rank - 2), torch.int64))
    return g.op("PRelu", self, weight)


def _glu_halves(g: Graph, self: Value, dim: int, **split_attrs) -> Value:
    axis = normalize_dim(dim, rank_of(self))
    first, second = g.op("Split", self, axis_i=axis, outputs=2, **split_attrs)
    return g.op("Mul", first, g.op("Sigmoid", second))


@symbolic("aten::glu", since=17)
def glu(g: Graph, self: Value, dim=-1) -> Value:
    """glu(Tensor self, int dim=-1) -> Tensor

    Split into equal halves: at opset 17 Split does that by its output count.
    """
    return _glu_halves(g, self, dim)


@symbolic("aten::glu", since=18)
def glu_18(g: Graph, self: Value, dim=-1) -> Value:
    """glu(Tensor self, int dim=-1) -> Tensor

    Split into equal halves: from opset 18 Split needs num_outputs=2 to say so.
    """
    return _glu_halves(g, self, dim, num_outputs_i=2)


@symbolic("aten::gelu", since=17)
def gelu(g: Graph, self: Value, *, approximate="none") -> Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor

    Before opset 20 there is no Gelu op: `x/2 * (1 + erf(x/sqrt(2)))`, or with "tanh"
    `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
    """
    dtype = self.dtype
    if approximate == "tanh":
        cube = g.op("Mul", g.op("Mul", self, self), self)
        inner = g.op("Add", self, g.op("Mul", cube, g.constant(0.044715, dtype)))
        core = g.op("Tanh", g.op("Mul", inner, g.constant(math.sqrt(2 / math.pi), dtype)))
    else:
        core = g.op("Erf", g.op("Mul", self, g.constant(1 / math.sqrt(2), dtype)))
    half = g.op("Mul", self, g.constant(0.5, dtype))
    return g.op("Mul", half, g.op("Add", core, g.constant(1, dtype)))


@symbolic("aten::gelu", since=20)
def gelu_20(g: Graph, self: Value, *, approximate="none") -> Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor

    ONNX Gelu (opset 20) with the same `approximate` values.
    """
    return g.op("Gelu", self, approximate_s=approximate)


# -- copies and casts ---------------------------------------------------------------------------------


@symbolic("aten::_to_copy")
def to_copy(g: Graph, self: Value, **options) -> Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor

    A Cast to the result dtype; device, layout and memory format mean nothing in ONNX.
    """
    return cast_to(g, self, g.ctx.output_dtype)


@symbolic("aten::clone", "aten::alias")
def clone(g: Graph, self: Value, **options) -> Value:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor

    Values are immutable in ONNX: the copy is the value itself (named by an Identity).
    """
    return self


@symbolic("aten::copy")
def copy(g: Graph, self: Value, src: Value, non_blocking=False) -> Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor

    The functional form of `self.copy_(src)`: `src` cast to self's dtype and broadcast to its
    shape; self's values are not read.
    """
    src = cast_to(g, src, g.ctx.output_dtype)
    if src.shape is not None and src.shape == self.shape and all(isinstance(d, int) for d in src.shape):
        return src
    return g.op("Expand", src, g.op("Shape", self))


# -- logical ops and remainders ---------------------------------------------------------------------


def _truth(g: Graph, value: Any) -> Value:
    """`value != 0` as bool (NaN is true, as in torch)."""
    return cast_to(g, value, torch.bool)


@symbolic("aten::logical_not")
def logical_not(g: Graph, self: Value) -> Value:
    """logical_not(Tensor self) -> Tensor"""
    return cast_to(g, g.op("Not", _truth(g, self)), g.ctx.output_dtype)


def _logical(g: Graph, onnx_op: str, self: Value, other: Value) -> Value:
    """`onnx_op` on both operands' truth values; the result in the node's dtype (bool)."""
    return cast_to(g, g.op(onnx_op, _truth(g, self), _truth(g, other)), g.ctx.output_dtype)


@symbolic("aten::logical_and")
def logical_and(g: Graph, self: Value, other: Value) -> Value:
    """logical_and(Tensor self, Tensor other) -> Tensor"""
    return _logical(g, "And", self, other)


@symbolic("aten::logical_or")
def logical_or(g: Graph, self: Value, other: Value) -> Value:
    """logical_or(Tensor self, Tensor other) -> Tensor"""
    return _logical(g, "Or", self, other)


@symbolic("aten::logical_xor")
def logical_xor(g: Graph, self: Value, other: Value) -> Value:
    """logical_xor(Tensor self, Tensor other) -> Tensor"""
    return _logical(g, "Xor", self, other)


@symbolic("aten::fmod.Scalar")
def fmod_scalar(g: Graph, self: Value, other) -> Value:
    """fmod.Scalar(Tensor self, Scalar other) -> Tensor

    C's fmod: the remainder takes the dividend's sign (ONNX Mod with fmod=1, for every dtype).
    """
    self, other = promote(g, self, other)
    return g.op("Mod", self, other, fmod_i=1)


@symbolic("aten::fmod.Tensor")
def fmod_tensor(g: Graph, self: Value, other: Value) -> Value:
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor"""
    return fmod_scalar(g, self, other)


def _remainder(g: Graph, self: Value, other: Value) -> Value:
    """Python's modulo: the remainder takes the divisor's sign.

    Integers: ONNX Mod with fmod=0. Floats (Mod needs fmod=1 for them): torch's own formula,
    `r = fmod(a, b)`, plus b where r is nonzero and its sign differs from b's.
    """
    self, other = promote(g, self, other)
    if not g.ctx.output_dtype.is_floating_point:
        return g.op("Mod", self, other, fmod_i=0)
    zero = g.constant(0, g.ctx.output_dtype)
    remainder = g.op("Mod", self, other, fmod_i=1)
    signs_differ = g.op("Xor", g.op("Less", remainder, zero), g.op("Less", other, zero))
    adjust = g.op("And", g.op("Not", g.op("Equal", remainder, zero)), signs_differ)
    return g.op("Where", adjust, g.op("Add", remainder, other), remainder)


@symbolic("aten::remainder.Scalar")
def remainder_scalar(g: Graph, self: Value, other) -> Value:
    """remainder.Scalar(Tensor self, Scalar other) -> Tensor"""
    return _remainder(g, self, other)


@symbolic("aten::remainder.Tensor")
def remainder_tensor(g: Graph, self: Value, other: Value) -> Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _remainder(g, self, other)


# -- more unary math ------------------------------------------------------------------------------------


@symbolic("aten::rsqrt")
def rsqrt(g: Graph, self: Value) -> Value:
    """rsqrt(Tensor self) -> Tensor

    1 / sqrt(x) (ONNX has no Rsqrt): a Reciprocal of the Sqrt.
    """
    (self,) = promote(g, self)
    return g.op("Reciprocal", g.op("Sqrt", self))


# -- bitwise ops ---------------------------------------------------------------------------------------

# On bools torch's bitwise ops are the logical ones; ONNX's Bitwise* take integers only.
_LOGICAL_FORMS = {"BitwiseAnd": "And", "BitwiseOr": "Or", "BitwiseXor": "Xor"}


BITWISE_SINCE = 18  # ONNX BitwiseAnd/Or/Xor/Not


def _integer_bitwise_supported(g: Graph) -> None:
    if g.opset_version < BITWISE_SINCE:
        raise ValueError(
            f"bitwise ops on integers need ONNX Bitwise* ops (opset >= {BITWISE_SINCE}); "
            f"export at opset {BITWISE_SINCE} or later (bool operands work at every opset)"
        )


def _bitwise(g: Graph, onnx_op: str, self: Value, other) -> Value:
    self, other = promote(g, self, other)
    if g.ctx.output_dtype == torch.bool:
        return g.op(_LOGICAL_FORMS[onnx_op], self, other)
    _integer_bitwise_supported(g)
    return g.op(onnx_op, self, other)


@symbolic("aten::bitwise_and.Tensor")
def bitwise_and(g: Graph, self: Value, other: Value) -> Value:
    """bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    return _bitwise(g, "BitwiseAnd", self, other)


@symbolic("aten::bitwise_or.Tensor")
def bitwise_or(g: Graph, self: Value, other: Value) -> Value:
    """bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    return _bitwise(g, "BitwiseOr", self, other)


@symbolic("aten::bitwise_not")
def bitwise_not(g: Graph, self: Value) -> Value:
    """bitwise_not(Tensor self) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    if self.dtype == torch.bool:
        return g.op("Not", self)
    _integer_bitwise_supported(g)
    return g.op("BitwiseNot", self)
