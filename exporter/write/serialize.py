"""Turn a `Graph` into an `onnx.ModelProto` that onnxruntime 1.31 accepts."""

from __future__ import annotations

import onnx
from onnx import helper

from exporter.contract.skeleton import EXTERNAL_MIN_BYTES, stub, tensor_bytes
from exporter.translate.graph import Graph, Value, attribute_protos, elem_type

# onnxruntime 1.31 refuses models whose IR version is newer than 13. Node-level
# metadata_props (our provenance) need IR >= 10.
MAX_IR_VERSION = 13
MIN_IR_VERSION = 10
PRODUCER = "roundtrip"


def ir_version_for(opset_version: int) -> int:
    """The IR version to write: what the opset needs, at least 10, at most what ORT reads."""
    needed = helper.find_min_ir_version_for([helper.make_opsetid("", opset_version)])
    return min(max(needed, MIN_IR_VERSION), MAX_IR_VERSION)


def value_info(value: Value) -> onnx.ValueInfoProto:
    info = onnx.ValueInfoProto()
    _fill_value_info(info, value)
    return info


def _fill_value_info(info: onnx.ValueInfoProto, value: Value) -> None:
    """Name, element type and shape of `value` (type left empty when unknown), built in place."""
    info.name = value.name
    etype = elem_type(value)
    if etype is None:
        return
    tensor_type = info.type.tensor_type
    tensor_type.elem_type = etype
    if value.shape is None:
        return
    shape = tensor_type.shape
    shape.SetInParent()  # a rank-0 value has a shape with no dims, not no shape
    for size in value.shape:
        dim = shape.dim.add()
        if isinstance(size, int):
            dim.dim_value = size
        else:
            dim.dim_param = "?" if size is None else str(size)


def to_model(
    graph: Graph,
    *,
    graph_name: str,
    producer_version: str,
    metadata: dict[str, str] | None = None,
    weights_inline: bool = True,
) -> onnx.ModelProto:
    """Serialize `graph` with its provenance and opset imports.

    With `weights_inline=False` the result is a skeleton: each initializer of at least
    `EXTERNAL_MIN_BYTES` has its name, dtype and shape but no data, and is marked as held in
    memory (`external_data.IN_MEMORY`); the arrays stay in `graph.initializers` (see
    exporter.write.external_data). Small ones (shapes, indices) stay inline for shape inference. Every message is built in
    place: no node, value or tensor is copied once made.
    """
    model = onnx.ModelProto()
    model.ir_version = ir_version_for(graph.opset_version)
    model.producer_name = PRODUCER
    model.producer_version = producer_version
    for domain, version in [("", graph.opset_version), *sorted(graph.custom_domains.items())]:
        opset = model.opset_import.add()
        opset.domain, opset.version = domain, version
    onnx_graph = model.graph
    onnx_graph.name = graph_name
    for node in graph.nodes:
        proto = onnx_graph.node.add()
        proto.op_type = node.op_type
        proto.input.extend(v.name if v is not None else "" for v in node.inputs)
        proto.output.extend(v.name for v in node.outputs)
        proto.name = node.outputs[0].name  # unique: FX names and '::' temporaries never collide
        if node.domain:
            proto.domain = node.domain
        if node.attributes:
            proto.attribute.extend(attribute_protos(node.attributes))
        for key, text in node.provenance.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, text
    for name, array in graph.initializers.items():
        tensor = onnx_graph.initializer.add()
        tensor.name = name
        tensor.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        if weights_inline or array.nbytes < EXTERNAL_MIN_BYTES:
            tensor.raw_data = tensor_bytes(array).tobytes()
        else:
            stub(tensor)
    for value in graph.inputs:
        _fill_value_info(onnx_graph.input.add(), value)
    for value in graph.outputs:
        _fill_value_info(onnx_graph.output.add(), value)
    output_names = {v.name for v in graph.outputs}
    for node in graph.nodes:  # the FX-named intermediates carry torch's dtype and shape; record them
        if node.op_type == "Constant":
            continue
        for out in node.outputs:
            if out.dtype is not None and out.shape is not None and out.name not in output_names:
                _fill_value_info(onnx_graph.value_info.add(), out)
    for key, text in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, text
    return model
