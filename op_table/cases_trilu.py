"""tril and triu as ONNX Trilu (exporter/translate/symbolics/trilu.py): batched and non-square inputs,
negative and out-of-range diagonals, a diagonal computed from dynamic sizes (a causal mask with
a KV cache), every dtype torch triangulates, and the in-place forms."""

from __future__ import annotations

import torch

from ._samples import ints, mask, op, randn
from .schema import OpCase

TRIL, TRIU = "aten.tril.default", "aten.triu.default"


def _axes(**axes: str) -> dict[str, dict[int, str]]:
    """The one input's dynamic axes: `_axes(d0="batch", d2="cols")`."""
    return {"args_0": {int(key[1:]): name for key, name in axes.items()}}


def _cached_mask(a: torch.Tensor) -> torch.Tensor:
    """A [new, total] causal mask over `total` keys of which the last `new` are new tokens."""
    new, total = a.shape[-2], a.shape[-1]
    return a.masked_fill(~torch.ones(new, total, dtype=torch.bool).tril(total - new), 0.0)


CASES: list[OpCase] = [
    op("tril_batched_wide", lambda a: a.tril(), lambda g: (randn(g, 2, 3, 5),), [TRIL],
       dynamic_axes=_axes(d0="batch", d2="cols")),
    op("triu_rank4_tall_negative_diagonal", lambda a: torch.triu(a, -2), lambda g: (randn(g, 2, 1, 6, 4),), [TRIU],
       dynamic_axes=_axes(d0="batch", d2="rows")),
    op("tril_positive_diagonal_square", lambda a: torch.tril(a, 2), lambda g: (randn(g, 5, 5),), [TRIL],
       dynamic_axes=_axes(d0="rows", d1="cols")),
    op("tril_diagonal_past_corners", lambda a: (a.tril(9), a.tril(-9)), lambda g: (randn(g, 3, 4),), [TRIL],
       dynamic_axes=_axes(d0="rows")),
    op("triu_diagonal_past_corners", lambda a: (a.triu(9), a.triu(-9)), lambda g: (randn(g, 3, 4),), [TRIU],
       dynamic_axes=_axes(d1="cols")),
    op("tril_diagonal_from_dynamic_sizes", _cached_mask, lambda g: (randn(g, 2, 3, 7),), [TRIL],
       dynamic_axes=_axes(d1="new", d2="total")),
    op("triu_bool", lambda m: m.triu(1), lambda g: (mask(g, 2, 4, 4),), [TRIU], dynamic_axes=_axes(d0="batch")),
    op("tril_int64", lambda a: a.tril(-1), lambda g: (ints(g, -9, 9, 4, 3),), [TRIL], dynamic_axes=_axes(d0="rows")),
    op("triu_int32", lambda a: a.triu(), lambda g: (ints(g, -9, 9, 3, 4, dtype=torch.int32),), [TRIU],
       dynamic_axes=_axes(d1="cols")),
    op("tril_int8_widened", lambda a: a.tril(1), lambda g: (ints(g, -128, 128, 2, 4, 4, dtype=torch.int8),), [TRIL],
       dynamic_axes=_axes(d0="batch")),
    op("triu_uint8_widened", lambda a: a.triu(-1), lambda g: (ints(g, 0, 256, 4, 5, dtype=torch.uint8),), [TRIU],
       dynamic_axes=_axes(d0="rows")),
    op("tril_int16_widened", lambda a: a.tril(), lambda g: (ints(g, -30000, 30000, 3, 3, dtype=torch.int16),), [TRIL],
       dynamic_axes=_axes(d0="rows", d1="cols")),
    op("triu_float64", lambda a: a.triu(2), lambda g: (randn(g, 3, 6, dtype=torch.float64),), [TRIU],
       dynamic_axes=_axes(d0="rows")),
    op("tril_float16", lambda a: a.tril(), lambda g: (randn(g, 2, 4, 4, dtype=torch.float16),), [TRIL],
       dynamic_axes=_axes(d0="batch")),
    op("triu_bfloat16_in_graph", lambda a: a.bfloat16().triu().float(), lambda g: (randn(g, 2, 4, 4),), [TRIU],
       dynamic_axes=_axes(d0="batch")),
    op("tril_inplace_on_fresh_tensor", lambda a: (a * 2).tril_(-1), lambda g: (randn(g, 3, 4),), [TRIL],
       dynamic_axes=_axes(d0="rows")),
    op("triu_inplace_on_input_clone", lambda a: a.clone().triu_(1) + a, lambda g: (randn(g, 2, 4, 4),), [TRIU],
       dynamic_axes=_axes(d0="batch")),
]
