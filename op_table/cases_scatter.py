"""scatter, scatter_add, scatter_reduce and diagonal (exporter/translate/symbolics/scatter.py)."""

from __future__ import annotations

import torch

from ._samples import ints, op, randn
from .cases_math import batch
from .schema import OpCase


def _distinct_index(gen: torch.Generator, rows: int, cols: int, size: int) -> torch.Tensor:
    """Per row, `cols` distinct positions below `size` (no two writes to one place)."""
    return torch.stack([torch.randperm(size, generator=gen)[:cols] for _ in range(rows)])


def _repeating_index(gen: torch.Generator, rows: int, cols: int, size: int) -> torch.Tensor:
    return torch.randint(0, size, (rows, cols), generator=gen)


SCATTER, SCATTER_VALUE, SCATTER_ADD = "aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default"
REDUCE = "aten.scatter_reduce.two"
FROM_18 = (18, 26)

SCATTERS = [
    op("scatter_src_dim1", lambda a, i, s: a.scatter(1, i, s), lambda g: (randn(g, 3, 5), _distinct_index(g, 3, 2, 5), randn(g, 3, 2)), [SCATTER], dynamic_axes=batch(3)),
    op("scatter_src_larger_than_index", lambda a, i, s: a.scatter(1, i, s), lambda g: (randn(g, 3, 5), _distinct_index(g, 3, 2, 5), randn(g, 3, 4)), [SCATTER], dynamic_axes=batch(3)),
    op("scatter_src_dim0_dynamic", lambda a, i, s: torch.scatter(a, 0, i, s), lambda g: (randn(g, 4, 3), _distinct_index(g, 3, 2, 4).T.contiguous(), randn(g, 2, 3)), [SCATTER], dynamic_axes={"args_0": {0: "batch"}}),
    op("scatter_value", lambda a, i: a.scatter(1, i, 2.5), lambda g: (randn(g, 3, 5), _distinct_index(g, 3, 2, 5)), [SCATTER_VALUE], dynamic_axes=batch(2)),
    op("scatter_value_int", lambda a, i: a.scatter(1, i, 7), lambda g: (ints(g, -5, 5, 3, 5), _distinct_index(g, 3, 3, 5)), [SCATTER_VALUE], dynamic_axes=batch(2)),
    op("scatter_add", lambda a, i, s: a.scatter_add(1, i, s), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [SCATTER_ADD], dynamic_axes=batch(3)),
    op("scatter_add_int_dim0", lambda a, i, s: torch.scatter_add(a, 0, i, s), lambda g: (ints(g, -5, 5, 4, 3), _repeating_index(g, 5, 3, 4), ints(g, -5, 5, 5, 3)), [SCATTER_ADD], dynamic_axes={"args_1": {0: "n"}, "args_2": {0: "n"}}),
]

REDUCES = [
    op("scatter_reduce_sum", lambda a, i, s: a.scatter_reduce(1, i, s, "sum"), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_sum_exclude_self", lambda a, i, s: a.scatter_reduce(1, i, s, "sum", include_self=False), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_prod", lambda a, i, s: a.scatter_reduce(1, i, s, "prod"), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_mean", lambda a, i, s: a.scatter_reduce(1, i, s, "mean"), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_mean_exclude_self", lambda a, i, s: a.scatter_reduce(1, i, s, "mean", include_self=False), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_mean_int_floors", lambda a, i, s: a.scatter_reduce(1, i, s, "mean"), lambda g: (ints(g, -9, 9, 3, 5), _repeating_index(g, 3, 6, 5), ints(g, -9, 9, 3, 6)), [REDUCE], dynamic_axes=batch(3)),
    op("scatter_reduce_amax", lambda a, i, s: a.scatter_reduce(1, i, s, "amax"), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], opsets=FROM_18, dynamic_axes=batch(3)),
    op("scatter_reduce_amin_exclude_self", lambda a, i, s: a.scatter_reduce(1, i, s, "amin", include_self=False), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], opsets=FROM_18, dynamic_axes=batch(3)),
    op("scatter_reduce_amax_int", lambda a, i, s: a.scatter_reduce(0, i, s, "amax", include_self=False), lambda g: (ints(g, -9, 9, 4, 3), _repeating_index(g, 5, 3, 4), ints(g, -9, 9, 5, 3)), [REDUCE], opsets=FROM_18, dynamic_axes={"args_1": {0: "n"}, "args_2": {0: "n"}}),
    op("scatter_reduce_amax_refused_at_17", lambda a, i, s: a.scatter_reduce(1, i, s, "amax"), lambda g: (randn(g, 3, 5), _repeating_index(g, 3, 6, 5), randn(g, 3, 6)), [REDUCE], opsets=(17,), refused="opset >= 18"),
]

DIAGONALS = [
    op("diagonal_square", torch.diagonal, lambda g: (randn(g, 4, 4),), ["aten.diagonal.default"], dynamic_axes={"args_0": {0: "n", 1: "n"}}),
    op("diagonal_offset", lambda a: torch.diagonal(a, 1), lambda g: (randn(g, 3, 5),), ["aten.diagonal.default"], dynamic_axes=batch()),
    op("diagonal_negative_offset", lambda a: torch.diagonal(a, -2), lambda g: (randn(g, 5, 3),), ["aten.diagonal.default"], dynamic_axes=batch()),
    op("diagonal_batched_dims", lambda a: torch.diagonal(a, 0, 1, 2), lambda g: (randn(g, 2, 3, 4),), ["aten.diagonal.default"], dynamic_axes=batch()),
    op("diagonal_swapped_dims_int", lambda a: torch.diagonal(a, 1, -1, 0), lambda g: (ints(g, -9, 9, 4, 2, 3),), ["aten.diagonal.default"], dynamic_axes={"args_0": {1: "batch"}}),
    op("diagonal_offset_past_end_is_empty", lambda a: torch.diagonal(a, 6) + 1, lambda g: (randn(g, 3, 4),), ["aten.diagonal.default"], dynamic_axes=batch()),
]

CASES: list[OpCase] = [*SCATTERS, *REDUCES, *DIAGONALS]
