"""The scale models: the large models the memory and floor benchmarks verify per op.

Each is built with seeded random weights and no download, with the inputs it is verified on:

* `linear3g` (three Linear(16384, 16384), 3.2 GB) and `linear23300` (one Linear(23300, 23300),
  2.17 GB in a single initializer, past protobuf's limit on its own);
* `fasterrcnn_resnet50_fpn` and `maskrcnn_resnet50_fpn` at torchvision's default transform
  (a 600 x 800 image resized to 800 x 1066 inside);
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
        import torchvision

        module = torchvision.models.get_model(name, weights=None, weights_backbone=None).eval()
        return module, (torch.rand(batch, *DETECTOR_IMAGE),)
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
