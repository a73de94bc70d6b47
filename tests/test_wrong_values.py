"""Regressions for values that were wrong without an error, beyond what the op table's runner
checks: a dynamic axis that is 0 at run time (the table's other sizes are only larger), and a
symbolic float `arange` over many sizes (where a float32 count is off by one for some)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import exporter
from harness.backend import prepare
from op_table.table import all_cases, build_sample

_ROWS = {case.name: case for case in all_cases()}


def _exported(name: str):
    case = _ROWS[name]
    sample = build_sample(case)
    model = exporter.export(sample.module, sample.args, dynamic_axes=case.dynamic_axes)
    return sample.module, prepare(model, "CPU")


@pytest.mark.parametrize("shape", [(4, 0, 4), (0, 5, 4), (0, 0, 4)])
def test_view_to_a_dynamic_zero_size(shape: tuple[int, ...]) -> None:
    module, backend = _exported("view_dynamic_sizes_swapped")
    x = torch.randn(shape)
    (actual,) = backend.run([x.numpy()])
    expected = module(x)
    assert actual.shape == tuple(expected.shape)


@pytest.mark.parametrize("name", ["arange_symbolic_float_bound", "arange_symbolic_truediv"])
def test_symbolic_float_arange_counts_as_torch_does(name: str) -> None:
    module, backend = _exported(name)
    wrong = []
    for rows in range(3, 40):
        x = torch.randn(rows, build_sample(_ROWS[name]).args[0].shape[1])
        (actual,) = backend.run([x.numpy()])
        expected = module(x).numpy()
        if actual.shape != expected.shape or not np.allclose(actual, expected, atol=1e-5):
            wrong.append((rows, actual.shape, expected.shape))
    assert not wrong, f"(size, ours, torch's) where the counts or values differ: {wrong}"
