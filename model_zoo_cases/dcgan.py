"""DCGAN (Radford et al. 2015) generator and discriminator for 64x64 RGB images.

Layer widths follow the paper's 64x64 setup (nz=100, ngf=ndf=64); weights are
drawn as the paper prescribes: N(0, 0.02) for convolutions, N(1, 0.02) for
BatchNorm scales.
"""

from __future__ import annotations

import torch
from torch import nn

LATENT_DIM = 100
IMAGE_CHANNELS = 3
IMAGE_SIZE = 64


def _dcgan_init(module: nn.Module) -> None:
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(layer.weight, 0.0, 0.02)
        elif isinstance(layer, nn.BatchNorm2d):
            nn.init.normal_(layer.weight, 1.0, 0.02)
            nn.init.zeros_(layer.bias)


class Generator(nn.Module):
    """Latent (N, nz, 1, 1) -> image (N, 3, 64, 64) in [-1, 1]."""

    def __init__(self, nz: int = LATENT_DIM, width: int = 64, channels: int = IMAGE_CHANNELS) -> None:
        super().__init__()
        widths = [width * 8, width * 4, width * 2, width]
        layers: list[nn.Module] = [
            nn.ConvTranspose2d(nz, widths[0], kernel_size=4, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        ]
        for c_in, c_out in zip(widths, widths[1:]):  # 4x4 -> 8x8 -> 16x16 -> 32x32
            layers += [
                nn.ConvTranspose2d(c_in, c_out, kernel_size=4, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(c_out),
                nn.ReLU(inplace=True),
            ]
        layers += [  # 32x32 -> 64x64
            nn.ConvTranspose2d(widths[-1], channels, kernel_size=4, stride=2, padding=1, bias=False),
            nn.Tanh(),
        ]
        self.main = nn.Sequential(*layers)
        _dcgan_init(self)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.main(latent)


class Discriminator(nn.Module):
    """Image (N, 3, 64, 64) -> probability (N,) that the image is real."""

    def __init__(self, width: int = 64, channels: int = IMAGE_CHANNELS) -> None:
        super().__init__()
        widths = [width, width * 2, width * 4, width * 8]
        layers: list[nn.Module] = [  # 64x64 -> 32x32, no BatchNorm on the input layer
            nn.Conv2d(channels, widths[0], kernel_size=4, stride=2, padding=1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
        ]
        for c_in, c_out in zip(widths, widths[1:]):  # 32x32 -> 16x16 -> 8x8 -> 4x4
            layers += [
                nn.Conv2d(c_in, c_out, kernel_size=4, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(c_out),
                nn.LeakyReLU(0.2, inplace=True),
            ]
        layers += [  # 4x4 -> 1x1
            nn.Conv2d(widths[-1], 1, kernel_size=4, stride=1, padding=0, bias=False),
            nn.Sigmoid(),
        ]
        self.main = nn.Sequential(*layers)
        _dcgan_init(self)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.main(image).flatten()
