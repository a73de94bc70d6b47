"""Per-ONNX-node verification against onnx's ReferenceEvaluator, for models with no FX mapping.

Used for torchscript exports and by `verify_onnx`. The model runs once in the backend with
every value exposed and once in the ReferenceEvaluator (which hands out any value by name):
accumulated error per node. Then every node runs alone, all batched into one isolation model
(harness.onnxgraph.isolation), fed the reference's values for its inputs: isolated error per node, which
decides the row's `passed` against the tolerance row `onnx::<OpType>` (or the '*' default).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from exporter.contract.keys import SCOPE_KEY, SOURCE_KEY
from harness.analysis.accumulated import run_instrumented
from harness.analysis.isolated import isolate
from harness.analysis.strictness import is_strict
from harness.analysis.rows import OpAnalysis, OpArtifacts, OpRecord, judge, worst_comparison as _worst
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare, dtype_name
from harness.metrics.tolerances import Tolerance, ToleranceTable, is_override
from harness.metrics.verdict import OVERRIDE, TOLERANCE, by_row
from harness.onnxgraph.isolation import Subgraph
from harness.runtime.errors import first_line
from harness.runtime.runner import ModelRunner

logger = logging.getLogger(__name__)

REFERENCE = "onnx.reference"


def reference_values(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every top-level value of `model` (node outputs and graph outputs) computed by onnx's
    ReferenceEvaluator; raises what the evaluator raises when it cannot run the model."""
    from onnx.reference import ReferenceEvaluator

    names = [o for node in model.graph.node for o in node.output if o]
    names += [o.name for o in model.graph.output if o.name not in names]
    evaluator = ReferenceEvaluator(model)
    produced = dict(zip(names, evaluator.run(names, dict(feeds))))
    return {name: value if isinstance(value, list) else np.asarray(value) for name, value in produced.items()}


def reference_or_reason(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                        strict: bool | None = None) -> tuple[dict[str, np.ndarray] | None, str]:
    """`reference_values`, or None and why the ReferenceEvaluator could not run the model. An op
    it has no implementation of (NotImplementedError) is its known limit, always a note; any
    other error of the evaluator is a note outside strict mode and raised in it
    (harness.analysis.strictness), since the run then compares nothing with a reference."""
    try:
        return reference_values(model, feeds), ""
    except NotImplementedError as error:  # the evaluator lacks an op of the model
        return None, first_line(error, 400)
    except Exception as error:  # onnx.reference fails on this model: its bug or the model's, unknown
        if is_strict(strict):
            raise
        logger.warning("onnx's ReferenceEvaluator failed", exc_info=error)
        return None, first_line(error, 400)


def op_type_key(node: onnx.NodeProto) -> str:
    """`onnx::Conv`, or `onnx::<domain>::<OpType>` outside the default domain."""
    domain = node.domain if node.domain not in ("", "ai.onnx") else ""
    return f"onnx::{domain + '::' if domain else ''}{node.op_type}"


def node_keys(model: onnx.ModelProto) -> list[str]:
    """A unique key per node: its name, or `<OpType>_<index>` when unnamed or repeated."""
    keys: list[str] = []
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        key = node.name or f"{node.op_type}_{index}"
        if key in seen:
            key = f"{key}#{index}"
        seen.add(key)
        keys.append(key)
    return keys


def _scope_and_source(node: onnx.NodeProto) -> tuple[str, str]:
    meta = {p.key: p.value for p in node.metadata_props}
    scope = meta.get(SCOPE_KEY) or meta.get("namespace", "") or node.name
    source = meta.get(SOURCE_KEY, "")
    if not source and "pkg.torch.onnx.stack_trace" in meta:
        source = meta["pkg.torch.onnx.stack_trace"].strip().splitlines()[0].strip()
    return scope, source


def analyse_nodes(
    model: onnx.ModelProto,
    source_model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    device: str,
    table: ToleranceTable,
    run: ModelRunner,
    initializer: Callable[[onnx.TensorProto], onnx.TensorProto] = lambda t: t,
    reference: Mapping[str, Any] | None = None,
    production: list[np.ndarray] | None = None,
    environment: Mapping[str, Any] | None = None,
    strict: bool | None = None,
    weights: Any = None,
) -> OpAnalysis:
    """One row per ONNX node against onnx's ReferenceEvaluator.

    `model` is what the backend loads (weights may be stubbed), `source_model` the same with its
    weights (the reference runs it); `reference` may carry the reference's values already.
    `environment` is recorded in each row's reproducer artifacts. `strict` raises the harness's
    own errors (harness.analysis.strictness). `weights` (runtime.SharedWeights) restores the
    in-memory initializers of `source_model` when a reproducer is written.
    """
    result = OpAnalysis(ops=[], reference=REFERENCE)
    timings = result.timings
    if reference is None:
        started = time.perf_counter()
        reference, reason = reference_or_reason(source_model, feeds, strict)
        if reference is None:  # nothing to compare with
            result.notes.append(f"per-node analysis skipped: onnx's ReferenceEvaluator cannot run the model: {reason}")
            return result
        timings["reference_s"] = time.perf_counter() - started
    keys = node_keys(model)
    records: dict[str, OpRecord] = {}
    for key, node in zip(keys, model.graph.node):
        dtype = _output_dtype(node, reference)
        tolerance = table.lookup(op_type_key(node), device, dtype or None)
        scope, source = _scope_and_source(node)
        records[key] = OpRecord(
            fx_node=key, aten=op_type_key(node), onnx_nodes=[node.name], onnx_ops=[node.op_type],
            scope=scope, source=source, tolerance=tolerance.to_dict(), dtype=dtype,
        )
    result.ops = list(records.values())

    started = time.perf_counter()
    exposed = [o for node in model.graph.node for o in node.output if o]
    instrumented = run_instrumented(model, exposed, feeds, run, production, strict)
    result.instrumented_vs_production = instrumented.final_vs_production
    result.notes.extend(instrumented.notes())
    for key, node in zip(keys, model.graph.node):
        records[key].accumulated = _worst(_compare(node, instrumented.values, reference, records[key]))
    timings["accumulated_s"] = time.perf_counter() - started

    started = time.perf_counter()
    subgraphs = [Subgraph(key, [node], [o for o in node.output if o]) for key, node in zip(keys, model.graph.node)]
    isolation = isolate(model, subgraphs, _lookup(reference, feeds), run, initializer, strict=strict)
    for key, node in zip(keys, model.graph.node):
        record = records[key]
        if key in isolation.not_isolable:
            record.not_isolable = isolation.not_isolable[key]
            record.passed = False if key in isolation.backend_failed else None
            continue
        actual = dict(zip([o for o in node.output if o], isolation.outputs[key]))
        comparisons = _compare(node, actual, reference, record)
        record.isolated = _worst(comparisons)
        record.passed = judge(record, comparisons)
        if record.isolated is not None:
            row = Tolerance(**record.tolerance)
            record.verdict = by_row(record.isolated, dtype=record.dtype, row=row,
                                    rule=OVERRIDE if is_override(row) else TOLERANCE,
                                    reason="judged against onnx's ReferenceEvaluator, which has no fp64 truth: "
                                           "the tolerance row decides")
        record.artifacts = OpArtifacts(
            source=source_model, nodes=[node], inputs=isolation.inputs.get(key, {}),
            expected={o: np.asarray(reference[o]) for o in node.output if o and _is_tensor(reference.get(o))},
            reference=REFERENCE, device=device, tolerance=record.tolerance,
            environment=dict(environment or {}), isolated_outputs=actual, weights=weights,
        )
    timings["isolated_s"] = time.perf_counter() - started
    return result


def _output_dtype(node: onnx.NodeProto, reference: Mapping[str, Any]) -> str:
    """The node's first floating output's dtype in the reference run (else its first output's)."""
    arrays = [np.asarray(reference[o]) for o in node.output if o and _is_tensor(reference.get(o))]
    chosen = next((a for a in arrays if a.dtype.kind == "f"), arrays[0] if arrays else None)
    return dtype_name(chosen.dtype) if chosen is not None else ""


def _is_tensor(value: Any) -> bool:
    return isinstance(value, np.ndarray) or np.isscalar(value)


def _lookup(reference: Mapping[str, Any], feeds: Mapping[str, np.ndarray]) -> Callable[[str], np.ndarray | str]:
    def lookup(name: str) -> np.ndarray | str:
        value = feeds.get(name, reference.get(name))
        if value is None:
            return "the reference produced no value of that name"
        if not _is_tensor(value):
            return f"the reference's value is a {type(value).__name__} (sequences are not fed)"
        return np.asarray(value)

    return lookup


def _compare(node: onnx.NodeProto, actual: Mapping[str, Any], reference: Mapping[str, Any],
             record: OpRecord) -> list[Comparison]:
    atol, rtol = record.tolerance["atol"], record.tolerance["rtol"]
    return [
        compare(as_array(actual[name]), as_array(reference[name]), atol=atol, rtol=rtol, name=name)
        for name in node.output
        if name and name in actual and _is_tensor(reference.get(name)) and _is_tensor(actual[name])
    ]


