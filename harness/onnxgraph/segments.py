"""Consecutive regions of an ONNX graph as models of their own: an instrumented run in pieces.

Exposing every value of a large model in one run makes the backend hand back every
intermediate at once. Cut into segments along the graph's (topological) node order, each
segment is a model whose inputs are the values it reads from before it (graph inputs, or what
an earlier segment computed) and whose outputs are the values exposed in it plus those read
after it. Run one after another, each fed its predecessors' outputs, the segments compute what
the whole model computes from the model inputs (the backend's own values flow across every
cut, so errors still accumulate), while at most one segment's exposed values and the values
crossing a cut are held at once.

Cuts fall where the exposed values produced since the last cut reach a byte budget, and only
where every value crossing the cut is a tensor of known element type (a segment's inputs must
be declared; a sequence or optional value never crosses a cut). Pure graph surgery: nothing
here runs a model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from harness.onnxgraph.values import external_inputs


@dataclass
class Segment:
    """Nodes `start` to `stop` (exclusive) of the graph, as one model's worth of work."""

    start: int
    stop: int
    inputs: list[str]  # values read from before the segment: graph inputs, earlier segments' outputs
    exposed: list[str]  # exposed values the segment produces
    carried: list[str]  # other values it produces that later nodes read, or that are graph outputs
    released: list[str] = field(default_factory=list)  # inputs no node after the segment reads

    @property
    def outputs(self) -> list[str]:
        """The segment model's outputs: its exposed values, then the carried ones."""
        return [*self.exposed, *[name for name in self.carried if name not in self.exposed]]


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """Value name -> ONNX tensor element type for every value whose type the model declares or
    onnx's shape inference finds (the model's stubbed initializers carry their types, so it
    runs on a skeleton without reading a weight). Non-tensor values are left out."""
    def collect(graph: onnx.GraphProto, found: dict[str, int]) -> None:
        for info in (*graph.input, *graph.value_info, *graph.output):
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                found.setdefault(info.name, info.type.tensor_type.elem_type)
        for tensor in graph.initializer:
            found.setdefault(tensor.name, tensor.data_type)

    found: dict[str, int] = {}
    collect(model.graph, found)
    produced = {o for node in model.graph.node for o in node.output if o}
    if produced - set(found):
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        except Exception:  # noqa: BLE001 - inference is a best effort: untyped values just cannot cross cuts
            inferred = None
        if inferred is not None:
            collect(inferred.graph, found)
    return found


def plan_segments(
    model: onnx.ModelProto,
    exposed: Sequence[str],
    nbytes: Callable[[str], int],
    budget: int,
    types: Mapping[str, int] | None = None,
) -> list[Segment]:
    """Cut `model`'s nodes into consecutive segments, each producing about `budget` bytes of
    the `exposed` values (`nbytes` gives a value's size; a single value larger than the budget
    gets a segment of its own). `types` (default `tensor_types(model)`) says which values may
    cross a cut. One segment when everything fits."""
    nodes = list(model.graph.node)
    types = tensor_types(model) if types is None else types
    initializers = {t.name for t in model.graph.initializer}
    graph_outputs = {o.name for o in model.graph.output}
    wanted = set(exposed)
    reads = [external_inputs([node]) for node in nodes]
    last_read: dict[str, int] = {}
    for index, names in enumerate(reads):
        for name in names:
            last_read[name] = index

    cuts: list[int] = []
    live: set[str] = set()  # values produced so far that a later node reads, or graph outputs
    running = 0
    for index, node in enumerate(nodes):
        live.difference_update([name for name in reads[index] if last_read.get(name) == index])
        produced = [o for o in node.output if o]
        live.update(o for o in produced if last_read.get(o, -1) > index or o in graph_outputs)
        running += sum(nbytes(o) for o in produced if o in wanted)
        if running >= budget and index + 1 < len(nodes) and all(name in types for name in live):
            cuts.append(index + 1)
            running = 0

    segments: list[Segment] = []
    bounds = [0, *cuts, len(nodes)]
    for start, stop in zip(bounds, bounds[1:]):
        inside = nodes[start:stop]
        inputs = [name for name in external_inputs(inside) if name not in initializers]
        produced = [o for node in inside for o in node.output if o]
        segments.append(Segment(
            start, stop, inputs,
            exposed=[o for o in produced if o in wanted],
            carried=[o for o in produced if last_read.get(o, -1) >= stop or o in graph_outputs],
            released=[name for name in inputs if last_read.get(name, -1) < stop and name not in graph_outputs],
        ))
    return segments


def segment_model(
    model: onnx.ModelProto,
    segment: Segment,
    feeds: Mapping[str, np.ndarray],
    types: Mapping[str, int],
) -> onnx.ModelProto:
    """The model of one segment: its nodes, the initializers they read (as `model` holds them:
    stubs stay stubs), inputs declared with `types` (else the fed array's dtype) and the shape
    of the array fed, and its exposed and carried values as (untyped) outputs."""
    inside = list(model.graph.node)[segment.start:segment.stop]
    read = set(external_inputs(inside))
    initializers = [t for t in model.graph.initializer if t.name in read]
    inputs = [
        helper.make_tensor_value_info(name, types.get(name) or helper.np_dtype_to_tensor_dtype(feeds[name].dtype),
                                      list(np.shape(feeds[name])))
        for name in segment.inputs
    ]
    graph = helper.make_graph(inside, f"{model.graph.name}_nodes_{segment.start}_{segment.stop}", inputs,
                              [onnx.ValueInfoProto(name=name) for name in segment.outputs], initializer=initializers)
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                             functions=list(model.functions))
