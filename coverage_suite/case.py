"""A coverage-suite case: a small module, its seeded inputs, and what it exercises.

Cases are declared as rows of per-family tables (coverage_suite/family_*.py); `Case.module()`
and `Case.inputs()` build them from a seed derived from the case's name, so every run of a case
sees the same weights and inputs. An input is described by a `Spec` (shape, kind); a case with
`dynamic` names the input axes exported as dynamic, and is verified again at a second size
(those axes one larger) with the same ONNX model.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# The names of a case's inputs, in the order of its module's forward arguments.
INPUT_NAMES = ("x", "y", "z", "w")


@dataclass(frozen=True)
class Spec:
    """One input tensor: its shape and kind.

    kinds: "float" (standard normal), "double" (float64 normal), "pos" (uniform in [0.5, 2.5)),
    "unit" (uniform in (-0.9, 0.9)), "int" (int64 in [low, high)), "int32", "bool", "prob"
    (uniform in [0, 1))."""

    shape: tuple[int, ...]
    kind: str = "float"
    low: int = 0
    high: int = 5

    def make(self, generator: torch.Generator, shape: Sequence[int] | None = None) -> torch.Tensor:
        """A tensor of this spec (of `shape` when given), drawn from `generator`."""
        size = tuple(self.shape if shape is None else shape)
        if self.kind == "float":
            return torch.randn(size, generator=generator)
        if self.kind == "double":
            return torch.randn(size, generator=generator, dtype=torch.float64)
        if self.kind == "pos":
            return torch.rand(size, generator=generator) * 2 + 0.5
        if self.kind == "unit":
            return (torch.rand(size, generator=generator) * 2 - 1) * 0.9
        if self.kind == "prob":
            return torch.rand(size, generator=generator)
        if self.kind in ("int", "int32"):
            dtype = torch.int64 if self.kind == "int" else torch.int32
            return torch.randint(self.low, self.high, size, generator=generator, dtype=dtype)
        if self.kind == "bool":
            return torch.rand(size, generator=generator) > 0.5
        raise ValueError(f"unknown input kind {self.kind!r}; use float, double, pos, unit, prob, int, int32 or bool")


def F(*shape: int) -> Spec:
    return Spec(shape)


def P(*shape: int) -> Spec:
    return Spec(shape, "pos")


def U(*shape: int) -> Spec:
    return Spec(shape, "unit")


def D(*shape: int) -> Spec:
    return Spec(shape, "double")


def I(*shape: int, low: int = 0, high: int = 5) -> Spec:  # noqa: E743 (a one-letter table helper)
    return Spec(shape, "int", low, high)


def B(*shape: int) -> Spec:
    return Spec(shape, "bool")


class Fn(torch.nn.Module):
    """A module whose forward applies `fn` to its inputs (one to four tensors, named x, y, z, w)."""

    def __init__(self, fn: Callable[..., Any], arity: int) -> None:
        super().__init__()
        self.fn = fn
        self.arity = arity

    def extra_repr(self) -> str:
        return f"arity={self.arity}"


class Fn1(Fn):
    def forward(self, x):
        return self.fn(x)


class Fn2(Fn):
    def forward(self, x, y):
        return self.fn(x, y)


class Fn3(Fn):
    def forward(self, x, y, z):
        return self.fn(x, y, z)


class Fn4(Fn):
    def forward(self, x, y, z, w):
        return self.fn(x, y, z, w)


_ARITY = {1: Fn1, 2: Fn2, 3: Fn3, 4: Fn4}


def seed_of(name: str) -> int:
    """The case's seed: stable across runs and processes (not Python's salted hash)."""
    return zlib.crc32(name.encode())


@dataclass(frozen=True)
class Case:
    """One coverage case. `build` returns a module, or a function of the inputs (wrapped in `Fn`).
    `dynamic` maps input index -> axes exported as dynamic. `random`: the op draws random
    values (the harness checks its outputs by distribution)."""

    name: str
    family: str
    description: str
    build: Callable[[], Any]
    specs: tuple[Spec, ...]
    dynamic: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    random: bool = False

    def module(self) -> torch.nn.Module:
        """The case's module, its parameters drawn from the case's seed, in eval mode."""
        torch.manual_seed(seed_of(self.name))
        built = self.build()
        module = built if isinstance(built, torch.nn.Module) else _ARITY[len(self.specs)](built, len(self.specs))
        return module.eval()

    def inputs(self, other_size: bool = False) -> tuple[torch.Tensor, ...]:
        """The case's inputs; `other_size`: its dynamic axes one larger (the second size verified)."""
        generator = torch.Generator().manual_seed(seed_of(self.name) + int(other_size))
        made = []
        for index, spec in enumerate(self.specs):
            shape = list(spec.shape)
            if other_size:
                for axis in self.dynamic.get(index, ()):
                    shape[axis] += 1
            made.append(spec.make(generator, shape))
        return tuple(made)

    @property
    def input_names(self) -> list[str]:
        return list(INPUT_NAMES[: len(self.specs)])

    @property
    def dynamic_axes(self) -> dict[str, dict[int, str]] | None:
        """`dynamic_axes` for the exporters (input name -> axis -> name), None when static."""
        if not self.dynamic:
            return None
        return {INPUT_NAMES[i]: {axis: f"{INPUT_NAMES[i]}_{axis}" for axis in axes} for i, axes in self.dynamic.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "description": self.description,
                "dynamic": bool(self.dynamic), "random": self.random}


class Table:
    """The cases of one family, added row by row (`add`) or from a parameter grid."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.cases: list[Case] = []

    def add(self, name: str, description: str, build: Callable[[], Any], *specs: Spec,
            dynamic: Mapping[int, tuple[int, ...]] | None = None, random: bool = False) -> None:
        """One case; `build` returns a module or a function of the inputs."""
        if not specs:
            raise ValueError(f"case {name!r} has no inputs; give at least one Spec")
        self.cases.append(Case(f"{self.family}.{name}", self.family, description, build, tuple(specs),
                               dict(dynamic or {}), random))

    def fn(self, name: str, description: str, fn: Callable[..., Any], *specs: Spec, **options: Any) -> None:
        """One case applying the function `fn` to its inputs."""
        self.add(name, description, lambda: fn, *specs, **options)
