"""A denoising UNet laid out as diffusers' UNet2DConditionModel (Stable Diffusion's), written here.

The scale benchmarks verify a diffusion UNet without depending on diffusers: the same blocks in
the same order, with seeded random weights.

* a sinusoidal timestep embedding through Linear-SiLU-Linear, added to every ResNet block;
* ResNet blocks: GroupNorm(32) -> SiLU -> 3x3 conv, plus the projected time embedding, then
  GroupNorm -> SiLU -> 3x3 conv, and a 1x1 shortcut where the width changes;
* spatial transformers: GroupNorm -> Linear in, then per block LayerNorm -> self-attention,
  LayerNorm -> cross-attention to the text context, LayerNorm -> GEGLU feed-forward (each
  residual), Linear out, residual;
* down blocks (ResNet, transformer where `attention` says, stride-2 conv), a middle block
  (ResNet, transformer, ResNet), up blocks that concatenate the skip of their level (nearest x2
  upsampling and a conv), then GroupNorm -> SiLU -> 3x3 conv out.

`UNetConfig()` is Stable Diffusion 1.x's layout at 40% of its widths: 64 x 64 latents of 4
channels, 77 text tokens of width 768, 8 heads; about 139M parameters (0.56 GB in float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class UNetConfig:
    """Widths and layout; the defaults are Stable Diffusion 1.x's at 40% of its widths."""

    widths: tuple[int, ...] = (128, 256, 512, 512)
    attention: tuple[bool, ...] = (True, True, True, False)
    """Which levels have spatial transformers (Stable Diffusion: all but the lowest)."""
    layers_per_block: int = 2
    latent_channels: int = 4
    context_width: int = 768
    heads: int = 8
    groups: int = 32
    time_channels: int | None = None
    """Width of the sinusoidal timestep features (default: the first level's width)."""

    def __post_init__(self) -> None:
        if len(self.widths) != len(self.attention):
            raise ValueError(f"widths {self.widths} and attention {self.attention} name different numbers of levels")
        for width in self.widths:
            if width % self.groups or width % self.heads:
                raise ValueError(f"width {width} is not a multiple of groups={self.groups} and heads={self.heads}")


def timestep_features(timesteps: torch.Tensor, channels: int, max_period: float = 10000.0,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Sinusoidal features of the timesteps in `dtype` (cosine half first, as Stable Diffusion's)."""
    half = channels // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=dtype, device=timesteps.device) / half
    angles = timesteps.to(dtype)[:, None] * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class ResnetBlock(nn.Module):
    """Two GroupNorm-SiLU-conv layers with the time embedding added between them."""

    def __init__(self, channels_in: int, channels_out: int, time_width: int, groups: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels_in, eps=1e-5)
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, padding=1)
        self.time_emb_proj = nn.Linear(time_width, channels_out)
        self.norm2 = nn.GroupNorm(groups, channels_out, eps=1e-5)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(channels_in, channels_out, 1) if channels_in != channels_out else None

    def forward(self, x: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        hidden = self.conv1(F.silu(self.norm1(x)))
        hidden = hidden + self.time_emb_proj(F.silu(time))[:, :, None, None]
        hidden = self.conv2(F.silu(self.norm2(hidden)))
        shortcut = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        return shortcut + hidden


class Attention(nn.Module):
    """Multi-head attention of `x` to `context` (to itself when there is none)."""

    def __init__(self, width: int, context_width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(width, width, bias=False)
        self.to_k = nn.Linear(context_width, width, bias=False)
        self.to_v = nn.Linear(context_width, width, bias=False)
        self.to_out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        context = x if context is None else context
        batch, tokens, width = x.shape
        split = lambda t: t.reshape(batch, -1, self.heads, width // self.heads).transpose(1, 2)  # noqa: E731
        attended = F.scaled_dot_product_attention(split(self.to_q(x)), split(self.to_k(context)),
                                                  split(self.to_v(context)))
        return self.to_out(attended.transpose(1, 2).reshape(batch, tokens, width))


class GEGLU(nn.Module):
    """The feed-forward's gated GELU: one projection to twice the inner width, halves multiplied."""

    def __init__(self, width: int, inner: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, 2 * inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.proj(x).chunk(2, dim=-1)
        return value * F.gelu(gate)


class TransformerBlock(nn.Module):
    """Self-attention, cross-attention to the text and a GEGLU feed-forward, each pre-normed and residual."""

    def __init__(self, width: int, context_width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn1 = Attention(width, width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.attn2 = Attention(width, context_width, heads)
        self.norm3 = nn.LayerNorm(width)
        self.ff = nn.Sequential(GEGLU(width, 4 * width), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        x = x + self.attn1(self.norm1(x))
        x = x + self.attn2(self.norm2(x), context)
        return x + self.ff(self.norm3(x))


class SpatialTransformer(nn.Module):
    """A feature map as tokens through one transformer block, and back, added to itself."""

    def __init__(self, width: int, context_width: int, heads: int, groups: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(groups, width, eps=1e-6)
        self.proj_in = nn.Linear(width, width)
        self.block = TransformerBlock(width, context_width, heads)
        self.proj_out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        batch, width, height, breadth = x.shape
        tokens = self.norm(x).permute(0, 2, 3, 1).reshape(batch, height * breadth, width)
        tokens = self.proj_out(self.block(self.proj_in(tokens), context))
        return x + tokens.reshape(batch, height, breadth, width).permute(0, 3, 1, 2)


class Level(nn.Module):
    """The ResNet blocks of one level, each followed by its transformer where the level has them."""

    def __init__(self, inputs: list[int], width: int, config: UNetConfig, time_width: int, attention: bool) -> None:
        super().__init__()
        self.resnets = nn.ModuleList(ResnetBlock(c, width, time_width, config.groups) for c in inputs)
        self.attentions = nn.ModuleList(
            SpatialTransformer(width, config.context_width, config.heads, config.groups) for _ in inputs
        ) if attention else None

    def layer(self, index: int, x: torch.Tensor, time: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        x = self.resnets[index](x, time)
        return self.attentions[index](x, context) if self.attentions is not None else x


class DiffusionUNet(nn.Module):
    """The noise prediction for `latents` at `timesteps`, conditioned on the text `context`."""

    def __init__(self, config: UNetConfig = UNetConfig()) -> None:
        super().__init__()
        self.config = config
        widths, layers = config.widths, config.layers_per_block
        self.time_channels = config.time_channels or widths[0]
        time_width = 4 * widths[0]
        self.time_embedding = nn.Sequential(nn.Linear(self.time_channels, time_width), nn.SiLU(),
                                            nn.Linear(time_width, time_width))
        self.conv_in = nn.Conv2d(config.latent_channels, widths[0], 3, padding=1)
        self.down = nn.ModuleList()
        self.downsamplers = nn.ModuleList()
        skips = [widths[0]]
        for level, width in enumerate(widths):
            before = widths[max(level - 1, 0)]
            self.down.append(Level([before] + [width] * (layers - 1), width, config, time_width, config.attention[level]))
            skips += [width] * layers
            if level < len(widths) - 1:
                self.downsamplers.append(nn.Conv2d(width, width, 3, stride=2, padding=1))
                skips.append(width)
        self.mid_resnet1 = ResnetBlock(widths[-1], widths[-1], time_width, config.groups)
        self.mid_attention = SpatialTransformer(widths[-1], config.context_width, config.heads, config.groups)
        self.mid_resnet2 = ResnetBlock(widths[-1], widths[-1], time_width, config.groups)
        self.up = nn.ModuleList()
        self.upsamplers = nn.ModuleList()
        previous = widths[-1]
        for level in reversed(range(len(widths))):
            width = widths[level]
            inputs = []
            for _ in range(layers + 1):
                inputs.append(previous + skips.pop())
                previous = width
            self.up.append(Level(inputs, width, config, time_width, config.attention[level]))
            if level > 0:
                self.upsamplers.append(nn.Conv2d(width, width, 3, padding=1))
        self.norm_out = nn.GroupNorm(config.groups, widths[0], eps=1e-5)
        self.conv_out = nn.Conv2d(widths[0], config.latent_channels, 3, padding=1)

    def forward(self, latents: torch.Tensor, timesteps: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        time = self.time_embedding(timestep_features(timesteps, self.time_channels,
                                                     dtype=self.time_embedding[0].weight.dtype))
        x = self.conv_in(latents)
        skips = [x]
        for level, block in enumerate(self.down):
            for index in range(len(block.resnets)):
                x = block.layer(index, x, time, context)
                skips.append(x)
            if level < len(self.downsamplers):
                x = self.downsamplers[level](x)
                skips.append(x)
        x = self.mid_resnet2(self.mid_attention(self.mid_resnet1(x, time), context), time)
        for level, block in enumerate(self.up):
            for index in range(len(block.resnets)):
                x = block.layer(index, torch.cat([x, skips.pop()], dim=1), time, context)
            if level < len(self.upsamplers):
                x = self.upsamplers[level](F.interpolate(x, scale_factor=2.0, mode="nearest"))
        return self.conv_out(F.silu(self.norm_out(x)))


def unet_inputs(config: UNetConfig, *, batch: int = 1, latent_size: int = 64, text_tokens: int = 77,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded latents, timesteps (one per image, in 0..999) and text context for `config`."""
    generator = torch.Generator().manual_seed(seed)
    latents = torch.randn(batch, config.latent_channels, latent_size, latent_size, generator=generator)
    timesteps = torch.randint(0, 1000, (batch,), generator=generator)
    context = torch.randn(batch, text_tokens, config.context_width, generator=generator)
    return latents, timesteps, context
