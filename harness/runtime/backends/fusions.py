"""A runtime's optimised graph mapped back onto the ONNX nodes it was made from.

A node of the optimised graph keeps the names of the values it computes; the ONNX nodes it
stands for are those that compute those values from the node's own inputs in the original
graph. A node that stands for one ONNX node of the same operator is no fusion; a node whose
outputs the original graph does not have (a layout conversion the runtime inserted) stands
for none.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

import onnx

from harness.runtime.backends.base import declared_precisions
from harness.runtime.backends.precision import RuntimeFusion


def covered_nodes(original: onnx.ModelProto, outputs: Iterable[str], inputs: Iterable[str]) -> list[str]:
    """Names of the original nodes that compute `outputs` from `inputs` (graph order)."""
    nodes = list(original.graph.node)
    producer = {out: index for index, node in enumerate(nodes) for out in node.output if out}
    stop = set(inputs)
    pending = [name for name in outputs if name in producer and name not in stop]
    seen: set[int] = set()
    while pending:
        index = producer[pending.pop()]
        if index in seen:
            continue
        seen.add(index)
        pending.extend(name for name in nodes[index].input if name and name not in stop and name in producer)
    return [nodes[i].name or nodes[i].output[0] for i in sorted(seen)]


def graph_fusions(original: onnx.ModelProto, optimised: onnx.ModelProto) -> list[RuntimeFusion]:
    """The groups of `optimised` nodes that stand for several nodes of `original`, or for one
    node of another operator, with the nodes they cover and their output precision. Nodes
    joined by values the original graph does not have (a fused convolution and the layout
    conversion after it) form one group, named by its members."""
    kinds = {node.name or node.output[0]: node.op_type for node in original.graph.node}
    known = ({o for node in original.graph.node for o in node.output} | {i.name for i in original.graph.input}
             | {t.name for t in original.graph.initializer})
    precisions = declared_precisions(optimised)
    original_precisions = declared_precisions(original)  # for contrib operators inference cannot type
    found = []
    for group in _joined_by_new_values(list(optimised.graph.node), known):
        outputs = [o for node in group for o in node.output if o in known]
        inputs = [i for node in group for i in node.input if i in known]
        covered = covered_nodes(original, outputs, inputs)
        if not covered or (len(group) == 1 and len(covered) == 1 and kinds.get(covered[0]) == group[0].op_type):
            continue
        names = [node.name or node.output[0] for node in group]
        kind = "+".join(f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in group)
        found.append(RuntimeFusion("+".join(names), kind, tuple(covered), precisions.get(names[-1]) or original_precisions.get(covered[-1], "")))
    return found


def _joined_by_new_values(nodes: list[onnx.NodeProto], known: set[str]) -> list[list[onnx.NodeProto]]:
    """`nodes` grouped (graph order kept) where one reads a value another makes that is not in
    `known`."""
    parent = list(range(len(nodes)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    producer = {out: index for index, node in enumerate(nodes) for out in node.output if out and out not in known}
    for index, node in enumerate(nodes):
        for name in node.input:
            if name in producer:
                parent[root(index)] = root(producer[name])
    groups: dict[int, list[onnx.NodeProto]] = {}
    for index, node in enumerate(nodes):
        groups.setdefault(root(index), []).append(node)
    return list(groups.values())


def onnxruntime_fusions(rep: Any, prepare: Callable[..., Any]) -> list[RuntimeFusion]:
    """onnxruntime's fusions for a prepared model: the model prepared again by `prepare` with
    the same settings, its optimised graph written to a scratch file and read back."""
    options = {k: v for k, v in rep.prepare_options.items()
               if k not in ("serialized", "profile", "shared_weights", "optimized_model_path")}
    model = rep.model
    shared = rep.prepare_options.get("shared_weights")
    if shared is not None:
        model = shared.restore(model)  # the optimised graph is written with its weights
    with tempfile.TemporaryDirectory(prefix="roundtrip-ort-opt-") as folder:
        path = os.path.join(folder, "optimised.onnx")
        prepare(model, rep.device.backend_device, optimized_model_path=path, **options)
        optimised = onnx.load(path, load_external_data=False)
    return graph_fusions(model, optimised)
