"""One row of the operator test table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

ALL_OPSETS = (17, 18, 26)


@dataclass(frozen=True)
class OpCase:
    """A sample that exports one operator form and checks it against torch.

    `targets` are the ATen overloads (normalised, e.g. "aten.add.Tensor") that the exported
    model must contain in its `roundtrip.aten` provenance: the runner checks this, so a row
    cannot claim coverage it does not have (xfail and refused rows claim none). `seed_ops`
    names the seed-list operators covered; the meta-tests hold each name to the row's targets.
    A row with `dynamic_axes` is also run at other sizes of each dynamic axis (re-running the
    exported model): larger than traced by default, and at each of `sizes` (dim name -> size,
    every dim named; 0 and 1 allowed), for forms whose size arithmetic must hold at an empty or
    a single-element axis too. `reference`, when given, computes torch's expected outputs from the
    inputs instead of the module: for forms torch's CPU kernels refuse (e.g. a half_to_float
    softmax), whose result torch defines through an equivalent call. `law`, for a row whose
    outputs are random draws, gives their distribution from the inputs (a
    harness.metrics.distribution.Law per output): the runner then checks shape, dtype and
    distribution statistics instead of values.
    """

    name: str
    module: Callable[[], torch.nn.Module]
    inputs: Callable[[torch.Generator], tuple[Any, ...]]
    targets: tuple[str, ...]
    seed_ops: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    opsets: tuple[int, ...] = ALL_OPSETS
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None
    sizes: tuple[Mapping[str, int], ...] = ()  # further sizes of the dynamic dims, by dim name
    xfail: str | None = None  # mandatory reason when the form is known not to work
    fails_with: str | None = None  # with xfail: a regex the expected failure's message must match
    refused: str | None = None  # the exporter must raise ExportError whose message contains this
    tags: tuple[str, ...] = field(default_factory=tuple)
    reference: Callable[..., Any] | None = None  # torch's expected outputs from the inputs
    law: Callable[..., Any] | None = None  # the outputs' distributions from the inputs (random ops)


class Lambda(torch.nn.Module):
    """Wrap a function of tensors as a module, for one-op samples."""

    def __init__(self, fn: Callable[..., Any], **params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            if isinstance(value, torch.nn.Parameter):
                self.register_parameter(name, value)
            else:
                self.register_buffer(name, value)

    def forward(self, *args: Any) -> Any:
        return self.fn(self, *args)
