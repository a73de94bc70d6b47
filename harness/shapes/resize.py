"""The example inputs at another size: each tensor cut, or tiled and cut, along the axes that change.

Tiling keeps every value one the example held (token ids stay in the vocabulary, masks stay
masks, images keep their statistics), so a divergence at the new size is the model's, not the
data's. A caller with a better source of inputs (a zoo case draws new images) passes its own
function to the sweep instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def resized(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """`tensor` at `shape` (same rank): each changed dim cut to its first entries, or tiled and
    cut; contiguous. ValueError for a rank mismatch or a dim grown from size 0."""
    if len(shape) != tensor.dim():
        raise ValueError(f"cannot resize a tensor of shape {tuple(tensor.shape)} to {tuple(shape)}: ranks differ")
    result = tensor
    for dim, size in enumerate(shape):
        current = result.shape[dim]
        if size == current:
            continue
        if size > current:
            if current == 0:
                raise ValueError(f"cannot grow dim {dim} of an empty tensor (shape {tuple(tensor.shape)}) to {size}")
            repeats = [1] * result.dim()
            repeats[dim] = -(-size // current)
            result = result.repeat(*repeats)
        result = result.narrow(dim, 0, size)
    return result.contiguous()


def resized_leaves(leaves: Sequence[Any], shapes: Sequence[Sequence[int] | None]) -> list[Any]:
    """Every tensor leaf at its shape (None: as it is); other leaves unchanged."""
    return [resized(leaf, shape) if isinstance(leaf, torch.Tensor) and shape is not None else leaf
            for leaf, shape in zip(leaves, shapes)]
