"""Indexing (`x[...]` in all its forms), index_select, embeddings and nonzero."""

from __future__ import annotations

import torch

from ._samples import ints, mask, module_op, op, randn
from .schema import OpCase

SELECT, SLICE, INDEX = "aten.select.int", "aten.slice.Tensor", "aten.index.Tensor"
UNSQUEEZE = "aten.unsqueeze.default"
BATCH = {"args_0": {0: "batch"}}

BASIC = [
    op("index_integer", lambda a: a[1], lambda g: (randn(g, 3, 4),), [SELECT], seed_ops=("Index",)),
    op("index_negative_integers", lambda a: a[-1, ..., -2], lambda g: (randn(g, 2, 3, 4),), [SELECT], seed_ops=("Index",)),
    op("index_integer_last_dim", lambda a: a[:, :, 2], lambda g: (randn(g, 2, 3, 4),), [SELECT], seed_ops=("Index",)),
    op("index_slice_step", lambda a: a[:, ::2], lambda g: (randn(g, 2, 5),), [SLICE], seed_ops=("Index",)),
    op("index_slice_negative_bounds", lambda a: a[1:-1, -3:], lambda g: (randn(g, 4, 5),), [SLICE], seed_ops=("Index",)),
    op("index_slice_past_end", lambda a: a[2:10], lambda g: (randn(g, 4, 2),), [SLICE], seed_ops=("Index",)),
    op("index_none_ellipsis", lambda a: a[None, ..., 1::2], lambda g: (randn(g, 2, 3, 4),), [UNSQUEEZE, SLICE], seed_ops=("Index",)),
    op("index_mixed_basic", lambda a: a[1, None, :, 1:3], lambda g: (randn(g, 2, 3, 4),), [SELECT, UNSQUEEZE, SLICE], seed_ops=("Index",)),
    op("index_slice_dynamic", lambda a: torch.cat([a, a, a])[2:-1], lambda g: (randn(g, 4, 2),), [SLICE], seed_ops=("Index",), dynamic_axes=BATCH),
    op(
        "index_slice_symbolic_end", lambda a: torch.cat([a, a])[: a.shape[0]], lambda g: (randn(g, 4, 2),),
        [SLICE, "aten.sym_size.int"], seed_ops=("Index",), dynamic_axes=BATCH,
    ),
    op("index_select_int_dynamic", lambda a: a[:, -1], lambda g: (randn(g, 4, 3),), [SELECT], seed_ops=("Index",), dynamic_axes=BATCH),
]

ADVANCED = [
    op("index_tensor", lambda a, i: a[i], lambda g: (randn(g, 4, 3), ints(g, 0, 4, 5)), [INDEX], seed_ops=("Index",)),
    op("index_tensor_negative", lambda a, i: a[:, i], lambda g: (randn(g, 2, 4), ints(g, -4, 4, 6)), [INDEX], seed_ops=("Index",)),
    op("index_tensor_2d", lambda a, i: a[:, :, i], lambda g: (randn(g, 2, 3, 4), ints(g, 0, 4, 2, 3)), [INDEX], seed_ops=("Index",)),
    op("index_tensor_int32", lambda a, i: a[i], lambda g: (randn(g, 4, 3), ints(g, 0, 4, 5, dtype=torch.int32)), [INDEX], seed_ops=("Index",)),
    op(
        "index_two_tensors_broadcast", lambda a, i, j: a[i, :, j],
        lambda g: (randn(g, 3, 2, 4), ints(g, -3, 3, 2, 1), ints(g, 0, 4, 3)), [INDEX], seed_ops=("Index",),
    ),
    op(
        "index_two_adjacent_tensors", lambda a, i, j: a[:, i, j],
        lambda g: (randn(g, 2, 3, 4, 2), ints(g, 0, 3, 5), ints(g, -4, 4, 5)), [INDEX], seed_ops=("Index",),
    ),
    op(
        "index_all_dims", lambda a, i, j, k: a[i, j, k],
        lambda g: (randn(g, 2, 3, 4), ints(g, 0, 2, 6), ints(g, 0, 3, 6), ints(g, 0, 4, 6)), [INDEX], seed_ops=("Index",),
    ),
    op("index_with_slice_and_tensor", lambda a, i: a[1:, i], lambda g: (randn(g, 3, 4), ints(g, 0, 4, 2)), [SLICE, INDEX], seed_ops=("Index",)),
    op("index_bool_mask_full", lambda a, m: a[m], lambda g: (randn(g, 2, 3), mask(g, 2, 3)), [INDEX, "_operator.ge", "_operator.le", "aten._assert_scalar.default"], seed_ops=("Index",)),
    op("index_bool_mask_leading", lambda a, m: a[m], lambda g: (randn(g, 2, 3, 4), mask(g, 2, 3)), [INDEX], seed_ops=("Index",)),
    op("index_bool_mask_dim1", lambda a, m: a[:, m], lambda g: (randn(g, 2, 4), mask(g, 4)), [INDEX], seed_ops=("Index",)),
    op("index_bool_from_comparison", lambda a: a[a > 0], lambda g: (randn(g, 3, 4),), [INDEX], seed_ops=("Index",)),
    op("index_tensor_dynamic", lambda a, i: a[i], lambda g: (randn(g, 4, 3), ints(g, 0, 4, 5)), [INDEX], seed_ops=("Index",), dynamic_axes=BATCH),
    op("nonzero", torch.nonzero, lambda g: (ints(g, 0, 2, 3, 4),), ["aten.nonzero.default"]),
    op("index_select", lambda a, i: a.index_select(1, i), lambda g: (randn(g, 2, 4), ints(g, 0, 4, 5)), ["aten.index_select.default"], seed_ops=("index_select",)),
    op("index_select_negative_dim", lambda a, i: a.index_select(-1, i), lambda g: (randn(g, 2, 3, 4), ints(g, 0, 4, 2)), ["aten.index_select.default"], seed_ops=("index_select",)),
    op("index_select_0d_index", lambda a: a.index_select(0, torch.tensor(2)), lambda g: (randn(g, 3, 2),), ["aten.index_select.default"], seed_ops=("index_select",)),
]


def _embedding(**options) -> torch.nn.Embedding:
    return torch.nn.Embedding(6, 3, **options)


EMBEDDING, RENORM = "aten.embedding.default", "aten.embedding_renorm.default"
EMBEDDINGS = [
    module_op("embedding", _embedding, lambda g: (ints(g, 0, 6, 2, 4),), [EMBEDDING], seed_ops=("Embedding",)),
    module_op("embedding_padding_idx", lambda: _embedding(padding_idx=1), lambda g: (torch.tensor([[0, 1, 5], [1, 1, 2]]),), [EMBEDDING], seed_ops=("Embedding",)),
    module_op("embedding_int32_indices", _embedding, lambda g: (ints(g, 0, 6, 5, dtype=torch.int32),), [EMBEDDING], seed_ops=("Embedding",)),
    # indices name rows 0, 2, 5 only (with repeats); the others must keep their norm
    module_op(
        "embedding_max_norm", lambda: _embedding(max_norm=1.0), lambda g: (torch.tensor([[0, 2], [5, 2]]),),
        [EMBEDDING, RENORM], seed_ops=("Embedding",),
    ),
    module_op(
        "embedding_max_norm_l1", lambda: _embedding(max_norm=0.5, norm_type=1.0), lambda g: (torch.tensor([3, 1, 3]),),
        [EMBEDDING, RENORM], seed_ops=("Embedding",),
    ),
    module_op(
        "embedding_max_norm_p3", lambda: _embedding(max_norm=0.8, norm_type=3.0), lambda g: (torch.tensor([4, 0]),),
        [EMBEDDING, RENORM], seed_ops=("Embedding",),
    ),
    op(
        "embedding_renorm_result", lambda w, i: torch.embedding_renorm_(w.clone(), i, 1.0, 2.0),
        lambda g: (randn(g, 5, 3), torch.tensor([0, 3, 3])), [RENORM], seed_ops=("Embedding",),
    ),
]

CASES: list[OpCase] = [*BASIC, *ADVANCED, *EMBEDDINGS]
