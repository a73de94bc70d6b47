"""Detection: NMS, RoIAlign (one level and multi-scale), TopK with a dynamic k, and the rounding,
factory and SymInt/SymFloat ops torchvision's detectors reach at data-dependent sizes.

Counts are dynamic here: the number of boxes or ROIs is a dynamic axis (rows are re-run at
other counts on the same ONNX model), and NMS's output count depends on the data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchvision

from ._samples import ints, op, randn
from .schema import OpCase

NMS, ROI_ALIGN, TOPK = "torchvision.nms.default", "torchvision.roi_align.default", "aten.topk.default"
COUNT = {"args_0": {0: "count"}}
# onnxruntime (1.31) has kernels for RoiAlign-16 but none for RoiAlign-22, the version opsets
# >= 22 carry: those rows run at the opsets onnxruntime can execute.
ROI_ALIGN_OPSETS = (17, 18)
BOXES_COUNT = {"args_0": {0: "count"}, "args_1": {0: "count"}}


def boxes(gen: torch.Generator, count: int, side: float = 32.0) -> torch.Tensor:
    """`count` valid boxes (x1 < x2, y1 < y2) inside a `side` x `side` image, many overlapping."""
    corner = torch.rand(count, 2, generator=gen) * side * 0.6
    extent = torch.rand(count, 2, generator=gen) * side * 0.4 + 1.0
    return torch.cat([corner, corner + extent], dim=1)


def scores(gen: torch.Generator, count: int) -> torch.Tensor:
    """Distinct scores in (0, 1): NMS's order is defined by them."""
    return torch.randperm(count, generator=gen).float().add(0.5).div(count)


def rois(gen: torch.Generator, count: int, images: int = 2, side: float = 16.0) -> torch.Tensor:
    """[count, 5] ROIs: image index, then a box."""
    return torch.cat([ints(gen, 0, images, count, 1).float(), boxes(gen, count, side)], dim=1)


class MultiScale(torch.nn.Module):
    """torchvision's MultiScaleRoIAlign over two pyramid levels (strides 4 and 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["p2", "p3"], output_size=3, sampling_ratio=2)

    def forward(self, boxes: torch.Tensor, p2: torch.Tensor, p3: torch.Tensor) -> torch.Tensor:
        return self.pool({"p2": p2, "p3": p3}, [boxes], [(64, 64)])


def _multiscale_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    # boxes of 4 to 60 pixels: the LevelMapper sends the small ones to p2, the large ones to p3
    corner = torch.rand(12, 2, generator=gen) * 4
    extent = torch.rand(12, 2, generator=gen) * 56 + 4
    return torch.cat([corner, corner + extent], 1), randn(gen, 1, 4, 16, 16), randn(gen, 1, 4, 8, 8)


def _nms_above(b: torch.Tensor, s: torch.Tensor, threshold: float) -> torch.Tensor:
    """NMS of the boxes scoring above `threshold` (a data-dependent count), as detectors filter."""
    kept = torch.where(s > threshold)[0]
    return kept[torchvision.ops.nms(b[kept], s[kept], 0.5)]


def _empty_filled(a: torch.Tensor) -> torch.Tensor:
    return torch.empty(a.shape[0], dtype=torch.float32).fill_(2.0) * a


def _resize_to_side(a: torch.Tensor) -> torch.Tensor:
    """GeneralizedRCNNTransform's resize: the shorter side to 8 at any input size."""
    scale = 8 / min(a.shape[-2], a.shape[-1])
    return F.interpolate(a, scale_factor=scale, mode="bilinear", recompute_scale_factor=True, align_corners=False)


CASES: list[OpCase] = [
    op("topk_dynamic_k", lambda a: torch.topk(a, a.shape[0] // 2, dim=0), lambda g: (randn(g, 8, 3),),
       [TOPK], dynamic_axes=COUNT),
    op("topk_smallest_dynamic_k", lambda a: torch.topk(a, a.shape[1] - 2, dim=1, largest=False),
       lambda g: (randn(g, 2, 7),), [TOPK], dynamic_axes={"args_0": {1: "count"}}),
    op("topk_static_k", lambda a: a.topk(3), lambda g: (randn(g, 2, 6),), [TOPK]),
    op("topk_of_a_0d_tensor", lambda a: a.topk(1), lambda g: (randn(g),), [TOPK]),
    op("topk_min_k_of_count", lambda a: a.topk(min(a.shape[0], 50), dim=0), lambda g: (randn(g, 5),),
       [TOPK, "torch.sym_min"], dynamic_axes=COUNT),
    op("nms_dynamic_count", lambda b, s: torchvision.ops.nms(b, s, 0.3), lambda g: (boxes(g, 24), scores(g, 24)),
       [NMS], dynamic_axes=BOXES_COUNT),
    op("nms_of_filtered_boxes", lambda b, s: _nms_above(b, s, 0.3),
       lambda g: (boxes(g, 24), scores(g, 24)), [NMS], dynamic_axes=BOXES_COUNT),
    op("batched_nms_dynamic_count", lambda b, s, c: torchvision.ops.batched_nms(b, s, c, 0.4),
       lambda g: (boxes(g, 30), scores(g, 30), ints(g, 0, 3, 30)), [NMS],
       dynamic_axes={"args_0": {0: "count"}, "args_1": {0: "count"}, "args_2": {0: "count"}}),
    op("roi_align_dynamic_rois", lambda x, r: torchvision.ops.roi_align(x, r, (3, 3), 0.5, 2, False),
       lambda g: (randn(g, 2, 4, 8, 8), rois(g, 6)), [ROI_ALIGN], dynamic_axes={"args_1": {0: "count"}}, opsets=ROI_ALIGN_OPSETS),
    op("roi_align_aligned_adaptive", lambda x, r: torchvision.ops.roi_align(x, r, (2, 4), 0.25, -1, True),
       lambda g: (randn(g, 2, 3, 8, 8), rois(g, 5, side=32.0)), [ROI_ALIGN], dynamic_axes={"args_1": {0: "count"}}, opsets=ROI_ALIGN_OPSETS),
    OpCase("multiscale_roi_align_dynamic_rois", MultiScale, _multiscale_inputs,
           (ROI_ALIGN, "aten.floor.default", "aten.log2.default"), dynamic_axes={"boxes": {0: "count"}},
           opsets=ROI_ALIGN_OPSETS),
    op("empty_filled", _empty_filled, lambda g: (randn(g, 4),), ["aten.empty.memory_format"]),
    op("sym_max_of_count", lambda a: a.new_zeros(max(a.shape[0], 5)), lambda g: (randn(g, 3),),
       ["torch.sym_max"], dynamic_axes=COUNT),
    op("resize_shorter_side_dynamic", _resize_to_side, lambda g: (randn(g, 1, 2, 12, 16),),
       ["aten.upsample_bilinear2d.vec", "torch.sym_float", "_operator.truediv", "math.trunc"],
       dynamic_axes={"args_0": {2: "height", 3: "width"}}),
]
