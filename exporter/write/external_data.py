"""Weights on their way out: model files written straight from the tensors, external data.

An exported model is a *skeleton* plus its weights (the format, a public contract, is
`exporter.contract.skeleton`: initializers are stubs at the location `IN_MEMORY`, meaning "the caller
holds this array"). From there:

* `write_model` writes a model file in one pass from the skeleton and the arrays. Each weight's
  bytes go from the array to the file once, without an intermediate bytes object or a
  serialised copy of the whole proto. A single file holds the weights as the initializers'
  raw_data; with `external=True` they go to a data file beside the model (ONNX external data),
  which is what a model whose proto would pass protobuf's 2 GB limit needs.
* `with_weights` gives a self-contained ModelProto (protobuf copies every weight into it: the
  in-memory form costs one copy more than writing a file).

The single file is written as protobuf's wire format allows: the model without initializers,
then one more `graph` field per initializer. A parser merges repeated occurrences of a message
field, so readers (onnx, onnxruntime) see one graph with every initializer. This hand-written
part is kept because it is needed: onnx_ir's `ir.save` of the same model to one file builds the
whole ModelProto and serialises it, about three copies of the weights at its peak (vgg16: 1.6 GiB
over 0.52 GiB of weights, against 0.0002 GiB here; 2.6x the seconds at load 5-7), measured by
bench/bench_write.py (docs/PERFORMANCE.md). With external data the two take the same memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO

import numpy as np
import onnx

from exporter.contract.fileio import atomic_writer
from exporter.contract.skeleton import (
    ALIGNMENT, EXTERNAL_MIN_BYTES, PROTOBUF_LIMIT, is_in_memory, stub, tensor_bytes,
)
from exporter.errors import ExportError

_SMALL_ALIGNMENT = 64
_LARGE_TENSOR = 1 << 20

# protobuf field numbers (onnx.proto): ModelProto.graph, GraphProto.initializer, TensorProto.raw_data
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9


def weight_bytes(weights: Mapping[str, np.ndarray]) -> int:
    """Bytes of all the weights."""
    return sum(int(array.nbytes) for array in weights.values())


def exceeds_protobuf_limit(skeleton: onnx.ModelProto, weights: Mapping[str, np.ndarray]) -> bool:
    """Whether the model with its weights inline would reach protobuf's 2 GB limit."""
    overhead = 32 * len(weights)  # the field tags and lengths around each initializer's data
    return skeleton.ByteSize() + weight_bytes(weights) + overhead >= PROTOBUF_LIMIT


def with_weights(skeleton: onnx.ModelProto, weights: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A self-contained copy of `skeleton` whose in-memory initializers hold their arrays.

    protobuf keeps its own copy of every bytes field, so this costs a copy of the weights (and
    a transient bytes object per weight); writing a file with `write_model` does not.
    """
    model = onnx.ModelProto()
    model.CopyFrom(skeleton)
    for tensor, array in _with_arrays(model, weights):
        _put_inline(tensor, array)
    return model


def _put_inline(tensor: onnx.TensorProto, array: np.ndarray) -> None:
    """Give a stub its data as raw_data (protobuf copies it)."""
    tensor.ClearField("external_data")
    tensor.ClearField("data_location")
    tensor.raw_data = tensor_bytes(array).tobytes()


@dataclass
class Written:
    """What `write_model` wrote: the model as saved (external references, or in-memory stubs
    for the weights written inline) and the data file, if any."""

    model: onnx.ModelProto
    data_path: str | None = None


def data_file_name(model_path: str) -> str:
    """The external data file's name for a model file: `model.onnx` -> `model.onnx.data`."""
    return os.path.basename(model_path) + ".data"


def write_model(
    f: str | os.PathLike | IO[bytes],
    skeleton: onnx.ModelProto,
    weights: Mapping[str, np.ndarray],
    *,
    external: bool | None = None,
) -> Written:
    """Write the skeleton with its weights to a path (atomically: readers see the old file or
    the new one; not forced to disk, as onnx.save is not) or a binary file object.

    `external=None` puts the weights in a data file beside the model only when the model would
    otherwise pass protobuf's 2 GB limit; True always does (a path is needed: the data file is
    named after it), False never does (and fails clearly past the limit).
    """
    too_large = exceeds_protobuf_limit(skeleton, weights)
    if external is None:
        external = too_large
    is_path = not hasattr(f, "write")
    if external and not is_path:
        raise ExportError("external data needs a file path to put the data file beside; pass f as a path")
    if not external and too_large:
        raise ExportError(
            f"the model with its weights ({weight_bytes(weights) / 2**30:.2f} GiB) would pass protobuf's "
            "2 GB limit; pass external_data=True (or leave it None) to write the weights beside the model"
        )
    if not external:
        if is_path:
            with atomic_writer(f, sync=False) as handle:
                _write_inline(handle, skeleton, weights)
        else:
            _write_inline(f, skeleton, weights)
        return Written(skeleton)
    path = os.fspath(f)
    location = data_file_name(path)
    data_path = os.path.join(os.path.dirname(os.path.abspath(path)), location)
    model = onnx.ModelProto()
    model.CopyFrom(skeleton)
    with atomic_writer(data_path, sync=False) as handle:
        for tensor, array in _with_arrays(model, weights):
            if array.nbytes < EXTERNAL_MIN_BYTES:
                _put_inline(tensor, array)
                continue
            alignment = ALIGNMENT if array.nbytes >= _LARGE_TENSOR else _SMALL_ALIGNMENT
            offset = -handle.tell() % alignment
            handle.write(b"\0" * offset)
            stub(tensor, location, offset=handle.tell(), length=array.nbytes)
            handle.write(tensor_bytes(array))
    with atomic_writer(path, sync=False) as handle:
        handle.write(model.SerializeToString())
    return Written(model, data_path)


def _with_arrays(model: onnx.ModelProto, weights: Mapping[str, np.ndarray]
                 ) -> Iterator[tuple[onnx.TensorProto, np.ndarray]]:
    for tensor in model.graph.initializer:
        if is_in_memory(tensor):
            yield tensor, weights[tensor.name]


def _write_inline(handle: IO[bytes], skeleton: onnx.ModelProto, weights: Mapping[str, np.ndarray]) -> None:
    """The model without its initializers, then each initializer, in order, as a `graph` field
    of its own; an in-memory one's raw_data is written straight from its array."""
    if not any(is_in_memory(t) for t in skeleton.graph.initializer):
        handle.write(skeleton.SerializeToString())
        return
    body = onnx.ModelProto()
    body.CopyFrom(skeleton)  # no weight bytes: the skeleton holds none
    del body.graph.initializer[:]
    handle.write(body.SerializeToString())
    for tensor in skeleton.graph.initializer:
        if not is_in_memory(tensor):
            encoded = tensor.SerializeToString()
            handle.write(_length_delimited(_MODEL_GRAPH, _length_delimited(_GRAPH_INITIALIZER, encoded)))
            continue
        header = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        if tensor.doc_string:
            header.doc_string = tensor.doc_string
        data = tensor_bytes(weights[tensor.name])
        handle.write(_initializer_prefix(header.SerializeToString(), data.nbytes))
        handle.write(data)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _key(field_number) + _varint(len(payload)) + payload


def _initializer_prefix(header: bytes, nbytes: int) -> bytes:
    """The bytes before a tensor's raw data: graph field, initializer field, header, raw_data tag."""
    raw_field = _key(_TENSOR_RAW_DATA) + _varint(nbytes)
    tensor_length = len(header) + len(raw_field) + nbytes
    initializer_field = _key(_GRAPH_INITIALIZER) + _varint(tensor_length)
    graph_length = len(initializer_field) + tensor_length
    return _key(_MODEL_GRAPH) + _varint(graph_length) + initializer_field + header + raw_field


def _key(field_number: int) -> bytes:
    return _varint(field_number << 3 | 2)  # wire type 2: length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)

