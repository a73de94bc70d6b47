"""Searching sorted sequences: `bucketize` and `searchsorted`, both sides, batched sequences,
sorters, values on the boundaries and NaN (placed after every number, as torch places it), and
empty sequences and values (onnxruntime's ReduceSum over a negative axis of an empty input
returned that input: the count runs over its axis counted from the front)."""

from __future__ import annotations

import torch

from ._samples import ints, op, randn
from .schema import OpCase

BUCKETIZE, SEARCHSORTED = "aten.bucketize.Tensor", "aten.searchsorted.Tensor"
BOUNDARIES = torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5])
ROWS = {"args_0": {0: "n"}}


def _on_boundaries(gen: torch.Generator) -> tuple[torch.Tensor]:
    """Normal draws, every boundary itself (where the sides differ) and NaN, +-inf."""
    special = torch.cat([BOUNDARIES, torch.tensor([float("nan"), float("inf"), float("-inf")])])
    return (torch.cat([randn(gen, 12), special]).reshape(5, 4),)


def _batched(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sort(randn(gen, 3, 6)).values, randn(gen, 3, 5)


CASES: list[OpCase] = [
    op("bucketize", lambda x: torch.bucketize(x, BOUNDARIES), _on_boundaries, [BUCKETIZE], dynamic_axes=ROWS),
    op("bucketize_right_int32", lambda x: torch.bucketize(x, BOUNDARIES, right=True, out_int32=True), _on_boundaries,
       [BUCKETIZE]),
    op("bucketize_int_values", lambda x, b: torch.bucketize(x, b), lambda g: (ints(g, -5, 5, 3, 4), torch.tensor([-2, 0, 0, 3])),
       [BUCKETIZE]),
    op("bucketize_scalar", lambda b: torch.bucketize(0.5, b), lambda g: (BOUNDARIES,), ["aten.bucketize.Scalar"]),
    op("searchsorted", lambda s, x: torch.searchsorted(s, x), lambda g: (BOUNDARIES, *_on_boundaries(g)), [SEARCHSORTED],
       dynamic_axes={"args_1": {0: "n"}}),
    op("searchsorted_right_side", lambda s, x: torch.searchsorted(s, x, side="right"), lambda g: (BOUNDARIES, *_on_boundaries(g)),
       [SEARCHSORTED]),
    op("searchsorted_batched", torch.searchsorted, _batched, [SEARCHSORTED],
       dynamic_axes={"args_0": {0: "batch"}, "args_1": {0: "batch"}}),
    op("searchsorted_sorter", lambda s, x: torch.searchsorted(s, x, sorter=torch.argsort(s)),
       lambda g: (randn(g, 7), randn(g, 2, 3)), [SEARCHSORTED, "aten.sort.default"]),
    op("searchsorted_empty_sequence", torch.searchsorted, lambda g: (torch.zeros(0), randn(g, 3, 2)), [SEARCHSORTED]),
    op("searchsorted_empty_sequence_and_values", torch.searchsorted, lambda g: (torch.zeros(0), torch.zeros(0)),
       [SEARCHSORTED]),
    op("bucketize_empty_boundaries", torch.bucketize, lambda g: (randn(g, 4), torch.zeros(0)), [BUCKETIZE]),
    op("searchsorted_float64_scalar", lambda s: torch.searchsorted(s, 0.1, right=True),
       lambda g: (torch.sort(randn(g, 9, dtype=torch.float64)).values,), ["aten.searchsorted.Scalar"]),
]
