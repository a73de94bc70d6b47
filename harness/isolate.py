"""Isolated error: every op's subgraph alone, fed reference values, all in ONE batched run.

The isolation model holds one copy of each subgraph (the ONNX nodes of one FX node, or a single
ONNX node). Each subgraph's external inputs become graph inputs named `isolated::<value>` and
are fed the reference's value for `<value>` (torch's, or onnx's ReferenceEvaluator's), so no
subgraph sees another's output and the error measured is the op's own. Initializers stay
initializers, shared by the subgraphs that read them (and, on onnxruntime, with the other
sessions of the verification, through `SharedWeights`); Constant nodes stay in their
subgraph. Internal values keep their names unless a node appears in two subgraphs, in which
case the later copy is renamed.

An input with no reference value that some node computes (exporters share constants between
ops, e.g. torch.onnx's one zero-bias Constant for every Conv) is computed inside the subgraph:
its producers are borrowed, back to values that have reference values, and the row notes it.
A subgraph that still lacks an input (a graph input without a value, a value torch has no
tensor for) is reported as not isolable, with the reason. If the backend cannot load or run
the batched model, the batch is split in halves until the subgraphs that fail alone are
found; they are reported as not isolable with the backend's message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from harness.mapping import external_inputs

logger = logging.getLogger(__name__)

INPUT_PREFIX = "isolated::"

ValueLookup = Callable[[str], "np.ndarray | str"]
"""Reference value of an ONNX value name, or a string saying why there is none."""

ModelRunner = Callable[[onnx.ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]
"""Run a model on feeds and return {output name: array}; raises when the backend cannot."""


@dataclass
class Subgraph:
    """One op's ONNX nodes and the values whose reference counterparts are known."""

    key: str
    nodes: list[onnx.NodeProto]
    outputs: list[str]


@dataclass
class IsolationResult:
    """Per subgraph key: the backend's outputs (aligned with Subgraph.outputs) or why not."""

    outputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    inputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # key -> {value: array fed}
    not_isolable: dict[str, str] = field(default_factory=dict)
    borrowed: dict[str, list[str]] = field(default_factory=dict)  # key -> nodes of other ops computed in it
    subgraphs: dict[str, Subgraph] = field(default_factory=dict)  # key -> the subgraph as run
    runs: int = 0  # backend runs made (1 unless a batch had to be split)


@dataclass
class IsolationModel:
    """A built batch: the model, its feeds, and where each subgraph's outputs are."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    outputs: dict[str, list[str]]  # key -> output names in `model`
    inputs: dict[str, dict[str, np.ndarray]]


def prepare_inputs(
    subgraphs: Sequence[Subgraph], source: onnx.ModelProto, lookup: ValueLookup
) -> tuple[list[Subgraph], dict[str, dict[str, np.ndarray]], dict[str, str], dict[str, list[str]]]:
    """Resolve every subgraph's external inputs.

    An input without a reference value that some node of `source` computes (a constant another
    op's subgraph made, which exporters share between ops) is computed inside the subgraph:
    its producers are borrowed, walking back until inputs with reference values. Returns the
    isolable subgraphs (borrowed nodes included), their inputs, the reasons for the others,
    and the borrowed node names per subgraph.
    """
    initializers = {t.name for t in source.graph.initializer}
    producer = {out: node for node in source.graph.node for out in node.output if out}
    ready: list[Subgraph] = []
    inputs: dict[str, dict[str, np.ndarray]] = {}
    reasons: dict[str, str] = {}
    borrowed: dict[str, list[str]] = {}
    for subgraph in subgraphs:
        reason = _structural_problem(subgraph)
        nodes = list(subgraph.nodes)
        fed: dict[str, np.ndarray] = {}
        lent: list[onnx.NodeProto] = []
        pending = [] if reason else external_inputs(nodes)
        while pending and not reason:
            name = pending.pop(0)
            if name in initializers or name in fed:
                continue
            value = lookup(name)
            if not isinstance(value, str):
                fed[name] = value
            elif name in producer:  # an external input is never produced by the subgraph itself
                lent.append(producer[name])
                nodes.append(producer[name])
                pending.extend(n for n in external_inputs([producer[name]]) if n not in pending)
            else:
                reason = f"input {name!r} has no reference value: {value}"
        if reason:
            reasons[subgraph.key] = reason
            continue
        if lent:
            nodes = topological(nodes)
            borrowed[subgraph.key] = [node.name for node in lent]
            subgraph = Subgraph(subgraph.key, nodes, subgraph.outputs)
        ready.append(subgraph)
        inputs[subgraph.key] = {name: fed[name] for name in external_inputs(nodes) if name in fed}
    return ready, inputs, reasons, borrowed


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


def _structural_problem(subgraph: Subgraph) -> str:
    if not subgraph.nodes:
        return "no ONNX nodes compute it"
    if not subgraph.outputs:
        return "none of its values is in the ONNX model"
    produced = {o for node in subgraph.nodes for o in node.output}
    missing = [o for o in subgraph.outputs if o not in produced]
    if missing:
        return f"its value {missing[0]!r} is not computed by its own nodes (an alias of an input?)"
    return ""


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
    used_initializers: dict[str, onnx.TensorProto] = {}
    feeds: dict[str, np.ndarray] = {}
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
            mapping[name] = feed_name
        taken.update(feeds)
        for node in subgraph.nodes:
            for out in node.output:
                if out and out in taken:
                    mapping[out] = f"{out}::{index}"
            copy = _renamed(node, mapping)
            if copy.name and copy.name in node_names:
                copy.name = f"{copy.name}::{index}"
            node_names.add(copy.name)
            taken.update(o for o in copy.output if o)
            nodes.append(copy)
        outputs[subgraph.key] = [mapping.get(o, o) for o in subgraph.outputs]
    graph = helper.make_graph(
        nodes,
        f"{source.graph.name}_isolated",
        [_input_info(name, array) for name, array in feeds.items()],
        [onnx.ValueInfoProto(name=name) for names in outputs.values() for name in names],
        initializer=[initializer(t) for t in used_initializers.values()],
    )
    model = helper.make_model(graph, opset_imports=list(source.opset_import), ir_version=source.ir_version,
                              functions=list(source.functions))
    return IsolationModel(model, feeds, outputs, {s.key: dict(inputs[s.key]) for s in subgraphs})


def contiguous(value: np.ndarray) -> np.ndarray:
    """A C-contiguous array, 0-d kept 0-d (np.ascontiguousarray would make it 1-d)."""
    array = np.asarray(value)
    return array if array.flags.c_contiguous else np.ascontiguousarray(array).reshape(array.shape)


def _input_info(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))


def _renamed(node: onnx.NodeProto, mapping: Mapping[str, str]) -> onnx.NodeProto:
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


def isolate(
    source: onnx.ModelProto,
    subgraphs: Sequence[Subgraph],
    lookup: ValueLookup,
    run: ModelRunner,
    initializer: Callable[[onnx.TensorProto], onnx.TensorProto] = lambda t: t,
) -> IsolationResult:
    """Run every isolable subgraph in one batched model (splitting it only on failure)."""
    ready, inputs, reasons, borrowed = prepare_inputs(subgraphs, source, lookup)
    result = IsolationResult(inputs=inputs, not_isolable=dict(reasons), borrowed=borrowed,
                             subgraphs={s.key: s for s in ready})
    if ready:
        _run_batch(source, ready, inputs, run, initializer, result)
    return result


MAX_RUNS = 64
"""Backend runs one isolation may take while splitting failing batches; past it, the subgraphs
left are reported with the last failure (a backend that fails everything would otherwise take
twice as many runs as there are ops)."""


def _run_batch(source, subgraphs, inputs, run, initializer, result: IsolationResult) -> None:
    try:
        built = build(source, subgraphs, inputs, initializer)
        result.runs += 1
        values = run(built.model, built.feeds)
    except Exception as error:  # onnxruntime raises several types; all mean "cannot run this batch"
        if len(subgraphs) == 1 or result.runs >= MAX_RUNS:
            alone = "alone" if len(subgraphs) == 1 else f"(in a batch of {len(subgraphs)}; gave up splitting)"
            for subgraph in subgraphs:
                result.not_isolable[subgraph.key] = (
                    f"the backend cannot run its subgraph {alone}: {_first_line(error)}"
                )
                result.inputs.pop(subgraph.key, None)
            return
        logger.info("isolation batch of %d failed (%s); splitting", len(subgraphs), _first_line(error))
        half = len(subgraphs) // 2
        _run_batch(source, subgraphs[:half], inputs, run, initializer, result)
        _run_batch(source, subgraphs[half:], inputs, run, initializer, result)
        return
    for key, names in built.outputs.items():
        result.outputs[key] = [values[name] for name in names]


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]
