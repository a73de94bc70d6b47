"""The kernel overloads of resampling (exporter/translate/symbolics/resize_kernels.py): `.default` forms
called directly, and antialiased interpolation (`F.interpolate(..., antialias=True)`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import op, randn
from .cases_math import batch
from .schema import OpCase

aten = torch.ops.aten
FROM_18 = (18, 26)

CASES: list[OpCase] = [
    op("upsample_nearest1d_kernel", lambda a: aten.upsample_nearest1d.default(a, [7]), lambda g: (randn(g, 2, 3, 4),), ["aten.upsample_nearest1d.default"], dynamic_axes=batch()),
    op("upsample_nearest2d_kernel_scales", lambda a: aten.upsample_nearest2d.default(a, [6, 8], 2.0, 2.0), lambda g: (randn(g, 2, 3, 3, 4),), ["aten.upsample_nearest2d.default"], dynamic_axes=batch()),
    op("upsample_nearest3d_kernel", lambda a: aten.upsample_nearest3d.default(a, [3, 5, 7]), lambda g: (randn(g, 2, 1, 2, 3, 4),), ["aten.upsample_nearest3d.default"], dynamic_axes=batch()),
    op("upsample_linear1d_kernel", lambda a: aten.upsample_linear1d.default(a, [7], False), lambda g: (randn(g, 2, 3, 4),), ["aten.upsample_linear1d.default"], dynamic_axes=batch()),
    op("upsample_bilinear2d_kernel", lambda a: aten.upsample_bilinear2d.default(a, [5, 7], False), lambda g: (randn(g, 2, 3, 3, 4),), ["aten.upsample_bilinear2d.default"], dynamic_axes=batch()),
    op("upsample_bilinear2d_kernel_align_corners", lambda a: aten.upsample_bilinear2d.default(a, [5, 7], True), lambda g: (randn(g, 2, 3, 3, 4),), ["aten.upsample_bilinear2d.default"], dynamic_axes=batch()),
    op("upsample_bilinear2d_kernel_scales", lambda a: aten.upsample_bilinear2d.default(a, [4, 6], False, 1.5, 1.5), lambda g: (randn(g, 2, 3, 3, 4),), ["aten.upsample_bilinear2d.default"], dynamic_axes=batch()),
    op("upsample_trilinear3d_kernel", lambda a: aten.upsample_trilinear3d.default(a, [3, 5, 7], False), lambda g: (randn(g, 2, 1, 2, 3, 4),), ["aten.upsample_trilinear3d.default"], dynamic_axes=batch()),
    op("upsample_bicubic2d_kernel", lambda a: aten.upsample_bicubic2d.default(a, [5, 7], False), lambda g: (randn(g, 2, 3, 3, 4),), ["aten.upsample_bicubic2d.default"], dynamic_axes=batch()),
    op("bilinear_antialias_down", lambda a: F.interpolate(a, size=(3, 4), mode="bilinear", antialias=True), lambda g: (randn(g, 2, 3, 8, 9),), ["aten._upsample_bilinear2d_aa.default"], opsets=FROM_18, dynamic_axes=batch()),
    op("bilinear_antialias_scale", lambda a: F.interpolate(a, scale_factor=0.5, mode="bilinear", antialias=True), lambda g: (randn(g, 2, 3, 8, 8),), ["aten._upsample_bilinear2d_aa.default"], opsets=FROM_18, dynamic_axes=batch()),
    op("bilinear_antialias_up", lambda a: F.interpolate(a, size=(6, 7), mode="bilinear", antialias=True), lambda g: (randn(g, 2, 3, 3, 4),), ["aten._upsample_bilinear2d_aa.default"], opsets=FROM_18, dynamic_axes=batch()),
    op("bicubic_antialias_down", lambda a: F.interpolate(a, size=(3, 4), mode="bicubic", antialias=True), lambda g: (randn(g, 2, 3, 8, 9),), ["aten._upsample_bicubic2d_aa.default"], opsets=FROM_18, dynamic_axes=batch()),
    op("bilinear_antialias_align_corners_refused", lambda a: F.interpolate(a, size=(3, 4), mode="bilinear", antialias=True, align_corners=True), lambda g: (randn(g, 2, 3, 8, 9),), ["aten._upsample_bilinear2d_aa.default"], opsets=FROM_18, refused="align_corners=True"),
    op("bilinear_antialias_refused_at_17", lambda a: F.interpolate(a, size=(3, 4), mode="bilinear", antialias=True), lambda g: (randn(g, 2, 3, 8, 9),), ["aten._upsample_bilinear2d_aa.default"], opsets=(17,), refused="opset >= 18"),
]
