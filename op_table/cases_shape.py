"""Shape ops, joins and splits, unfold, padding, factories and dynamic-shape arithmetic."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import ints, op, randn
from .schema import OpCase

VIEW, PERMUTE, EXPAND = "aten.view.default", "aten.permute.default", "aten.expand.default"
BATCH = {"args_0": {0: "batch"}}  # Lambda rows name their inputs args_0, args_1, ...

RESHAPES = [
    op("view_minus_one", lambda a: a.view(6, -1), lambda g: (randn(g, 2, 3, 4),), [VIEW], seed_ops=("view",)),
    op("view_as", lambda a, b: a.view_as(b), lambda g: (randn(g, 2, 6), randn(g, 3, 4)), [VIEW], seed_ops=("view",)),
    op("reshape_is_view", lambda a: a.reshape(4, 3, 2), lambda g: (randn(g, 2, 3, 4),), [VIEW], seed_ops=("view",)),
    op("reshape_non_contiguous", lambda a: a.t().reshape(-1), lambda g: (randn(g, 3, 4),), ["aten._unsafe_view.default", "aten.clone.default"], seed_ops=("view",)),
    op("flatten_is_view", lambda a: a.flatten(1), lambda g: (randn(g, 2, 3, 4),), [VIEW], seed_ops=("view",)),
    op("view_to_0d", lambda a: a.view(()), lambda g: (randn(g, 1, 1),), [VIEW], seed_ops=("view",)),
    op("_unsafe_view", lambda a: torch.ops.aten._unsafe_view(a, [4, 6]), lambda g: (randn(g, 2, 3, 4),), ["aten._unsafe_view.default"], seed_ops=("view",)),
    op("t_2d", torch.t, lambda g: (randn(g, 2, 3),), ["aten.t.default"], seed_ops=("t",)),
    op("t_1d", lambda a: a.t() * 2, lambda g: (randn(g, 3),), ["aten.t.default"], seed_ops=("t",)),
    op("transpose", lambda a: a.transpose(0, 2), lambda g: (randn(g, 2, 3, 4),), ["aten.transpose.int"], seed_ops=("transpose",)),
    op("transpose_negative_dims", lambda a: a.transpose(-1, -2), lambda g: (randn(g, 2, 3, 4),), ["aten.transpose.int"], seed_ops=("transpose",)),
    op("permute", lambda a: a.permute(2, 0, 1), lambda g: (randn(g, 2, 3, 4),), [PERMUTE], seed_ops=("permute",)),
    op("permute_negative_dims", lambda a: a.permute(-1, 1, 0, -2), lambda g: (randn(g, 2, 3, 4, 2),), [PERMUTE], seed_ops=("permute",)),
    op("permute_int", lambda a: a.permute(1, 0), lambda g: (ints(g, -5, 5, 2, 3),), [PERMUTE], seed_ops=("permute",)),
    op("expand_minus_one", lambda a: a.expand(-1, 3, -1), lambda g: (randn(g, 2, 1, 4),), [EXPAND], seed_ops=("expand",)),
    op("expand_new_leading_dims", lambda a: a.expand(2, 3, 2, 1, 4), lambda g: (randn(g, 2, 1, 4),), [EXPAND], seed_ops=("expand",)),
    op("expand_then_unary", lambda a: a.expand(3, 4).exp(), lambda g: (randn(g, 4),), [EXPAND], seed_ops=("expand",)),
    op("expand_as", lambda a, b: a.expand_as(b), lambda g: (randn(g, 3, 1), randn(g, 2, 3, 4)), [EXPAND], seed_ops=("expand",)),
    op("repeat", lambda a: a.repeat(2, 3), lambda g: (randn(g, 2, 3),), ["aten.repeat.default"]),
    op("repeat_new_leading_dims", lambda a: a.repeat(2, 1, 1, 2), lambda g: (randn(g, 2, 3),), ["aten.repeat.default"]),
    op("repeat_int_0d", lambda a: a.repeat(3), lambda g: (ints(g, -5, 5),), ["aten.repeat.default"]),
    op("repeat_dynamic", lambda a: a.repeat(2, 1), lambda g: (randn(g, 3, 2),), ["aten.repeat.default"], dynamic_axes=BATCH),
    op("repeat_by_a_dynamic_size", lambda a: a[:1].repeat(a.shape[0], 2), lambda g: (randn(g, 3, 2),), ["aten.repeat.default"], dynamic_axes=BATCH),
    op("expand_dynamic", lambda a: a[:, :1].expand(-1, 3), lambda g: (randn(g, 4, 2),), [EXPAND], seed_ops=("expand",), dynamic_axes=BATCH),
    op("squeeze_all", lambda a: a.squeeze(), lambda g: (randn(g, 1, 3, 1, 2),), ["aten.squeeze.default"], seed_ops=("squeeze",)),
    op("squeeze_dim", lambda a: a.squeeze(2), lambda g: (randn(g, 2, 3, 1),), ["aten.squeeze.dim"], seed_ops=("squeeze",)),
    op("squeeze_dim_not_one", lambda a: a.squeeze(1) + 1, lambda g: (randn(g, 2, 3, 1),), ["aten.squeeze.dim"], seed_ops=("squeeze",)),
    op("squeeze_dims", lambda a: a.squeeze((0, -1, 1)), lambda g: (randn(g, 1, 3, 1),), ["aten.squeeze.dims"], seed_ops=("squeeze",)),
    op("unsqueeze", lambda a: a.unsqueeze(1), lambda g: (randn(g, 2, 3),), ["aten.unsqueeze.default"]),
    op("unsqueeze_negative", lambda a: a.unsqueeze(-1), lambda g: (randn(g, 2, 3),), ["aten.unsqueeze.default"]),
]

CAT, SPLIT, SPLIT_SIZES = "aten.cat.default", "aten.split.Tensor", "aten.split_with_sizes.default"
JOINS = [
    op("cat_dim1", lambda a, b: torch.cat([a, b], 1), lambda g: (randn(g, 2, 3), randn(g, 2, 4)), [CAT], seed_ops=("cat",)),
    op("cat_negative_dim_three", lambda a, b, c: torch.cat([a, b, c], -1), lambda g: (randn(g, 2, 1), randn(g, 2, 2), randn(g, 2, 3)), [CAT], seed_ops=("cat",)),
    op("cat_promotes", lambda a, b: torch.cat([a, b]), lambda g: (ints(g, -5, 5, 2, 3), randn(g, 1, 3)), [CAT], seed_ops=("cat",)),
    op("cat_legacy_empty", lambda a: torch.cat([a, torch.zeros(0), a]), lambda g: (randn(g, 2, 3),), [CAT], seed_ops=("cat",)),
    op("concat", lambda a, b: torch.concat([a, b], 0), lambda g: (randn(g, 2, 3), randn(g, 1, 3)), [CAT], seed_ops=("concat",)),
    op("cat_dynamic", lambda a, b: torch.cat([a, b], 0), lambda g: (randn(g, 3, 2), randn(g, 2, 2)), [CAT], seed_ops=("cat",), dynamic_axes=BATCH),
    op("split_by_size", lambda a: a.split(2, 1), lambda g: (randn(g, 2, 6),), [SPLIT], seed_ops=("split",)),
    op("split_by_size_uneven", lambda a: a.split(2, -1), lambda g: (randn(g, 2, 3, 5),), [SPLIT], seed_ops=("split",)),
    op("split_one_chunk", lambda a: a.split(4, 0)[0] * 2, lambda g: (randn(g, 3, 2),), [SPLIT], seed_ops=("split",)),
    op("chunk_is_split", lambda a: a.chunk(3, 0), lambda g: (randn(g, 7, 2),), [SPLIT], seed_ops=("split",)),
    op("split_sections", lambda a: a.split([1, 3, 2], 1), lambda g: (randn(g, 2, 6),), [SPLIT_SIZES], seed_ops=("split",)),
    op("split_sections_dim0", lambda a: torch.split(a, [3, 1]), lambda g: (randn(g, 4, 2),), [SPLIT_SIZES], seed_ops=("split",)),
    op("chunk_of_a_dynamic_dim", lambda a: torch.cat([a, a * 2]).chunk(2, 0), lambda g: (randn(g, 3, 2),), [SPLIT], seed_ops=("split",), dynamic_axes=BATCH),
    op("split_other_dim_dynamic", lambda a: a.split(2, 1), lambda g: (randn(g, 3, 5),), [SPLIT], seed_ops=("split",), dynamic_axes=BATCH),
]

UNFOLD, PAD = "aten.unfold.default", "aten.constant_pad_nd.default"
WINDOWS = [
    op("unfold_last_dim", lambda a: a.unfold(2, 2, 1), lambda g: (randn(g, 2, 3, 5),), [UNFOLD], seed_ops=("unfold",)),
    op("unfold_first_dim_step", lambda a: a.unfold(0, 3, 2), lambda g: (randn(g, 7, 3),), [UNFOLD], seed_ops=("unfold",)),
    op("unfold_middle_dim", lambda a: a.unfold(1, 2, 3), lambda g: (randn(g, 2, 8, 3),), [UNFOLD], seed_ops=("unfold",)),
    op("unfold_whole_dim", lambda a: a.unfold(-1, 4, 1), lambda g: (randn(g, 2, 4),), [UNFOLD], seed_ops=("unfold",)),
    op("unfold_1d", lambda a: a.unfold(0, 2, 2), lambda g: (ints(g, -5, 5, 6),), [UNFOLD], seed_ops=("unfold",)),
    op("unfold_dynamic", lambda a: a.unfold(0, 2, 1), lambda g: (randn(g, 5, 3),), [UNFOLD], seed_ops=("unfold",), dynamic_axes=BATCH),
    op("unfold_0d", lambda a: a.sum().unfold(0, 1, 1), lambda g: (randn(g, 3),), [UNFOLD], seed_ops=("unfold",)),
    op("pad_constant", lambda a: F.pad(a, (1, 2), value=1.5), lambda g: (randn(g, 2, 3),), [PAD], seed_ops=("ConstantPadNd",)),
    op("pad_two_dims", lambda a: F.pad(a, (1, 0, 0, 2)), lambda g: (randn(g, 2, 3, 4),), [PAD], seed_ops=("ConstantPadNd",)),
    op("pad_negative_crops", lambda a: F.pad(a, (-1, -2)), lambda g: (randn(g, 2, 5),), [PAD], seed_ops=("ConstantPadNd",)),
    op("pad_mixed_signs", lambda a: F.pad(a, (2, -1, -1, 1), value=-3.0), lambda g: (randn(g, 2, 3, 4),), [PAD], seed_ops=("ConstantPadNd",)),
    op("pad_int_value", lambda a: torch.constant_pad_nd(a, [1, 1], 7), lambda g: (ints(g, -5, 5, 2, 3),), [PAD], seed_ops=("ConstantPadNd",)),
    op("constant_pad_module", lambda a: torch.nn.ConstantPad2d((1, 1, 2, 0), 0.5)(a), lambda g: (randn(g, 1, 2, 3),), [PAD], seed_ops=("ConstantPadNd",)),
]

FACTORIES = [
    op("zeros_is_full", lambda a: a + torch.zeros(4), lambda g: (randn(g, 2, 4),), ["aten.full.default"]),
    op("ones_int", lambda a: a * torch.ones(2, 3, dtype=torch.int32), lambda g: (ints(g, -5, 5, 2, 3, dtype=torch.int32),), ["aten.full.default"]),
    op("full_bool", lambda a: a != torch.full((3,), True), lambda g: (ints(g, 0, 2, 3).bool(),), ["aten.full.default"]),
    op("zeros_like_is_full_like", lambda a: torch.zeros_like(a) + a.sum(), lambda g: (randn(g, 2, 3),), ["aten.full_like.default"]),
    op("ones_like_dtype", lambda a: torch.ones_like(a, dtype=torch.int64), lambda g: (randn(g, 2, 3),), ["aten.full_like.default"]),
    op("full_like_dynamic", lambda a: torch.full_like(a, 2.5), lambda g: (randn(g, 3, 2),), ["aten.full_like.default"], dynamic_axes=BATCH),
    op("scalar_tensor", lambda a: a * torch.scalar_tensor(3.0), lambda g: (randn(g, 2, 3),), ["aten.scalar_tensor.default"]),
    op("arange_static", lambda a: a + torch.arange(4), lambda g: (randn(g, 2, 4),), ["aten.arange.start_step"]),
    op("arange_float_step", lambda a: a + torch.arange(0.5, 2.5, 0.5), lambda g: (randn(g, 4),), ["aten.arange.start_step"]),
    op("arange_dynamic", lambda a: a * torch.arange(a.shape[0]).unsqueeze(1), lambda g: (randn(g, 5, 2),), ["aten.arange.start_step", "aten.sym_size.int"], dynamic_axes=BATCH),
]

SYMBOLIC_SIZES = [
    op("view_dynamic_product", lambda a: a.view(a.shape[0] * a.shape[1], -1), lambda g: (randn(g, 4, 3, 2),), [VIEW, "aten.sym_size.int", "_operator.mul"], dynamic_axes=BATCH),
    op("new_zeros_dynamic_sub", lambda a: a.new_zeros(a.shape[0] * 2 - 1), lambda g: (randn(g, 4, 2),), ["aten.full.default", "_operator.sub", "_operator.mul"], dynamic_axes=BATCH),
    op("new_ones_dynamic_floordiv", lambda a: a.new_ones(a.shape[0] // 2 + 2), lambda g: (randn(g, 5, 2),), ["_operator.floordiv", "_operator.add"], dynamic_axes=BATCH),
]

CASES: list[OpCase] = [*RESHAPES, *JOINS, *WINDOWS, *FACTORIES, *SYMBOLIC_SIZES]
