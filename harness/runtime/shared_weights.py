"""Weights shared between onnxruntime sessions of variants of one model.

The production model, the instrumented one and the isolation model carry stub initializers
marked external; each session receives the weight arrays themselves (onnxruntime's
`add_external_initializers`), so the weights are neither copied into each variant nor
serialised for each session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx


_STUB_LOCATION = "roundtrip-shared-weight"


@dataclass
class SharedWeights:
    """A model's large initializers as numpy arrays, handed to onnxruntime sessions directly."""

    arrays: dict[str, np.ndarray]
    protos: dict[str, onnx.TensorProto] = field(repr=False)

    @classmethod
    def of(cls, model: onnx.ModelProto, min_bytes: int = 1024) -> SharedWeights:
        """Share every initializer of at least `min_bytes` with inline data."""
        from onnx import numpy_helper

        arrays: dict[str, np.ndarray] = {}
        protos: dict[str, onnx.TensorProto] = {}
        for tensor in model.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL or not _large(tensor, min_bytes):
                continue
            try:
                arrays[tensor.name] = numpy_helper.to_array(tensor)
            except Exception:  # dtypes numpy cannot hold (e.g. float8) stay inline
                continue
            protos[tensor.name] = tensor
        return cls(arrays, protos)

    def stub(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """`tensor` itself, or a data-less stand-in marked external when it is shared."""
        if tensor.name not in self.arrays:
            return tensor
        stub = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        stub.data_location = onnx.TensorProto.EXTERNAL
        entry = stub.external_data.add()
        entry.key, entry.value = "location", _STUB_LOCATION
        return stub

    def stubbed(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A copy of `model` whose shared initializers are stubs (cheap: no weight bytes copied)."""
        return _copy_model(model, [self.stub(t) for t in model.graph.initializer])

    def restore(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A copy of `model` with the real initializers back (for backends that need them)."""
        if not any(t.name in self.protos and _is_stub(t) for t in model.graph.initializer):
            return model
        return _copy_model(model, [self.protos[t.name] if _is_stub(t) and t.name in self.protos else t
                                   for t in model.graph.initializer])

    def used_by(self, model: onnx.ModelProto) -> dict[str, np.ndarray]:
        return {t.name: self.arrays[t.name] for t in model.graph.initializer if _is_stub(t) and t.name in self.arrays}


def _large(tensor: onnx.TensorProto, min_bytes: int) -> bool:
    return tensor.ByteSize() >= min_bytes


def _is_stub(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL and any(
        e.key == "location" and e.value == _STUB_LOCATION for e in tensor.external_data
    )


def _copy_model(model: onnx.ModelProto, initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """`model` with its graph's initializers replaced, copying nothing else that is large."""
    graph = onnx.GraphProto()
    for descriptor, value in model.graph.ListFields():
        if descriptor.name != "initializer":
            _copy_field(graph, descriptor, value)
    graph.initializer.extend(initializers)
    copy = onnx.ModelProto()
    for descriptor, value in model.ListFields():
        if descriptor.name != "graph":
            _copy_field(copy, descriptor, value)
    copy.graph.CopyFrom(graph)
    return copy


def _copy_field(target: Any, descriptor: Any, value: Any) -> None:
    if descriptor.is_repeated:
        getattr(target, descriptor.name).extend(value)
    elif descriptor.type == descriptor.TYPE_MESSAGE:
        getattr(target, descriptor.name).CopyFrom(value)
    else:
        setattr(target, descriptor.name, value)
