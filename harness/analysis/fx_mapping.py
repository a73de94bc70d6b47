"""Join an ONNX model to the FX graph it came from: node groups and value names per FX node.

Two exporters are understood:

* roundtrip: every node carries `roundtrip.fx_node` (and aten/scope/source); the value of FX
  node `n` is named `n`, its second output `n__1`.
* torch.onnx (dynamo): every node carries `pkg.torch.onnx.fx_node`, the FX node printed as
  `%name : ... = call_function[...]`; values are named after FX nodes too, but a multi-output
  op's outputs are named after its `getitem` users. Export with `optimize=False` to keep every
  FX value (the optimizer fuses, e.g., Conv+BatchNormalization and the conv2d value vanishes).

A model with no such metadata is joined by value name alone: the group of FX node `n` is the
chain of producers that ends in `n`'s value, walked back until values with a torch counterpart
(graph inputs, initializers, other FX nodes' values).

An FX value the optimiser merged into another (a removed no-op: `_fft_r2c` and its
`view_as_real` alias end as one value) is read off the value that carries it
(`roundtrip.aliased_values`), so both FX nodes keep their rows.
"""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field
from typing import Any

import onnx
import torch
import torch.fx

from torch.export.graph_signature import InputKind

from exporter.contract.keys import ALIASED_VALUES_KEY, FOLDED_VALUES_KEY, FX_NODE_KEY, REGION_KEY, SCOPE_KEY, SOURCE_KEY
from exporter.contract.metadata import renamed_values
from harness.analysis.rows import RegionMember
from harness.onnxgraph.values import producer_chain

TORCH_ONNX_FX_NODE_KEY = "pkg.torch.onnx.fx_node"
_TORCH_ONNX_FX_NAME = re.compile(r"^%(\S+?) :")


@dataclass
class NodeGroup:
    """The ONNX nodes emitted for one FX node, and the ONNX values carrying its outputs."""

    fx_node: str
    aten: str
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)  # FX output index -> ONNX value name
    scope: str = ""
    source: str = ""
    mapped_by: str = ""  # "metadata" | "value names" | "folded" | "" (no ONNX nodes)
    folded_into: str = ""  # the initializer the export folded the value into (roundtrip.folded_values)
    region: list[Any] = field(default_factory=list)  # rows.RegionMember per FX node an optimised node stands for


def _metadata(node: onnx.NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props}


def fx_node_name(node: onnx.NodeProto) -> str | None:
    """The FX node an ONNX node was emitted for, from roundtrip's or torch.onnx's metadata."""
    for entry in node.metadata_props:
        if entry.key == FX_NODE_KEY:
            return entry.value
        if entry.key == TORCH_ONNX_FX_NODE_KEY:
            found = _TORCH_ONNX_FX_NAME.match(entry.value)
            if found:
                return found.group(1)
    return None


def compute_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    """FX nodes that compute something (getitem is an alias, not an op)."""
    return [
        n for n in program.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem
    ]


def _output_candidates(fx_node: torch.fx.Node) -> dict[int, list[str]]:
    """ONNX names that may carry each output of `fx_node`, in order of preference."""
    val = fx_node.meta.get("val")
    if not isinstance(val, (tuple, list)):
        return {0: [fx_node.name]}
    candidates = {i: [fx_node.name if i == 0 else f"{fx_node.name}__{i}"] for i in range(len(val))}
    for user in fx_node.users:
        if user.target is operator.getitem and isinstance(user.args[1], int) and user.args[1] in candidates:
            candidates[user.args[1]].append(user.name)
    return candidates


def map_model(
    model: onnx.ModelProto, program: torch.export.ExportedProgram, root_name: str = ""
) -> dict[str, NodeGroup]:
    """FX node name -> NodeGroup, joining on provenance metadata and on value names."""
    renamed = renamed_values(model)
    aliased = aliased_values(model)
    renamed = {**aliased, **{fx: aliased.get(name, name) for fx, name in renamed.items()}}
    produced = {out: node for node in model.graph.node for out in node.output if out}
    nodes = compute_nodes(program)
    by_name = {n.name: n for n in program.graph.nodes}
    by_fx: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        fx = fx_node_name(node)
        if fx in by_name and by_name[fx].target is operator.getitem:
            fx = by_name[fx].args[0].name
        if fx:
            by_fx.setdefault(fx, []).append(node)
    groups: dict[str, NodeGroup] = {}
    for fx_node in nodes:
        group = NodeGroup(fx_node.name, str(fx_node.target))
        for index, names in _output_candidates(fx_node).items():
            found = next((renamed.get(n, n) for n in names if renamed.get(n, n) in produced), None)
            if found is not None:
                group.outputs[index] = found
        groups[fx_node.name] = group
    from exporter.translate.provenance import scope_of, source_of  # the translator's own reading of FX nodes

    known = known_values(model, groups)
    initializers = {t.name for t in model.graph.initializer}
    folded = {fx: name for name, fx in folded_values(model).items() if name in initializers}
    for fx_node in nodes:
        group = groups[fx_node.name]
        if by_fx.get(fx_node.name):
            group.nodes, group.mapped_by = by_fx[fx_node.name], "metadata"
        elif group.outputs:
            group.nodes = producer_chain(model, group.outputs.values(), known - set(group.outputs.values()))
            group.mapped_by = "value names"
        elif fx_node.name in folded:
            group.folded_into, group.mapped_by = folded[fx_node.name], "folded"
        meta = _metadata(group.nodes[0]) if group.nodes else {}
        group.scope = meta.get(SCOPE_KEY) or scope_of(fx_node, root_name or model.graph.name)
        group.source = meta.get(SOURCE_KEY) or source_of(fx_node)
        group.region = region_of(group.nodes)
    absorbed = {m.fx_node for g in groups.values() for m in g.region[:-1]}
    return {fx: g for fx, g in groups.items() if not (fx in absorbed and not g.nodes and not g.outputs)}


def region_of(nodes: list[onnx.NodeProto]) -> list[RegionMember]:
    """The FX nodes an optimised group stands for (`roundtrip.region` of its nodes, in graph
    order, each once); empty when it stands for its own FX node only. A node mapped to FX node
    n is the region's last member, so n's group carries the whole region."""
    members: dict[str, RegionMember] = {}
    for node in nodes:
        text = _metadata(node).get(REGION_KEY)
        for entry in json.loads(text) if text else ():
            members.setdefault(entry["fx_node"], RegionMember(
                entry["fx_node"], entry.get("aten", ""), entry.get("scope", ""), entry.get("source", "")))
    return list(members.values()) if len(members) > 1 else []


def aliased_values(model: onnx.ModelProto) -> dict[str, str]:
    """Value name -> the value that carries it, for the values the optimiser merged into another
    (a removed no-op, a shared sub-expression): the FX node keeps its row, read off the carrier."""
    for entry in model.metadata_props:
        if entry.key == ALIASED_VALUES_KEY:
            return json.loads(entry.value)
    return {}


def folded_values(model: onnx.ModelProto) -> dict[str, str]:
    """Initializer name -> FX node, for the FX values the exporter folded into initializers."""
    for entry in model.metadata_props:
        if entry.key == FOLDED_VALUES_KEY:
            return json.loads(entry.value)
    return {}


def known_values(model: onnx.ModelProto, groups: dict[str, NodeGroup]) -> set[str]:
    """Values whose torch counterpart is known: graph inputs, initializers, FX node values."""
    known = {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    for group in groups.values():
        known.update(group.outputs.values())
    return known


def user_input_names(model: onnx.ModelProto, program: torch.export.ExportedProgram) -> dict[str, str]:
    """ONNX graph input name -> FX placeholder name for the user's tensor inputs (positional)."""
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in initializers]
    user = {s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    placeholders = [
        n.name for n in program.graph.nodes
        if n.op == "placeholder" and n.name in user and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    return dict(zip(graph_inputs, placeholders))


def value_sources(
    model: onnx.ModelProto, program: torch.export.ExportedProgram, groups: dict[str, NodeGroup]
) -> dict[str, tuple[str, int]]:
    """ONNX value name -> (FX node name, output index) for every value torch also computes."""
    sources = {onnx_name: (fx, 0) for onnx_name, fx in user_input_names(model, program).items()}
    for group in groups.values():
        for index, name in group.outputs.items():
            sources[name] = (group.fx_node, index)
    return sources


def output_at(value: Any, index: int) -> Any:
    """Output `index` of an FX node's value (a tensor, SymInt, or a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return value[index] if index < len(value) else None
    return value if index == 0 else None
