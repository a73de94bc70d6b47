"""Post-training quantization with torchao's PT2E flow, for the `quantized` tier.

A quantized case is a float case's module (seeded, batch norm calibrated), captured with
`torch.export`, prepared with torchao's XNNPACK quantizer (its symmetric int8 configuration:
activations int8 in [-128, 127] per tensor, weights int8 in [-127, 127] per tensor or per
output channel), calibrated on seeded batches drawn like the case's inputs, and converted with
`convert_pt2e`. The converted module holds `quantized_decomposed` quantize/dequantize ops around
float ops, as users deploy it. No download: the weights are the float case's seeded ones.

torchao is optional (`pip install roundtrip[quant]`); `available()` says whether it is here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Scheme:
    """One quantizer configuration (torchao's XNNPACK `get_symmetric_quantization_config`)."""

    name: str
    per_channel: bool = False
    dynamic: bool = False
    # the weights' integer range: int8's symmetric [-127, 127], or 4 bits held in int8 ([-8, 7]),
    # which exports as ONNX INT4 from opset 21
    weight_range: tuple[int, int] = (-127, 127)

    def describe(self) -> str:
        weights = "per output channel" if self.per_channel else "per tensor"
        activations = "dynamic per tensor (choose_qparams at run time)" if self.dynamic else "static per tensor"
        bits = "" if self.weight_range == (-127, 127) else f", weights in [{self.weight_range[0]}, {self.weight_range[1]}]"
        return f"XNNPACK symmetric int8{bits}: weights {weights}, activations {activations}"


SCHEMES = {scheme.name: scheme for scheme in (
    Scheme("xnnpack"), Scheme("xnnpack_per_channel", per_channel=True),
    Scheme("xnnpack_dynamic", per_channel=True, dynamic=True),
    Scheme("xnnpack_int4_weights", per_channel=True, weight_range=(-8, 7)),
)}


def available() -> str:
    """'' when torchao's PT2E quantization can run here, else why not."""
    try:
        import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401
        import torchao.testing.pt2e._xnnpack_quantizer  # noqa: F401
    except ImportError as error:
        return f"torchao's PT2E quantization is not installed ({error}); pip install roundtrip[quant]"
    return ""


def quantize(module: nn.Module, example_args: tuple[Any, ...], batches: Iterable[tuple[Any, ...]],
             scheme: str = "xnnpack") -> torch.fx.GraphModule:
    """`module` quantized by torchao's PT2E flow with `scheme` (see SCHEMES), calibrated on
    `batches`; returns the converted GraphModule (which refuses `.eval()`: it is already in
    inference form)."""
    reason = available()
    if reason:
        raise RuntimeError(reason)
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization scheme {scheme!r}; choose one of {sorted(SCHEMES)}")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    chosen = SCHEMES[scheme]
    config = get_symmetric_quantization_config(is_per_channel=chosen.per_channel, is_dynamic=chosen.dynamic,
                                               weight_qmin=chosen.weight_range[0], weight_qmax=chosen.weight_range[1])
    from torchao.quantization.pt2e import generate_numeric_debug_handle

    program = torch.export.export(module.eval(), tuple(example_args), strict=False)
    generate_numeric_debug_handle(program)  # joins each quantized op to its float twin (harness quant_cost)
    captured = program.module()
    prepared = prepare_pt2e(captured, XNNPACKQuantizer().set_global(config))
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    return convert_pt2e(prepared)


def counts(module: torch.fx.GraphModule) -> dict[str, int]:
    """How many nodes of each quantized_decomposed op the converted module holds."""
    found: dict[str, int] = {}
    for node in module.graph.nodes:
        target = str(node.target)
        if node.op == "call_function" and target.startswith("quantized_decomposed."):
            name = target.split(".")[1]
            found[name] = found.get(name, 0) + 1
    return found



# --- the models of the quantized tier that torchvision's zoo does not build -----------------------

VIT_IMAGE_SIZE = 32
ENCODER_WIDTH = 64
ENCODER_LENGTH = 16


def small_vit() -> nn.Module:
    """A two-layer ViT on 32x32 images (patch 8, width 64, 4 heads), ten classes. torchvision
    zero-initialises the head, which would make every logit 0: it is drawn N(0, 0.02) here."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=VIT_IMAGE_SIZE, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                              mlp_dim=128, num_classes=10)
    nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


def transformer_encoder() -> nn.Module:
    """nn.TransformerEncoder: two post-norm layers, width 64, 4 heads, feed-forward 128."""
    layer = nn.TransformerEncoderLayer(ENCODER_WIDTH, 4, 128, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def sequence_features(generator: torch.Generator, batch: int) -> tuple[torch.Tensor]:
    """(batch, 16, 64) features drawn N(0, 1), as an embedding layer's output."""
    return (torch.randn(batch, ENCODER_LENGTH, ENCODER_WIDTH, generator=generator),)
