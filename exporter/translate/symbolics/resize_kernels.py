"""The kernel overloads of resampling: `upsample_<mode>.default` (an output size and optional
per-axis scales) and the antialiased `_upsample_<mode>_aa`.

`F.interpolate` reaches the registry as `.vec` (resize.py); these forms come from code calling
the kernels (or from other decompositions). torch maps coordinates with 1/scale when every
scale is given and with in/out otherwise, so Resize gets `scales` or `sizes` to match; nearest
takes torch's index pick per axis (resize_nearest.py), with each axis's scale or in/out.
Antialiasing (downsampling with a filter widened by the scale, as PIL does) is ONNX Resize's
`antialias` from opset 18, with `exclude_outside` (torch renormalises the filter's weights over
the taps inside the image); torch's antialiased bicubic uses the coefficient a = -0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import int64_vector, register_from_schema
from exporter.translate.symbolics.resize import _resize, _resize_attributes
from exporter.translate.symbolics.resize_nearest import upsample_nearest

ANTIALIAS_SINCE = 18


def _resize_kernel(g: Graph, input: Value, output_size, scales: Sequence, mode: str, align_corners) -> Value:
    if scales and all(s is not None for s in scales):
        return _resize(g, input, None, scales, mode, align_corners)
    return _resize(g, input, output_size, None, mode, align_corners)


@symbolic("aten::upsample_nearest1d")
def upsample_nearest1d(g: Graph, self: Value, output_size, scales=None) -> Value:
    """upsample_nearest1d(Tensor self, SymInt[1] output_size, float? scales=None) -> Tensor"""
    return upsample_nearest(g, self, output_size, [scales])


@symbolic("aten::upsample_nearest2d")
def upsample_nearest2d(g: Graph, self: Value, output_size, scales_h=None, scales_w=None) -> Value:
    """upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return upsample_nearest(g, self, output_size, [scales_h, scales_w])


@symbolic("aten::upsample_nearest3d")
def upsample_nearest3d(g: Graph, self: Value, output_size, scales_d=None, scales_h=None, scales_w=None) -> Value:
    """upsample_nearest3d(Tensor self, SymInt[3] output_size, float? scales_d=None, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return upsample_nearest(g, self, output_size, [scales_d, scales_h, scales_w])


@symbolic("aten::upsample_linear1d")
def upsample_linear1d(g: Graph, self: Value, output_size, align_corners: bool, scales=None) -> Value:
    """upsample_linear1d(Tensor self, SymInt[1] output_size, bool align_corners, float? scales=None) -> Tensor"""
    return _resize_kernel(g, self, output_size, [scales], "linear", align_corners)


@symbolic("aten::upsample_bilinear2d")
def upsample_bilinear2d(g: Graph, self: Value, output_size, align_corners: bool, scales_h=None, scales_w=None) -> Value:
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize_kernel(g, self, output_size, [scales_h, scales_w], "linear", align_corners)


@symbolic("aten::upsample_trilinear3d")
def upsample_trilinear3d(g: Graph, self: Value, output_size, align_corners: bool, scales_d=None, scales_h=None, scales_w=None) -> Value:
    """upsample_trilinear3d(Tensor self, SymInt[3] output_size, bool align_corners, float? scales_d=None, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize_kernel(g, self, output_size, [scales_d, scales_h, scales_w], "linear", align_corners)


@symbolic("aten::upsample_bicubic2d")
def upsample_bicubic2d(g: Graph, self: Value, output_size, align_corners: bool, scales_h=None, scales_w=None) -> Value:
    """upsample_bicubic2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""
    return _resize_kernel(g, self, output_size, [scales_h, scales_w], "cubic", align_corners)


def _antialiased(g: Graph, self: Value, output_size, align_corners: bool, scales: Sequence, mode: str) -> Value:
    if align_corners:
        raise ValueError(
            "antialiased interpolation with align_corners=True has no ONNX Resize equivalent "
            "(its filter placement differs); use align_corners=False or antialias=False"
        )
    attributes = _resize_attributes(mode, align_corners)
    attributes["coordinate_transformation_mode_s"] = "half_pixel"
    if mode == "cubic":
        attributes["cubic_coeff_a_f"] = -0.5
    attributes["exclude_outside_i"] = 1  # torch renormalises the filter over in-image taps
    rank = len(output_size) + 2
    if scales and all(s is not None for s in scales):
        factors = g.constant([1.0, 1.0, *(float(s) for s in scales)], torch.float32)
        return g.op("Resize", self, None, factors, antialias_i=1, **attributes)
    return g.op("Resize", self, None, None, int64_vector(g, list(output_size)), axes_i=list(range(2, rank)),
                antialias_i=1, **attributes)


def _antialiased_kernel(mode: str) -> Any:
    def upsample_aa(g: Graph, self: Value, output_size, align_corners: bool, scales_h=None, scales_w=None) -> Value:
        return _antialiased(g, self, output_size, align_corners, [scales_h, scales_w], mode)

    return upsample_aa


for _target, _mode in (("aten::_upsample_bilinear2d_aa", "linear"), ("aten::_upsample_bicubic2d_aa", "cubic")):
    register_from_schema([_target], _antialiased_kernel(_mode), name=_target.removeprefix("aten::_"),
                         since=ANTIALIAS_SINCE, note=f"Resize ({_mode}, antialias=1).\n\n"
                         "Limits: align_corners=True is refused (Resize places the filter differently).")
