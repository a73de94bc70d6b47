"""Two models made from the same source, side by side in one ONNX model, so that a backend whose
every load is a compile (OpenVINO's CPU plugin spends about 0.1 s on even a one-node model) loads
and runs them once: a verification's instrumented model and its isolation batch.

The second model's computed values, graph inputs and node names that the first also uses are
renamed; an initializer both hold is taken once (they come from the same source, and a name held
by both with different contents is refused). The two parts share no computed value, so a
backend's fusions stay within each part; they share initializers, as the subgraphs of one
isolation batch already do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from harness.onnxgraph.isolation import renamed

SUFFIX = "::joint"


@dataclass
class JointModel:
    """The joint model, its feeds, and where each part's outputs are in it."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    first_outputs: list[str]  # the first model's output names (kept as they are)
    second_outputs: dict[str, str]  # the second model's output name -> its name in `model`

    def split(self, values: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The joint run's outputs as each model's own outputs, by their names there."""
        first = {name: values[name] for name in self.first_outputs if name in values}
        second = {name: values[joint] for name, joint in self.second_outputs.items() if joint in values}
        return first, second


def side_by_side(first: onnx.ModelProto, first_feeds: Mapping[str, np.ndarray],
                 second: onnx.ModelProto, second_feeds: Mapping[str, np.ndarray]) -> JointModel:
    """One model computing both `first` and `second`, fed both feeds. ValueError when the two
    disagree on an initializer's contents or on their opsets (they must come from one source)."""
    if _opsets(first) != _opsets(second):
        raise ValueError(f"the two models import different opsets: {_opsets(first)} vs {_opsets(second)}")
    graph = first.graph
    initializers = {t.name: t for t in graph.initializer}
    taken = _names(graph)
    node_names = {node.name for node in graph.node if node.name}
    mapping: dict[str, str] = {}

    def fresh(name: str) -> str:
        candidate, index = name + SUFFIX, 1
        while candidate in taken:
            candidate, index = f"{name}{SUFFIX}{index}", index + 1
        taken.add(candidate)
        return candidate

    extra_initializers = []
    for tensor in second.graph.initializer:
        known = initializers.get(tensor.name)
        if known is None:
            if tensor.name in taken:  # a computed value of the first model bears the name
                raise ValueError(f"initializer {tensor.name!r} of the second model is a computed value of the first")
            extra_initializers.append(tensor)
            taken.add(tensor.name)
        elif known != tensor:
            raise ValueError(f"initializer {tensor.name!r} differs between the two models")
    held = {t.name for t in second.graph.initializer}
    inputs = []
    for value in second.graph.input:
        if value.name in held:
            continue
        if value.name in taken:
            mapping[value.name] = fresh(value.name)
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(value)
        copy.name = mapping.get(value.name, value.name)
        inputs.append(copy)
    nodes = []
    for node in second.graph.node:
        for out in node.output:
            if out and out in taken and out not in mapping:
                mapping[out] = fresh(out)
        taken.update(o for o in node.output if o)
        copy = renamed(node, mapping)
        if copy.name:
            while copy.name in node_names:
                copy.name += SUFFIX
            node_names.add(copy.name)
        nodes.append(copy)
    second_outputs = {o.name: mapping.get(o.name, o.name) for o in second.graph.output}
    joint = helper.make_graph(
        [*graph.node, *nodes], f"{graph.name}_joint", [*graph.input, *inputs],
        [*graph.output, *(_output_info(o, second_outputs[o.name]) for o in second.graph.output)],
        initializer=[*graph.initializer, *extra_initializers], value_info=list(graph.value_info))
    model = helper.make_model(joint, opset_imports=list(first.opset_import), ir_version=first.ir_version,
                              functions=_functions(first, second))
    feeds = {**first_feeds, **{mapping.get(name, name): array for name, array in second_feeds.items()}}
    return JointModel(model, feeds, [o.name for o in graph.output], second_outputs)


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every value name of `graph`'s top level: inputs, initializers, node outputs."""
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names.update(o for node in graph.node for o in node.output if o)
    return names


def _output_info(value: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    copy.name = name
    return copy


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {entry.domain: entry.version for entry in model.opset_import}


def _functions(first: onnx.ModelProto, second: onnx.ModelProto) -> list[onnx.FunctionProto]:
    """The local functions of both, each (domain, name, overload) once."""
    found: dict[tuple[str, str, str], onnx.FunctionProto] = {}
    for function in (*first.functions, *second.functions):
        found.setdefault((function.domain, function.name, function.overload), function)
    return list(found.values())
