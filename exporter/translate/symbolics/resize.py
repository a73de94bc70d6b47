"""Resampling: `F.interpolate` (nearest, linear, bilinear, trilinear, bicubic) and `F.grid_sample`.

`F.interpolate` reaches the registry as `upsample_<mode>.vec` with either an output size or
scale factors. torch computes source coordinates with 1/scale_factor when factors are given
and with in/out otherwise; ONNX Resize does the same when it is given `scales` or `sizes`
respectively, so the symbolic passes on whichever torch had. Nearest is the exception: torch's
pick has special cases Resize lacks, so it is a Gather of torch's indices (resize_nearest.py).
Coordinate conventions:

| torch | ONNX Resize |
|---|---|
| linear modes, align_corners=False | mode=linear, half_pixel (source clamped at 0 in both) |
| linear modes, align_corners=True | mode=linear, align_corners |
| bicubic | mode=cubic, cubic_coeff_a=-0.75, same coordinate modes |

torch maps an output axis of size 1 to the source coordinate `0.5 * in/out - 0.5` like any
other; ONNX's `pytorch_half_pixel` maps it to 0 instead, so `half_pixel` (which differs from it
only there) is the convention that matches torch at every output size.

From opset 18 Resize takes an `axes` attribute, so output sizes are given for the resized
axes only; at 17 the batch and channel sizes are read with Shape and prepended.
"""

from __future__ import annotations

from typing import Any

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics import resize_nearest as nearest
from exporter.translate.symbolics._helpers import int64_vector, rank_of, register_from_schema


def _resize_attributes(mode: str, align_corners: bool | None) -> dict[str, Any]:
    attributes = {
        "mode_s": mode,
        "coordinate_transformation_mode_s": "align_corners" if align_corners else "half_pixel",
    }
    if mode == "cubic":
        attributes["cubic_coeff_a_f"] = -0.75
    return attributes


def _resize(g: Graph, input: Value, output_size, scale_factors, mode: str, align_corners: bool | None) -> Value:
    """Resize over the trailing spatial axes of `input` (all but batch and channel)."""
    rank = rank_of(input)
    spatial = rank - 2
    attributes = _resize_attributes(mode, align_corners)
    if output_size is None:
        if scale_factors is None:
            raise ValueError("interpolation needs an output size or scale factors")
        scales = g.constant([1.0, 1.0, *(float(s) for s in scale_factors)], torch.float32)
        return g.op("Resize", input, None, scales, **attributes)
    if len(output_size) != spatial:
        raise ValueError(f"output size {list(output_size)} does not match {spatial} spatial axes")
    if g.opset_version >= 18:
        sizes = int64_vector(g, list(output_size))
        return g.op("Resize", input, None, None, sizes, axes_i=list(range(2, rank)), **attributes)
    leading = g.op("Shape", input, start_i=0, end_i=2)
    sizes = g.op("Concat", leading, int64_vector(g, list(output_size)), axis_i=0)
    return g.op("Resize", input, None, None, sizes, **attributes)


@symbolic("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec", "aten::upsample_nearest3d.vec")
def upsample_nearest(g: Graph, input: Value, output_size, scale_factors) -> Value:
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor

    The 1-d and 3-d forms alike: torch's index pick, one Gather per resized axis (resize_nearest.py).
    """
    return nearest.upsample_nearest(g, input, output_size, scale_factors)


@symbolic("aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec", "aten::upsample_trilinear3d.vec")
def upsample_linear(g: Graph, input: Value, output_size, align_corners: bool, scale_factors) -> Value:
    """upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor

    The 1-d (linear) and 3-d (trilinear) forms alike: Resize in linear mode.
    """
    return _resize(g, input, output_size, scale_factors, "linear", align_corners)


@symbolic("aten::upsample_bicubic2d.vec")
def upsample_bicubic2d(g: Graph, input: Value, output_size, align_corners: bool, scale_factors) -> Value:
    """upsample_bicubic2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _resize(g, input, output_size, scale_factors, "cubic", align_corners)


# -- grid sampling ---------------------------------------------------------------------------------

_PADDING_MODES = ("zeros", "border", "reflection")


def _grid_sampler(modes: tuple[str, str, str]) -> Any:
    def grid_sampler_2d(g: Graph, input: Value, grid: Value, interpolation_mode: int, padding_mode: int,
                        align_corners: bool) -> Value:
        return g.op("GridSample", input, grid, mode_s=modes[interpolation_mode],
                    padding_mode_s=_PADDING_MODES[padding_mode], align_corners_i=int(align_corners))

    return grid_sampler_2d


# GridSample's spelling of torch's interpolation modes (0, 1, 2) changed at opset 20.
for _since, _modes in ((17, ("bilinear", "nearest", "bicubic")), (20, ("linear", "nearest", "cubic"))):
    register_from_schema(["aten::grid_sampler_2d"], _grid_sampler(_modes), name="grid_sampler_2d", since=_since,
                         note=f"GridSample-{16 if _since < 20 else 20}, whose modes are spelled {' / '.join(_modes)}.")
