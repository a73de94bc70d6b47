"""Capture rules for torchvision's detection models (Faster/Mask/Keypoint R-CNN, RetinaNet,
FCOS, SSD, SSDlite): each replaces one torchvision function during capture only.

Every rule keeps torchvision's arithmetic; what changes is how a decision on an unbacked size
is taken. `guard_or_false(cond)` answers a size question torch can decide (a backed or static
size) exactly as Python would, and answers False where the size is data dependent: the rule
then takes the branch that is correct for every size, which its `soundness` argues.
"""

from __future__ import annotations

import contextvars
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from exporter.capturing.rules.patching import original_of, rule


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


# -- GeneralizedRCNNTransform and the anchors: sizes computed from the image's, never read as ints --


@rule(
    "torchvision.models.detection.transform:_resize_image_and_masks",
    settles="(IntTrueDiv(160, Max(s0, s1))) >= (IntTrueDiv(160, Min(s0, s1))) (torchvision/models/"
    "detection/transform.py: `min(self_min_size / min_size, self_max_size / max_size)` on two "
    "SymFloats: torch.export decides Python's min by the traced image, so a square trace keeps "
    "min_size / short side for every image and a non-square image is resized past max_size)",
    soundness="the scale is torchvision's, min(min_size / short side, max_size / long side), taken "
    "with torch.sym_min so that the graph computes the minimum for each image; the resize is "
    "torchvision's call (bilinear, recompute_scale_factor=True: the output size is "
    "floor(side * scale) in float64, as torch computes it). A call with targets or a fixed_size "
    "(training, SSD-style transforms) is torchvision's own.",
)
def resize_image_and_masks(image: torch.Tensor, self_min_size: int, self_max_size: int,
                           target: dict[str, torch.Tensor] | None = None,
                           fixed_size: tuple[int, int] | None = None) -> tuple[torch.Tensor, Any]:
    """torchvision's `_resize_image_and_masks` for an image alone, with the scale's min in the graph."""
    if target is not None or fixed_size is not None:
        return original_of("torchvision.models.detection.transform:_resize_image_and_masks")(
            image, self_min_size, self_max_size, target, fixed_size)
    height, width = image.shape[-2:]
    scale = torch.sym_min(self_min_size / torch.sym_min(height, width), self_max_size / torch.sym_max(height, width))
    resized = torch.nn.functional.interpolate(image[None], scale_factor=scale, mode="bilinear",
                                              recompute_scale_factor=True, align_corners=False)[0]
    return resized, target


@rule(
    "torchvision.models.detection.transform:GeneralizedRCNNTransform.batch_images",
    settles="Eq(TruncToInt(<resized height>), 160) and the width's (torchvision/models/detection/"
    "transform.py: batch_images rounds the largest size up to `size_divisible` with "
    "int(math.ceil(float(size) / stride) * stride), which reads the resized image's size as an "
    "int: the padded batch, every feature map and every anchor then keep the traced size)",
    soundness="for an int n >= 0 and stride s, ceil(float(n) / s) * s == (n + s - 1) // s * s "
    "(float64 holds both exactly at image sizes), and the largest size over the images is "
    "torch.sym_max of theirs; the batch is torchvision's (zeros of that size with each image "
    "copied into its top-left corner), made without writing into a view: each image padded with "
    "zeros after its last channel, row and column to that size, and the images stacked.",
)
def batch_images(self: Any, images: list[torch.Tensor], size_divisible: int = 32) -> torch.Tensor:
    """GeneralizedRCNNTransform.batch_images with the padded size computed from the images' sizes."""
    channels, height, width = images[0].shape
    for image in images[1:]:
        channels = torch.sym_max(channels, image.shape[0])
        height = torch.sym_max(height, image.shape[1])
        width = torch.sym_max(width, image.shape[2])
    height = (height + size_divisible - 1) // size_divisible * size_divisible
    width = (width + size_divisible - 1) // size_divisible * size_divisible
    padded = [torch.nn.functional.pad(image, (0, width - image.shape[2], 0, height - image.shape[1],
                                              0, channels - image.shape[0]))
              for image in images]
    return torch.stack(padded)


@rule(
    "torchvision.models.detection.anchor_utils:AnchorGenerator.forward",
    settles="an unspecified value: the anchor strides are `torch.empty(()).fill_(stride)`, and the "
    "empty tensor's contents (uninitialised memory in torch) would be a row no backend can match",
    soundness="`torch.empty(()).fill_(v)` and `torch.scalar_tensor(v)` are the same tensor; the rest "
    "of forward() is torchvision's. The strides (image size // feature map size) are SymInts "
    "computed from the padded batch's size, so the anchors follow the image's size.",
)
def anchor_generator_forward(self: Any, image_list: Any, feature_maps: list[torch.Tensor]) -> list[torch.Tensor]:
    """AnchorGenerator.forward with the strides made by `torch.scalar_tensor`."""
    grid_sizes = [feature_map.shape[-2:] for feature_map in feature_maps]
    image_size = image_list.tensors.shape[-2:]
    dtype, device = feature_maps[0].dtype, feature_maps[0].device
    strides = [
        [torch.scalar_tensor(image_size[0] // g[0], dtype=torch.int64, device=device),
         torch.scalar_tensor(image_size[1] // g[1], dtype=torch.int64, device=device)]
        for g in grid_sizes
    ]
    self.set_cell_anchors(dtype, device)
    anchors_over_all_feature_maps = self.grid_anchors(grid_sizes, strides)
    return [torch.cat(list(anchors_over_all_feature_maps)) for _ in range(len(image_list.image_sizes))]


@rule(
    "torchvision.models.detection.transform:paste_masks_in_image",
    settles="Min(<detections>, u5) (torchvision/models/detection/roi_heads.py: paste_masks_in_image "
    "loops over the detections in Python, and each mask's size int(box[2] - box[0] + 1) is a "
    "data-dependent int)",
    soundness="each pasted mask is torchvision's: the box's own bilinear resize (align_corners=False, "
    "source index (j + 0.5) * M / w - 0.5 clamped at 0, the upper neighbour clamped to the last "
    "row) evaluated at every image pixel the box covers, zero elsewhere; only the loop over the "
    "detections becomes a batch, so the values agree to fp32 rounding. The boxes are expanded by "
    "torchvision's own traced form (`_onnx_expand_boxes`: the same four coordinates, stacked "
    "instead of written into a zeros tensor, which would cost the capture torch's full decomposition).",
)
def paste_masks_in_image(masks: torch.Tensor, boxes: torch.Tensor, img_shape: tuple[int, int],
                         padding: int = 1) -> torch.Tensor:
    """torchvision's `paste_masks_in_image`, every detection at once."""
    from torchvision.models.detection.roi_heads import _onnx_expand_boxes, expand_masks

    masks, scale = expand_masks(masks, padding=padding)
    boxes = _onnx_expand_boxes(boxes, scale).to(dtype=torch.int64)
    im_h, im_w = img_shape
    mask = masks[:, 0]  # [N, M, M]
    rows = _bilinear_taps(boxes[:, 1], boxes[:, 3], mask.shape[-2], im_h)  # per image row
    cols = _bilinear_taps(boxes[:, 0], boxes[:, 2], mask.shape[-1], im_w)  # per image column
    index0, index1, weight0, weight1, inside_y = rows
    top = torch.gather(mask, 1, index0[:, :, None].expand(-1, -1, mask.shape[-1]))
    bottom = torch.gather(mask, 1, index1[:, :, None].expand(-1, -1, mask.shape[-1]))
    resized_rows = weight0[:, :, None] * top + weight1[:, :, None] * bottom  # [N, im_h, M]
    index0, index1, weight0, weight1, inside_x = cols
    left = torch.gather(resized_rows, 2, index0[:, None, :].expand(-1, resized_rows.shape[1], -1))
    right = torch.gather(resized_rows, 2, index1[:, None, :].expand(-1, resized_rows.shape[1], -1))
    pasted = weight0[:, None, :] * left + weight1[:, None, :] * right  # [N, im_h, im_w]
    inside = inside_y[:, :, None] & inside_x[:, None, :]
    return torch.where(inside, pasted, torch.zeros((), dtype=pasted.dtype))[:, None]


def _bilinear_taps(start: torch.Tensor, end: torch.Tensor, mask_size: int, image_size: Any):
    """For every image pixel along one axis and every box [start, end] (ints): the two source
    rows of the box's resized mask, their weights, and whether the pixel is inside the box."""
    extent = torch.clamp(end - start + 1, min=1)  # torchvision: max(int(box[2] - box[0] + 1), 1)
    pixel = torch.arange(image_size, dtype=torch.int64, device=start.device)[None, :]
    offset = pixel - start[:, None]  # position inside the resized mask
    inside = (pixel >= start[:, None]) & (pixel <= end[:, None])
    # torch's scale is input size / output size, a division in fp32
    scale = torch.full_like(extent, mask_size, dtype=torch.float32) / extent.to(torch.float32)
    source = torch.clamp(scale[:, None] * (offset.to(torch.float32) + 0.5) - 0.5, min=0.0)
    index0 = torch.clamp(source.to(torch.int64), max=mask_size - 1)
    index1 = torch.clamp(index0 + 1, max=mask_size - 1)
    weight1 = source - index0.to(torch.float32)
    return index0, index1, 1.0 - weight1, weight1, inside


@rule(
    "torchvision.models.detection.transform:resize_keypoints",
    settles="no guard: `resized_data[..., 0] *= ratio_w` (torchvision/models/detection/transform.py: "
    "resize_keypoints) writes into a view of a clone, which the capture's local decompositions cannot "
    "rewrite, so every Keypoint R-CNN capture paid for torch's full decomposition (a second trace)",
    soundness="it is torchvision's own branch for tracing (taken under torch.jit tracing): x times "
    "ratio_w, y times ratio_h and the visibility column stacked, the same values the in-place "
    "multiplications write.",
)
def resize_keypoints(keypoints: torch.Tensor, original_size: list[int], new_size: list[int]) -> torch.Tensor:
    """torchvision's `resize_keypoints` as it runs under tracing: scaled columns stacked."""
    ratio_h, ratio_w = (torch.tensor(size, dtype=torch.float32, device=keypoints.device)
                        / torch.tensor(original, dtype=torch.float32, device=keypoints.device)
                        for size, original in zip(new_size, original_size))
    return torch.stack((keypoints[:, :, 0] * ratio_w, keypoints[:, :, 1] * ratio_h, keypoints[:, :, 2]), dim=2)


# -- Keypoint R-CNN: heatmaps to keypoints -------------------------------------------------------

_IMAGE_BOUND: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "roundtrip_keypoint_image_bound", default=None)
BICUBIC_A = -0.75  # torch's cubic convolution constant (upsample_bicubic2d)


@rule(
    "torchvision.models.detection.roi_heads:RoIHeads.forward",
    settles="nothing itself: it tells the keypoint rule below the largest image size of the batch "
    "(max of image_shapes), the bound of every ROI the heads see",
    soundness="it calls torchvision's RoIHeads.forward unchanged; the ROIs are boxes clipped to their "
    "image (box_ops.clip_boxes_to_image), so no ROI is larger than the largest image.",
)
def roi_heads_forward(self: Any, features: Any, proposals: Any, image_shapes: list[tuple[int, int]],
                      targets: Any = None) -> Any:
    """RoIHeads.forward, with the image-size bound set for `heatmaps_to_keypoints`."""
    bound = (max(h for h, _ in image_shapes), max(w for _, w in image_shapes))
    token = _IMAGE_BOUND.set(bound)
    try:
        return original_of("torchvision.models.detection.roi_heads:RoIHeads.forward")(
            self, features, proposals, image_shapes, targets)
    finally:
        _IMAGE_BOUND.reset(token)


@rule(
    "torchvision.models.detection.roi_heads:heatmaps_to_keypoints",
    settles="Min(<detections>, u5) (torchvision/models/detection/roi_heads.py: heatmaps_to_keypoints "
    "allocates len(rois) rows, loops over the ROIs in Python and resizes each heatmap to "
    "int(widths_ceil[i].item()) columns, a data-dependent int)",
    soundness="each ROI's heatmaps are resized as torch's bicubic upsample does (align_corners=False: "
    "source (j + 0.5) * 56 / size - 0.5, four taps clamped to the map, A = -0.75), written as two "
    "interpolation matrices over a canvas of the largest image size (no ROI is larger); the "
    "argmax runs over the ROI's own rows and columns only, in the same row-major order, so the "
    "first maximum, the keypoint and its score are torchvision's up to fp32 rounding.",
)
def heatmaps_to_keypoints(maps: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torchvision's `heatmaps_to_keypoints` for every ROI at once (inside RoIHeads.forward)."""
    bound = _IMAGE_BOUND.get()
    if bound is None:  # called outside RoIHeads: no bound on the ROI sizes
        return original_of("torchvision.models.detection.roi_heads:heatmaps_to_keypoints")(maps, rois)
    offset_x, offset_y = rois[:, 0], rois[:, 1]
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    widths_ceil, heights_ceil = widths.ceil(), heights.ceil()
    rows = _bicubic_matrix(heights_ceil, maps.shape[2], bound[0])  # [N, H, Hm]
    cols = _bicubic_matrix(widths_ceil, maps.shape[3], bound[1])  # [N, W, Wm]
    resized = rows[:, None] @ maps @ cols[:, None].transpose(2, 3)  # [N, K, H, W]
    inside_y = torch.arange(bound[0], device=maps.device)[None, :] < heights_ceil[:, None]
    inside_x = torch.arange(bound[1], device=maps.device)[None, :] < widths_ceil[:, None]
    inside = (inside_y[:, :, None] & inside_x[:, None, :])[:, None]
    resized = torch.where(inside, resized, torch.full((), float("-inf"), dtype=resized.dtype))
    scores, position = resized.flatten(2).max(dim=2)  # the first maximum, row-major as torchvision's
    x_int = position % bound[1]
    y_int = torch.div(position - x_int, bound[1], rounding_mode="floor")
    x = (x_int.float() + 0.5) * (widths / widths_ceil)[:, None]
    y = (y_int.float() + 0.5) * (heights / heights_ceil)[:, None]
    xy = torch.stack([x + offset_x[:, None], y + offset_y[:, None], torch.ones_like(x)], dim=2)
    return xy, scores


def _bicubic_matrix(out_sizes: torch.Tensor, in_size: int, bound: Any) -> torch.Tensor:
    """[N, bound, in_size]: row j of matrix n resamples a length-`in_size` signal to
    `out_sizes[n]` samples as torch's bicubic upsample (rows past the size are unused)."""
    scale = torch.full_like(out_sizes, in_size) / out_sizes  # torch: input size / output size, in fp32
    position = torch.arange(bound, device=out_sizes.device).to(out_sizes.dtype)[None, :]
    real = scale[:, None] * (position + 0.5) - 0.5
    index = torch.clamp(torch.floor(real), max=in_size - 1)
    t = torch.clamp(real - index, 0.0, 1.0)
    a = BICUBIC_A
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731  |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731  1 < |x| < 2
    weights = torch.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], dim=2)  # [N, bound, 4]
    taps = index.to(torch.int64)[:, :, None] + torch.arange(-1, 3, device=out_sizes.device)
    taps = torch.clamp(taps, 0, in_size - 1)
    one_hot = (taps[..., None] == torch.arange(in_size, device=out_sizes.device)).to(weights.dtype)
    return (weights[..., None] * one_hot).sum(dim=2)
