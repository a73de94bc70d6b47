"""The `detection` tier: torchvision's 12 object detectors, exported with unbacked sizes.

Each detector is built untrained (seeded, BatchNorm calibrated by the case) with settings that
keep it cheap on a CPU and make it return detections: small images, few proposals and
candidates, and a score threshold of 0 so that an untrained head (scores near 1/num_classes)
still keeps `detections_per_img` boxes. One image per call: a detector returns one mapping per
image, so the batch is fixed by the output's structure; the image's height and width are the
dynamic axes. The traced image is square; the same ONNX model is then verified at two
non-square sizes (OTHER_SIZES) that the transform resizes to other internal sizes than the
traced one: its `min_size` and `max_size` differ (as torchvision's defaults, 800 and 1333, do),
so one size is bound by `min_size` and the other by `max_size`, and the padded batch, the
feature maps and the anchors all change size with the image.

Outputs are compared matched (harness.metrics.detections): boxes paired by label and IoU,
masks and keypoints through their boxes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torchvision
from torch import nn

from model_zoo_cases import inputs
from model_zoo_cases.torchvision_extended import DETECTION_MODELS

# Proposal and detection counts: small enough that post-processing stays cheap on a CPU, large
# enough that NMS, the score filter and the `detections_per_img` cut all act.
RPN_PRE_NMS_TOP_N = 100
RPN_POST_NMS_TOP_N = 30
DETECTIONS_PER_IMAGE = 10
TOPK_CANDIDATES = 50
SCORE_THRESHOLD = 0.0  # untrained heads score near 1/num_classes: keep every candidate
# Fewer classes than COCO's 91: an untrained head's softmax then separates its scores better.
NUM_CLASSES = 11
KEYPOINTS = 17  # COCO's person keypoints (torchvision's default)
# The transform's sizes for the cases that keep the aspect ratio: small for a CPU, in
# torchvision's ratio of max_size to min_size (1333 / 800 ~ 1.67).
MIN_SIZE = 160
MAX_SIZE = 256
# (height, width) of the other verifications. At 192x192 (traced) the image becomes 160x160
# inside; 160x224 stays 160x224 (min_size binds: 160 / 160 < 256 / 224); 288x128 becomes
# 256x113, padded to 256x128 (max_size binds: 256 / 288 < 160 / 128).
OTHER_SIZES: tuple[tuple[int, int], ...] = ((160, 224), (288, 128))


@dataclasses.dataclass(frozen=True)
class Detector:
    """How one detection case builds and feeds its model."""

    name: str
    image_size: int  # the traced input's side (a square image)
    # the transform's (min_size, max_size), keeping the aspect ratio (None: the model's fixed size)
    transform_sizes: tuple[int, int] | None
    kind: str  # "rcnn", "dense" (RetinaNet, FCOS) or "ssd"
    outputs: tuple[str, ...] = ("boxes", "labels", "scores")
    smoke: bool = False  # the one detector every CI run verifies

    def builder_kwargs(self) -> dict[str, Any]:
        """The torchvision builder's arguments: no weights, small sizes, few proposals."""
        options: dict[str, Any] = {"weights": None, "weights_backbone": None}
        if self.kind == "rcnn":
            options.update(
                num_classes=2 if "keypoint" in self.name else NUM_CLASSES,
                rpn_pre_nms_top_n_test=RPN_PRE_NMS_TOP_N, rpn_post_nms_top_n_test=RPN_POST_NMS_TOP_N,
                box_detections_per_img=DETECTIONS_PER_IMAGE, box_score_thresh=SCORE_THRESHOLD,
            )
        else:
            options.update(num_classes=NUM_CLASSES, topk_candidates=TOPK_CANDIDATES,
                           detections_per_img=DETECTIONS_PER_IMAGE, score_thresh=SCORE_THRESHOLD)
        if self.transform_sizes is not None:
            options.update(min_size=self.transform_sizes[0], max_size=self.transform_sizes[1])
        return options

    def build(self) -> nn.Module:
        """The untrained detector (call under a seeded RNG)."""
        return torchvision.models.get_model(self.name, **self.builder_kwargs())

    def images(self, generator: torch.Generator, batch: int) -> tuple[torch.Tensor]:
        """`batch` images in [0, 1] of `image_size` (the model normalises them itself): the
        cases verify one (a fixed batch), BatchNorm calibration uses several (SSDlite's last
        feature maps are 1x1, so one image gives one value per channel, too few to calibrate)."""
        return (inputs.uniform_images(generator, batch, 3, self.image_size),)

    def images_at(self, generator: torch.Generator, height: int, width: int) -> tuple[torch.Tensor]:
        """One image of `height` x `width` in [0, 1] (the other sizes' inputs)."""
        return (inputs.uniform_images(generator, 1, 3, (height, width)),)


def _rcnn(name: str, outputs: tuple[str, ...] = ("boxes", "labels", "scores"), **fields: Any) -> Detector:
    return Detector(name, image_size=192, transform_sizes=(MIN_SIZE, MAX_SIZE), kind="rcnn", outputs=outputs, **fields)


def _dense(name: str) -> Detector:
    return Detector(name, image_size=192, transform_sizes=(MIN_SIZE, MAX_SIZE), kind="dense")


DETECTORS: dict[str, Detector] = {d.name: d for d in (
    _rcnn("fasterrcnn_mobilenet_v3_large_320_fpn", smoke=True),
    _rcnn("fasterrcnn_mobilenet_v3_large_fpn"),
    _rcnn("fasterrcnn_resnet50_fpn"),
    _rcnn("fasterrcnn_resnet50_fpn_v2"),
    _rcnn("maskrcnn_resnet50_fpn", outputs=("boxes", "labels", "scores", "masks")),
    _rcnn("maskrcnn_resnet50_fpn_v2", outputs=("boxes", "labels", "scores", "masks")),
    _rcnn("keypointrcnn_resnet50_fpn", outputs=("boxes", "labels", "scores", "keypoints", "keypoints_scores")),
    _dense("retinanet_resnet50_fpn"),
    _dense("retinanet_resnet50_fpn_v2"),
    _dense("fcos_resnet50_fpn"),
    # SSD and SSDlite resize every image to their own fixed size (300 and 320)
    Detector("ssd300_vgg16", image_size=192, transform_sizes=None, kind="ssd"),
    Detector("ssdlite320_mobilenet_v3_large", image_size=192, transform_sizes=None, kind="ssd"),
)}

if set(DETECTORS) != set(DETECTION_MODELS):  # a torchvision release added or dropped a detector
    raise RuntimeError(f"detection cases {sorted(DETECTORS)} differ from torchvision's {sorted(DETECTION_MODELS)}")
