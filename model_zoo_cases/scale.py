"""The scale models: the large models the memory and floor benchmarks verify per op.

Each is built with seeded random weights and no download, with the inputs it is verified on:

* `linear3g` (three Linear(16384, 16384), 3.2 GB) and `linear23300` (one Linear(23300, 23300),
  2.17 GB in a single initializer, past protobuf's limit on its own);
* `fasterrcnn_resnet50_fpn` and `maskrcnn_resnet50_fpn` at torchvision's default transform
  (a 600 x 800 image resized to 800 x 1066 inside) and proposal counts, BatchNorm calibrated
  and the heads of the detection tier (model_zoo_cases.detection: 11 classes, every scored box
  kept), so that they return their 100 detections as a trained detector does. Left at their
  default running statistics (mean 0, variance 1), the BatchNorms do not normalise: the
  backbone's activations reach 250 and the mask logits 220, the masks become steps, and
  float32 rows whose backend and torch are equally far from the fp64 truth differ from each
  other by more than the float32 tolerance row's absolute 1e-5 (Mask R-CNN at 800 px: 26 such
  rows and the masks);
* `llama`: a random-config LlamaForCausalLM of 0.40B parameters on 128 tokens (transformers);
* `unet`: a diffusion UNet laid out as Stable Diffusion's (model_zoo_cases.diffusion_unet) on
  64 x 64 latents and 77 text tokens.
"""

from __future__ import annotations

from typing import Any

import torch

SCALE_MODELS = ("linear3g", "linear23300", "fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", "llama", "unet")

DETECTOR_IMAGE = (3, 600, 800)
"""The detectors' input image: their default transform (min_size 800, max_size 1333) resizes it
to 800 x 1066, the size they verify at."""
CALIBRATION_IMAGES = 2
"""Images of one train-mode forward that set the detectors' BatchNorm statistics (each layer
then sees 2 x its feature map's pixels per channel: hundreds of thousands of samples)."""
LLAMA = {"vocab_size": 32000, "hidden_size": 1024, "num_hidden_layers": 20, "num_attention_heads": 16,
         "num_key_value_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 256}
"""A random-config Llama of 0.40B parameters (1.6 GB in float32), run on `LLAMA_TOKENS` tokens."""
LLAMA_TOKENS = 128
UNET_LATENT_SIZE = 64
UNET_TEXT_TOKENS = 77


def build(name: str, batch: int = 1, seed: int = 0) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """The scale model `name` in eval mode, its weights drawn from `seed`, and its inputs for
    `batch` images (or sequences)."""
    torch.manual_seed(seed)
    if name == "linear3g":
        width = 16384
        module = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=True) for _ in range(3)]).eval()
        return module, (torch.randn(2, width),)
    if name == "linear23300":
        width = 23300
        return torch.nn.Linear(width, width, bias=True).eval(), (torch.randn(2, width),)
    if name in ("fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn"):
        return _detector(name, batch, seed)
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(**LLAMA, bos_token_id=0, eos_token_id=0, attn_implementation="sdpa", use_cache=False)
        return LlamaForCausalLM(config).eval(), (torch.randint(0, LLAMA["vocab_size"], (batch, LLAMA_TOKENS)),)
    if name == "unet":
        from model_zoo_cases.diffusion_unet import DiffusionUNet, UNetConfig, unet_inputs

        module = DiffusionUNet(UNetConfig()).eval()
        return module, unet_inputs(module.config, batch=batch, latent_size=UNET_LATENT_SIZE,
                                   text_tokens=UNET_TEXT_TOKENS, seed=seed)
    raise ValueError(f"no scale model {name!r}; choose one of {SCALE_MODELS}")


def _detector(name: str, batch: int, seed: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """A torchvision detector at its default transform, its BatchNorm calibrated on
    `CALIBRATION_IMAGES` seeded images of the verified size, and its images."""
    import torchvision

    from model_zoo_cases.calibration import calibrate_batchnorm
    from model_zoo_cases.detection import NUM_CLASSES, SCORE_THRESHOLD

    module = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=NUM_CLASSES,
                                          box_score_thresh=SCORE_THRESHOLD).eval()
    generator = torch.Generator().manual_seed(seed + 1)
    calibrate_batchnorm(module, lambda step: (list(torch.rand(CALIBRATION_IMAGES, *DETECTOR_IMAGE,
                                                                generator=generator)),), steps=1)
    return module, (torch.rand(batch, *DETECTOR_IMAGE, generator=generator),)
