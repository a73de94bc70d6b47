"""Every torchvision family beyond the 2018 zoo: classifiers, segmentation, video, optical flow.

The `extended` tier (nightly) holds one case per model of `torchvision.models.list_models()`
that the `full` tier does not already have, at the smallest input each architecture accepts
(inputs are small so that the whole tier runs on a CPU; the sizes are in `SIZES` and in each
case's description). Detection models are not cases: `DETECTION_MODELS` lists them for the
capture attempts recorded in docs/COVERAGE.md (torch.export cannot capture their
data-dependent post-processing).

Realistic numerics: weights are seeded, BatchNorm is calibrated by the case, and weights that
torchvision initialises to all zeros (ViT's classification head, some projection layers) are
re-initialised with a seeded normal of std `ZERO_WEIGHT_STD`, so no output is identically 0.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch
import torchvision
from torch import nn

logger = logging.getLogger(__name__)

# std for weights torchvision starts at all zeros: the trunc-normal std torchvision itself
# uses for transformer heads and projections (0.02).
ZERO_WEIGHT_STD = 0.02

# Torchvision's RAFT runs a fixed number of refinement steps; 12 is its default.
RAFT_FLOW_UPDATES = 12


@dataclasses.dataclass(frozen=True)
class InputSize:
    """The example input of an extended case: image side, and frames for video models."""

    size: int
    frames: int | None = None
    reason: str = ""
    calibration_batch: int = 4  # images per BatchNorm calibration step (3 steps)


# Untrained EfficientNets beyond B0 end in stages of 2x2 feature maps at 64x64: BatchNorm
# statistics calibrated on so few values leave channels of near-zero variance, which eval-mode
# inputs then blow up (activations of 1e3-1e4, logits of 1e3, torch fp32 off its own fp64 by
# 1e-2 and more). At 128 (160 for B5, 192 for B7) with 16 images per calibration step,
# activations stay under 80 and fp32 within 5e-5 of fp64, as for the other families.
_EFFICIENTNET_REASON = "EfficientNet's BatchNorm needs larger feature maps to calibrate"

# The smallest sizes the architectures accept (see `reason`); everything else uses 64x64.
SIZES: dict[str, InputSize] = {
    "maxvit_t": InputSize(224, reason="MaxViT's window/grid partitions need 224x224"),
    "s3d": InputSize(224, 16, "S3D ends in a (2, 7, 7) average pool: 16 frames of 224x224"),
    "mvit_v1_b": InputSize(224, 16, "MViT's positional embeddings fix 16 frames of 224x224"),
    "mvit_v2_s": InputSize(224, 16, "MViT's relative positions fix 16 frames of 224x224"),
    "r3d_18": InputSize(32, 8), "mc3_18": InputSize(32, 8), "r2plus1d_18": InputSize(32, 8),
    "swin3d_t": InputSize(64, 4), "swin3d_s": InputSize(64, 4), "swin3d_b": InputSize(64, 4),
    "raft_small": InputSize(128, reason="RAFT's correlation pyramid needs feature maps of 16 (images of 128)"),
    "raft_large": InputSize(128, reason="RAFT's correlation pyramid needs feature maps of 16 (images of 128)"),
    **{name: InputSize({"efficientnet_b5": 160, "efficientnet_b7": 192}.get(name, 128), reason=_EFFICIENTNET_REASON,
                       calibration_batch=16)
       for name in ("efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4", "efficientnet_b5",
                    "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_s", "efficientnet_v2_m",
                    "efficientnet_v2_l")},
}
DEFAULT_SIZE = InputSize(64)

# ViTs are built for 64x64 images (56x56 for the patch-14 ViT-H): `image_size` only changes
# the length of the learned positional embedding, every layer is the model's own.
VIT_IMAGE_SIZE = {"vit_b_16": 64, "vit_b_32": 64, "vit_l_16": 64, "vit_l_32": 64, "vit_h_14": 56}

DETECTION_MODELS: tuple[str, ...] = tuple(torchvision.models.list_models(module=torchvision.models.detection))


def input_size(name: str) -> InputSize:
    """The input size an extended case uses."""
    if name in VIT_IMAGE_SIZE:
        return InputSize(VIT_IMAGE_SIZE[name], reason="ViT built for this image size")
    return SIZES.get(name, DEFAULT_SIZE)


def family_of(name: str) -> str:
    """The case family: the torchvision module of a classifier (`regnet`, `swin_transformer`),
    else the task (`segmentation`, `video`, `optical_flow`)."""
    module = torchvision.models.get_model_builder(name).__module__
    for task in ("segmentation", "video", "optical_flow", "detection"):
        if f".{task}." in module:
            return task
    return module.rsplit(".", 1)[-1]


def reinit_zero_weights(model: nn.Module, std: float = ZERO_WEIGHT_STD) -> int:
    """Give every all-zero Linear/Conv weight a normal(0, std) draw from torch's (seeded) RNG;
    returns how many were re-initialised."""
    count = 0
    with torch.no_grad():
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)) and not weight.any():
                nn.init.normal_(weight, std=std)
                count += 1
    return count


class SegmentationOutput(nn.Module):
    """A torchvision segmentation model returning its "out" map (its forward returns a dict)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model(image)["out"]


class FinalFlow(nn.Module):
    """RAFT with a fixed number of refinement steps, returning the last flow estimate."""

    def __init__(self, model: nn.Module, flow_updates: int = RAFT_FLOW_UPDATES) -> None:
        super().__init__()
        self.model = model
        self.flow_updates = flow_updates

    def forward(self, image1: torch.Tensor, image2: torch.Tensor) -> torch.Tensor:
        return self.model(image1, image2, num_flow_updates=self.flow_updates)[-1]


def build(name: str, **kwargs: Any) -> nn.Module:
    """`torchvision.models.get_model(name, weights=None)`, wrapped to return one tensor, with
    all-zero weights re-initialised (call under a seeded RNG)."""
    family = family_of(name)
    options: dict[str, Any] = {"weights": None, **kwargs}
    if family in ("segmentation",):
        options.update(weights_backbone=None, aux_loss=False)
    if name in VIT_IMAGE_SIZE:
        options.setdefault("image_size", VIT_IMAGE_SIZE[name])
    if name == "googlenet":
        options.update(aux_logits=False, init_weights=True)
    model = torchvision.models.get_model(name, **options)
    reinitialised = reinit_zero_weights(model)
    if reinitialised:
        logger.debug("%s: re-initialised %d all-zero weights", name, reinitialised)
    if family == "segmentation":
        return SegmentationOutput(model)
    if family == "optical_flow":
        return FinalFlow(model)
    return model


def classification_names() -> list[str]:
    """Every classifier in `torchvision.models.list_models()` (quantized ones excluded: they
    run int8 kernels that torch.export does not capture)."""
    tasks = [torchvision.models.segmentation, torchvision.models.video, torchvision.models.optical_flow,
             torchvision.models.detection, torchvision.models.quantization]
    excluded = {name for module in tasks for name in torchvision.models.list_models(module=module)}
    return [name for name in torchvision.models.list_models() if name not in excluded]


def task_names(task: str) -> list[str]:
    """The models of one torchvision task module ("segmentation", "video", "optical_flow")."""
    return torchvision.models.list_models(module=getattr(torchvision.models, task))
