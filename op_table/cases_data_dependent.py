"""Data-dependent values and sizes: `.item()`, boolean-mask and index-tensor writes
(`index_put`), `masked_select`, `masked_scatter`, `nonzero`, `unique` (sorted, consecutive),
`bincount`, `repeat_interleave` with tensor repeats, and data checks.

Sizes that depend on the data are unbacked symbols in the program and computed at run time in
the model; each row's samples make those sizes neither 0 nor the whole tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import ints, mask, op, randn
from .schema import OpCase

BATCH = {"args_0": {0: "batch"}, "args_1": {0: "batch"}}
PUT, ITEM = "aten.index_put.default", "aten._local_scalar_dense.default"


def _put(value: float | None = None, accumulate: bool = False, where=lambda m: (m,)):
    """`x[where(index)] = v` on a copy (v = `value`, else the third input), or `+=` with accumulate."""
    def fn(x, index, *values):
        out = x.clone()
        update = torch.tensor(value) if value is not None else values[0]
        return out.index_put_(where(index), update, accumulate=accumulate)
    return fn


def _set_after_slice(x: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out[:, index] = values
    return out


def _labels(gen: torch.Generator) -> tuple[torch.Tensor]:
    return (ints(gen, 0, 5, 3, 7),)


ITEMS = [
    op("item_float_scales", lambda x: x * x.sum().item(), lambda g: (randn(g, 3, 4),), [ITEM]),
    op("item_int_sizes_arange", lambda x, n: torch.arange(n.item()) * 2, lambda g: (randn(g, 2), torch.tensor([5])),
       [ITEM]),
    op("item_int_slices", lambda x, n: x[: n.item()], lambda g: (randn(g, 6, 2), torch.tensor(4)), [ITEM]),
]

WRITES = [
    op("index_put_bool_mask_scalar", _put(0.5), lambda g: (randn(g, 4, 5), mask(g, 4, 5)), [PUT], dynamic_axes=BATCH),
    op("index_put_bool_mask_values", lambda x, m: _put()(x, m, x[m] * 2), lambda g: (randn(g, 4, 5), mask(g, 4, 5)),
       [PUT, "aten.index.Tensor"]),
    op("index_put_bool_rows", lambda x, m, v: _put()(x, m, v), lambda g: (randn(g, 6, 3), mask(g, 6), randn(g, 3)),
       [PUT]),
    op("index_put_int_rows", lambda x, i, v: _put()(x, i, v), lambda g: (randn(g, 6, 3), torch.tensor([4, -1, 0]), randn(g, 3, 3)),
       [PUT]),
    op("index_put_int_pairs", lambda x, i, v: _put(where=lambda i: (i[0], i[1]))(x, i, v),
       lambda g: (randn(g, 4, 5, 2), torch.tensor([[0, 3, 1], [4, 0, 2]]), randn(g, 2)), [PUT]),
    op("index_put_after_a_slice", _set_after_slice,
       lambda g: (randn(g, 3, 6, 2), torch.tensor([[5, 1], [2, 0]]), randn(g, 3, 2, 2, 2)), [PUT]),
    op("index_put_accumulate_repeats", _put(accumulate=True), lambda g: (randn(g, 5, 3), torch.tensor([1, 3, 1, 1]), randn(g, 4, 3)),
       [PUT]),
    op("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), lambda g: (randn(g, 4, 5), mask(g, 4, 5), randn(g, 25)),
       ["aten.masked_scatter.default"]),
    op("masked_scatter_broadcast_mask", lambda x, m, s: x.masked_scatter(m, s), lambda g: (randn(g, 3, 4), mask(g, 4), randn(g, 3, 4)),
       ["aten.masked_scatter.default"]),
]

READS = [
    op("masked_select", torch.masked_select, lambda g: (randn(g, 4, 5), mask(g, 4, 5)), ["aten.masked_select.default"],
       dynamic_axes=BATCH),
    op("masked_select_broadcast", torch.masked_select, lambda g: (randn(g, 3, 4), mask(g, 4)), ["aten.masked_select.default"]),
    op("nonzero_zero_dim_true", lambda x: torch.nonzero(x.sum() > -100), lambda g: (randn(g, 3),), ["aten.nonzero.default"]),
    op("nonzero_zero_dim_false", lambda x: torch.nonzero(x.sum() > 100), lambda g: (randn(g, 3),), ["aten.nonzero.default"]),
    op("nonzero_zero_dim_float", torch.nonzero, lambda g: (randn(g),), ["aten.nonzero.default"]),
    op("nonzero_zero_dim_int_zero", torch.nonzero, lambda g: (ints(g, 0, 1),), ["aten.nonzero.default"]),
    op("argwhere_zero_dim", torch.argwhere, lambda g: (ints(g, 1, 3),), ["aten.nonzero.default"]),
    op("nonzero_as_tuple_zero_dim", lambda x: torch.nonzero(x, as_tuple=True), lambda g: (randn(g),),
       ["aten.nonzero.default"]),
    op("unique_sorted", torch.unique, _labels, ["aten._unique2.default"]),
    op("unique_inverse_counts", lambda x: torch.unique(x, return_inverse=True, return_counts=True), _labels,
       ["aten._unique2.default"]),
    op("unique_rows", lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
       lambda g: (ints(g, 0, 2, 8, 2),), ["aten.unique_dim.default"]),
    op("one_hot_with_class_count", lambda x: F.one_hot(x, 6), _labels,
       ["aten._assert_async.msg"]),
]

UNIQUE, CONSECUTIVE = "aten._unique.default", "aten.unique_consecutive.default"
BINCOUNT, REPEAT = "aten.bincount.default", "aten.repeat_interleave.Tensor"
ONE_AXIS = {"args_0": {0: "n"}}


def _runs(gen: torch.Generator, dtype: torch.dtype = torch.int64) -> tuple[torch.Tensor]:
    """Sorted small integers: runs of equal neighbours of several lengths."""
    return (torch.sort(ints(gen, 0, 6, 14)).values.to(dtype),)


def _float_runs(gen: torch.Generator) -> tuple[torch.Tensor]:
    """Floats with runs, a NaN pair (NaN differs from NaN) and -0.0 next to 0.0 (equal)."""
    return (torch.tensor([1.5, 1.5, float("nan"), float("nan"), -0.0, 0.0, 2.0, 2.0, 2.0, -1.0]),)


COUNTING = [
    op("unique_underscore_inverse", lambda x: torch.ops.aten._unique(x, True, True), _labels, [UNIQUE]),
    op("unique_underscore_unsorted_int32", lambda x: torch.ops.aten._unique(x, False, True),
       lambda g: (ints(g, -3, 3, 4, 5, dtype=torch.int32),), [UNIQUE]),
    op("unique_underscore_bool", lambda x: torch.ops.aten._unique(x, True, True), lambda g: (mask(g, 3, 4),), [UNIQUE]),
    op("unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True), _runs,
       [CONSECUTIVE], dynamic_axes=ONE_AXIS),
    op("unique_consecutive_values_only", torch.unique_consecutive, lambda g: _runs(g, torch.int32), [CONSECUTIVE]),
    op("unique_consecutive_float_nan", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
       _float_runs, [CONSECUTIVE]),
    op("unique_consecutive_2d", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
       lambda g: (ints(g, 0, 2, 3, 4),), [CONSECUTIVE]),
    op("unique_consecutive_dim", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=1),
       lambda g: (torch.tensor([[1, 1, 2, 2, 2, 3], [0, 0, 5, 5, 5, 0]]),), [CONSECUTIVE]),
    op("bincount", torch.bincount, lambda g: (ints(g, 0, 7, 20),), [BINCOUNT], dynamic_axes=ONE_AXIS),
    op("bincount_minlength", lambda x: torch.bincount(x, minlength=12), lambda g: (ints(g, 0, 5, 9, dtype=torch.int32),),
       [BINCOUNT]),
    op("bincount_weights", torch.bincount, lambda g: (ints(g, 0, 6, 15), randn(g, 15)), [BINCOUNT],
       dynamic_axes={"args_0": {0: "n"}, "args_1": {0: "n"}}),
    op("bincount_weights_float64", torch.bincount, lambda g: (ints(g, 0, 4, 8, dtype=torch.uint8), randn(g, 8, dtype=torch.float64)),
       [BINCOUNT]),
    op("repeat_interleave_tensor", torch.repeat_interleave, lambda g: (torch.tensor([1, 0, 3, 2, 0]),), [REPEAT],
       dynamic_axes=ONE_AXIS),
    op("repeat_interleave_tensor_leading_zeros_int32", torch.repeat_interleave,
       lambda g: (torch.tensor([0, 0, 2, 1], dtype=torch.int32),), [REPEAT]),
    op("repeat_interleave_self_tensor_dim", lambda x, r: torch.repeat_interleave(x, r, dim=0),
       lambda g: (randn(g, 4, 3), torch.tensor([2, 0, 1, 3])), [REPEAT]),
]

CASES: list[OpCase] = [*ITEMS, *WRITES, *READS, *COUNTING]
