"""Values of an ONNX graph: what a set of nodes reads, who produces what, exposing values.

Pure graph surgery on onnx protos; nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx

from harness.runtime.exposure import expose_values

__all__ = ["expose_values", "external_inputs", "producer_chain", "topological"]


def external_inputs(nodes: Iterable[onnx.NodeProto]) -> list[str]:
    """Values the nodes read but do not produce (subgraph references to outer values included),
    in first-use order; empty (omitted optional) inputs are left out."""
    produced: set[str] = set()
    needed: list[str] = []
    for node in nodes:
        for name in [*node.input, *_outer_references(node)]:
            if name and name not in produced and name not in needed:
                needed.append(name)
        produced.update(o for o in node.output if o)
    return needed


def _outer_references(node: onnx.NodeProto) -> list[str]:
    """Names a node's subgraphs (If/Loop/Scan bodies) read from the enclosing scope."""
    found: list[str] = []
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
            for inner in graph.node:
                for name in [*inner.input, *_outer_references(inner)]:
                    if name and name not in defined and name not in found:
                        found.append(name)
                defined.update(inner.output)
    return found


def producer_chain(model: onnx.ModelProto, outputs: Iterable[str], stop: set[str]) -> list[onnx.NodeProto]:
    """The nodes that compute `outputs` from values in `stop`, in graph order."""
    produced = {out: index for index, node in enumerate(model.graph.node) for out in node.output if out}
    wanted: set[int] = set()
    pending = [name for name in outputs if name in produced]
    while pending:
        index = produced[pending.pop()]
        if index in wanted:
            continue
        wanted.add(index)
        for name in external_inputs([model.graph.node[index]]):
            if name and name not in stop and name in produced:
                pending.append(name)
    return [model.graph.node[i] for i in sorted(wanted)]


def topological(nodes: Sequence[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """`nodes` ordered so that producers come before consumers (stable otherwise)."""
    producer_of = {out: index for index, node in enumerate(nodes) for out in node.output if out}
    order: list[int] = []
    state = [0] * len(nodes)  # 0 new, 1 visiting, 2 done

    def visit(index: int) -> None:
        if state[index]:
            return
        state[index] = 1
        for name in external_inputs([nodes[index]]):
            if name in producer_of and state[producer_of[name]] == 0:
                visit(producer_of[name])
        state[index] = 2
        order.append(index)

    for index in range(len(nodes)):
        visit(index)
    return [nodes[i] for i in order]
