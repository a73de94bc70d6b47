"""A backend's own fusions on the rows: which runtime layer ran each op, and the layers that
ran several FX nodes' ONNX nodes as one kernel, to be judged as regions.

A runtime that fuses a Conv with the Relu after it (onnxruntime's NCHWc Conv, OpenVINO's
Convolution layer) never computes the Conv's value on its own: only the layer's output exists in
the run users deploy. Each row whose ONNX nodes went into such a layer records it
(`OpRecord.runtime_fusion`); the row of the FX node whose value the layer outputs also gets the
layer judged as one region: its ONNX nodes isolated together, fed torch's values at its inputs,
against the fp64 truth of its members replayed in sequence (harness.analysis.fx_rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx

from harness.analysis.fx_mapping import NodeGroup
from harness.analysis.rows import OpRecord, RegionMember
from harness.runtime.backends.precision import RuntimeFusion


@dataclass(frozen=True)
class FusedLayer:
    """One runtime layer mapped onto the FX nodes whose ONNX nodes it ran (graph order)."""

    fusion: RuntimeFusion
    fx_nodes: tuple[str, ...]

    @property
    def output(self) -> str:
        """The FX node whose value the layer outputs: the last one it covers."""
        return self.fx_nodes[-1]

    @property
    def is_region(self) -> bool:
        """Whether the layer ran more than one FX node's ONNX nodes."""
        return len(self.fx_nodes) > 1

    def describe(self) -> dict[str, Any]:
        return {"layer": self.fusion.layer, "layer_type": self.fusion.layer_type, "precision": self.fusion.precision,
                "onnx_nodes": list(self.fusion.onnx_nodes), "fx_nodes": list(self.fx_nodes), "output": self.output}


def node_name(node: onnx.NodeProto) -> str:
    """How fusions name an ONNX node: its name, else its first output."""
    return node.name or node.output[0]


def fused_layers(fusions: Sequence[RuntimeFusion], groups: Mapping[str, NodeGroup]) -> list[FusedLayer]:
    """The fusions that cover some mapped ONNX node, each with the FX nodes it covers in the
    order of `groups` (graph order). A node no FX row owns (a shape computation) is left out."""
    owner = {node_name(node): fx for fx, group in groups.items() for node in group.nodes}
    order = {fx: index for index, fx in enumerate(groups)}
    found = []
    for fusion in fusions:
        covered = {owner[name] for name in fusion.onnx_nodes if name in owner}
        if covered:
            found.append(FusedLayer(fusion, tuple(sorted(covered, key=order.__getitem__))))
    return found


def first_members(fusions: Sequence[RuntimeFusion], groups: Mapping[str, NodeGroup]) -> set[str]:
    """The first FX row of every fused layer that runs several: where its region's replay starts."""
    return {layer.fx_nodes[0] for layer in fused_layers(fusions, groups) if layer.is_region}


def node_positions(model: onnx.ModelProto) -> dict[str, int]:
    """{ONNX node name (node_name): its position in the model's graph}."""
    return {node_name(node): index for index, node in enumerate(model.graph.node)}


def region_group(layer: FusedLayer, groups: Mapping[str, NodeGroup], model: onnx.ModelProto,
                 positions: Mapping[str, int] | None = None) -> NodeGroup:
    """The NodeGroup a fused layer is isolated and replayed as: every ONNX node of the FX nodes
    it covers (in the model's order: `positions`, node_positions(model), read once for every
    layer of a model), the output FX node's outputs, and one region member per FX node (an
    exporter region inside it contributes its own members)."""
    positions = node_positions(model) if positions is None else positions
    members: list[RegionMember] = []
    wanted: set[str] = set()
    for fx in layer.fx_nodes:
        group = groups[fx]
        wanted.update(node_name(node) for node in group.nodes)
        members.extend(group.region or [RegionMember(group.fx_node, group.aten, group.scope, group.source)])
    output = groups[layer.output]
    nodes = [model.graph.node[index] for index in sorted(positions[name] for name in wanted if name in positions)]
    return NodeGroup(fx_node=output.fx_node, aten=output.aten, nodes=nodes, outputs=dict(output.outputs),
                     scope=output.scope, source=output.source, mapped_by=output.mapped_by, region=members)


def annotate(records: Mapping[str, OpRecord], layers: Sequence[FusedLayer]) -> None:
    """Write each layer onto the rows it covers, with a note on each: the output's row is judged
    with the region, the others' values never exist on their own in the production run."""
    for layer in layers:
        for fx in layer.fx_nodes:
            record = records.get(fx)
            if record is None:
                continue
            record.runtime_fusion = layer.describe()
            what = f"{layer.fusion.layer_type} layer {layer.fusion.layer!r}"
            if not layer.is_region:
                record.notes.append(f"the runtime ran it as {what}")
            elif fx == layer.output:
                record.notes.append(f"the runtime fused it with {', '.join(layer.fx_nodes[:-1])} into {what}: "
                                    "the layer is judged as one region (runtime_fusion), with the op's own row")
            else:
                record.notes.append(f"the runtime fused it into {what}, which outputs {layer.output}'s value only: "
                                    f"this op's value never exists on its own there; the layer is judged as a "
                                    f"region on {layer.output}'s row")
