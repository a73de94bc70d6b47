"""The static-axis records: declared dynamic axes an export fixed to one size, as the model's
`roundtrip.static_axes` metadata records them (written by exporter.capturing.specialise's
capture, read by whoever runs the model at other sizes)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from exporter.contract.keys import STATIC_AXES_KEY, STATIC_SIZES_KEY
from exporter.contract.metadata import json_entry


@dataclass(frozen=True)
class SpecialisedAxis:
    """A declared dynamic axis the export fixed to `size`, why, and where (the user's lines)."""

    input: str
    axis: int
    dim_name: str
    size: int
    reason: str
    source: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = f" at {self.source[-1]}" if self.source else ""
        return (f"{self.input!r} axis {self.axis} ({self.dim_name!r}) is declared dynamic but exported static "
                f"with size {self.size}: {self.reason}{where}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def metadata_entry(axes: Sequence[SpecialisedAxis]) -> dict[str, str]:
    """The model metadata recording the fixed axes (empty when none)."""
    return {STATIC_AXES_KEY: json.dumps([a.to_dict() for a in axes])} if axes else {}


def static_axes_of(model: Any) -> list[dict[str, Any]]:
    """The fixed axes an ONNX model records (`roundtrip.static_axes`), as dicts; [] for none."""
    return json_entry(model, STATIC_AXES_KEY, [])


def static_axes_hit(model: Any, inputs: Sequence[Any]) -> list[str]:
    """The fixed axes that `inputs` (the ONNX model's inputs in order: arrays or tensors) give
    another size than the export fixed, described as "declared dynamic, exported static: ...".
    Running the model on them would fail on a size it was never promised to accept."""
    names = [value.name for value in model.graph.input]
    hits = []
    for entry in static_axes_of(model):
        if entry["input"] not in names or names.index(entry["input"]) >= len(inputs):
            continue
        shape = tuple(inputs[names.index(entry["input"])].shape)
        axis = entry["axis"] % len(shape) if shape else 0
        if shape and shape[axis] != entry["size"]:
            hits.append(f"declared dynamic, exported static: {SpecialisedAxis(**entry).describe()}; "
                        f"this input has size {shape[axis]} there")
    return hits


@dataclass(frozen=True)
class FixedSize:
    """A size computed from dynamic axes that the export fixed to its value at the traced
    shapes, and the user's lines: `int(h * 0.5)` in forward, where Python's int() must return a
    plain int, so torch.export turns the size into a constant (and guards it)."""

    expression: str  # in the inputs' terms: math.trunc(0.5*torch.sym_float(x.shape[2]))
    size: int
    source: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = f" at {self.source[-1]}" if self.source else ""
        return (f"the size {self.expression} is exported as the constant {self.size} (its value at the traced "
                f"shapes){where}: what depends on it keeps that size at every input size. torch.export fixes a "
                "size that int() takes from a dynamic size; write it with math.floor, math.ceil, // or "
                "torch.sym_int to keep it computed from the input's shape")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fixed_sizes_entry(sizes: Sequence[FixedSize]) -> dict[str, str]:
    """The model metadata recording the fixed sizes (empty when none)."""
    return {STATIC_SIZES_KEY: json.dumps([s.to_dict() for s in sizes])} if sizes else {}


def static_sizes_of(model: Any) -> list[dict[str, Any]]:
    """The fixed sizes an ONNX model records (`roundtrip.static_sizes`), as dicts; [] for none."""
    return json_entry(model, STATIC_SIZES_KEY, [])
