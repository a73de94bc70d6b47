"""Composite ops of torch.export's training IR that the capture keeps from torch's
decomposition: hardswish and hardsigmoid translated whole (exporter/translate/symbolics/hard_activations.py),
the others rewritten by exporter/capturing/functionalize.py into the ops the decomposition makes (the
targets name those). Inputs span the activations' kinks at -3 and 3."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import op, randn
from .cases_math import batch
from .schema import OpCase

HARDSWISH, HARDSIGMOID = "aten.hardswish.default", "aten.hardsigmoid.default"
WHERE, SCALAR = "aten.where.self", "aten.scalar_tensor.default"


def _wide(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Values over [-6, 6): both kinks of the hard activations and the flat parts outside."""
    return (randn(gen, *shape) * 3).clamp(-6, 6).to(dtype)


CASES: list[OpCase] = [
    op("hardswish", F.hardswish, lambda g: (_wide(g, 3, 8),), [HARDSWISH], dynamic_axes=batch()),
    op("hardswish_inplace", lambda a: F.hardswish(a * 1, inplace=True), lambda g: (_wide(g, 2, 3, 4),), [HARDSWISH], dynamic_axes=batch()),
    op("hardswish_float64", F.hardswish, lambda g: (_wide(g, 5, dtype=torch.float64),), [HARDSWISH]),
    op("hardswish_float16", F.hardswish, lambda g: (_wide(g, 4, 6, dtype=torch.float16),), [HARDSWISH], atol=1e-3, rtol=1e-3),
    op("hardswish_kinks", F.hardswish, lambda g: (torch.tensor([-6.0, -3.0, -2.999, 0.0, 2.999, 3.0, 6.0]),), [HARDSWISH]),
    op("hardsigmoid", F.hardsigmoid, lambda g: (_wide(g, 3, 8),), [HARDSIGMOID], dynamic_axes=batch()),
    op("hardsigmoid_inplace", lambda a: F.hardsigmoid(a * 1, inplace=True), lambda g: (_wide(g, 2, 5),), [HARDSIGMOID], dynamic_axes=batch()),
    op("hardsigmoid_float64", F.hardsigmoid, lambda g: (_wide(g, 5, dtype=torch.float64),), [HARDSIGMOID]),
    op("hardsigmoid_kinks", F.hardsigmoid, lambda g: (torch.tensor([-6.0, -3.0, -2.999, 0.0, 2.999, 3.0, 6.0]),), [HARDSIGMOID]),
    op("silu_inplace_rewritten", lambda a: F.silu(a * 2, inplace=True), lambda g: (randn(g, 3, 4),), ["aten.sigmoid.default", "aten.mul.Tensor"], dynamic_axes=batch()),
    op("masked_fill_scalar_as_where", lambda a: a.masked_fill(a > 0.5, -2.0), lambda g: (randn(g, 3, 4),), [WHERE, SCALAR], dynamic_axes=batch()),
    op("where_scalar_other_rewritten", lambda a: torch.where(a > 0, a, -1.5), lambda g: (randn(g, 3, 4),), [WHERE, SCALAR], dynamic_axes=batch()),
    op("diff_prepend", lambda a: torch.diff(a, prepend=a[:, :1] * 2), lambda g: (randn(g, 3, 5),), ["aten.cat.default", "aten.slice.Tensor", "aten.sub.Tensor"], dynamic_axes=batch()),
    op("and_bool_tensors", lambda a: (a > 0) & (a < 1), lambda g: (randn(g, 3, 4),), ["aten.bitwise_and.Tensor"], dynamic_axes=batch()),
    op("unflatten_dynamic", lambda a: a.unflatten(1, (2, 3)) * 2, lambda g: (randn(g, 3, 6),), ["aten.view.default"], dynamic_axes=batch()),
    op("zeros_float_dynamic", lambda a: torch.zeros(a.shape[0], 2) + a[:, :2], lambda g: (randn(g, 3, 4),), ["aten.full.default"], dynamic_axes=batch()),
]
