"""Seeded example-argument factories with realistic value ranges.

Every factory takes a `torch.Generator` first and a batch size second, so a
case's `input_fn` is a `functools.partial` of one of these.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

# ImageNet channel statistics (RGB), the normalisation torchvision's models expect.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# Images are a blend of smooth structure (coarse noise, bilinearly upsampled)
# and pixel noise: closer to natural images' spatial correlation than i.i.d.
# pixels, which matters for how large conv activations get.
_COARSE_FACTOR = 8
_FINE_WEIGHT = 0.25


def uniform_images(generator: torch.Generator, batch: int, channels: int, size: int | tuple[int, int]) -> torch.Tensor:
    """Images in [0, 1], shape (batch, channels, size, size), or (batch, channels, height, width)
    for a `size` of (height, width)."""
    height, width = (size, size) if isinstance(size, int) else size
    coarse = torch.rand(batch, channels, max(2, height // _COARSE_FACTOR), max(2, width // _COARSE_FACTOR),
                        generator=generator)
    smooth = F.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    fine = torch.rand(batch, channels, height, width, generator=generator)
    return ((1.0 - _FINE_WEIGHT) * smooth + _FINE_WEIGHT * fine).clamp_(0.0, 1.0)


def imagenet_images(generator: torch.Generator, batch: int, size: int = 224) -> tuple[torch.Tensor]:
    """RGB images normalised with ImageNet mean/std: values in about [-2.1, 2.6]."""
    images = uniform_images(generator, batch, 3, size)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return ((images - mean) / std,)


def tanh_range_images(generator: torch.Generator, batch: int, size: int = 64) -> tuple[torch.Tensor]:
    """RGB images scaled to [-1, 1], the range a DCGAN generator produces."""
    return (uniform_images(generator, batch, 3, size) * 2.0 - 1.0,)


def luminance_images(generator: torch.Generator, batch: int, size: int = 224) -> tuple[torch.Tensor]:
    """Luminance (Y) channel in [0, 1], shape (batch, 1, size, size)."""
    return (uniform_images(generator, batch, 1, size),)


def latents(generator: torch.Generator, batch: int, dim: int = 100) -> tuple[torch.Tensor]:
    """Unit-normal GAN latents, shape (batch, dim, 1, 1)."""
    return (torch.randn(batch, dim, 1, 1, generator=generator),)


def token_batch(
    generator: torch.Generator,
    batch: int,
    *,
    ntoken: int,
    nlayers: int,
    nhid: int,
    seq_len: int,
    lstm: bool,
    nonnegative_hidden: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Tokens (seq_len, batch) int64 in [0, ntoken) and a carried-over hidden state.

    The hidden state is what a previous chunk would leave behind: h in
    [-0.5, 0.5] (in [0, 0.5] for ReLU RNNs, whose states are nonnegative), and
    for LSTMs a cell state c ~ N(0, 0.5^2).
    """
    tokens = torch.randint(0, ntoken, (seq_len, batch), generator=generator, dtype=torch.int64)
    h0 = torch.rand(nlayers, batch, nhid, generator=generator)
    h0 = h0 * 0.5 if nonnegative_hidden else h0 - 0.5
    if not lstm:
        return tokens, h0
    c0 = torch.randn(nlayers, batch, nhid, generator=generator) * 0.5
    return tokens, h0, c0


# Kinetics-400 channel statistics (RGB), the normalisation torchvision's video models expect.
KINETICS_MEAN = (0.43216, 0.394666, 0.37645)
KINETICS_STD = (0.22803, 0.22145, 0.216989)
# Consecutive frames differ by this much pixel noise around a shared scene.
_FRAME_NOISE = 0.05


def video_clips(generator: torch.Generator, batch: int, frames: int, size: int) -> tuple[torch.Tensor]:
    """Kinetics-normalised clips (batch, 3, frames, size, size): one smooth scene per clip whose
    frames differ by a little pixel noise, as consecutive video frames do."""
    scene = uniform_images(generator, batch, 3, size).unsqueeze(2)
    noise = torch.rand(batch, 3, frames, size, size, generator=generator) - 0.5
    clips = (scene + _FRAME_NOISE * noise).clamp_(0.0, 1.0)
    mean = torch.tensor(KINETICS_MEAN).view(1, 3, 1, 1, 1)
    std = torch.tensor(KINETICS_STD).view(1, 3, 1, 1, 1)
    return ((clips - mean) / std,)


def frame_pairs(generator: torch.Generator, batch: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two consecutive frames in [-1, 1] (RAFT's input range): the second is the first moved
    by one pixel to the right plus a little noise, so there is a flow to estimate."""
    first = uniform_images(generator, batch, 3, size)
    second = torch.roll(first, shifts=1, dims=3)
    second = (second + _FRAME_NOISE * (torch.rand(second.shape, generator=generator) - 0.5)).clamp_(0.0, 1.0)
    return first * 2.0 - 1.0, second * 2.0 - 1.0
