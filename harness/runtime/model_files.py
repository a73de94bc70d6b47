"""Loading an ONNX model from a file the user names, with a clear error for a bad one.

The file is parsed without its external data first. An empty, truncated or foreign file is a
`ModelFileError` naming the path. External data is then checked before any of it is read:
a location that is absolute, that leaves the model's folder (`../`), or that goes through a
symbolic link is refused with its own message, as is a missing data file. Only then is the
data loaded, from the model's folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import onnx
from onnx.external_data_helper import load_external_data_for_model, load_external_data_for_tensor, uses_external_data


class ModelFileError(ValueError):
    """A model file that cannot be verified: missing, not a valid ONNX model, or with external
    data the harness refuses to read. The message names the path and the problem."""


def load_model_file(path: str | os.PathLike, *, keep_initializers_external: bool = False) -> onnx.ModelProto:
    """The model at `path`, its external data loaded from beside it once every location is
    checked; ModelFileError for anything else.

    `keep_initializers_external=True` checks every location but leaves the graph's initializers
    in their data file (SharedWeights memory-maps them for onnxruntime), loading only the
    external data of other tensors (node attributes, subgraphs)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file; pass the path of an .onnx model")
    if not os.path.isfile(path):
        raise ModelFileError(f"{path} is not a file; pass the path of an .onnx model")
    if os.path.getsize(path) == 0:
        raise ModelFileError(f"{path} is not a valid ONNX model: the file is empty")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # protobuf's DecodeError, and whatever else a bad file causes
        raise ModelFileError(
            f"{path} is not a valid ONNX model: it does not parse as an ONNX ModelProto "
            f"({type(error).__name__}: {error}); the file may be truncated or not an ONNX file"
        ) from error
    problem = structural_problem(model)
    if problem:
        raise ModelFileError(f"{path} is not a valid ONNX model: {problem}")
    folder = os.path.dirname(os.path.abspath(path))
    external = [tensor for tensor in all_tensors(model) if uses_external_data(tensor)]
    for tensor in external:
        check_external_location(path, folder, tensor)
    if external:
        try:
            if keep_initializers_external:
                kept = {id(t) for t in model.graph.initializer}
                for tensor in external:
                    if id(tensor) not in kept:
                        load_external_data_for_tensor(tensor, folder)
                        tensor.data_location = onnx.TensorProto.DEFAULT
                        del tensor.external_data[:]
            else:
                load_external_data_for_model(model, folder)
        except Exception as error:  # a short data file, an offset past its end, ...
            raise ModelFileError(f"{path}: its external data could not be read: {type(error).__name__}: {error}") from error
    return model


def structural_problem(model: onnx.ModelProto) -> str:
    """Why a parsed ModelProto is not a model at all ('' when it looks like one): bytes that
    happen to parse (an empty message, random data) have no IR version, opsets or graph."""
    if not model.ir_version:
        return "it declares no IR version (the bytes parse, but not as a model an exporter wrote)"
    if not model.HasField("graph"):
        return "it has no graph"
    if not model.opset_import:
        return "it imports no opset"
    if not model.graph.output:
        return "its graph has no outputs"
    return ""


def check_external_location(path: str, folder: str, tensor: onnx.TensorProto) -> None:
    """ModelFileError unless the tensor's external data lies inside `folder`, reached without
    symbolic links, in a file that exists. Nothing is read."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    where = f"{path}: initializer {tensor.name!r} keeps its data in {location!r}"
    if not location:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} says its data is external but names no location")
    if os.path.isabs(location) or os.path.splitdrive(location)[0]:
        raise ModelFileError(f"{where}, an absolute path; external data must be named relative to the model's folder")
    target = os.path.normpath(os.path.join(folder, location))
    if os.path.commonpath([folder, target]) != folder:
        raise ModelFileError(f"{where}, which is outside the model's folder {folder}; refused")
    step = folder
    for part in os.path.relpath(target, folder).split(os.sep):
        step = os.path.join(step, part)
        if os.path.islink(step):
            raise ModelFileError(f"{where}, which goes through the symbolic link {step}; refused")
    if not os.path.isfile(target):
        raise ModelFileError(f"{where}, which does not exist (expected at {target})")


def all_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of the model: initializers, sparse initializers, and the tensors of
    node attributes, in subgraphs and functions too."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _attribute_tensors(node)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _attribute_tensors(node)


def _attribute_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        if attribute.HasField("g"):
            yield from _graph_tensors(attribute.g)
        for graph in attribute.graphs:
            yield from _graph_tensors(graph)
