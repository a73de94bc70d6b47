"""FX values a pass merged into another value, so that their rows survive optimisation.

Removing a no-op (an Identity, a Cast to its own type, ...) or computing a shared
sub-expression once leaves one value where the graph had two: the readers of the value that
went now read the one that stayed, which carries the same data. onnxscript's constant folder
may even keep the Identity's output name and drop its input's (`_fft_r2c` followed by
`view_as_real`, a graph output). Either way one FX node's value loses its name.

`readers` notes, before a pass, which nodes read each watched value (and the graph outputs);
`merged_values` finds, after it, each watched value that is gone while a reader is still in the
graph, and names the value that reader reads now. A pass that removes a chain of no-ops (whose
readers go too) says what it merged with `record`. `resolved` follows chains over several
passes. The result is written to the model's `roundtrip.aliased_values` (value name -> the
value that carries it), which the harness reads to give both FX nodes their rows.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

import onnx_ir as ir

from exporter.contract.keys import MERGED_VALUES_META


@dataclass(frozen=True)
class Readers:
    """Who read each watched value before a pass: (node, input index) pairs, and the graph
    outputs' names by position."""

    uses: dict[str, list[tuple[ir.Node, int]]]
    outputs: tuple[str | None, ...]


_RECORDED = MERGED_VALUES_META  # ir.Graph.meta key: what a pass said it merged


def record(graph: ir.Graph, name: str | None, carrier: str | None) -> None:
    """Note that a pass merged value `name` into `carrier` (read back by `merged_values`)."""
    if name and carrier and name != carrier:
        graph.meta.setdefault(_RECORDED, {})[name] = carrier


def readers(graph: ir.Graph, watched: Container[str]) -> Readers:
    """The readers of each value of `graph` named in `watched`."""
    uses: dict[str, list[tuple[ir.Node, int]]] = {}
    for node in graph:
        for index, value in enumerate(node.inputs):
            if value is not None and value.name in watched:
                uses.setdefault(value.name, []).append((node, index))
    return Readers(uses, tuple(v.name for v in graph.outputs))


def present_values(graph: ir.Graph) -> set[str]:
    """Names of every value `graph` holds: inputs, initializers and node outputs."""
    names = {v.name for v in graph.inputs if v.name} | set(graph.initializers)
    names.update(v.name for node in graph for v in node.outputs if v.name)
    return names


def merged_values(before: Readers, graph: ir.Graph) -> dict[str, str]:
    """Value name -> the value that now carries it, for each value read before the pass that
    the pass removed while one of its readers (or its graph output slot) stayed."""
    present = present_values(graph)
    found: dict[str, str] = dict(graph.meta.pop(_RECORDED, None) or {})
    for position, name in enumerate(before.outputs):
        now = graph.outputs[position].name if position < len(graph.outputs) else None
        if name and now and name != now and name not in present:
            found[name] = now
    for name, uses in before.uses.items():
        if name in present or name in found:
            continue
        for node, index in uses:
            if node.graph is graph and index < len(node.inputs):
                value = node.inputs[index]
                if value is not None and value.name and value.name != name:
                    found[name] = value.name
                    break
    return found


def resolved(aliases: Mapping[str, str], present: Container[str]) -> dict[str, str]:
    """`aliases` with chains followed (a -> b, then b -> c: a -> c), keeping only values that
    are gone and whose carrier is still there."""
    result: dict[str, str] = {}
    for name, target in aliases.items():
        seen = {name}
        while target in aliases and target not in seen and target not in present:
            seen.add(target)
            target = aliases[target]
        if name not in present and target in present:
            result[name] = target
    return result
