"""Regression rows for forms that once exported without an error and computed the wrong thing:
half-pixel resizes to an output axis of size 1, `arange` over a symbolic (float) bound, and a
`view` whose size holds a dynamic 0. Each row failed before its fix."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._samples import op, randn
from .schema import OpCase

BATCH = {"args_0": {0: "batch"}}


def _interpolate(**options) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.interpolate(x, align_corners=False, **options)


# torch maps an output axis of size 1 to source coordinate in/2 - 1/2; ONNX's
# pytorch_half_pixel maps it to 0 (max abs error 1.4-3.0 on these samples before the fix).
HALF_PIXEL_SIZE_ONE = [
    op("upsample_linear1d_half_pixel_size1", _interpolate(size=1, mode="linear"), lambda g: (randn(g, 1, 2, 5),),
       ["aten.upsample_linear1d.vec"]),
    op("upsample_bilinear2d_half_pixel_size1", _interpolate(size=(1, 3), mode="bilinear"), lambda g: (randn(g, 2, 2, 5, 6),),
       ["aten.upsample_bilinear2d.vec"], dynamic_axes=BATCH),
    op("upsample_bilinear2d_half_pixel_scale_to_1", _interpolate(scale_factor=(0.2, 0.5), mode="bilinear"),
       lambda g: (randn(g, 1, 2, 5, 6),), ["aten.upsample_bilinear2d.vec"]),
    op("upsample_bicubic2d_half_pixel_size1", _interpolate(size=(3, 1), mode="bicubic"), lambda g: (randn(g, 1, 2, 5, 6),),
       ["aten.upsample_bicubic2d.vec"], atol=1e-4),
    op("upsample_trilinear3d_half_pixel_size1", _interpolate(size=(1, 1, 2), mode="trilinear"),
       lambda g: (randn(g, 1, 2, 4, 5, 6),), ["aten.upsample_trilinear3d.vec"]),
]

ARANGE, SYM_SIZE = "aten.arange.start_step", "aten.sym_size.int"

# torch counts ceil((end - start) / step) elements in float64; a float32 Range counts one
# more or one fewer for some sizes (arange(0, 0.6000000000000001, 0.1) has 7 elements).
SYMBOLIC_ARANGE = [
    op("arange_symbolic_float_bound", lambda x: torch.arange(0, x.shape[0] * 0.1, 0.1) + x[:, 0].sum(),
       lambda g: (randn(g, 6, 3),), [ARANGE, SYM_SIZE, "torch.sym_float", "_operator.mul"], dynamic_axes=BATCH),
    op("arange_symbolic_truediv", lambda x: torch.arange(1, x.shape[0] / 3, 1 / 3), lambda g: (randn(g, 7, 2),),
       [ARANGE, SYM_SIZE, "_operator.truediv"], dynamic_axes=BATCH),
    op("arange_symbolic_int_step", lambda x: torch.arange(1, x.shape[0], 2), lambda g: (randn(g, 6, 3),),
       [ARANGE, SYM_SIZE], dynamic_axes=BATCH),
    op("arange_symbolic_int_float_dtype", lambda x: torch.arange(x.shape[0] - 1, dtype=torch.float32),
       lambda g: (randn(g, 5, 3),), [ARANGE, SYM_SIZE], dynamic_axes=BATCH),
]


def _view_swapping_sizes(x: torch.Tensor) -> torch.Tensor:
    """(a, b, c) viewed as (b, a * c): a dynamic b of 0 is a size of 0, not "copy the input's"."""
    return x.view(x.shape[1], x.shape[0] * x.shape[2])


ZERO_SIZE_VIEW = [
    op("view_dynamic_sizes_swapped", _view_swapping_sizes, lambda g: (randn(g, 2, 3, 4),), ["aten.view.default"],
       dynamic_axes={"args_0": {0: "a", 1: "b"}}),
]

CASES: list[OpCase] = [*HALF_PIXEL_SIZE_ONE, *SYMBOLIC_ARANGE, *ZERO_SIZE_VIEW]
