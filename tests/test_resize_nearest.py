"""Nearest upsampling picks torch's source pixels exactly: the index formula against torch's kernel
over many sizes and scales, and exported models in onnxruntime against eager torch, static and
with dynamic spatial axes run at sizes other than the traced one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import exporter
from exporter.translate.symbolics.resize_nearest import source_indices
from harness.backend import prepare

SCALES = (0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 1.7, 2.0, 2.2, 2.5, 3.0, 3.3, 4.1)


def _torch_picks(spatial: int, in_size: int, scale: float, recompute: bool | None) -> list[int]:
    """The source index of each output along the last axis, read off torch's kernel."""
    x = torch.arange(in_size, dtype=torch.float32).reshape(1, 1, *[1] * (spatial - 1), in_size)
    factors = (1.0,) * (spatial - 1) + (scale,)
    y = F.interpolate(x, scale_factor=factors, mode="nearest", recompute_scale_factor=recompute)
    return y.long().ravel().tolist()


@pytest.mark.parametrize("recompute", [None, True])
@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_source_indices_are_torch_kernel_picks(spatial, recompute) -> None:
    wrong = {}
    for in_size in range(1, 41):
        for scale in SCALES:
            out_size = int(in_size * scale)
            if out_size == 0:
                continue
            expected = _torch_picks(spatial, in_size, scale, recompute)
            actual = source_indices(in_size, out_size, None if recompute else scale, spatial == 2).tolist()
            if actual != expected:
                wrong[(in_size, scale)] = (actual, expected)
    assert not wrong, f"{len(wrong)} (size, scale) pairs differ from torch: {dict(list(wrong.items())[:3])}"


class _Interpolate(torch.nn.Module):
    def __init__(self, **options) -> None:
        super().__init__()
        self.options = options

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, **self.options)


def _export(module: torch.nn.Module, x: torch.Tensor, dynamic_axes=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return prepare(exporter.export(module, (x,), dynamic_axes=dynamic_axes), "CPU")


def _distinct(*shape: int) -> torch.Tensor:
    """Every element different, so a wrong pick cannot hide behind an equal value."""
    return torch.arange(float(np.prod(shape))).reshape(shape)


ROWS = [
    # input shape, F.interpolate options
    ((1, 1, 1, 4), {"scale_factor": (1.0, 2.2)}),  # width 4 -> 8: torch shifts (i >> 1)
    ((1, 2, 3, 3), {"scale_factor": (2.2, 2.2)}),  # 3 -> 6 on both axes
    ((1, 1, 3, 3), {"scale_factor": 1.3}),  # 3 -> 3: torch copies
    ((1, 1, 3, 3), {"scale_factor": 1.3, "recompute_scale_factor": True}),
    ((2, 3, 5, 7), {"scale_factor": (1.3, 2.2)}),
    ((1, 2, 7, 11), {"scale_factor": (0.7, 1.7)}),
    ((1, 1, 13, 5), {"scale_factor": (3.3, 0.5)}),
    ((1, 2, 4, 6), {"scale_factor": (2.2, 1.3), "recompute_scale_factor": True}),
    ((1, 1, 3, 5), {"size": (6, 9)}),
    ((1, 1, 11, 7), {"size": (5, 14)}),
    ((2, 3, 4), {"scale_factor": 2.2}),  # 1-d: 4 -> 8
    ((1, 2, 5), {"scale_factor": 1.3}),  # 1-d: 5 -> 6
    ((1, 2, 3), {"scale_factor": 1.3}),  # 1-d: 3 -> 3 is not a copy
    ((1, 1, 2, 3, 4), {"scale_factor": (1.3, 2.2, 2.2)}),  # 3-d: 2 -> 2, 3 -> 6, 4 -> 8
    ((1, 1, 3, 5, 2), {"size": (4, 7, 5)}),
    ((1, 2, 3, 5), {"scale_factor": (2.0, 3.0)}),
    ((1, 1, 4, 3), {"scale_factor": (25.0, 2.2)}),
]
MODES = ("nearest", "nearest-exact")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("shape", "options"), ROWS, ids=[f"{'x'.join(map(str, s))}-{o}" for s, o in ROWS])
def test_exported_nearest_equals_torch(shape, options, mode) -> None:
    module = _Interpolate(mode=mode, **options)
    x = _distinct(*shape)
    (actual,) = _export(module, x).run([x.numpy()])
    expected = module(x).numpy()
    assert actual.shape == expected.shape
    assert np.array_equal(actual, expected), f"picks differ:\n{actual}\nvs torch\n{expected}"


DYNAMIC_ROWS = [
    # traced shape, dynamic axes of x, options, shapes run after the export
    ((1, 1, 3, 4), {2: "h", 3: "w"}, {"scale_factor": (1.3, 2.2)}, [(1, 1, 3, 4), (1, 1, 5, 3), (1, 1, 7, 5),
                                                                     (1, 1, 2, 11)]),
    ((1, 2, 6), {2: "w"}, {"scale_factor": 2.2}, [(1, 2, 6), (1, 2, 4), (1, 2, 9), (1, 2, 13)]),
    ((1, 1, 5, 6), {3: "w"}, {"scale_factor": (2.0, 0.7)}, [(1, 1, 5, 6), (1, 1, 5, 3), (1, 1, 5, 17)]),
    ((1, 1, 4, 5), {2: "h", 3: "w"}, {"scale_factor": (3.0, 25.0)}, [(1, 1, 4, 5), (1, 1, 7, 2), (1, 1, 1, 9)]),
    ((2, 3, 5, 6), {0: "n", 2: "h", 3: "w"}, {"scale_factor": 2.0}, [(2, 3, 5, 6), (1, 3, 7, 3)]),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("traced", "axes", "options", "runs"), DYNAMIC_ROWS,
                         ids=[f"{'x'.join(map(str, row[0]))}-{row[2]}" for row in DYNAMIC_ROWS])
def test_dynamic_nearest_equals_torch_at_other_sizes(traced, axes, options, runs, mode) -> None:
    module = _Interpolate(mode=mode, **options)
    backend = _export(module, _distinct(*traced), {"x": axes})
    wrong = {}
    for shape in runs:
        x = _distinct(*shape)
        (actual,) = backend.run([x.numpy()])
        expected = module(x).numpy()
        if actual.shape != expected.shape or not np.array_equal(actual, expected):
            wrong[shape] = (actual.tolist(), expected.tolist())
    assert not wrong, f"onnx differs from torch at {wrong}"


FORMS = [
    # input shape, dynamic axes, options, the ONNX ops the pick takes: one Resize where torch's
    # pick is i // k for an integer k, a Gather per other axis
    ((1, 1, 4, 4), None, {"scale_factor": (1.0, 2.2)}, ["Resize"]),  # 4 -> 8 is the 2-d shift
    ((1, 1, 4, 5), {"x": {2: "h", 3: "w"}}, {"scale_factor": 2.0}, ["Resize"]),
    ((1, 1, 4, 5), {"x": {3: "w"}}, {"scale_factor": (2.0, 25.0)}, ["Resize", "Gather"]),  # f32(1/25) < 1/25
    ((1, 1, 5, 5), None, {"scale_factor": (1.3, 1.7)}, ["Gather", "Gather"]),
    ((1, 1, 3), None, {"scale_factor": 1.3}, ["Gather"]),  # 1-d: 3 -> 3 is not a copy in torch
]


@pytest.mark.parametrize(("shape", "axes", "options", "ops"), FORMS, ids=[str(row[2]) for row in FORMS])
def test_integer_factors_take_resize_and_others_gather(shape, axes, options, ops) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = exporter.export(_Interpolate(mode="nearest", **options), (_distinct(*shape),), dynamic_axes=axes)
    assert [n.op_type for n in model.graph.node if n.op_type in ("Resize", "Gather")] == ops
