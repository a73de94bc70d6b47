"""nn.EmbeddingBag / F.embedding_bag (exporter/translate/symbolics/embedding_bag.py): every mode, with
offsets and with 2-D inputs, padding and per-sample weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import ints, module_op, op, positive, randn
from .schema import OpCase

BAG = "aten._embedding_bag_forward_only.default"  # functional calls on plain tensors
MODULE_BAG = "aten._embedding_bag.default"  # an nn.EmbeddingBag, whose weight is a parameter
OFFSETS = torch.tensor([0, 2, 2, 5])  # the second bag is empty


def _bag(mode: str, **options):
    return lambda: torch.nn.EmbeddingBag(10, 3, mode=mode, **options)


def _flat(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return ints(gen, 0, 10, 7), OFFSETS


POSITIONS = {"input": {0: "positions"}}
ROWS = {"input": {0: "bags"}}

CASES: list[OpCase] = [
    module_op("embedding_bag_sum_offsets", _bag("sum"), _flat, [MODULE_BAG], dynamic_axes=POSITIONS),
    module_op("embedding_bag_mean_offsets", _bag("mean"), _flat, [MODULE_BAG], dynamic_axes=POSITIONS),
    module_op("embedding_bag_max_offsets", _bag("max"), _flat, [MODULE_BAG], dynamic_axes=POSITIONS),
    module_op("embedding_bag_mean_2d_input", _bag("mean"), lambda g: (ints(g, 0, 10, 3, 4),), [MODULE_BAG], dynamic_axes=ROWS),
    module_op("embedding_bag_max_2d_input", _bag("max"), lambda g: (ints(g, 0, 10, 3, 4),), [MODULE_BAG], dynamic_axes=ROWS),
    module_op("embedding_bag_sum_padding_idx", _bag("sum", padding_idx=1), lambda g: (torch.tensor([[1, 2, 1], [1, 1, 1], [3, 4, 1]]),), [MODULE_BAG], dynamic_axes=ROWS),
    module_op("embedding_bag_mean_padding_idx", _bag("mean", padding_idx=1), lambda g: (torch.tensor([[1, 2, 1], [1, 1, 1], [3, 4, 5]]),), [MODULE_BAG], dynamic_axes=ROWS),
    module_op("embedding_bag_include_last_offset", _bag("sum", include_last_offset=True), lambda g: (ints(g, 0, 10, 7), torch.tensor([0, 3, 3, 7])), [MODULE_BAG]),
    op("embedding_bag_per_sample_weights",
       lambda i, o, w, t: F.embedding_bag(i, t, o, mode="sum", per_sample_weights=w),
       lambda g: (ints(g, 0, 10, 7), OFFSETS, positive(g, 7), randn(g, 10, 3)), [BAG],
       dynamic_axes={"args_0": {0: "positions"}, "args_2": {0: "positions"}}),
    op("embedding_bag_int32_indices", lambda i, o, t: F.embedding_bag(i, t, o, mode="mean"),
       lambda g: (ints(g, 0, 10, 7, dtype=torch.int32), OFFSETS.int(), randn(g, 10, 3)), [BAG], dynamic_axes={"args_0": {0: "positions"}}),
]
