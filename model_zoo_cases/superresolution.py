"""ESPCN super-resolution (Shi et al. 2016): conv layers + sub-pixel shuffle.

Input is the luminance (Y) channel, (N, 1, H, W) in [0, 1]; the output is
(N, 1, H*r, W*r) for upscale factor r. Orthogonal init, with the ReLU gain on
the layers followed by a ReLU, keeps activations at unit scale untrained.
"""

from __future__ import annotations

import torch
from torch import nn


class SuperResolutionNet(nn.Module):
    """ESPCN: 5x5 (1->64), 3x3 (64->64), 3x3 (64->32), 3x3 (32->r^2), pixel shuffle."""

    def __init__(self, upscale_factor: int = 3) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor
        self.conv1 = nn.Conv2d(1, 64, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(64, 64, kernel_size=3, padding=1)
        self.conv3 = nn.Conv2d(64, 32, kernel_size=3, padding=1)
        self.conv4 = nn.Conv2d(32, upscale_factor**2, kernel_size=3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        relu_gain = nn.init.calculate_gain("relu")
        for conv in (self.conv1, self.conv2, self.conv3):
            nn.init.orthogonal_(conv.weight, relu_gain)
        nn.init.orthogonal_(self.conv4.weight)

    def forward(self, luminance: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(luminance))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))
