"""empty (zeros, since torch promises no values) and the hamming and blackman windows
(exporter/translate/symbolics/creation.py). Rows use only what torch defines of `empty`: its shape."""

from __future__ import annotations

import torch

from ._samples import op, randn
from .cases_math import batch
from .schema import OpCase

EMPTY, PERMUTED = "aten.empty.memory_format", "aten.empty_permuted.default"
HAMMING, BLACKMAN = "aten.hamming_window", "aten.blackman_window"

CASES: list[OpCase] = [
    op("empty_zero_width_dynamic_rows", lambda a: torch.cat([torch.empty(a.shape[0], 0), a], 1), lambda g: (randn(g, 3, 4),), [EMPTY], dynamic_axes=batch()),
    op("new_empty_written_over", lambda a: a.new_empty(a.shape).copy_(a) * 2, lambda g: (randn(g, 3, 4),), [EMPTY], dynamic_axes=batch()),
    op("empty_like_written_over", lambda a: torch.empty_like(a).copy_(a) + 1, lambda g: (randn(g, 3, 4),), [PERMUTED], dynamic_axes=batch()),
    op("hamming_window", lambda a: a * torch.hamming_window(4), lambda g: (randn(g, 3, 4),), [f"{HAMMING}.default"], dynamic_axes=batch()),
    op("hamming_window_symmetric", lambda a: a * torch.hamming_window(5, periodic=False), lambda g: (randn(g, 3, 5),), [f"{HAMMING}.periodic"], dynamic_axes=batch()),
    op("hamming_window_alpha", lambda a: a * torch.hamming_window(5, True, 0.6), lambda g: (randn(g, 3, 5),), [f"{HAMMING}.periodic_alpha"], dynamic_axes=batch()),
    op("hamming_window_alpha_beta_double", lambda a: a * torch.hamming_window(5, False, 0.5, 0.4, dtype=torch.float64), lambda g: (randn(g, 3, 5),), [f"{HAMMING}.periodic_alpha_beta"], dynamic_axes=batch()),
    op("hamming_window_length_1", lambda a: a * torch.hamming_window(1), lambda g: (randn(g, 3, 1),), [f"{HAMMING}.default"], dynamic_axes=batch()),
    op("blackman_window", lambda a: a * torch.blackman_window(6), lambda g: (randn(g, 3, 6),), [f"{BLACKMAN}.default"], dynamic_axes=batch()),
    op("blackman_window_symmetric", lambda a: a * torch.blackman_window(6, periodic=False), lambda g: (randn(g, 3, 6),), [f"{BLACKMAN}.periodic"], dynamic_axes=batch()),
    op("tril_indices_gather", lambda a: a[tuple(torch.tril_indices(4, 5))], lambda g: (randn(g, 4, 5),),
       ["aten.tril_indices.default"]),
    op("tril_indices_offset_wide", lambda a: a + torch.tril_indices(3, 6, -1).sum(), lambda g: (randn(g, 2),),
       ["aten.tril_indices.default"], dynamic_axes=batch()),
    op("triu_indices_offset", lambda a: a[tuple(torch.triu_indices(5, 4, 1))], lambda g: (randn(g, 5, 4),),
       ["aten.triu_indices.default"]),
    op("triu_indices_int32_empty", lambda a: a + torch.triu_indices(3, 3, 4, dtype=torch.int32).sum(),
       lambda g: (randn(g, 2),), ["aten.triu_indices.default"]),
    op("tril_indices_values", lambda a: torch.tril_indices(3, 3, 1) * a, lambda g: (torch.tensor(2),),
       ["aten.tril_indices.default"]),
]
