"""Builders for torchvision's classifiers, untrained (`weights=None`).

ResNet-family nets get one adjustment: the last BatchNorm of every residual
branch starts with scale `RESIDUAL_BRANCH_GAIN` instead of 1. With unit gains
an untrained, BN-calibrated ResNet is chaotic: in resnet152 a 1e-7 relative
input perturbation moves the logits by ~1e-3, and torch fp32 differs from
torch fp64 by 5.6e-4 at logit scale 1.8, so fp32 round-off alone would hide
any exporter error below that. Trained ResNets have small gains there; at 0.2
the same model's fp32-vs-fp64 gap is 2.2e-6 and activations peak at ~18
instead of ~80. (Measured with torch 2.14 CPU, seed 0.)
"""

from __future__ import annotations

from typing import Any

import torch
import torchvision
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck

RESIDUAL_BRANCH_GAIN = 0.2


def build_torchvision(name: str, **kwargs: Any) -> nn.Module:
    """`torchvision.models.<name>(weights=None, **kwargs)`."""
    return getattr(torchvision.models, name)(weights=None, **kwargs)


def damp_residual_branches(model: nn.Module, gain: float = RESIDUAL_BRANCH_GAIN) -> int:
    """Scale the last BatchNorm weight of each ResNet block by `gain`; returns the block count."""
    blocks = 0
    with torch.no_grad():
        for block in model.modules():
            if isinstance(block, Bottleneck):
                block.bn3.weight.mul_(gain)
            elif isinstance(block, BasicBlock):
                block.bn2.weight.mul_(gain)
            else:
                continue
            blocks += 1
    return blocks


def build_resnet(name: str, residual_branch_gain: float = RESIDUAL_BRANCH_GAIN, **kwargs: Any) -> nn.Module:
    """A torchvision ResNet/ResNeXt/Wide ResNet with damped residual branches."""
    model = build_torchvision(name, **kwargs)
    if damp_residual_branches(model, residual_branch_gain) == 0:
        raise ValueError(f"{name} has no torchvision ResNet blocks")
    return model
