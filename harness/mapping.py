"""Join an ONNX model to the FX graph it came from: node groups and value names per FX node."""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field

import onnx
import torch
import torch.fx

FX_NODE_KEY = "roundtrip.fx_node"


@dataclass
class NodeGroup:
    """The ONNX nodes emitted for one FX node, and the ONNX values carrying its outputs."""

    fx_node: str
    aten: str
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)  # FX output index -> ONNX value name
    scope: str = ""
    source: str = ""


def _metadata(node: onnx.NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props}


def renamed_values(model: onnx.ModelProto) -> dict[str, str]:
    for entry in model.metadata_props:
        if entry.key == "roundtrip.renamed_values":
            return json.loads(entry.value)
    return {}


def compute_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    """FX nodes that compute something (getitem is an alias, not an op)."""
    return [
        n for n in program.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem
    ]


def map_model(model: onnx.ModelProto, program: torch.export.ExportedProgram) -> dict[str, NodeGroup]:
    """FX node name -> NodeGroup, joining on provenance metadata and on value names."""
    renamed = renamed_values(model)
    produced = {out: node for node in model.graph.node for out in node.output if out}
    by_fx: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        fx = _metadata(node).get(FX_NODE_KEY)
        if fx:
            by_fx.setdefault(fx, []).append(node)
    groups: dict[str, NodeGroup] = {}
    for fx_node in compute_nodes(program):
        group = NodeGroup(fx_node.name, str(fx_node.target))
        val = fx_node.meta.get("val")
        count = len(val) if isinstance(val, (tuple, list)) else 1
        for index in range(count):
            name = fx_node.name if index == 0 else f"{fx_node.name}__{index}"
            name = renamed.get(name, name)
            if name in produced:
                group.outputs[index] = name
        group.nodes = by_fx.get(fx_node.name) or [produced[n] for n in group.outputs.values()]
        if group.nodes:
            meta = _metadata(group.nodes[0])
            group.scope = meta.get("roundtrip.scope", "")
            group.source = meta.get("roundtrip.source", "")
        groups[fx_node.name] = group
    return groups


def expose_values(model: onnx.ModelProto, names_and_types: dict[str, int]) -> onnx.ModelProto:
    """A copy of `model` whose graph outputs also include every named value (one run shows all)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    existing = {o.name for o in exposed.graph.output}
    for name, elem_type in names_and_types.items():
        if name not in existing:
            exposed.graph.output.append(onnx.helper.make_tensor_value_info(name, elem_type, None))
    return exposed
