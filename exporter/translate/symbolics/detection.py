"""Detection: torchvision's NMS and RoIAlign, TopK with a data-dependent k, and the few factory,
rounding and SymInt ops torchvision's detection models reach with data-dependent sizes.

The counts these ops see (boxes past a score threshold, boxes NMS kept) are unbacked SymInts
at capture: they reach the symbolics as 0-d int64 Values computed in the graph, never as
Python ints, so every size below is read from the graph (Shape) or taken as an input.
"""

from __future__ import annotations

import math

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import (
    cast_to,
    int64_vector,
    normalize_dim,
    promote,
    rank_of,
    scalar_of,
    squeeze,
    unsqueeze,
)

# -- TopK -------------------------------------------------------------------------------------------


@symbolic("aten::topk")
def topk(g: Graph, self: Value, k, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Value, Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)

    ONNX TopK takes k as a 1-D int64 input, so a k computed in the graph (`min(pre_nms_top_n,
    num_anchors)` at a dynamic size) needs no constant. ONNX always sorts; an unsorted torch
    topk leaves the order unspecified, so sorted output is one of its answers. A 0-d input has
    no axis for TopK; torch returns it and index 0 (for k 0 or 1, the only ones it accepts).
    """
    if rank_of(self) == 0:
        return g.op("Identity", self), g.constant(0, torch.int64)
    axis = normalize_dim(dim, rank_of(self))
    values, indices = g.op("TopK", self, int64_vector(g, [k]), axis_i=axis, largest_i=int(largest),
                           sorted_i=1, outputs=2)
    return values, indices


# -- torchvision::nms -------------------------------------------------------------------------------


@symbolic("torchvision::nms")
def nms(g: Graph, boxes: Value, scores: Value, iou_threshold: float) -> Value:
    """nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor

    ONNX NonMaxSuppression on one batch and one class: boxes [1, N, 4] in corner form, scores
    [1, 1, N], at most N kept (a count read from the graph), IoU strictly above the threshold
    suppresses, as in torchvision. It returns (batch, class, box) triples in decreasing score
    order; the box column is torchvision's `keep`. `batched_nms` reaches here with its boxes
    offset by class, so one call separates the classes.
    """
    boxes, scores = promote(g, boxes, scores, dtype=torch.float32)
    batched_boxes = unsqueeze(g, boxes, [0])
    batched_scores = unsqueeze(g, unsqueeze(g, scores, [0]), [0])
    max_kept = g.op("Shape", scores)  # [N]: every box may be kept
    selected = g.op("NonMaxSuppression", batched_boxes, batched_scores, max_kept,
                    g.constant([float(iou_threshold)], torch.float32), center_point_box_i=0)
    box_column = g.op("Gather", selected, g.constant(2, torch.int64), axis_i=1)
    return box_column


# -- torchvision::roi_align -------------------------------------------------------------------------


@symbolic("torchvision::roi_align")
def roi_align(g: Graph, input: Value, rois: Value, spatial_scale: float, pooled_height: int, pooled_width: int,
              sampling_ratio: int, aligned: bool) -> Value:
    """roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor

    ONNX RoiAlign (average mode; opset >= 16 for its coordinate_transformation_mode) with rois [K, 5] split into batch indices (column 0) and
    corners. torchvision's `aligned=True` shifts by half a pixel ("half_pixel"); `aligned=False`
    does not ("output_half_pixel"), and both clamp a ROI to at least one cell in that mode as
    onnxruntime does. A sampling ratio <= 0 means adaptive in torchvision, 0 in ONNX.
    The multi-scale form (MultiScaleRoIAlign) reaches here once per pyramid level.
    """
    dtype = input.dtype or torch.float32
    batch_indices = cast_to(g, squeeze(g, g.op("Slice", rois, g.constant([0], torch.int64),
                                                g.constant([1], torch.int64), g.constant([1], torch.int64)), [1]),
                            torch.int64)
    corners = g.op("Slice", rois, g.constant([1], torch.int64), g.constant([5], torch.int64),
                   g.constant([1], torch.int64))
    corners = cast_to(g, corners, dtype)
    return g.op(
        "RoiAlign", input, corners, batch_indices,
        mode_s="avg", output_height_i=int(pooled_height), output_width_i=int(pooled_width),
        sampling_ratio_i=max(int(sampling_ratio), 0), spatial_scale_f=float(spatial_scale),
        coordinate_transformation_mode_s="half_pixel" if aligned else "output_half_pixel",
    )


# -- what the detectors' pre- and post-processing reach besides ---------------------------------


def _sym_extreme(g: Graph, onnx_op: str, python_op, a, b):
    if not isinstance(a, Value) and not isinstance(b, Value):
        return python_op(a, b)
    # SymFloats (Python floats, float64 in the graph) stay float64: a size computed from them,
    # e.g. the transform's scale min(min_size / short side, max_size / long side), is then
    # rounded as torch rounds it; SymInts are int64.
    floating = isinstance(g.ctx.output_meta, (float, torch.SymFloat)) or any(_is_floating(v) for v in (a, b))
    dtype = torch.float64 if floating else torch.int64
    a, b = (scalar_of(g, v, dtype) for v in (a, b))
    return g.op(onnx_op, a, b)


def _is_floating(value) -> bool:
    if isinstance(value, Value):
        return value.dtype is not None and value.dtype.is_floating_point
    return isinstance(value, float)


@symbolic("torch.sym_min")
def sym_min(g: Graph, a, b):
    """min(SymInt a, SymInt b) or min(SymFloat a, SymFloat b): `keep[:detections_per_img]` on a
    data-dependent count, the transform's resize scale at a dynamic image size."""
    return _sym_extreme(g, "Min", min, a, b)


@symbolic("torch.sym_max")
def sym_max(g: Graph, a, b):
    """max(SymInt a, SymInt b) as int64 scalars, max(SymFloat a, SymFloat b) as float64."""
    return _sym_extreme(g, "Max", max, a, b)


# -- SymFloat arithmetic: the transform's resize to `min_size` at a dynamic image size -------------


@symbolic("math.trunc")
def sym_trunc(g: Graph, a):
    """math.trunc(SymFloat a) -> SymInt: a Cast to int64, which truncates toward zero like trunc."""
    if not isinstance(a, Value):
        return math.trunc(a)
    return cast_to(g, scalar_of(g, a, torch.float64), torch.int64)
