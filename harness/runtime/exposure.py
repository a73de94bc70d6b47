"""Exposing intermediate values of an ONNX model as graph outputs (so one run shows them)."""

from __future__ import annotations

from collections.abc import Iterable

import onnx


def expose_values(model: onnx.ModelProto, names: Iterable[str]) -> onnx.ModelProto:
    """A copy of `model` whose graph outputs also include every named value (one run shows all).

    The extra outputs are untyped: the backend infers their types, so a value whose ONNX type
    differs from torch's is still exposed (and the difference reported) instead of failing the
    whole session.
    """
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    existing = {o.name for o in exposed.graph.output}
    for name in names:
        if name not in existing:
            exposed.graph.output.append(onnx.ValueInfoProto(name=name))
            existing.add(name)
    return exposed
