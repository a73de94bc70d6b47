"""Make untrained networks behave like trained ones where it matters for export.

Two data-dependent steps, both deterministic for seeded data:

* `calibrate_batchnorm`: an untrained net's BatchNorm layers hold the default
  running stats (mean 0, var 1), so in eval mode they do not normalise and
  activations compound layer after layer (Inception v3 reaches ~1e12). We
  re-estimate the running stats from a few train-mode forward passes, as one
  would after training ("BN recalibration"). Each layer sees inputs normalised
  by *batch* statistics of the layers before it, while eval uses the running
  averages; with several batches the two agree closely enough that eval-mode
  activations stay O(1)-O(10).
* `rescale_weights`: for nets without BatchNorm whose default init makes
  activations vanish or explode, scale each Conv/Linear layer so its output
  has a target std on seeded data (a single-pass LSUV-style init, Mishkin &
  Matas 2016). Done in one forward pass: the hook rescales the layer's weight
  and bias and hands the rescaled output on, so later layers see what they
  will see at eval time.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

logger = logging.getLogger(__name__)

MakeBatch = Callable[[int], Sequence[torch.Tensor]]

_RESCALED_TYPES = (
    nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Linear
)


def batchnorm_layers(module: nn.Module) -> list[_BatchNorm]:
    """Every BatchNorm (1d/2d/3d, sync) that tracks running stats."""
    return [m for m in module.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]


def calibrate_batchnorm(module: nn.Module, make_batch: MakeBatch, steps: int) -> int:
    """Re-estimate BatchNorm running stats from `steps` forward passes.

    `make_batch(step)` returns the args of one forward call. Only BatchNorm
    layers are put in train mode (Dropout and friends stay in eval), momentum
    is set to None so the running stats are the cumulative average over all
    steps, and autograd is off. Momentum is restored and the module is left in
    eval mode. Returns the number of BatchNorm layers calibrated.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    layers = batchnorm_layers(module)
    if not layers:
        logger.debug("calibrate_batchnorm: %s has no BatchNorm layers", type(module).__name__)
        module.eval()
        return 0
    momenta = [layer.momentum for layer in layers]
    module.eval()
    try:
        for layer in layers:
            layer.reset_running_stats()
            layer.momentum = None
            layer.train()
        with torch.no_grad():
            for step in range(steps):
                module(*make_batch(step))
    finally:
        for layer, momentum in zip(layers, momenta):
            layer.momentum = momentum
        module.eval()
    logger.debug("calibrated %d BatchNorm layers over %d steps", len(layers), steps)
    return len(layers)


def rescale_weights(module: nn.Module, args: Sequence[torch.Tensor], target_std: float = 1.0) -> int:
    """Scale each Conv/Linear so its output std on `args` is `target_std`.

    One eval-mode forward pass; every layer is rescaled at its first call, in
    execution order, so each sees inputs already produced by rescaled layers.
    Returns the number of layers rescaled.
    """
    rescaled: set[nn.Module] = set()

    def hook(layer: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> torch.Tensor | None:
        if layer in rescaled:
            return None
        std = float(output.float().std())
        if not torch.isfinite(torch.tensor(std)) or std == 0.0:
            logger.warning("rescale_weights: %s output std is %r; left unchanged", type(layer).__name__, std)
            rescaled.add(layer)
            return None
        scale = target_std / std
        layer.weight.mul_(scale)
        if layer.bias is not None:
            layer.bias.mul_(scale)
        rescaled.add(layer)
        return output * scale

    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, _RESCALED_TYPES)]
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            module(*args)
    finally:
        for handle in handles:
            handle.remove()
        module.train(was_training)
    logger.debug("rescaled %d layers of %s", len(rescaled), type(module).__name__)
    return len(rescaled)
