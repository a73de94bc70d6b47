"""The batched isolation model: every op's subgraph alone, side by side in one ONNX model.

The model holds one copy of each subgraph (the ONNX nodes of one FX node, or a single ONNX
node). Each subgraph's external inputs become graph inputs named `isolated::<value>`, so no
subgraph sees another's output. Initializers stay initializers, shared by the subgraphs that
read them; Constant nodes stay in their subgraph. Internal values keep their names unless a
node appears in two subgraphs, in which case the later copy is renamed. With
`rename_inputs=False` a single subgraph keeps its input names: that is the reproducer's model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from harness.metrics.arrays import contiguous
from harness.onnxgraph.values import external_inputs

INPUT_PREFIX = "isolated::"


@dataclass
class Subgraph:
    """One op's ONNX nodes and the values whose reference counterparts are known."""

    key: str
    nodes: list[onnx.NodeProto]
    outputs: list[str]


@dataclass
class IsolationModel:
    """A built batch: the model, its feeds, and where each subgraph's outputs are."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    outputs: dict[str, list[str]]  # key -> output names in `model`
    inputs: dict[str, dict[str, np.ndarray]]


def build(
    source: onnx.ModelProto,
    subgraphs: Sequence[Subgraph],
    inputs: Mapping[str, Mapping[str, np.ndarray]],
    initializer: Callable[[onnx.TensorProto], onnx.TensorProto] = lambda t: t,
    *,
    rename_inputs: bool = True,
) -> IsolationModel:
    """One model holding every subgraph, fed `inputs[key]` for its external inputs.

    `initializer` maps each initializer the subgraphs read to the proto to put in the model
    (SharedWeights.stub keeps weights out of it). `rename_inputs=False` keeps the original names
    of the graph inputs (a single-subgraph reproducer reads better that way).
    """
    initializers = {t.name: t for t in source.graph.initializer}
    declared = _bit_cast_types(source)
    used_initializers: dict[str, onnx.TensorProto] = {}
    feeds: dict[str, np.ndarray] = {}
    feed_types: dict[str, int] = {}
    nodes: list[onnx.NodeProto] = []
    outputs: dict[str, list[str]] = {}
    taken: set[str] = set(initializers)
    node_names: set[str] = set()
    for index, subgraph in enumerate(subgraphs):
        mapping: dict[str, str] = {}
        for name in external_inputs(subgraph.nodes):
            if name in initializers:
                used_initializers[name] = initializers[name]
                continue
            feed_name = f"{INPUT_PREFIX}{name}" if rename_inputs else name
            feeds[feed_name] = contiguous(inputs[subgraph.key][name])
            if name in declared:
                feed_types[feed_name] = declared[name]
            mapping[name] = feed_name
        taken.update(feeds)
        for node in subgraph.nodes:
            for out in node.output:
                if out and out in taken:
                    mapping[out] = f"{out}::{index}"
            copy = renamed(node, mapping)
            if copy.name and copy.name in node_names:
                copy.name = f"{copy.name}::{index}"
            node_names.add(copy.name)
            taken.update(o for o in copy.output if o)
            nodes.append(copy)
        outputs[subgraph.key] = [mapping.get(o, o) for o in subgraph.outputs]
    graph = helper.make_graph(
        nodes,
        f"{source.graph.name}_isolated",
        [_input_info(name, array, feed_types.get(name)) for name, array in feeds.items()],
        [onnx.ValueInfoProto(name=name) for names in outputs.values() for name in names],
        initializer=[initializer(t) for t in used_initializers.values()],
    )
    model = helper.make_model(graph, opset_imports=list(source.opset_import), ir_version=source.ir_version,
                              functions=list(source.functions))
    return IsolationModel(model, feeds, outputs, {s.key: dict(inputs[s.key]) for s in subgraphs})


def _input_info(name: str, array: np.ndarray, declared: int | None = None) -> onnx.ValueInfoProto:
    elem_type = declared if declared is not None else helper.np_dtype_to_tensor_dtype(array.dtype)
    return helper.make_tensor_value_info(name, elem_type, list(array.shape))


def _bit_cast_types(source: onnx.ModelProto) -> dict[str, int]:
    """Values the source declares bfloat16 or float8: the harness holds their values as
    float32 arrays, so the isolation model declares the source's type (the backend converts
    the arrays back exactly, runtime.ortvalues.fed_as)."""
    graph = source.graph
    return {
        info.name: info.type.tensor_type.elem_type for info in (*graph.input, *graph.value_info, *graph.output)
        if info.type.tensor_type.elem_type and _numpy_lacks(info.type.tensor_type.elem_type)
    }


def _numpy_lacks(elem_type: int) -> bool:
    """Whether an ONNX element type is a float type numpy has no dtype for (ml_dtypes' bfloat16
    and float8 formats stand in)."""
    try:
        dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        return False
    return dtype.kind == "V" and "float" in dtype.name


def renamed(node: onnx.NodeProto, mapping: Mapping[str, str]) -> onnx.NodeProto:
    """A copy of `node` with its inputs and outputs renamed by `mapping`, and the outer-scope
    values its subgraphs read renamed alike."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    if not mapping:
        return copy
    copy.input[:] = [mapping.get(n, n) for n in copy.input]
    copy.output[:] = [mapping.get(n, n) for n in copy.output]
    for attribute in copy.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            _rename_outer_references(graph, mapping)
    return copy


def _rename_outer_references(graph: onnx.GraphProto, mapping: Mapping[str, str]) -> None:
    """Rename the values a subgraph reads from the enclosing scope (not those it defines)."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) if n not in defined else n for n in node.input]
        inner = {k: v for k, v in mapping.items() if k not in defined}
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                _rename_outer_references(subgraph, inner)
        defined.update(node.output)
