"""Capture rules for torchvision's detection models (Faster/Mask/Keypoint R-CNN, RetinaNet,
FCOS, SSD, SSDlite): each replaces one torchvision function during capture only.

Every rule keeps torchvision's arithmetic; what changes is how a decision on an unbacked size
is taken. `guard_or_false(cond)` answers a size question torch can decide (a backed or static
size) exactly as Python would, and answers False where the size is data dependent: the rule
then takes the branch that is correct for every size, which its `soundness` argues.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from exporter.capture_rules.patching import rule


@rule(
    "torchvision.ops.boxes:batched_nms",
    settles="Eq(4*u1, 0) and 4*u1 > 4000 (torchvision/ops/boxes.py: batched_nms and "
    "_batched_nms_coordinate_trick test boxes.numel() before NMS)",
    soundness="torchvision picks between two equal algorithms by box count for speed only "
    "(per-class NMS loop vs. one NMS over boxes offset by class); the offset form is correct for "
    "every count, and an empty input keeps no box in both. The empty early return is kept where "
    "the count is known to be 0.",
)
def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """torchvision's `_batched_nms_coordinate_trick`, without a guard on an unbacked count."""
    if guard_or_false(boxes.numel() == 0):
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    return torch.ops.torchvision.nms(boxes + offsets[:, None], scores, iou_threshold)


@rule(
    "torchvision.ops.poolers:_multiscale_roi_align",
    settles="Min(<detections>, u2) (torchvision/ops/poolers.py: num_rois = len(rois) makes the "
    "unbacked ROI count a Python int; the per-level `result[idx_in_level] = ...` scatters by "
    "data-dependent indices)",
    soundness="RoIAlign pools each ROI independently of the others, so pooling every ROI at every "
    "level and keeping, per ROI, the level the LevelMapper chose gives the same values, bit for "
    "bit, as pooling each level's subset and scattering it back; no size is read as an int.",
)
def multiscale_roi_align(
    x_filtered: list[torch.Tensor],
    boxes: list[torch.Tensor],
    output_size: list[int],
    sampling_ratio: int,
    scales: list[float] | None,
    mapper: Any,
) -> torch.Tensor:
    """torchvision's `_multiscale_roi_align`, merging the levels by selection instead of scatter."""
    from torchvision.ops.poolers import _convert_to_roi_format
    from torchvision.ops.roi_align import roi_align

    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    rois = _convert_to_roi_format(boxes)
    pooled = [
        roi_align(feature, rois, output_size=output_size, spatial_scale=scale, sampling_ratio=sampling_ratio)
        for feature, scale in zip(x_filtered, scales)
    ]
    if len(pooled) == 1:
        return pooled[0]
    levels = mapper(boxes).view(-1, 1, 1, 1)
    result = pooled[0]
    for level in range(1, len(pooled)):
        result = torch.where(levels == level, pooled[level].to(result.dtype), result)
    return result


@rule(
    "torchvision.models.detection.anchor_utils:AnchorGenerator.forward",
    settles="an unspecified value: the anchor strides are `torch.empty(()).fill_(stride)`, and the "
    "empty tensor's contents (uninitialised memory in torch) would be a row no backend can match",
    soundness="`torch.empty(()).fill_(v)` and `torch.full((), v)` are the same tensor; the rest of "
    "forward() is torchvision's.",
)
def anchor_generator_forward(self: Any, image_list: Any, feature_maps: list[torch.Tensor]) -> list[torch.Tensor]:
    """AnchorGenerator.forward with the strides made by `torch.full`."""
    grid_sizes = [feature_map.shape[-2:] for feature_map in feature_maps]
    image_size = image_list.tensors.shape[-2:]
    dtype, device = feature_maps[0].dtype, feature_maps[0].device
    strides = [
        [torch.full((), image_size[0] // g[0], dtype=torch.int64, device=device),
         torch.full((), image_size[1] // g[1], dtype=torch.int64, device=device)]
        for g in grid_sizes
    ]
    self.set_cell_anchors(dtype, device)
    anchors_over_all_feature_maps = self.grid_anchors(grid_sizes, strides)
    return [torch.cat(list(anchors_over_all_feature_maps)) for _ in range(len(image_list.image_sizes))]
