"""Sample builders shared by the elementwise, shape, reduction and indexing tables.

Inputs are drawn from the runner's generator (seeded from the row's name), small enough that
the whole table runs in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .schema import Lambda, OpCase

Inputs = Callable[[torch.Generator], tuple[Any, ...]]


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=gen).to(dtype)


def positive(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Floats in [0.5, 2.5): safe for sqrt, pow and division."""
    return torch.rand(shape, generator=gen) * 2 + 0.5


def ints(gen: torch.Generator, low: int, high: int, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=gen).to(dtype)


def nonzero_ints(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Divisors in [-4, -1] and [1, 4]."""
    magnitude = torch.randint(1, 5, shape, generator=gen)
    sign = torch.randint(0, 2, shape, generator=gen) * 2 - 1
    return (magnitude * sign).to(dtype)


def with_nans(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Normal floats with about a quarter NaN: NaN must propagate as torch propagates it."""
    values = randn(gen, *shape)
    return values.masked_fill(torch.rand(shape, generator=gen) < 0.25, float("nan"))


def mask(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=gen) > 0.5


def op(name: str, fn: Callable[..., Any], inputs: Inputs, targets: Sequence[str], **fields: Any) -> OpCase:
    """A row whose module computes `fn(*inputs)` with no parameters."""
    return OpCase(
        name=name,
        module=lambda: Lambda(lambda module, *args: fn(*args)),
        inputs=inputs,
        targets=tuple(targets),
        **fields,
    )


def module_op(name: str, build: Callable[[], torch.nn.Module], inputs: Inputs, targets: Sequence[str], **fields: Any) -> OpCase:
    """A row for a module built fresh for every export (the runner seeds torch's RNG first)."""
    return OpCase(name=name, module=build, inputs=inputs, targets=tuple(targets), **fields)
