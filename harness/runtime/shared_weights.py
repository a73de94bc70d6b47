"""Weights shared between onnxruntime sessions of variants of one model, never serialised.

The production model, the instrumented one and the isolation model carry stub initializers
(data-less, marked external at `IN_MEMORY`: `exporter.contract.skeleton`'s format, a public contract);
each session receives the weight arrays themselves, so the weights are neither copied into each
variant nor serialised for each session, nor (on CPU) copied by onnxruntime. A CUDA session
gets them through `add_external_initializers`, which copies them to the device as it loads. onnxruntime (1.31)
copies what `add_external_initializers` gives it on the CPU too, but uses what
`add_initializer` gives it in place. That needs the initializer declared in the model with data
onnxruntime can resolve, and its graph optimisers read that data (the NCHWc layout reorders
convolution weights from it), so `session_file` writes the arrays once to a data file in a
scratch folder (the page cache holds it, not the process) and loads each variant from a file
beside it whose stubs point into it: the kernels run on the arrays themselves, the optimisers
read the same bytes from the file. Only weights that no optimiser rewrites in place are taken
in place (`sessions.in_place_safe`: those read by Conv, MatMul, Gemm, Gather, the recurrent and
normalisation ops); the others (scales, biases an element-wise op reads) load from the file.

The arrays come from wherever the weights already are, without copying them:

* an export's own arrays (`exporter.ExportResult.weights`, views of the module's parameters):
  its skeleton already carries the stubs;
* a model file's external data, memory-mapped from the data file (pages are read as the
  session touches them and belong to the page cache, not to the process's heap);
* only the initializers stored inside a proto are copied out (onnx.numpy_helper).
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from exporter.contract.skeleton import ALIGNMENT, IN_MEMORY, PROTOBUF_LIMIT, is_in_memory, stub, tensor_bytes

logger = logging.getLogger(__name__)

DATA_FILE = "weights.data"
"""The data file of a SharedWeights' scratch folder."""

MIN_SHARED_BYTES = 1024
"""Inline initializers smaller than this stay in each variant (copying them costs nothing)."""


class MissingWeightsError(ValueError):
    """A model's initializers are held in memory by the export that made it, and their arrays
    were not given; the message names them and says what to pass."""


@dataclass
class SharedWeights:
    """A model's large initializers as numpy arrays, handed to onnxruntime sessions directly."""

    arrays: dict[str, np.ndarray]
    sources: dict[str, str] = field(default_factory=dict)  # name -> "memory" | "file" | "proto"
    _folder: Any = field(default=None, init=False, repr=False, compare=False)  # TemporaryDirectory
    _ortvalues: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _offsets: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _counter: Any = field(default_factory=itertools.count, init=False, repr=False, compare=False)
    # the scratch file and the OrtValues are made on first use; a further backend's sessions
    # load on a worker thread beside the first backend's (harness.analysis.overlap)
    _lock: Any = field(default_factory=threading.RLock, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, model: onnx.ModelProto, weights: Mapping[str, np.ndarray] | None = None, *,
           base_dir: str | os.PathLike | None = None, min_bytes: int = MIN_SHARED_BYTES) -> SharedWeights:
        """Share `model`'s weights: in-memory stubs take their arrays from `weights`, external
        data is memory-mapped from `base_dir` (the model file's folder), and inline initializers
        of at least `min_bytes` are copied out of the proto."""
        arrays: dict[str, np.ndarray] = {}
        sources: dict[str, str] = {}
        missing: list[str] = []
        for tensor in model.graph.initializer:
            if is_in_memory(tensor):
                if weights is None or tensor.name not in weights:
                    missing.append(tensor.name)
                    continue
                arrays[tensor.name] = _checked(tensor, weights[tensor.name])
                sources[tensor.name] = "memory"
            elif tensor.data_location == onnx.TensorProto.EXTERNAL:
                if base_dir is not None:
                    arrays[tensor.name] = external_array(tensor, base_dir)
                    sources[tensor.name] = "file"
            elif tensor.ByteSize() >= min_bytes:
                array = _proto_array(tensor)
                if array is not None:  # else it stays inline in the proto
                    arrays[tensor.name] = array
                    sources[tensor.name] = "proto"
        if missing:
            raise MissingWeightsError(
                f"{len(missing)} initializer(s) of the model ({', '.join(missing[:5])}"
                f"{', ...' if len(missing) > 5 else ''}) are held in memory by the export that made it, "
                "but their arrays were not given: pass the ExportResult's `weights` with its `skeleton`, "
                "or pass its self-contained `model`"
            )
        return cls(arrays, sources)

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays.values())

    def stub(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """`tensor` itself, or a data-less stand-in marked as held in memory when it is shared."""
        if tensor.name not in self.arrays or is_in_memory(tensor):
            return tensor
        return stub(onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims))

    def stubbed(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """`model` with its shared initializers as stubs (cheap: no weight bytes copied); the
        model itself when it already has them all so."""
        if all(t.name not in self.arrays or is_in_memory(t) for t in model.graph.initializer):
            return model
        return copy_model(model, [self.stub(t) for t in model.graph.initializer])

    def restore_tensor(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """`tensor` with its data: a stub's array copied into a TensorProto (for backends and
        files that need the data inline: onnx's ReferenceEvaluator, reproducers)."""
        if not is_in_memory(tensor) or tensor.name not in self.arrays:
            return tensor
        restored = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        restored.raw_data = tensor_bytes(self.arrays[tensor.name]).tobytes()
        return restored

    def restore(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A copy of `model` with the real initializers back (for backends that need them)."""
        if not any(is_in_memory(t) and t.name in self.arrays for t in model.graph.initializer):
            return model
        return copy_model(model, [self.restore_tensor(t) for t in model.graph.initializer])

    def reference_form(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], *,
                       limit: int | None = None) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        """`model` and `feeds` as onnx's ReferenceEvaluator takes them: the weights restored
        inline while the model with them stays under `limit` bytes (protobuf's 2 GB by default),
        else the shared weights declared as graph inputs and fed their arrays, which copies no
        weight (a model past the limit cannot be held in one proto at all)."""
        limit = PROTOBUF_LIMIT if limit is None else limit
        shared = [t for t in model.graph.initializer if is_in_memory(t) and t.name in self.arrays]
        if not shared:
            return model, dict(feeds)
        if model.ByteSize() + sum(int(self.arrays[t.name].nbytes) for t in shared) < limit:
            return self.restore(model), dict(feeds)
        names = {t.name for t in shared}
        copy = copy_model(model, [t for t in model.graph.initializer if t.name not in names])
        declared = {value.name for value in copy.graph.input}
        copy.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                for t in shared if t.name not in declared)
        return copy, {**feeds, **{name: self.arrays[name] for name in names}}

    def used_by(self, model: onnx.ModelProto) -> dict[str, np.ndarray]:
        """The arrays of `model`'s stubs, by name: what its session must be given."""
        return {t.name: self.arrays[t.name] for t in model.graph.initializer
                if is_in_memory(t) and t.name in self.arrays}

    def ortvalues(self, names: list[str]) -> dict[str, Any]:
        """onnxruntime OrtValues over the arrays (no copy), kept alive as long as this object."""
        from harness.runtime.ortvalues import to_ortvalue  # bfloat16 weights included

        with self._lock:
            for name in names:
                if name not in self._ortvalues:
                    self._ortvalues[name] = to_ortvalue(self.arrays[name])
            return {name: self._ortvalues[name] for name in names}

    def session_file(self, model: onnx.ModelProto) -> str:
        """`model` written to this object's scratch folder, its stubs pointing into the data
        file there (each array written to it once, on first use); the caller loads it and may
        delete it. The folder goes when this object does."""
        used = self.used_by(model)
        with self._lock:
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix="roundtrip-weights-")
            self._write_data([name for name in used if name not in self._offsets])
            path = os.path.join(self._folder.name, f"model-{next(self._counter)}.onnx")
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # stubs only: no weight bytes
        for tensor in copy.graph.initializer:
            if tensor.name in used and is_in_memory(tensor):
                stub(tensor, DATA_FILE, offset=self._offsets[tensor.name], length=used[tensor.name].nbytes)
        with open(path, "wb") as handle:
            handle.write(copy.SerializeToString())
        return path

    def _write_data(self, names: list[str]) -> None:
        if not names:
            return
        with open(os.path.join(self._folder.name, DATA_FILE), "ab") as handle:
            for name in names:
                data = tensor_bytes(self.arrays[name])
                handle.write(b"\0" * (-handle.tell() % ALIGNMENT))
                self._offsets[name] = handle.tell()
                handle.write(data)


def external_array(tensor: onnx.TensorProto, base_dir: str | os.PathLike) -> np.ndarray:
    """An initializer's external data as a read-only-in-effect memory map (copy-on-write, so
    nothing can write the file) of the data file, with the tensor's dtype and shape."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if not location or location == IN_MEMORY:
        raise ValueError(f"initializer {tensor.name!r} has no external data file")
    path = os.path.join(os.fspath(base_dir), location)
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    shape = tuple(int(d) for d in tensor.dims)
    count = int(np.prod(shape, dtype=np.int64))
    offset = int(info.get("offset", 0))
    length = int(info.get("length", count * dtype.itemsize))
    if length != count * dtype.itemsize:
        raise ValueError(f"initializer {tensor.name!r}: {length} bytes in {location} for shape {list(shape)} "
                         f"of {dtype} ({count * dtype.itemsize} bytes)")
    if count == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape)


def _checked(tensor: onnx.TensorProto, array: np.ndarray) -> np.ndarray:
    """`array` as the stub declares it (dtype and shape), or a ValueError naming the difference."""
    declared = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    shape = tuple(int(d) for d in tensor.dims)
    if array.dtype != declared or tuple(array.shape) != shape:
        raise ValueError(f"initializer {tensor.name!r} is declared {declared}{list(shape)} but its array is "
                         f"{array.dtype}{list(array.shape)}")
    return np.ascontiguousarray(array)


def copy_model(model: onnx.ModelProto, initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
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


def _copy_field(target, descriptor, value) -> None:
    if descriptor.is_repeated:
        getattr(target, descriptor.name).extend(value)
    elif descriptor.type == descriptor.TYPE_MESSAGE:
        getattr(target, descriptor.name).CopyFrom(value)
    else:
        setattr(target, descriptor.name, value)


def _proto_array(tensor: onnx.TensorProto) -> np.ndarray | None:
    """An inline initializer's array, or None for one onnx cannot give numpy (an undefined
    element type, one it does not convert: such a tensor is left inline, for the runtime to read)."""
    try:
        return onnx.numpy_helper.to_array(tensor)
    except (TypeError, ValueError, NotImplementedError) as error:  # what to_array raises for a dtype it cannot convert
        logger.debug("initializer %s stays inline: %s", tensor.name, error)
        return None
