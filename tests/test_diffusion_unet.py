"""The scale benchmarks' diffusion UNet (model_zoo_cases.diffusion_unet): laid out as Stable
Diffusion's, verified per op at a small width, and its scale configuration's size."""

from __future__ import annotations

import pytest
import torch

import harness
from model_zoo_cases.diffusion_unet import DiffusionUNet, UNetConfig, unet_inputs
from model_zoo_cases.scale import SCALE_MODELS, build

SMALL = UNetConfig(widths=(16, 32), attention=(True, False), layers_per_block=1, context_width=24, heads=4, groups=8)


def test_the_scale_configuration_is_stable_diffusions_layout_at_a_few_hundred_mb():
    with torch.device("meta"):
        unet = DiffusionUNet(UNetConfig())
    weight_bytes = sum(p.numel() * p.element_size() for p in unet.parameters())
    assert 0.3e9 < weight_bytes < 1e9
    assert [level.attentions is not None for level in unet.down] == [True, True, True, False]
    assert [level.attentions is not None for level in unet.up] == [False, True, True, True]
    assert [len(level.resnets) for level in unet.up] == [3, 3, 3, 3]
    assert len(unet.downsamplers) == len(unet.upsamplers) == 3


@pytest.mark.parametrize("config, size", [
    (SMALL, 8),
    pytest.param(UNetConfig(widths=(16, 16, 32), attention=(False, True, True), layers_per_block=2,
                            context_width=16, heads=2, groups=4, time_channels=8), 12, marks=pytest.mark.nightly),
], ids=["one-attention-level", "two-levels-attended"])
def test_a_small_unet_verifies_per_op(config, size):
    torch.manual_seed(0)
    unet = DiffusionUNet(config).eval()
    args = unet_inputs(config, batch=2, latent_size=size, text_tokens=5)
    with torch.no_grad():
        assert unet(*args).shape == args[0].shape
    verification = harness.verify(unet, args, model_name="unet")
    assert verification.passed, verification.to_dict().get("notes")
    aten = {op.aten for op in verification.ops}
    for expected in ("aten.group_norm.default", "aten.conv2d.default", "aten.layer_norm.default",
                     "aten.scaled_dot_product_attention.default", "aten.upsample_nearest2d.vec", "aten.cat.default"):
        assert expected in aten, sorted(aten)
    assert all(op.passed is not False for op in verification.ops)


def test_the_unet_runs_in_float64_as_a_user_casts_it():
    """The fp64 forward of a floor benchmark: `.double()` on the module, the latents and text in
    float64, the timesteps left as integers."""
    torch.manual_seed(0)
    unet = DiffusionUNet(SMALL).eval()
    latents, timesteps, context = unet_inputs(SMALL, latent_size=8, text_tokens=5)
    with torch.no_grad():
        single = unet(latents, timesteps, context)
        double = unet.double()(latents.double(), timesteps, context.double())
    assert double.dtype == torch.float64
    torch.testing.assert_close(double.float(), single, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("widths, attention, groups, heads, match", [
    ((16, 32), (True,), 8, 4, "different numbers of levels"),
    ((12, 32), (True, False), 8, 4, "not a multiple"),
    ((16, 32), (True, False), 8, 3, "not a multiple"),
])
def test_an_impossible_configuration_is_refused(widths, attention, groups, heads, match):
    with pytest.raises(ValueError, match=match):
        UNetConfig(widths=widths, attention=attention, groups=groups, heads=heads)


def test_an_unknown_scale_model_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="llama"):
        build("gpt5")
    assert "unet" in SCALE_MODELS
