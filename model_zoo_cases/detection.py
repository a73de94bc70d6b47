"""The `detection` tier: torchvision's 12 object detectors, exported with unbacked sizes.

Each detector is built untrained (seeded, BatchNorm calibrated by the case) with settings that
keep it cheap on a CPU and make it return detections: small images, few proposals and
candidates, and a score threshold of 0 so that an untrained head (scores near 1/num_classes)
still keeps `detections_per_img` boxes. One image per call: a detector returns one mapping per
image, so the batch is fixed by the output's structure; the image's height and width are the
dynamic axes, and the other verification runs the same ONNX model at half the image size (the
model's transform resizes both to its own size, the dynamic-size Resize).

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


@dataclasses.dataclass(frozen=True)
class Detector:
    """How one detection case builds and feeds its model."""

    name: str
    image_size: int  # the traced input's side; the other run uses half of it
    internal_size: int | None  # the transform's min_size = max_size (None: the model's fixed size)
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
        if self.internal_size is not None:
            options.update(min_size=self.internal_size, max_size=self.internal_size)
        return options

    def build(self) -> nn.Module:
        """The untrained detector (call under a seeded RNG)."""
        return torchvision.models.get_model(self.name, **self.builder_kwargs())

    def images(self, generator: torch.Generator, batch: int) -> tuple[torch.Tensor]:
        """`batch` images in [0, 1] of `image_size` (the model normalises them itself): the
        cases verify one (a fixed batch), BatchNorm calibration uses several (SSDlite's last
        feature maps are 1x1, so one image gives one value per channel, too few to calibrate)."""
        return (inputs.uniform_images(generator, batch, 3, self.image_size),)


def _rcnn(name: str, outputs: tuple[str, ...] = ("boxes", "labels", "scores"), **fields: Any) -> Detector:
    return Detector(name, image_size=192, internal_size=160, kind="rcnn", outputs=outputs, **fields)


def _dense(name: str) -> Detector:
    return Detector(name, image_size=192, internal_size=160, kind="dense")


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
    Detector("ssd300_vgg16", image_size=192, internal_size=None, kind="ssd"),
    Detector("ssdlite320_mobilenet_v3_large", image_size=192, internal_size=None, kind="ssd"),
)}

if set(DETECTORS) != set(DETECTION_MODELS):  # a torchvision release added or dropped a detector
    raise RuntimeError(f"detection cases {sorted(DETECTORS)} differ from torchvision's {sorted(DETECTION_MODELS)}")
