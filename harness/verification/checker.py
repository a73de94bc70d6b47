"""The ONNX checker as a verification runs it: full check (shape inference included) on a proto,
a file, or a skeleton whose weights are held in memory; failures are recorded, not raised."""

from __future__ import annotations

import os
import tempfile

import onnx
from google.protobuf.message import DecodeError

from exporter.contract.skeleton import EXTERNAL_MIN_BYTES, PROTOBUF_LIMIT, is_in_memory, stub
from harness.records import CheckerResult
from harness.runtime.shared_weights import copy_model


def run_checker(model: onnx.ModelProto | bytes | str | os.PathLike) -> CheckerResult:
    """onnx.checker with full_check (shape inference included) on a proto or a model file (a
    path: external data and models past 2 GB are checked where they lie); failures are
    recorded, not raised.

    A skeleton whose initializers are held in memory (a roundtrip export) is checked as written
    to a scratch folder, every weight pointing at one empty file: everything but the weight
    bytes is checked, and SharedWeights checks each array's dtype and shape against its stub.
    """
    try:
        if isinstance(model, onnx.ModelProto) and any(is_in_memory(t) for t in model.graph.initializer):
            _check_skeleton(model)
        elif isinstance(model, onnx.ModelProto) and _past_protobuf_limit(model):
            _check_skeleton(_without_weight_bytes(model))  # protobuf cannot serialise it whole
        else:
            onnx.checker.check_model(model if not isinstance(model, os.PathLike) else os.fspath(model),
                                     full_check=True)
    except _CHECKER_ERRORS as error:  # the model's defects; an error of the harness's own code is raised
        return CheckerResult(False, f"{type(error).__name__}: {error}")
    return CheckerResult(True)


_CHECKER_ERRORS: tuple[type[BaseException], ...] = (
    onnx.checker.ValidationError, onnx.shape_inference.InferenceError, DecodeError, OSError,
)
"""What checking a model raises about the model: the checker's and shape inference's verdicts, a
file protobuf cannot parse, a file or external data that cannot be read."""


def _past_protobuf_limit(model: onnx.ModelProto) -> bool:
    """Whether `model` is too large for protobuf to serialise (2 GB), measured without doing it."""
    return sum(t.ByteSize() for t in model.graph.initializer) >= PROTOBUF_LIMIT - (1 << 20)


def _without_weight_bytes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose large inline initializers are in-memory stubs (name, dtype and
    shape; no bytes copied), so the checker sees everything but the weight bytes."""
    initializers = [
        stub(onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims))
        if t.data_location != onnx.TensorProto.EXTERNAL and t.ByteSize() >= EXTERNAL_MIN_BYTES else t
        for t in model.graph.initializer
    ]
    return copy_model(model, initializers)


def _check_skeleton(model: onnx.ModelProto) -> None:
    placeholder = "weights-held-in-memory"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # a skeleton: no weight bytes to copy
    for tensor in copy.graph.initializer:
        if is_in_memory(tensor):
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = placeholder
    with tempfile.TemporaryDirectory(prefix="roundtrip-check-") as folder:
        open(os.path.join(folder, placeholder), "wb").close()
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as handle:
            handle.write(copy.SerializeToString())
        onnx.checker.check_model(path, full_check=True)
