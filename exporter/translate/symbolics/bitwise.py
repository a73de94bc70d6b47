"""Bitwise ops with a Python scalar operand, xor, and the shifts.

ONNX's BitShift takes unsigned integers only, so a signed integer shifts as its unsigned
two's-complement twin (a Cast both ways, which wraps as torch's shift does); an arithmetic
right shift of a negative number is the complement of the logical shift of its complement.
Shifts by the bit width or more give 0 (or -1 for negative numbers shifted right), as torch.
"""

from __future__ import annotations

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import promote
from exporter.translate.symbolics.elementwise import _bitwise

_NARROW = (torch.int8, torch.int16)
_UNSIGNED = {torch.int8: torch.uint8, torch.int16: torch.uint16, torch.int32: torch.uint32, torch.int64: torch.uint64}


@symbolic("aten::bitwise_and.Scalar", "aten::bitwise_and.Scalar_Tensor")
def bitwise_and_scalar(g: Graph, self, other) -> Value:
    """bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    return _bitwise(g, "BitwiseAnd", self, other)


@symbolic("aten::bitwise_or.Scalar", "aten::bitwise_or.Scalar_Tensor")
def bitwise_or_scalar(g: Graph, self, other) -> Value:
    """bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    return _bitwise(g, "BitwiseOr", self, other)


@symbolic("aten::bitwise_xor.Tensor", "aten::bitwise_xor.Scalar", "aten::bitwise_xor.Scalar_Tensor")
def bitwise_xor(g: Graph, self, other) -> Value:
    """bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor

    Limits: integer operands need opset >= 18.
    """
    return _bitwise(g, "BitwiseXor", self, other)


def _cast(g: Graph, value: Value, dtype: torch.dtype) -> Value:
    return g.op("Cast", value, to_i=onnx_type(dtype))


def _complement(g: Graph, value: Value, dtype: torch.dtype) -> Value:
    """~x for a signed integer: -1 - x (BitwiseNot needs opset 18)."""
    return g.op("Sub", g.constant(-1, dtype), value)


def _shift(g: Graph, self, other, direction: str) -> Value:
    dtype = g.ctx.output_dtype
    if dtype is None or dtype.is_floating_point or dtype == torch.bool:
        raise ValueError(f"shifts take integer tensors; got {dtype}")
    self, other = promote(g, self, other)
    bits = torch.iinfo(dtype).bits
    if dtype in _NARROW:  # onnxruntime lacks Where/Sub kernels for them: shift sign-extended
        self = _cast(g, self, torch.int32)
        return _cast(g, _shift_as(g, self, other, direction, bits, torch.int32), dtype)
    return _shift_as(g, self, other, direction, bits, dtype)


def _shift_as(g: Graph, self: Value, other: Value, direction: str, bits: int, dtype: torch.dtype) -> Value:
    """The shift of `self` (held in `dtype`) as a `bits`-wide integer."""
    unsigned = _UNSIGNED.get(dtype, dtype)
    zero = g.constant(0, dtype)
    # shift amounts of the bit width or more: clamp (right) or zero the result (left)
    # (in int64: onnxruntime's Min has no kernel for the narrow integers)
    wide = _cast(g, other, torch.int64)
    too_far = g.op("GreaterOrEqual", wide, g.constant(bits, torch.int64))
    amount = _cast(g, g.op("Min", wide, g.constant(bits - 1, torch.int64)), unsigned)
    if direction == "LEFT":
        shifted = g.op("BitShift", _cast(g, self, unsigned), amount, direction_s="LEFT")
        return g.op("Where", too_far, zero, _cast(g, shifted, dtype))
    if unsigned == dtype:
        shifted = g.op("BitShift", self, amount, direction_s="RIGHT")
        return g.op("Where", too_far, zero, shifted)
    negative = g.op("Less", self, zero)
    magnitude = g.op("Where", negative, _complement(g, self, dtype), self)
    shifted = _cast(g, g.op("BitShift", _cast(g, magnitude, unsigned), amount, direction_s="RIGHT"), dtype)
    return g.op("Where", negative, _complement(g, shifted, dtype), shifted)


@symbolic("aten::bitwise_left_shift.Tensor", "aten::bitwise_left_shift.Tensor_Scalar",
          "aten::bitwise_left_shift.Scalar_Tensor", "aten::__lshift__.Scalar", "aten::__lshift__.Tensor")
def bitwise_left_shift(g: Graph, self, other) -> Value:
    """bitwise_left_shift.Tensor(Tensor self, Tensor other) -> Tensor

    Wraps around as torch's does (the unsigned shift of the two's complement).
    """
    return _shift(g, self, other, "LEFT")


@symbolic("aten::bitwise_right_shift.Tensor", "aten::bitwise_right_shift.Tensor_Scalar",
          "aten::bitwise_right_shift.Scalar_Tensor", "aten::__rshift__.Scalar", "aten::__rshift__.Tensor")
def bitwise_right_shift(g: Graph, self, other) -> Value:
    """bitwise_right_shift.Tensor(Tensor self, Tensor other) -> Tensor

    Arithmetic for signed integers: negative numbers stay negative (rounding toward -inf).
    """
    return _shift(g, self, other, "RIGHT")
