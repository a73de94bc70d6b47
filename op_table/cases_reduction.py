"""Reductions and softmax: one row per form (dims, keepdim, dtype, integer promotion)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import ints, mask, op, randn, with_nans
from .schema import OpCase

SUM, SUM_ALL = "aten.sum.dim_IntList", "aten.sum.default"
MEAN, MEAN_ALL = "aten.mean.dim", "aten.mean.default"
PROD, PROD_ALL = "aten.prod.dim_int", "aten.prod.default"

SUMS = [
    op("sum_all", torch.sum, lambda g: (randn(g, 2, 3, 4),), [SUM_ALL], seed_ops=("sum",)),
    op("sum_all_int32_to_int64", torch.sum, lambda g: (ints(g, -5, 5, 2, 3, dtype=torch.int32),), [SUM_ALL], seed_ops=("sum",)),
    op("sum_all_bool_to_int64", torch.sum, lambda g: (mask(g, 2, 3),), [SUM_ALL], seed_ops=("sum",)),
    op("sum_dim", lambda a: a.sum(1), lambda g: (randn(g, 2, 3, 4),), [SUM], seed_ops=("sum",)),
    op("sum_dims_keepdim", lambda a: a.sum((0, 2), keepdim=True), lambda g: (randn(g, 2, 3, 4),), [SUM], seed_ops=("sum",)),
    op("sum_negative_dim", lambda a: a.sum(-1), lambda g: (randn(g, 2, 3, 4),), [SUM], seed_ops=("sum",)),
    op("sum_dtype_float64", lambda a: a.sum(1, dtype=torch.float64), lambda g: (randn(g, 2, 3),), [SUM], seed_ops=("sum",)),
    op("sum_int_dim", lambda a: a.sum(0), lambda g: (ints(g, -5, 5, 3, 4, dtype=torch.int32),), [SUM], seed_ops=("sum",)),
    op("sum_empty_dims_is_all", lambda a: torch.sum(a, dim=[]), lambda g: (randn(g, 2, 3),), [SUM], seed_ops=("sum",)),
    op("sum_0d", lambda a: a.sum().sum(0), lambda g: (randn(g, 3),), [SUM_ALL, SUM], seed_ops=("sum",)),
]

MEANS = [
    op("mean_all", torch.mean, lambda g: (randn(g, 2, 3, 4),), [MEAN_ALL], seed_ops=("mean",)),
    op("mean_all_dtype", lambda a: a.mean(dtype=torch.float64), lambda g: (randn(g, 2, 3),), [MEAN_ALL], seed_ops=("mean",)),
    op("mean_dim", lambda a: a.mean(1), lambda g: (randn(g, 2, 3, 4),), [MEAN], seed_ops=("mean",)),
    op("mean_dims_keepdim", lambda a: a.mean((-1, 0), keepdim=True), lambda g: (randn(g, 2, 3, 4),), [MEAN], seed_ops=("mean",)),
    op("mean_dim_none_keepdim", lambda a: torch.mean(a, dim=None, keepdim=True), lambda g: (randn(g, 2, 3),), [MEAN], seed_ops=("mean",)),
    op("mean_dtype_float64", lambda a: a.mean(0, dtype=torch.float64), lambda g: (randn(g, 3, 2),), [MEAN], seed_ops=("mean",)),
    op("mean_over_an_empty_axis", lambda a: a.mean(1), lambda g: (randn(g, 3, 0),), [MEAN], seed_ops=("mean",)),
    op("mean_all_of_an_empty_tensor", torch.mean, lambda g: (randn(g, 0, 4),), [MEAN_ALL], seed_ops=("mean",)),
]

PRODS = [
    op("prod_all", torch.prod, lambda g: (randn(g, 2, 3),), [PROD_ALL], seed_ops=("prod",)),
    op("prod_all_int32_to_int64", torch.prod, lambda g: (ints(g, -3, 4, 2, 3, dtype=torch.int32),), [PROD_ALL], seed_ops=("prod",)),
    op("prod_dim", lambda a: a.prod(1), lambda g: (randn(g, 2, 3, 4),), [PROD], seed_ops=("prod",)),
    op("prod_dim_keepdim", lambda a: a.prod(-1, keepdim=True), lambda g: (randn(g, 2, 3, 4),), [PROD], seed_ops=("prod",)),
    op("prod_dim_dtype", lambda a: a.prod(0, dtype=torch.float64), lambda g: (randn(g, 3, 2),), [PROD], seed_ops=("prod",)),
    op("prod_int_dim", lambda a: a.prod(1), lambda g: (ints(g, -3, 4, 3, 3),), [PROD], seed_ops=("prod",)),
]

EXTREMES = [
    op("max_all", torch.max, lambda g: (randn(g, 2, 3, 4),), ["aten.max.default"], seed_ops=("max",)),
    op("max_all_int", torch.max, lambda g: (ints(g, -9, 9, 2, 3),), ["aten.max.default"], seed_ops=("max",)),
    op("min_all", torch.min, lambda g: (randn(g, 2, 3, 4),), ["aten.min.default"], seed_ops=("min",)),
    op("max_dim_values_indices", lambda a: a.max(1), lambda g: (randn(g, 2, 3, 4),), ["aten.max.dim"], seed_ops=("max",)),
    op("max_dim_keepdim", lambda a: a.max(-1, keepdim=True), lambda g: (randn(g, 2, 3, 4),), ["aten.max.dim"], seed_ops=("max",)),
    # few distinct values: ties, where torch returns the first index
    op("max_dim_int_ties", lambda a: a.max(0), lambda g: (ints(g, 0, 2, 5, 4),), ["aten.max.dim"], seed_ops=("max",)),
    op("min_dim_values_indices", lambda a: a.min(2), lambda g: (randn(g, 2, 3, 4),), ["aten.min.dim"], seed_ops=("min",)),
    op("min_dim_int_ties", lambda a: a.min(1, keepdim=True), lambda g: (ints(g, 0, 2, 3, 5),), ["aten.min.dim"], seed_ops=("min",)),
    op("max_dim_nan_propagates", lambda a: a.max(1), lambda g: (with_nans(g, 3, 4),), ["aten.max.dim"], seed_ops=("max",)),
    op("max_all_nan_propagates", torch.max, lambda g: (with_nans(g, 3, 4),), ["aten.max.default"], seed_ops=("max",)),
    op("min_dim_nan_propagates", lambda a: a.min(0, keepdim=True), lambda g: (with_nans(g, 4, 3),), ["aten.min.dim"], seed_ops=("min",)),
    op("amin_nan_propagates", lambda a: a.amin(-1), lambda g: (with_nans(g, 3, 4),), ["aten.amin.default"], seed_ops=("min",)),
    op("max_all_bool", torch.max, lambda g: (mask(g, 3, 4),), ["aten.max.default"], seed_ops=("max",)),
    op("min_dim_bool", lambda a: a.min(1), lambda g: (mask(g, 3, 4),), ["aten.min.dim"], seed_ops=("min",)),
    op("amax_bool", lambda a: a.amax(0), lambda g: (mask(g, 3, 4),), ["aten.amax.default"], seed_ops=("max",)),
    op("amax_dims", lambda a: a.amax((0, 2)), lambda g: (randn(g, 2, 3, 4),), ["aten.amax.default"], seed_ops=("max",)),
    op("amin_keepdim", lambda a: a.amin(1, keepdim=True), lambda g: (randn(g, 2, 3, 4),), ["aten.amin.default"], seed_ops=("min",)),
]

SOFTMAX, LOG_SOFTMAX = "aten.softmax.int", "aten.log_softmax.int"
SOFTMAXES = [
    op("softmax_dim0", lambda a: F.softmax(a, 0), lambda g: (randn(g, 2, 3, 4),), [SOFTMAX], seed_ops=("softmax",)),
    op("softmax_dim1", lambda a: F.softmax(a, 1), lambda g: (randn(g, 2, 3, 4),), [SOFTMAX], seed_ops=("softmax",)),
    op("softmax_last", lambda a: a.softmax(-1), lambda g: (randn(g, 2, 3, 4) * 4,), [SOFTMAX], seed_ops=("softmax",)),
    op("softmax_dtype", lambda a: F.softmax(a, 1, dtype=torch.float64), lambda g: (randn(g, 2, 3),), [SOFTMAX], seed_ops=("softmax",)),
    op("softmax_0d", lambda a: a.sum().softmax(0), lambda g: (randn(g, 3),), [SOFTMAX], seed_ops=("softmax",)),
    op("softmax_module", lambda a: torch.nn.Softmax(dim=1)(a), lambda g: (randn(g, 3, 5),), [SOFTMAX], seed_ops=("softmax",)),
    op("_softmax_direct", lambda a: torch._softmax(a, 1, False), lambda g: (randn(g, 2, 3, 4),), ["aten._softmax.default"], seed_ops=("softmax",)),
    # torch's CPU kernel refuses half_to_float=True (CUDA only); the op is defined as the
    # softmax of the input upcast to float32, which is what torch computes on CUDA
    op(
        "_softmax_half_to_float", lambda a: torch._softmax(a, 1, True), lambda g: (randn(g, 2, 3, dtype=torch.float16),),
        ["aten._softmax.default"], seed_ops=("softmax",),
        reference=lambda a: torch._softmax(a.float(), 1, False),
    ),
    op("log_softmax_dim0", lambda a: F.log_softmax(a, 0), lambda g: (randn(g, 2, 3, 4),), [LOG_SOFTMAX], seed_ops=("log_softmax",)),
    op("log_softmax_last", lambda a: F.log_softmax(a, -1), lambda g: (randn(g, 2, 3, 4) * 4,), [LOG_SOFTMAX], seed_ops=("log_softmax",)),
    op("log_softmax_dtype", lambda a: F.log_softmax(a, 1, dtype=torch.float64), lambda g: (randn(g, 2, 3),), [LOG_SOFTMAX], seed_ops=("log_softmax",)),
    op("_log_softmax_direct", lambda a: torch._log_softmax(a, 2, False), lambda g: (randn(g, 2, 3, 4),), ["aten._log_softmax.default"], seed_ops=("log_softmax",)),
]

CASES: list[OpCase] = [*SUMS, *MEANS, *PRODS, *EXTREMES, *SOFTMAXES]
