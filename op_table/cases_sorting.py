"""argmax/argmin, sort and flip (exporter/translate/symbolics/sorting.py): one row per form."""

from __future__ import annotations

import torch

from ._samples import ints, mask, op, randn, with_nans
from .cases_math import batch
from .schema import OpCase

ARGMAX, ARGMIN, SORT = "aten.argmax.default", "aten.argmin.default", "aten.sort.default"


def _ties(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Few distinct values: ties must resolve to the first index, as torch's."""
    return torch.randint(0, 3, shape, generator=gen).float()


CASES: list[OpCase] = [
    op("argmax_dim", lambda a: torch.argmax(a, 1), lambda g: (randn(g, 3, 5),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_keepdim_dynamic_axis", lambda a: torch.argmax(a, 0, keepdim=True), lambda g: (randn(g, 4, 3),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_flat", torch.argmax, lambda g: (randn(g, 3, 5),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_flat_keepdim", lambda a: torch.argmax(a, keepdim=True), lambda g: (randn(g, 3, 5),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_ties_first", lambda a: torch.argmax(a, -1), lambda g: (_ties(g, 3, 6),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_nan_wins", lambda a: torch.argmax(a, -1), lambda g: (with_nans(g, 3, 6),), [ARGMAX], dynamic_axes=batch()),
    op("argmax_int", lambda a: torch.argmax(a, -1), lambda g: (ints(g, -9, 9, 3, 6),), [ARGMAX], dynamic_axes=batch()),
    op("argmin_dim", lambda a: torch.argmin(a, 1), lambda g: (randn(g, 3, 5),), [ARGMIN], dynamic_axes=batch()),
    op("argmin_flat", torch.argmin, lambda g: (randn(g, 3, 5),), [ARGMIN], dynamic_axes=batch()),
    op("argmin_nan_wins", lambda a: torch.argmin(a, -1), lambda g: (with_nans(g, 3, 6),), [ARGMIN], dynamic_axes=batch()),
    op("argmin_int32_ties", lambda a: torch.argmin(a, 0), lambda g: (ints(g, 0, 3, 4, 6, dtype=torch.int32),), [ARGMIN], dynamic_axes=batch()),
    op("sort_last", lambda a: torch.sort(a), lambda g: (randn(g, 3, 5),), [SORT], dynamic_axes=batch()),
    op("sort_descending_dynamic_axis", lambda a: torch.sort(a, 0, descending=True), lambda g: (randn(g, 4, 3),), [SORT], dynamic_axes=batch()),
    op("sort_int_ties_keep_order", lambda a: torch.sort(a, stable=True), lambda g: (ints(g, 0, 3, 3, 8),), ["aten.sort.stable"], dynamic_axes=batch()),
    op("sort_stable_descending", lambda a: torch.sort(a, stable=True, descending=True), lambda g: (_ties(g, 3, 8),), ["aten.sort.stable"], dynamic_axes=batch()),
    op("sort_bool", lambda a: torch.sort(a, -1), lambda g: (mask(g, 3, 5),), [SORT], dynamic_axes=batch()),
    op("argsort_is_sort", lambda a: torch.argsort(a, 1), lambda g: (randn(g, 3, 5),), [SORT], dynamic_axes=batch()),
    op("flip_one_axis", lambda a: torch.flip(a, [1]), lambda g: (randn(g, 3, 5),), ["aten.flip.default"], dynamic_axes=batch()),
    op("flip_dynamic_and_negative_axes", lambda a: torch.flip(a, [0, -1]), lambda g: (randn(g, 3, 4, 2),), ["aten.flip.default"], dynamic_axes=batch()),
    op("flip_int", lambda a: a.flip(0), lambda g: (ints(g, -9, 9, 3, 4),), ["aten.flip.default"], dynamic_axes=batch()),
    op("fliplr", torch.fliplr, lambda g: (randn(g, 3, 4),), ["aten.flip.default"], dynamic_axes=batch()),
]
