"""Turn a `Graph` into an `onnx.ModelProto` that onnxruntime 1.31 accepts."""

from __future__ import annotations

import json

import onnx
from onnx import helper, numpy_helper

from exporter.graph import Graph, Value, attribute_protos, elem_type

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
    etype = elem_type(value)
    if etype is None:
        return helper.make_value_info(value.name, onnx.TypeProto())  # type unknown
    shape = None if value.shape is None else [d if d is not None else "?" for d in value.shape]
    return helper.make_tensor_value_info(value.name, etype, shape)


def to_model(
    graph: Graph,
    *,
    graph_name: str,
    producer_version: str,
    metadata: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """Serialize `graph` with its initializers, provenance and opset imports."""
    nodes = []
    for node in graph.nodes:
        proto = helper.make_node(
            node.op_type,
            [v.name if v is not None else "" for v in node.inputs],
            [v.name for v in node.outputs],
            name=node.outputs[0].name,  # unique: FX names and '::' temporaries never collide
            domain=node.domain or None,
        )
        proto.attribute.extend(attribute_protos(node.attributes))
        for key, text in node.provenance.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, text
        nodes.append(proto)
    initializers = [numpy_helper.from_array(array, name=name) for name, array in graph.initializers.items()]
    output_names = {v.name for v in graph.outputs}
    typed = [  # the FX-named intermediates carry torch's dtype and shape; record them
        value_info(out)
        for node in graph.nodes
        for out in node.outputs
        if out.dtype is not None and out.shape is not None and out.name not in output_names
        and node.op_type != "Constant"
    ]
    onnx_graph = helper.make_graph(
        nodes,
        graph_name,
        [value_info(v) for v in graph.inputs],
        [value_info(v) for v in graph.outputs],
        initializer=initializers,
        value_info=typed,
    )
    opsets = [helper.make_opsetid("", graph.opset_version)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in sorted(graph.custom_domains.items())]
    model = helper.make_model(
        onnx_graph,
        opset_imports=opsets,
        ir_version=ir_version_for(graph.opset_version),
        producer_name=PRODUCER,
        producer_version=producer_version,
    )
    for key, text in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, text
    return model


def renamed_values(model: onnx.ModelProto) -> dict[str, str]:
    """FX value name -> ONNX name for the inputs/outputs renamed by input_names/output_names."""
    for entry in model.metadata_props:
        if entry.key == "roundtrip.renamed_values":
            return json.loads(entry.value)
    return {}
