"""Provenance through a rewrite: the region a replacement node stands for.

Every node the exporter emits names its FX node (`roundtrip.fx_node`, `.aten`, `.scope`,
`.source`). When a rewrite replaces matched nodes by new ones, `carry` gives each new node the
union of what the matched nodes stood for, in graph order, as `roundtrip.region` (a JSON list of
{fx_node, aten, scope, source}; docs/ARCHITECTURE.md, "Regions"), and the provenance keys of the
member whose value the replacement computes, which is put last. A region of one member is
written as plain provenance, without the region key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import onnx_ir as ir

from exporter.contract.keys import ATEN_KEY, FX_NODE_KEY, REGION_KEY, SCOPE_KEY, SOURCE_KEY

_FIELDS = (("fx_node", FX_NODE_KEY), ("aten", ATEN_KEY), ("scope", SCOPE_KEY), ("source", SOURCE_KEY))


def members_of(node: ir.Node) -> list[dict[str, str]]:
    """The FX nodes `node` stands for, in graph order (one, or its region's)."""
    region = node.metadata_props.get(REGION_KEY)
    if region:
        return json.loads(region)
    if not node.metadata_props.get(FX_NODE_KEY):
        return []
    return [{field: node.metadata_props.get(key, "") for field, key in _FIELDS}]


def merged(nodes: Iterable[ir.Node], computes: str | None) -> list[dict[str, str]]:
    """The members of `nodes` (given in graph order), each FX node once, with `computes` (the FX
    node whose value the replacement computes) moved last."""
    seen: dict[str, dict[str, str]] = {}
    for node in nodes:
        for member in members_of(node):
            seen.setdefault(member["fx_node"], member)
    members = list(seen.values())
    if computes in seen:
        members = [m for m in members if m["fx_node"] != computes] + [seen[computes]]
    return members


def stamp(node: ir.Node, members: Sequence[dict[str, str]]) -> None:
    """Write `members` onto `node`: the last member's provenance keys, and the region when
    there are several."""
    if not members:
        return
    last = members[-1]
    for field, key in _FIELDS:
        if last.get(field):
            node.metadata_props[key] = last[field]
    if len(members) > 1:
        node.metadata_props[REGION_KEY] = json.dumps(list(members))
    else:
        node.metadata_props.pop(REGION_KEY, None)


def carry(graph: ir.Graph, matched: Sequence[ir.Node], replaced: Sequence[ir.Value],
          new_nodes: Sequence[ir.Node]) -> list[dict[str, str]]:
    """Give `new_nodes` the provenance of the `matched` nodes they replace; `replaced` are the
    matched outputs the new nodes take over. Returns the region written."""
    position = {node: index for index, node in enumerate(graph)}
    ordered = sorted(matched, key=lambda n: position.get(n, len(position)))
    computes = None
    for value in replaced:
        producer = value.producer()
        if producer is not None:
            computes = producer.metadata_props.get(FX_NODE_KEY) or computes
    members = merged(ordered, computes)
    for node in new_nodes:
        stamp(node, members)
    return members
