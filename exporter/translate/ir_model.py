"""The translated graph as the `ir.Model` the later stages work on, and that model's proto.

`build_model` assembles what `Graph` recorded into one `onnx_ir.Model` (no proto is made): the
initializers wrap the module's arrays without a copy, and the values that carry a dtype and a
shape (graph inputs and outputs, node outputs other than Constants') get their ONNX type. The
optimisation passes then rewrite that model in place, and `to_skeleton` builds the proto once,
at the end: a skeleton whose initializers of `EXTERNAL_MIN_BYTES` or more are data-less stubs
marked as held in memory, plus the arrays by name (exporter.contract.skeleton's format).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from exporter.contract.skeleton import EXTERNAL_MIN_BYTES, IN_MEMORY
from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Dim, Graph, Value

# onnxruntime 1.31 refuses models whose IR version is newer than 13. Node-level
# metadata_props (our provenance) need IR >= 10.
MAX_IR_VERSION = 13
MIN_IR_VERSION = 10
PRODUCER = "roundtrip"


def ir_version_for(opset_version: int) -> int:
    """The IR version to write: what the opset needs, at least 10, at most what ORT reads."""
    needed = helper.find_min_ir_version_for([helper.make_opsetid("", opset_version)])
    return min(max(needed, MIN_IR_VERSION), MAX_IR_VERSION)


def build_model(graph: Graph, *, graph_name: str, producer_version: str,
                metadata: dict[str, str] | None = None) -> ir.Model:
    """The `ir.Model` of `graph`, with its provenance, opset imports and model metadata. Each
    node is named after its first output. The model holds `graph.ir_graph` itself, not a copy:
    the passes that rewrite the model rewrite the graph's record."""
    for value in (*graph.inputs, *graph.outputs):
        _declare_type(value)
    outputs = {id(v.ir) for v in graph.outputs}
    for node in graph.nodes:
        node.name = node.outputs[0].name  # unique: FX names and '::' temporaries never collide
    for value in _typed_intermediates(graph):
        if id(value.ir) not in outputs:
            _declare_type(value)
    ir_graph = graph.ir_graph
    ir_graph.name = graph_name
    ir_graph.opset_imports.update(sorted(graph.custom_domains.items()))
    for recorded, values in ((ir_graph.inputs, graph.inputs), (ir_graph.outputs, graph.outputs)):
        if list(recorded) != [v.ir for v in values]:
            recorded.clear()
            recorded.extend(v.ir for v in values)
    model = ir.Model(ir_graph, ir_version=ir_version_for(graph.opset_version), producer_name=PRODUCER,
                     producer_version=producer_version)
    model.metadata_props.update(metadata or {})
    return model


def _typed_intermediates(graph: Graph) -> list[Value]:
    """The node outputs whose dtype and shape the translation knows (torch's, for the FX-named
    values), Constants' left out."""
    known = {id(v.ir): v for v in graph.values() if v.dtype is not None and v.shape is not None}
    return [known[id(out)] for node in graph.nodes if node.op_type != "Constant"
            for out in node.outputs if id(out) in known]


def _declare_type(value: Value) -> None:
    """Give the ir value `value`'s element type and shape (a None size as the unknown dim '?')."""
    if value.dtype is None:
        return
    value.ir.type = ir.TensorType(ir.DataType(onnx_type(value.dtype)))
    if value.shape is not None:
        value.ir.shape = ir.Shape([_dim(size) for size in value.shape])


def _dim(size: Dim) -> int | ir.SymbolicDim:
    return size if isinstance(size, int) else ir.SymbolicDim("?" if size is None else str(size))


def to_skeleton(model: ir.Model) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The skeleton and the weights of an onnx_ir model: every initializer's array by name (no
    copy for those given as arrays); in the skeleton those of `EXTERNAL_MIN_BYTES` or more are
    in-memory stubs and smaller ones stay inline. The model is left as it was."""
    weights: dict[str, np.ndarray] = {}
    stubbed: dict[str, ir.TensorProtocol] = {}
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None:
            continue
        weights[name] = tensor.numpy()
        if tensor.nbytes >= EXTERNAL_MIN_BYTES:
            stubbed[name] = tensor
            value.const_value = ir.ExternalTensor(IN_MEMORY, offset=None, length=None, dtype=tensor.dtype,
                                                  shape=tensor.shape, name=name)
    try:
        skeleton = ir.serde.serialize_model(model)
    finally:  # the ir model stays usable (tests inspect it)
        for name, tensor in stubbed.items():
            model.graph.initializers[name].const_value = tensor
    return skeleton, weights
