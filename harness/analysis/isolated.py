"""Isolated error: every op's subgraph alone, fed reference values, all in ONE batched run.

The subgraphs go into one isolation model (harness.onnxgraph.isolation) whose inputs are fed
the reference's values (torch's, or onnx's ReferenceEvaluator's), so the error measured is the
op's own. On onnxruntime the weights are shared with the other sessions of the verification.

An input with no reference value that some node computes (exporters share constants between
ops, e.g. torch.onnx's one zero-bias Constant for every Conv) is computed inside the subgraph:
its producers are borrowed, back to values that have reference values, and the row notes it.
A subgraph that still lacks an input (a graph input without a value, a value torch has no
tensor for) is reported as not isolable, with the reason. If the backend cannot load or run
the batched model, the batch is split in halves until the subgraphs that fail alone are
found; they are reported as not isolable with the backend's message, and listed in
`IsolationResult.backend_failed`: a subgraph the backend cannot run is a failing op.

Only the backend's load and run errors (runtime.errors.BACKEND_ERRORS) are the backend's: an
error while building the batch or preparing its session is the harness's own
(harness.analysis.strictness), raised in strict mode and never blamed on the backend.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from harness.analysis.strictness import harness_errors
from harness.onnxgraph.isolation import IsolationModel, Subgraph, build
from harness.onnxgraph.values import external_inputs, topological
from harness.runtime.errors import BACKEND_ERRORS, first_line, missing_kernel
from harness.runtime.runner import ModelRunner

logger = logging.getLogger(__name__)

ValueLookup = Callable[[str], "np.ndarray | str"]
"""Reference value of an ONNX value name, or a string saying why there is none."""


@dataclass
class IsolationResult:
    """Per subgraph key: the backend's outputs (aligned with Subgraph.outputs) or why not."""

    outputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    inputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # key -> {value: array fed}
    not_isolable: dict[str, str] = field(default_factory=dict)
    backend_failed: set[str] = field(default_factory=set)  # keys the backend could not run (failing ops)
    borrowed: dict[str, list[str]] = field(default_factory=dict)  # key -> nodes of other ops computed in it
    subgraphs: dict[str, Subgraph] = field(default_factory=dict)  # key -> the subgraph as run
    runs: int = 0  # backend runs made (1 unless a batch had to be split)
    computed_by: dict[str, str] = field(default_factory=dict)  # key -> "onnx.reference" where the fallback ran it


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


def isolate(
    source: onnx.ModelProto,
    subgraphs: Sequence[Subgraph],
    lookup: ValueLookup,
    run: ModelRunner,
    initializer: Callable[[onnx.TensorProto], onnx.TensorProto] = lambda t: t,
    strict: bool | None = None,
    fallback: ModelRunner | None = None,
) -> IsolationResult:
    """Run every isolable subgraph in one batched model (splitting it only on failure). A
    subgraph the backend has no kernel for (runtime.errors.missing_kernel) runs on `fallback`
    (onnx's ReferenceEvaluator), and `computed_by` says so."""
    ready, inputs, reasons, borrowed = prepare_inputs(subgraphs, source, lookup)
    result = IsolationResult(inputs=inputs, not_isolable=dict(reasons), borrowed=borrowed,
                             subgraphs={s.key: s for s in ready})
    if ready:
        _run_batch(source, ready, inputs, run, initializer, result, strict, fallback)
    return result


MAX_RUNS = 64
"""Backend runs one isolation may take while splitting failing batches; past it, the subgraphs
left are reported with the last failure (a backend that fails everything would otherwise take
twice as many runs as there are ops)."""


def _run_batch(source, subgraphs, inputs, run, initializer, result: IsolationResult, strict: bool | None,
               fallback: ModelRunner | None = None) -> None:
    built = _build(source, subgraphs, inputs, initializer, result, strict)
    if built is None:
        return
    try:
        with harness_errors(f"running the isolation model of {len(subgraphs)} subgraph(s)", strict,
                            findings=BACKEND_ERRORS) as failed:  # the harness's code around the run
            result.runs += 1
            values = run(built.model, built.feeds)
    except BACKEND_ERRORS as error:  # the backend cannot load or run this batch (the harness's errors pass)
        reason = first_line(error)
        if len(subgraphs) == 1 and fallback is not None and missing_kernel(error):
            reason = _on_reference(built, fallback, subgraphs[0].key, result, reason)
            if not reason:
                return
        if len(subgraphs) == 1 or result.runs >= MAX_RUNS:
            alone = "alone" if len(subgraphs) == 1 else f"(in a batch of {len(subgraphs)}; gave up splitting)"
            for subgraph in subgraphs:
                result.not_isolable[subgraph.key] = f"the backend cannot run its subgraph {alone}: {reason}"
                result.backend_failed.add(subgraph.key)
                result.inputs.pop(subgraph.key, None)
            return
        logger.info("isolation batch of %d failed (%s); splitting", len(subgraphs), first_line(error))
        half = len(subgraphs) // 2
        _run_batch(source, subgraphs[:half], inputs, run, initializer, result, strict, fallback)
        _run_batch(source, subgraphs[half:], inputs, run, initializer, result, strict, fallback)
        return
    if failed:  # the harness's own code around the run (session, shared weights)
        _not_isolable(subgraphs, result, failed.note)
        return
    for key, names in built.outputs.items():
        result.outputs[key] = [values[name] for name in names]


def _on_reference(built: IsolationModel, fallback: ModelRunner, key: str, result: IsolationResult,
                  reason: str) -> str:
    """Run a subgraph the backend has no kernel for on `fallback`; '' when it ran, else the
    backend's reason with the fallback's."""
    try:
        values = fallback(built.model, built.feeds)
    except BACKEND_ERRORS as error:  # the reference's own failure (the runner wraps what its ops raise)
        return f"{reason}; onnx.reference could not run it either: {first_line(error)}"
    logger.info("no backend kernel for %s (%s): computed by onnx.reference", key, reason)
    result.computed_by[key] = "onnx.reference"
    for output_key, names in built.outputs.items():
        result.outputs[output_key] = [values[name] for name in names]
    return ""


def _build(source, subgraphs, inputs, initializer, result: IsolationResult, strict: bool | None) -> IsolationModel | None:
    """The batch's model, or None after recording the harness's failure to build it on every
    subgraph of the batch (raised in strict mode)."""
    with harness_errors(f"building the isolation model of {len(subgraphs)} subgraph(s)", strict) as failed:
        return build(source, subgraphs, inputs, initializer)
    _not_isolable(subgraphs, result, failed.note)  # the harness's own graph surgery failed, not the backend
    return None


def _not_isolable(subgraphs: Sequence[Subgraph], result: IsolationResult, note: str) -> None:
    """Record the harness's failure `note` on every subgraph of a batch."""
    for subgraph in subgraphs:
        result.not_isolable[subgraph.key] = note
        result.inputs.pop(subgraph.key, None)
