"""Bitwise ops with scalars, xor and shifts (exporter/translate/symbolics/bitwise.py): one row per form."""

from __future__ import annotations

import torch

from ._samples import ints, mask, op
from .cases_math import batch
from .schema import OpCase

# integer bitwise ops need ONNX Bitwise* (opset 18); the shifts work from 17
FROM_18 = (18, 26)


def _shifts(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randint(0, 8, shape, generator=gen)


def _wide(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Integers across the type's range, both signs: shifts must wrap as torch's do."""
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=gen, dtype=torch.int64).to(dtype)


LSHIFT, RSHIFT = "aten.bitwise_left_shift", "aten.bitwise_right_shift"
CASES: list[OpCase] = [
    op("bitwise_and_scalar", lambda a: a & 6, lambda g: (ints(g, -9, 9, 3, 4),), ["aten.bitwise_and.Scalar"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_and_scalar_tensor", lambda a: torch.bitwise_and(6, a), lambda g: (ints(g, -9, 9, 3, 4),), ["aten.bitwise_and.Scalar_Tensor"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_or_scalar", lambda a: a | 5, lambda g: (ints(g, -9, 9, 3, 4, dtype=torch.int32),), ["aten.bitwise_or.Scalar"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_or_scalar_tensor", lambda a: torch.bitwise_or(5, a), lambda g: (ints(g, -9, 9, 3, 4),), ["aten.bitwise_or.Scalar_Tensor"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_xor_tensor", lambda a, b: a ^ b, lambda g: (ints(g, -9, 9, 3, 4), ints(g, -9, 9, 4)), ["aten.bitwise_xor.Tensor"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_xor_bools", lambda a, b: a ^ b, lambda g: (mask(g, 3, 4), mask(g, 3, 4)), ["aten.bitwise_xor.Tensor"], dynamic_axes=batch(2)),
    op("bitwise_xor_scalar", lambda a: a ^ 3, lambda g: (ints(g, -9, 9, 3, 4),), ["aten.bitwise_xor.Scalar"], opsets=FROM_18, dynamic_axes=batch()),
    op("bitwise_xor_scalar_tensor", lambda a: torch.bitwise_xor(3, a), lambda g: (ints(g, -9, 9, 3, 4),), ["aten.bitwise_xor.Scalar_Tensor"], opsets=FROM_18, dynamic_axes=batch()),
    op("lshift_tensor", torch.bitwise_left_shift, lambda g: (ints(g, -99, 99, 3, 4), _shifts(g, 3, 4)), [f"{LSHIFT}.Tensor"], dynamic_axes=batch(2)),
    op("lshift_wraps_int64", torch.bitwise_left_shift, lambda g: (_wide(g, 3, 4), _shifts(g, 3, 4) * 8), [f"{LSHIFT}.Tensor"], dynamic_axes=batch(2)),
    op("lshift_wraps_int32", lambda a: torch.bitwise_left_shift(a, 20), lambda g: (_wide(g, 3, 4, dtype=torch.int32),), [f"{LSHIFT}.Tensor_Scalar"], dynamic_axes=batch()),
    op("lshift_uint8", lambda a: torch.bitwise_left_shift(a, 3), lambda g: (ints(g, 0, 255, 3, 4, dtype=torch.uint8),), [f"{LSHIFT}.Tensor_Scalar"], dynamic_axes=batch()),
    op("lshift_by_width_is_zero", lambda a: torch.bitwise_left_shift(a, 64), lambda g: (ints(g, -99, 99, 3, 4),), [f"{LSHIFT}.Tensor_Scalar"], dynamic_axes=batch()),
    op("lshift_scalar_tensor", lambda b: torch.bitwise_left_shift(3, b), lambda g: (_shifts(g, 3, 4),), [f"{LSHIFT}.Scalar_Tensor"], dynamic_axes=batch()),
    op("lshift_operator_scalar", lambda a: torch.ops.aten.__lshift__.Scalar(a, 2), lambda g: (ints(g, -99, 99, 3, 4),), ["aten.__lshift__.Scalar"], dynamic_axes=batch()),
    op("lshift_operator_tensor", lambda a, b: a << b, lambda g: (ints(g, -99, 99, 3, 4), _shifts(g, 3, 4)), ["aten.__lshift__.Tensor"], dynamic_axes=batch(2)),
    op("rshift_tensor_negative_numbers", torch.bitwise_right_shift, lambda g: (ints(g, -99, 99, 3, 4), _shifts(g, 3, 4)), [f"{RSHIFT}.Tensor"], dynamic_axes=batch(2)),
    op("rshift_int64_full_range", torch.bitwise_right_shift, lambda g: (_wide(g, 3, 4), _shifts(g, 3, 4) * 9), [f"{RSHIFT}.Tensor"], dynamic_axes=batch(2)),
    op("rshift_int16", lambda a: torch.bitwise_right_shift(a, 5), lambda g: (_wide(g, 3, 4, dtype=torch.int16),), [f"{RSHIFT}.Tensor_Scalar"], dynamic_axes=batch()),
    op("rshift_uint8", lambda a: torch.bitwise_right_shift(a, 3), lambda g: (ints(g, 0, 255, 3, 4, dtype=torch.uint8),), [f"{RSHIFT}.Tensor_Scalar"], dynamic_axes=batch()),
    op("rshift_scalar_tensor", lambda b: torch.bitwise_right_shift(-100, b), lambda g: (_shifts(g, 3, 4),), [f"{RSHIFT}.Scalar_Tensor"], dynamic_axes=batch()),
    op("rshift_operator_scalar", lambda a: torch.ops.aten.__rshift__.Scalar(a, 2), lambda g: (ints(g, -99, 99, 3, 4),), ["aten.__rshift__.Scalar"], dynamic_axes=batch()),
    op("rshift_operator_tensor", lambda a, b: a >> b, lambda g: (ints(g, -99, 99, 3, 4), _shifts(g, 3, 4)), ["aten.__rshift__.Tensor"], dynamic_axes=batch(2)),
]
