"""The skeleton format: how an export hands over its weights without copying them. A public
contract between the exporter, which writes it, and whoever loads a skeleton (the harness's
runtime.shared_weights, your own code): it changes only with a note in docs/ARCHITECTURE.md.

An exported model is a *skeleton* (nodes, types, initializer names, shapes and dtypes) plus
its *weights*, the arrays its initializers hold, by initializer name (views of the module's
parameters). Each initializer of the skeleton is a *stub*: a TensorProto with its name, dtype
and dims, no data, `data_location = EXTERNAL` and one `external_data` entry, `location` =
`IN_MEMORY`: "the caller holds this array". An array's bytes are what ONNX's raw_data would
hold (`tensor_bytes`: little-endian, C order). A stub may be pointed at a real data file
instead (`stub(tensor, "weights.data", offset=..., length=...)`); offsets of large tensors are
multiples of `ALIGNMENT`, so that onnxruntime can memory-map them.

This module needs only numpy and onnx.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx

__all__ = ["ALIGNMENT", "EXTERNAL_MIN_BYTES", "IN_MEMORY", "PROTOBUF_LIMIT", "is_in_memory", "stub", "tensor_bytes"]

IN_MEMORY = "roundtrip-weights-held-in-memory"
"""external_data location of an initializer whose array the caller holds, not a file. It is a
plain file name, so a reader that insists on a file (onnx's checker, onnxruntime) can be given
a placeholder of that name beside the model, while the arrays reach it some other way."""

PROTOBUF_LIMIT = 2**31 - 1
"""Protobuf cannot serialise or parse a message of 2 GB or more."""

EXTERNAL_MIN_BYTES = 1024
"""Initializers smaller than this stay inside the model file when the weights go external
(onnx.save_model's default `size_threshold`)."""

ALIGNMENT = 65536
"""Offset alignment of large tensors in a data file: the allocation granularity onnxruntime
needs to memory-map them instead of reading them (64 KiB covers every platform)."""


FOUR_BIT_DTYPES = ("int4", "uint4")
"""ml_dtypes' 4-bit integer dtype names, whose arrays ONNX stores packed (INT4, UINT4)."""


def tensor_bytes(array: np.ndarray) -> memoryview:
    """The array's bytes in ONNX's raw_data layout (little-endian, C order), without a copy
    when the array is already contiguous and little-endian. 4-bit integers (ml_dtypes' int4 and
    uint4, one element per byte) are packed two per byte, the first element in the low nibble."""
    array = np.ascontiguousarray(array)
    if array.dtype.name in FOUR_BIT_DTYPES:
        nibbles = array.reshape(-1).view(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return memoryview(np.ascontiguousarray(nibbles[0::2] | (nibbles[1::2] << 4)))
    if sys.byteorder != "little" or array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1).view(np.uint8))


def is_in_memory(tensor: onnx.TensorProto) -> bool:
    """Whether `tensor` is a skeleton's stand-in for an array the caller holds."""
    return tensor.data_location == onnx.TensorProto.EXTERNAL and any(
        entry.key == "location" and entry.value == IN_MEMORY for entry in tensor.external_data
    )


def stub(tensor: onnx.TensorProto, location: str = IN_MEMORY, **entries: int) -> onnx.TensorProto:
    """Make `tensor` data-less and external at `location` (with `offset=`/`length=` entries)."""
    tensor.ClearField("raw_data")
    tensor.ClearField("external_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in {"location": location, **{k: str(v) for k, v in entries.items()}}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor
