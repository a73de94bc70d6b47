"""Per-op analysis of an ONNX model that maps onto an FX graph (roundtrip, torch.onnx).

For every FX node n with an ONNX subgraph: accumulated error (one instrumented run), isolated
error (all subgraphs batched into one run, fed torch's values), the fp64 truth and who
diverged from it (harness.analysis.truth, harness.metrics.noise), and on CUDA the torch CPU-vs-CUDA noise floor. The op's
tolerance row decides `passed` from the isolated comparison.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch

from harness.analysis import draws, overlap, quant_rows, runtime_regions, selections
from harness.analysis.accumulated import SegmentedRun, run_instrumented
from harness.analysis.budget import FLOOR_BYTES, values_budget
from harness.analysis.fx_mapping import NodeGroup, output_at, value_sources
from harness.analysis.isolated import isolate
from harness.analysis.joint_run import JointRun
from harness.analysis.nearest_rows import settle_row_ties
from harness.analysis.rows import (
    BLAME_RUNTIME_PRECISION, OpAnalysis, OpArtifacts, OpRecord, judge, worst_comparison as _worst,
)
from harness.analysis.spilled import SpillFolder, spill
from harness.analysis.strictness import harness_errors
from harness.analysis.torch_values import TorchValues, describe_value
from harness.analysis.truth import (
    Float64Weights, OpCallFailed, Replayer, TruthInSlices, cell_roundings, compare_with_truth, no_truth_reason,
    reduction_length, replay_memory, replay_region, truth_largest_finite,
)
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare, dtype_name
from harness.metrics import ties
from harness.metrics.noise import NoiseModel, attribute, dtype_key, load_noise_model
from harness.metrics.tolerances import Tolerance, ToleranceTable
from harness.metrics.verdict import VerdictRule, load_rule
from harness.analysis.judging import TruthPair, decide, overflow_note, verdicts_for
from harness.onnxgraph.isolation import Subgraph
from harness.runtime.exposure import expose_values
from harness.runtime.memory import any_size_from_heap, release_freed_memory
from harness.runtime.backends.precision import DECLARED, RuntimePrecision, is_lower
from harness.runtime.runner import ModelRunner

logger = logging.getLogger(__name__)

CHUNK_BYTES: int | None = None
"""Exposed values (bytes, as torch's) of one chunk of the per-op analysis: a model whose mapped
values take more is measured in chunks, its instrumented run in segments (see `analyse`). None:
sized from the memory available (harness.analysis.budget), so that the zoo's models at their
test sizes are one chunk (one instrumented and one isolation session) where memory allows; a
detector at 800 px is a dozen."""


@dataclass
class FxAnalysis:
    """Inputs of the per-op analysis of one verification."""

    onnx_model: onnx.ModelProto  # as the backend loads it (shared weights stubbed on onnxruntime)
    source_model: onnx.ModelProto  # with its weights (or in-memory stubs `weights` restores), for reproducers
    program: torch.export.ExportedProgram
    groups: dict[str, NodeGroup]
    values: dict[str, Any]  # torch's value of every FX node, on the device under test
    feeds: dict[str, np.ndarray]  # the model inputs
    device: str  # "cpu" | "cuda" | "reference"
    table: ToleranceTable
    run: ModelRunner
    initializer: Callable[[onnx.TensorProto], onnx.TensorProto] = lambda t: t
    production: Sequence[np.ndarray] | None = None
    noise_model: NoiseModel = field(default_factory=load_noise_model)
    rule: VerdictRule | None = None  # the verdict rule (None: the shipped one, checked against noise_model)
    environment: dict[str, Any] = field(default_factory=dict)
    strict: bool | None = None  # raise the harness's own errors (None: ROUNDTRIP_STRICT decides)
    weights: Any = None  # runtime.SharedWeights holding the arrays of source_model's in-memory stubs
    fallback: ModelRunner | None = None  # runs a subgraph the backend has no kernel for (onnx.reference)
    backend: str = "onnxruntime"  # the backend `run` runs on, as its spec reads
    runtime_precisions: Mapping[str, RuntimePrecision] = field(default_factory=dict)  # ONNX node -> as it ran
    declared_only: bool = True  # the backend runs every node as declared: a row's precision is its dtype
    chunk_bytes: int = field(default_factory=lambda: CHUNK_BYTES or values_budget())  # backend values held at once (_analyse_streamed)
    runtime_fusions: Sequence[Any] = ()  # the backend's fused layers (RuntimeFusion), judged as regions
    region_truths: dict[str, Any] = field(default_factory=dict)  # fp64 per-op truths the fused layers reuse
    region_rows: dict[str, Any] = field(default_factory=dict)  # the fused layers' region rows, between passes
    float64_weights: Float64Weights | None = None  # parameters' fp64 copies the outputs' truth made


def analyse(analysis: FxAnalysis) -> OpAnalysis:
    """One row per FX node: accumulated, isolated, fp64 truth and attribution (and the CUDA
    noise floor), with the instrumented run's comparison with production and its notes."""
    return analyse_backends([analysis])[0]


def analyse_backends(analyses: Sequence[FxAnalysis]) -> list[OpAnalysis]:
    """`analyse` for the same program and torch values on several backends (one FxAnalysis
    each, differing in `run`, `production`, `backend` and `runtime_precisions`): each gets its
    own accumulated and isolated rows, and every op's fp64 truth is computed once and judges
    them all. Returns one OpAnalysis per backend, in order. One backend is analysed streamed
    (`_analyse_streamed`)."""
    if len(analyses) == 1:
        return [_analyse_streamed(analyses[0])]
    with overlap.worker(_overlappable(analyses)) as worker:  # the further backends' runs beside the first's
        later = [worker.submit(_measure, analysis) for analysis in analyses[1:]]
        measured = [_measure(analyses[0])] + [each.result() for each in later]
    started = time.perf_counter()
    release_freed_memory()
    with replay_memory(analyses[0].values):
        truths = _truth([(records, analysis, isolated) for analysis, (records, _, isolated) in zip(analyses, measured)])
    truth_s = time.perf_counter() - started
    results = []
    for index, (analysis, (records, result, isolated)) in enumerate(zip(analyses, measured)):
        result.timings["truth_s"] = truth_s if index == 0 else 0.0  # computed once, for the first
        rule = analysis.rule or load_rule(analysis.noise_model)
        for fx, record in records.items():
            _judge(record, isolated.get(fx, {}), truths[index].get(fx, {}), rule, analysis)
        _judge_fused_layers(records, analysis, rule, analysis.region_rows, isolated, result.timings)
        started = time.perf_counter()
        result.notes.extend(quant_rows.annotate(records, analysis))
        if any(record.quant_steps is not None for record in records.values()):
            result.timings["quant_steps_s"] = time.perf_counter() - started
        if analysis.device == "cuda":
            started = time.perf_counter()
            _noise_floor(records, analysis)
            result.timings["noise_floor_s"] = time.perf_counter() - started
        result.environment["noise_model"] = analysis.noise_model.to_dict()
        result.environment["verdict_rule"] = rule.to_dict()
        results.append(result)
    return results


def _overlappable(analyses: Sequence[FxAnalysis]) -> bool:
    """Whether the backends' rows may be measured at once, the further backends' on a worker
    thread (harness.analysis.overlap): on the CPU, from torch's values held whole (a streamed
    value is computed again on demand, by one reader at a time), when every backend's
    instrumented values fit one chunk together (each measurement holds its own)."""
    first = analyses[0]
    if first.device != "cpu" or (isinstance(first.values, TorchValues) and first.values.streaming):
        return False
    exposed = {name for group in first.groups.values() for name in group.outputs.values()}
    sizes = _exposed_sizes(first, {})
    return len(analyses) * sum(sizes.get(name, 0) for name in exposed) <= first.chunk_bytes


def _measure(analysis: FxAnalysis) -> tuple[dict[str, OpRecord], OpAnalysis, dict[str, dict[str, Comparison]]]:
    """The rows of one backend with their accumulated and isolated errors (not yet judged)."""
    records = {fx: _record(group, analysis) for fx, group in analysis.groups.items()}
    _annotate_fusions(records, analysis)
    result = OpAnalysis(ops=list(records.values()), reference="torch")
    timings = result.timings

    exposed = [name for group in analysis.groups.values() for name in group.outputs.values()]
    joint = None
    sizes = _exposed_sizes(analysis, {})  # once: each call reads every group's torch value
    if _joinable(analysis, sum(sizes.get(name, 0) for name in set(exposed))):
        # one load and one run of the backend for the instrumented model and the isolation batch
        joint = JointRun(analysis.run, expose_values(analysis.onnx_model, exposed), analysis.feeds)
    started = time.perf_counter()
    analysis.region_rows = _region_rows(records, analysis)
    isolated = _isolated(records, analysis, extra=analysis.region_rows, run=joint.isolation if joint else None)
    timings["isolated_s"] = time.perf_counter() - started  # with the instrumented run when joint

    started = time.perf_counter()
    instrumented = run_instrumented(analysis.onnx_model, exposed, analysis.feeds,
                                    joint.instrumented if joint else analysis.run, analysis.production, analysis.strict)
    result.instrumented_vs_production = instrumented.final_vs_production
    result.notes.extend(instrumented.notes())
    for fx, group in analysis.groups.items():
        if group.folded_into:  # its accumulated row is the initializer's (_folded, with the isolation)
            continue
        records[fx].accumulated = _worst(_compare_outputs(group, instrumented.values, analysis, records[fx]))
    selections.match_rows(records, analysis.groups, instrumented.values, analysis.values, analysis.program,
                          result.selections)
    del instrumented  # every op's value, compared
    release_freed_memory()
    timings["accumulated_s"] = time.perf_counter() - started
    if joint is not None:
        result.environment["joint_instrumented_isolation_runs"] = joint.joint_runs
    return records, result, isolated


def _analyse_streamed(analysis: FxAnalysis) -> OpAnalysis:
    """`analyse` of one backend, streamed: the rows are measured in chunks, in graph order, so that the backend's values are held
    one chunk at a time: when the exposed values and the weights exceed `analysis.chunk_bytes`, the
    instrumented model runs in segments (accumulated.SegmentedRun) and, after each, the rows
    whose values it produced are compared, isolated (one batched isolation model per chunk),
    replayed in float64 and judged; then the chunk's backend values are dropped. A model that
    fits the budget is one chunk: one instrumented run, one isolation run."""
    with contextlib.ExitStack() as sessions_apart:  # closed early, or here on an error
        return _analyse_in_chunks(analysis, sessions_apart)


def _analyse_in_chunks(analysis: FxAnalysis, sessions_apart: contextlib.ExitStack) -> OpAnalysis:
    """`_analyse_streamed`'s work; `sessions_apart` holds the memory scope of the instrumented
    and isolation sessions of one chunk loaded apart, from the first one's load to the second's end."""
    records = {fx: _record(group, analysis) for fx, group in analysis.groups.items()}
    _annotate_fusions(records, analysis)
    result = OpAnalysis(ops=list(records.values()), reference="torch")
    timings = result.timings
    for phase in ("accumulated_s", "isolated_s", "truth_s"):
        timings[phase] = 0.0
    rule = analysis.rule or load_rule(analysis.noise_model)
    sources = value_sources(analysis.onnx_model, analysis.program, analysis.groups)
    truth = _TruthPass(records, analysis)
    spill_folder = None
    if isinstance(analysis.values, TorchValues) and analysis.values.streaming:
        spill_folder = SpillFolder()
        analysis.values.measured_by({**{member.fx_node: fx for fx, group in analysis.groups.items()
                                        for member in group.region}, **{fx: fx for fx in analysis.groups}})

    started = time.perf_counter()
    exposed = [name for group in analysis.groups.values() for name in group.outputs.values()]
    sizes = _exposed_sizes(analysis, sources)
    exposed_bytes = sum(sizes.get(name, 0) for name in set(exposed))
    isolated_first = None
    batch_bytes: int | None = None  # a streamed chunk's rows isolated and judged in batches of this many bytes
    if _joinable(analysis, exposed_bytes):
        # one chunk: the isolation batch and the instrumented model are loaded and run as one
        # model (analysis.joint_run), the isolation first since it needs only torch's values
        timings["accumulated_s"] += time.perf_counter() - started
        joint = JointRun(analysis.run, expose_values(analysis.onnx_model, exposed), analysis.feeds)
        isolated_first = _isolate_chunk(records, analysis, sources, timings, run=joint.isolation)
        started = time.perf_counter()
        instrumented = run_instrumented(analysis.onnx_model, exposed, analysis.feeds, joint.instrumented,
                                        analysis.production, analysis.strict)
        result.environment["joint_instrumented_isolation_runs"] = joint.joint_runs
        chunks: Iterator[tuple[list[str], dict[str, Any]]] = _one_chunk(instrumented, list(records))
    elif exposed_bytes + (weights := initializer_bytes(analysis.onnx_model)) <= analysis.chunk_bytes:
        # one chunk loaded apart: the instrumented run first, its values compared and dropped
        # before the isolation batch loads (in the loop below). Where the weights outweigh the
        # values, every block comes from the heap until then, so that the isolation session packs
        # its weights into the pages the instrumented session's packing freed, not into fresh
        # ones (vgg11: 150K page faults a session); where they do not (densenet201, apart for its
        # node count) the sessions' own blocks are small beside the values, and that saves nothing
        if weights > exposed_bytes:
            sessions_apart.enter_context(any_size_from_heap())
        instrumented = run_instrumented(analysis.onnx_model, exposed, analysis.feeds, analysis.run,
                                        analysis.production, analysis.strict)
        result.environment["joint_instrumented_isolation_runs"] = 0
        chunks = _one_chunk(instrumented, list(records))
    else:
        # past the budget the model streams anyway: its chunks are the smallest budget's, since a
        # larger chunk saves only sessions while it adds to the peak (a detector at 800 px); a
        # segment's weights count with its values, as its sessions pack them (a Llama's layers)
        segment_bytes = batch_bytes = min(analysis.chunk_bytes, FLOOR_BYTES)
        weights = weights_by_value(analysis.onnx_model, analysis.groups)
        segmented = SegmentedRun(analysis.onnx_model, exposed, analysis.feeds, analysis.run,
                                 lambda name: _segment_share(sizes.get(name, 0), segment_bytes) + weights.get(name, 0),
                                 segment_bytes,
                                 analysis.production, analysis.strict)
        instrumented = segmented.result
        chunks = _segment_chunks(segmented, analysis.groups, sizes, segment_bytes)
        result.environment["instrumented_segments"] = len(segmented.segments)
    timings["accumulated_s"] += time.perf_counter() - started

    while True:
        started = time.perf_counter()
        chunk = next(chunks, None)
        if chunk is None:
            timings["accumulated_s"] += time.perf_counter() - started
            break
        names, values = chunk
        for fx in names:
            if analysis.groups[fx].folded_into:  # its accumulated row is the initializer's (_folded)
                continue
            records[fx].accumulated = _worst(_compare_outputs(analysis.groups[fx], values, analysis, records[fx]))
        selections.match_rows({fx: records[fx] for fx in names}, analysis.groups, values, analysis.values,
                              analysis.program, result.selections)
        del chunk, values  # this chunk's backend values, compared
        release_freed_memory()
        timings["accumulated_s"] += time.perf_counter() - started
        batches = [names] if isolated_first is not None else _batches(names, records, analysis, sizes, batch_bytes)
        for batch in batches:
            batch_records = {fx: records[fx] for fx in batch}
            if isolated_first is None:
                isolated_first = _isolate_chunk(batch_records, analysis, sources, timings)
            sessions_apart.close()
            _measure_chunk(batch_records, analysis, truth, rule, timings, isolated_first)
            isolated_first = None
            if isinstance(analysis.values, TorchValues) and analysis.values.streaming:
                _keep_worst_artifacts(records.values(), spill_folder)
                analysis.values.release(batch)
    result.instrumented_vs_production = instrumented.final_vs_production
    result.notes.extend(instrumented.notes())
    if isinstance(analysis.values, TorchValues) and analysis.values.streaming:
        kept = sum(1 for record in records.values() if record.artifacts is not None)
        result.environment["torch_values"] = {"streamed": True, "graph_runs": analysis.values.passes}
        result.notes.append(
            "torch's values exceed the budget of values held at once, so they were streamed (each released once "
            f"the ops reading it were measured); reproducer inputs are kept for the {kept} op(s) with the largest "
            "errors")
    started = time.perf_counter()
    result.notes.extend(quant_rows.annotate_regions(records, analysis))
    if any(record.quant_steps is not None for record in records.values()):
        timings["quant_steps_s"] = time.perf_counter() - started

    if analysis.device == "cuda":
        started = time.perf_counter()
        _noise_floor(records, analysis)
        timings["noise_floor_s"] = time.perf_counter() - started
    result.environment["noise_model"] = analysis.noise_model.to_dict()
    result.environment["verdict_rule"] = rule.to_dict()
    return result


JOIN_WEIGHTS_BYTES = 128 << 20
"""Weights up to this size may be packed twice by a joint load whatever the values' size: the
second packed copy then adds at most this much to the peak, while a separate load costs one
more session (resnet18, 47 MB of weights beside 31 MB of values: 0.15 s of CPU of a 0.8 s
verification)."""


JOIN_NODES = 400
"""Models of up to this many nodes may load the two halves as one model; a larger one loads them
apart. onnxruntime's load grows faster than the graph (its optimisers at ORT_ENABLE_ALL, CPU
seconds, min of 5 at load 2-4): the joint model of densenet201 (608 nodes) takes 0.53-0.58 s
against 0.33-0.35 s for its two halves apart, densenet169's (512) 0.38 s against 0.22 s,
densenet161's (488) 0.36 s against 0.28 s, while resnet152's (360) takes 0.22 s against 0.28 s,
resnet50's (122) 0.07 s against 0.13 s (one session's fixed cost saved). The rows are the same
either way."""


def _joinable(analysis: FxAnalysis, exposed_bytes: int) -> bool:
    """Whether the instrumented model and the isolation batch load and run as one model
    (analysis.joint_run): one session load less (measured on onnxruntime's CPU: 0.0-0.15 s of
    CPU on the zoo; more where every load is a compile), at a cost in memory. The joint model
    holds both halves' values at once, and while it loads, a weight both halves read is packed
    twice: onnxruntime's kernels each pack their own copy of a matrix-product or convolution
    weight and the session then keeps one (1.31, prepacking on: one Gemm on a 392 MiB weight
    peaks at +400 MiB while it loads, two Gemms on it at +792 MiB, +400 MiB once loaded;
    vgg16's joint model at +955 MiB against +579 MiB each apart). So the two are joined when
    their values and weights fit one chunk and the model's weights are no larger than those values
    or than JOIN_WEIGHTS_BYTES: the joint model then adds about one chunk of values, or that
    allowance, to the peak and no more. A model whose weights outweigh both loads them apart,
    the instrumented run first: vgg16 (528 MB beside 115 MB of values), and a Llama of 1.49 GiB
    on 128 tokens, whose joint load took its net peak from 4.5 to 6.1 GiB. A model of more than
    JOIN_NODES nodes loads them apart: there two loads cost less than one joint one."""
    if len(analysis.onnx_model.graph.node) > JOIN_NODES:
        return False
    weights = initializer_bytes(analysis.onnx_model)
    return exposed_bytes + weights <= analysis.chunk_bytes and weights <= max(exposed_bytes, JOIN_WEIGHTS_BYTES)


def _segment_share(size: int, budget: int) -> int:
    """What a value counts for when segments are cut: its bytes, or the whole `budget` for a
    value of half of it or more, which so ends its segment: torch's values of a chunk's rows are
    held while the chunk is measured, and two such values of a segment would be held at once
    with the next one's inputs (a detector's mask paste: 183 MiB each)."""
    return budget if 2 * size >= budget else size


def initializer_bytes(model: onnx.ModelProto) -> int:
    """Bytes of `model`'s initializers, read off their types and shapes (stubs' too)."""
    return sum(_tensor_bytes(tensor) for tensor in model.graph.initializer)


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    """Bytes of one initializer, read off its type and shape (0 for a string or untyped one)."""
    if tensor.data_type in (onnx.TensorProto.UNDEFINED, onnx.TensorProto.STRING):
        return 0
    return int(np.prod(tensor.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def weights_by_value(model: onnx.ModelProto, groups: Mapping[str, NodeGroup]) -> dict[str, int]:
    """{a row's first exposed value: bytes of the initializers its ONNX nodes read}, each
    initializer counted once, at its first reader among the rows: the weights a segment that
    computes the row loads (and onnxruntime packs a copy of), so that a model's segments are cut
    by their weights as well as by their values (a Llama of 1.49 GiB whose values are 0.5 GiB)."""
    sizes = {tensor.name: _tensor_bytes(tensor) for tensor in model.graph.initializer}
    counted: set[str] = set()
    found: dict[str, int] = {}
    for group in groups.values():
        if not group.outputs:
            continue
        read = {name for node in group.nodes for name in node.input if name in sizes and name not in counted}
        counted.update(read)
        if read:
            found[group.outputs[min(group.outputs)]] = sum(sizes[name] for name in read)
    return found


def _exposed_sizes(analysis: FxAnalysis, sources: Mapping[str, tuple[str, int]]) -> dict[str, int]:
    """Bytes of each exposed ONNX value, read off torch's value for it (what the backend's
    will take)."""
    sizes: dict[str, int] = {}
    for group in analysis.groups.values():
        for index, name in group.outputs.items():
            value = output_at(describe_value(analysis.values, group.fx_node), index)
            sizes[name] = value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 8
    return sizes


def _one_chunk(instrumented: Any, names: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """The single chunk of a model that fits the budget: every row, every value of one run
    (handed over, not kept here, so that the caller's release frees them)."""
    box = [instrumented.values]
    instrumented.values = {}
    yield names, box.pop()


def _segment_chunks(segmented: SegmentedRun, groups: Mapping[str, NodeGroup], sizes: Mapping[str, int],
                    budget: int) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """(rows to measure, their backend values) after each segment: the rows, in graph order,
    up to the first one whose values are not all produced yet (so torch's values, streamed in
    graph order, are released behind them); and every row whose values are produced once
    those waiting would pass `budget` bytes. The rows left when a segment fails come last,
    with what was produced."""
    order = list(groups)
    position_of = {fx: position for position, fx in enumerate(order)}
    ready_at = {fx: max((segmented.segment_of.get(name, 0) for name in group.outputs.values()), default=0)
                for fx, group in groups.items()}
    waiting: dict[str, Any] = {}  # backend values of rows not measured yet
    done: set[str] = set()
    rows_of = Counter(name for group in groups.values() for name in group.outputs.values())  # rows not taken yet

    def take(names: list[str]) -> dict[str, Any]:
        """The values of rows `names`, each dropped here once no row left reads it (two rows
        whose values are one ONNX value, a view the export folded, may fall in two chunks)."""
        done.update(names)
        taken = {name: waiting[name] for fx in names for name in groups[fx].outputs.values() if name in waiting}
        rows_of.subtract(name for fx in names for name in groups[fx].outputs.values())
        for name in taken:
            if rows_of[name] <= 0:
                del waiting[name]
        return taken

    for index, produced in segmented.values():
        waiting.update(produced)
        del produced
        ready = [fx for fx in order if fx not in done and ready_at[fx] <= index]
        frontier = next((position for position, fx in enumerate(order) if fx not in done and ready_at[fx] > index),
                        len(order))
        names = [fx for fx in ready if position_of[fx] < frontier]
        if sum(sizes.get(name, 0) for name in waiting) - sum(
                sizes.get(name, 0) for fx in names for name in groups[fx].outputs.values()) > budget:
            names = ready
        if names:
            yield names, take(names)
    left = [fx for fx in order if fx not in done]
    if left:
        yield left, take(left)


def _batches(names: list[str], records: Mapping[str, OpRecord], analysis: FxAnalysis, sizes: Mapping[str, int],
             budget: int | None) -> list[list[str]]:
    """A streamed chunk's rows (`names`, in graph order) in consecutive batches whose outputs
    together take at most `budget` bytes (a row larger than that alone), each isolated, replayed
    and judged before the next is isolated: the backend's isolated outputs of a batch are held
    until its rows are judged, and a chunk of a detector's mask paste (100 x 600 x 800 values)
    would hold 1.8 GB of them at once. One batch when `budget` is None (a model held whole), and
    where rows judge across a batch's edge: the backend's fused layers as regions, quantized rows."""
    if budget is None or analysis.runtime_fusions or any(quant_rows.is_quantized_op(records[fx].aten) for fx in names):
        return [names]
    batches: list[list[str]] = [[]]
    held = 0
    for fx in names:
        size = sum(sizes.get(name, 0) for name in analysis.groups[fx].outputs.values())
        if batches[-1] and held + size > budget:
            batches.append([])
            held = 0
        batches[-1].append(fx)
        held += size
    return batches


KEPT_ARTIFACTS = 10
"""Ops whose reproducer tensors are kept when torch's values are streamed: those with the
largest errors (failing first), as many as a report writes reproducers for."""


def _keep_worst_artifacts(records: Iterable[OpRecord], folder: SpillFolder | None = None) -> None:
    """Drop the reproducer tensors (views that would hold torch's values) of every measured op
    but the KEPT_ARTIFACTS worst; with a `folder`, the kept ones move there (analysis.spilled),
    so that they hold no torch value in memory either."""
    measured = [record for record in records if record.artifacts is not None]
    measured.sort(key=lambda record: (record.passed is False, record.error_ratio), reverse=True)
    for record in measured[KEPT_ARTIFACTS:]:
        record.artifacts = None
    if folder is not None:
        for record in measured[:KEPT_ARTIFACTS]:
            spill(record.artifacts, folder)


def _isolate_chunk(records: dict[str, OpRecord], analysis: FxAnalysis, sources: Mapping[str, tuple[str, int]],
                   timings: dict[str, float], run: ModelRunner | None = None
                   ) -> tuple[dict[str, tuple[OpRecord, NodeGroup]], dict[str, dict[str, Comparison]]]:
    """(the fused layers' regions, every isolated comparison) of one chunk of rows, its
    subgraphs and regions in one batch run by `run` (the analysis's runner by default)."""
    started = time.perf_counter()
    regions = _region_rows(records, analysis)
    isolated = _isolated(records, analysis, sources, regions, run=run)
    timings["isolated_s"] += time.perf_counter() - started
    return regions, isolated


def _measure_chunk(records: dict[str, OpRecord], analysis: FxAnalysis, truth: _TruthPass, rule: VerdictRule,
                   timings: dict[str, float],
                   isolation: tuple[dict[str, tuple[OpRecord, NodeGroup]], dict[str, dict[str, Comparison]]]) -> None:
    """Replay in float64 and judge one chunk of rows, isolated (`isolation`: `_isolate_chunk`);
    then drop the backend's isolated values of the rows that passed (a failing row keeps them
    beside its reproducer's inputs). Without fused layers' regions, each row is judged as soon
    as its truth is filled, and a passing row's isolated values go then (a detector's mask
    rows hold 183 MiB each); a quantize or dequantize row keeps them for quant_rows."""
    regions, isolated = isolation
    started = time.perf_counter()
    judged: set[str] = set()

    def judge_row(node: torch.fx.Node, pairs: Mapping[str, TruthPair]) -> None:
        record = records[node.name]
        _judge(record, isolated.get(node.name, {}), pairs, rule, analysis)
        judged.add(node.name)
        if (not regions and record.artifacts is not None and record.passed is not False
                and str(node.target) not in quant_rows.QUANTIZE_OPS | quant_rows.DEQUANTIZE_OPS):
            record.artifacts.isolated_outputs = {}

    truths = truth.measure(records, isolated, after=judge_row)
    for fx, record in records.items():
        if fx not in judged:
            _judge(record, isolated.get(fx, {}), truths.get(fx, {}), rule, analysis)
    _judge_fused_layers(records, analysis, rule, regions, isolated, timings)
    quant_rows.annotate_rows(records, analysis)  # reads the isolated outputs, dropped next
    for record in records.values():
        if record.artifacts is not None and record.passed is not False:
            record.artifacts.isolated_outputs = {}
    del isolated, truths
    release_freed_memory()
    timings["truth_s"] += time.perf_counter() - started


def _judge(record: OpRecord, isolated: Mapping[str, Comparison], truths: Mapping[str, TruthPair],
           rule: VerdictRule, analysis: FxAnalysis) -> None:
    """Decide one row; a row the backend ran below its declared precision is judged at the
    precision it ran at, and named when only that lower precision lets it pass."""
    lower = _lower_precision(record)
    if not lower:
        decide(record, isolated, truths, rule, analysis.table.lookup("*", analysis.device, record.dtype or None))
        return
    decide(record, isolated, truths, rule, analysis.table.lookup("*", analysis.device, lower), precision=lower)
    if record.verdict is None:
        return
    record.notes.append(f"{record.runtime_precision.describe()}: judged by the {lower} rule, below the declared "
                        f"{record.dtype}")
    declared = verdicts_for(record, isolated, truths, rule,
                            analysis.table.lookup("*", analysis.device, record.dtype or None))
    if record.passed and not all(v.passed for v in declared):
        record.blame = BLAME_RUNTIME_PRECISION
        record.notes.append(f"its error passes only at {lower}: the {record.dtype} rule it declares would fail it "
                            "(the backend's precision, not the export)")


REGION_KEY = "runtime-region:"
"""The isolation key of a fused layer's region, beside the rows' own (FX node names)."""


def _annotate_fusions(records: dict[str, OpRecord], analysis: FxAnalysis) -> None:
    """The backend's fused layers onto the rows they cover (runtime_regions)."""
    if analysis.runtime_fusions:
        runtime_regions.annotate(records, runtime_regions.fused_layers(analysis.runtime_fusions, analysis.groups))


def _region_rows(records: Mapping[str, OpRecord], analysis: FxAnalysis) -> dict[str, tuple[OpRecord, NodeGroup]]:
    """{isolation key: (a scratch row, its group)} of each fused layer that ran several FX nodes
    and outputs the value of one of `records`: isolated in the same batch as the rows."""
    if not analysis.runtime_fusions:
        return {}
    layers = [layer for layer in runtime_regions.fused_layers(analysis.runtime_fusions, analysis.groups)
              if layer.is_region and layer.output in records]
    for layer in [layer for layer in layers if quant_rows.is_quantized_op(records[layer.output].aten)]:
        # a layer ending in a quantize is an integer kernel that requantizes: the step rule judges
        # it (quant_rows reads the same layer), not an exact comparison of its integers
        records[layer.output].notes.append("its fused runtime layer is judged by the step rule as a quantized region")
        layers.remove(layer)
    if layers and isinstance(analysis.values, TorchValues) and analysis.values.streaming:
        for layer in layers:
            records[layer.output].notes.append("its fused runtime layer was not judged as a region: torch's values "
                                               "were streamed and released")
        return {}
    found = {}
    positions = runtime_regions.node_positions(analysis.onnx_model)
    for layer in layers:
        group = runtime_regions.region_group(layer, analysis.groups, analysis.onnx_model, positions)
        found[REGION_KEY + layer.output] = (_record(group, analysis), group)
    return found


def _judge_fused_layers(records: dict[str, OpRecord], analysis: FxAnalysis, rule: VerdictRule,
                        regions: Mapping[str, tuple[OpRecord, NodeGroup]], isolated: Mapping[str, Mapping[str, Comparison]],
                        timings: dict[str, float]) -> None:
    """Each fused layer that ran several FX nodes judged as one region on its output's row:
    isolated together from torch's values (`isolated`, in the rows' batch), against its
    members' fp64 truth replayed in sequence (from the first member's per-op truth). A failing
    region fails that row, whose verdict becomes the region's."""
    if not regions:
        return
    started = time.perf_counter()
    by_name = {n.name: n for n in analysis.program.graph.nodes}
    for key, (region, group) in regions.items():
        fx = group.fx_node
        truths: dict[str, TruthPair] = {}
        members = _region_members(group, analysis.program, by_name)
        reason = next((no_truth_reason(m) for m in members if no_truth_reason(m)), "")
        if reason:
            region.notes.append(f"no fp64 truth: {reason}")
        else:
            try:
                truth, length = replay_region(members, analysis.values, known=analysis.region_truths)
                truths = _fill_truth(region, group, by_name[fx], truth, None, analysis, isolated.get(key, {}),
                                     length=length)
            except OpCallFailed as failed:
                region.notes.append(f"no fp64 truth: the float64 call failed: {failed}"[:300])
        _judge(region, isolated.get(key, {}), truths, rule, analysis)
        _within_members(region, [records[m] for m in (records[fx].runtime_fusion or {}).get("fx_nodes", [])
                                 if m in records])
        _take_region(records[fx], region)
    timings["runtime_regions_s"] = timings.get("runtime_regions_s", 0.0) + time.perf_counter() - started


def _within_members(region: OpRecord, members: Sequence[OpRecord]) -> None:
    """A region whose error against the truth is no larger than what one of its member rows was
    allowed alone passes: the members it adds after that one round once more at most (a Relu
    after its Conv rounds nothing), while torch's own error at the region's output, which the
    rule scales by, can be smaller than at the member's by chance (a Relu drops the elements
    where torch's Conv erred most)."""
    verdict = region.verdict
    if region.passed is not False or verdict is None or verdict.rule != "truth" or verdict.e_backend is None:
        return
    allowed = max((m.verdict.allowed for m in members if m.verdict is not None and m.verdict.passed
                   and m.verdict.rule == "truth" and m.verdict.allowed), default=None)
    if allowed is None or verdict.e_backend > allowed:
        return
    region.passed = True
    region.verdict = dataclasses.replace(
        verdict, passed=True, allowed=allowed, score=verdict.e_backend / allowed,
        reason=f"e_backend {verdict.e_backend:.3g} <= {allowed:.3g}, what a member of the region was allowed alone "
               f"(the rule at the region's output: {verdict.reason})")


def _take_region(record: OpRecord, region: OpRecord) -> None:
    """The fused layer's region judgement onto its output's row."""
    fusion = dict(record.runtime_fusion or {})
    fusion.update(passed=region.passed, isolated=region.isolated.to_dict() if region.isolated else None,
                  verdict=region.verdict.to_dict() if region.verdict is not None else None)
    record.runtime_fusion = fusion
    if region.passed is False and record.passed is not False:
        record.passed = False
        if region.verdict is not None:
            record.verdict = dataclasses.replace(
                region.verdict, reason=f"the runtime's fused layer {fusion.get('layer')!r} as a region "
                                       f"({' + '.join(fusion.get('fx_nodes', []))}): {region.verdict.reason}")
        record.notes.append(f"its fused runtime layer {fusion.get('layer')!r} fails as a region "
                            f"({' + '.join(fusion.get('fx_nodes', []))})")


def _lower_precision(record: OpRecord) -> str:
    """The precision the backend ran the row at when lower than its declared dtype, else ''."""
    if record.runtime_precision is None or not record.dtype:
        return ""
    return record.runtime_precision.precision if is_lower(record.runtime_precision.precision, record.dtype) else ""


def _record(group: NodeGroup, analysis: FxAnalysis) -> OpRecord:
    dtype = _op_dtype(describe_value(analysis.values, group.fx_node))
    precision = row_precision([n.name for n in group.nodes], analysis.runtime_precisions)
    if precision is None and analysis.declared_only and dtype:
        precision = RuntimePrecision(dtype, DECLARED)
    judged = precision.precision if precision is not None and dtype and is_lower(precision.precision, dtype) else dtype
    tolerance = analysis.table.lookup(group.aten, analysis.device, judged or None)
    return OpRecord(
        fx_node=group.fx_node, aten=group.aten,
        onnx_nodes=[n.name for n in group.nodes], onnx_ops=[n.op_type for n in group.nodes],
        scope=group.scope, source=group.source, tolerance=tolerance.to_dict(), region=list(group.region),
        dtype=dtype, backend=analysis.backend, runtime_precision=precision,
        computed_by=analysis.backend.split(":", 1)[0],
    )


def row_precision(onnx_nodes: Sequence[str], precisions: Mapping[str, RuntimePrecision]) -> RuntimePrecision | None:
    """The precision a row ran at: the lowest floating precision among its ONNX nodes' (a
    row is as precise as its least precise node), else its last node's; None when unknown."""
    known = [precisions[name] for name in onnx_nodes if name in precisions]
    if not known:
        return None
    floating = [p for p in known if p.precision in ("float64", "float32", "float16", "bfloat16")]
    if not floating:
        return known[-1]
    lowest = floating[-1]
    for candidate in floating:
        if is_lower(candidate.precision, lowest.precision):
            lowest = candidate
    return lowest


def _op_dtype(value: Any) -> str:
    """The op's own dtype: its first floating output's (else its first tensor's), '' for none."""
    tensors = [v for v in (value if isinstance(value, (tuple, list)) else [value]) if isinstance(v, torch.Tensor)]
    chosen = next((t for t in tensors if t.is_floating_point()), tensors[0] if tensors else None)
    return dtype_key(chosen.dtype) if chosen is not None else ""


def _tolerance(record: OpRecord) -> Tolerance:
    return Tolerance(**record.tolerance)


def _torch_output(analysis: FxAnalysis, group: NodeGroup, index: int) -> Any:
    return output_at(analysis.values.get(group.fx_node), index)


def _compare_outputs(group: NodeGroup, actual: Mapping[str, Any], analysis: FxAnalysis,
                     record: OpRecord) -> list[Comparison]:
    node = next(n for n in analysis.program.graph.nodes if n.name == group.fx_node) if draws.random_op(group.aten) else None
    if node is not None and draws.draws_here(node):  # its values are draws: checked by their law (analysis.draws)
        return draws.compare_draws(record, node, analysis.values, actual,
                                   lambda index: _torch_output(analysis, group, index), group.outputs)
    tolerance = _tolerance(record)
    selecting = _index_judge(group, analysis)
    comparisons = []
    for index, name in sorted(group.outputs.items()):
        expected = _torch_output(analysis, group, index)
        if name in actual and _comparable(expected):
            if selecting is not None and index == selecting[0]:
                comparisons.append(selecting[1](actual[name], as_array(expected), name))
                record.check = "selection"
                continue
            comparisons.append(compare(actual[name], as_array(expected), atol=tolerance.atol,
                                       rtol=tolerance.rtol, name=name))
    return comparisons


def _index_judge(group: NodeGroup, analysis: FxAnalysis) -> tuple[int, Callable[[Any, np.ndarray, str], Comparison]] | None:
    """(the output index, its comparison) for an op whose output is indices (harness.metrics.ties):
    judged through the values they select in torch's value of the indexed input, so that a tie
    broken another way is no divergence."""
    spec = ties.index_output(group.aten)
    if spec is None:
        return None
    node = next((n for n in analysis.program.graph.nodes if n.name == group.fx_node), None)
    if node is None or len(node.args) <= spec.source or not isinstance(node.args[spec.source], torch.fx.Node):
        return None
    source = analysis.values.get(node.args[spec.source].name)
    if not isinstance(source, torch.Tensor) or not source.is_floating_point():
        return None
    values = as_array(source)
    args = list(node.args)
    axis = None if spec.selection else ties.dim_of(spec, args, values.ndim)
    keeps = ties.keeps_dim(spec, args)

    def judge(actual_value: Any, expected: np.ndarray, name: str) -> Comparison:
        return ties.compare_selection(as_array(actual_value), expected, values, axis=axis, keeps_dim=keeps,
                                      selection=spec.selection, name=name)

    return spec.output, judge


def _comparable(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, int, float, bool)) or type(value).__name__ in ("SymInt", "SymFloat")





# --- isolated --------------------------------------------------------------------------------


def torch_lookup(analysis: FxAnalysis, sources: Mapping[str, tuple[str, int]] | None = None
                 ) -> Callable[[str], np.ndarray | str]:
    """ONNX value name -> torch's value as numpy, or why there is none (`sources`: the value
    names' FX nodes, fx_mapping.value_sources, computed when not given)."""
    if sources is None:
        sources = value_sources(analysis.onnx_model, analysis.program, analysis.groups)
    cache: dict[str, np.ndarray] = {}

    def lookup(name: str) -> np.ndarray | str:
        if name in cache:
            return cache[name]
        if name not in sources:
            return "it is an intermediate of another op's subgraph, torch has no value for it"
        fx, index = sources[name]
        value = output_at(analysis.values.get(fx), index)
        if value is None:
            return f"torch's value for {fx} output {index} is None"
        if not _comparable(value):
            return f"torch's value for {fx} is a {type(value).__name__}, not a tensor or scalar"
        cache[name] = as_array(value)
        return cache[name]

    return lookup


def _isolated(records: dict[str, OpRecord], analysis: FxAnalysis, sources: Mapping[str, tuple[str, int]] | None = None,
              extra: Mapping[str, tuple[OpRecord, NodeGroup]] | None = None,
              run: ModelRunner | None = None) -> dict[str, dict[str, Comparison]]:
    """Fill the isolated rows of `records`, and of `extra` ({key: (row, its group)}: the fused
    layers' regions), all their subgraphs in one batch run by `run` (the analysis's runner by
    default); return every isolated comparison by key (the FX node for a row of `records`) and
    value name."""
    items = [(fx, record, analysis.groups[fx]) for fx, record in records.items()]
    items += [(key, record, group) for key, (record, group) in (extra or {}).items()]
    subgraphs = [Subgraph(fx, group.nodes, [name for _, name in sorted(group.outputs.items())])
                 for fx, _, group in items]
    result = isolate(analysis.onnx_model, subgraphs, torch_lookup(analysis, sources), run or analysis.run,
                     analysis.initializer, strict=analysis.strict, fallback=analysis.fallback)
    isolated_by_name: dict[str, dict[str, Comparison]] = {}
    for fx, record, group in items:
        if group.folded_into:
            _folded(record, group, analysis)
            continue
        if fx in result.not_isolable:
            record.not_isolable = result.not_isolable[fx]
            record.passed = False if fx in result.backend_failed else None
            continue
        record.computed_by = result.computed_by.get(fx, record.computed_by)
        if fx in result.borrowed:
            record.notes.append(
                f"its isolated subgraph also computes {len(result.borrowed[fx])} node(s) of other ops whose "
                f"values torch does not have: {', '.join(result.borrowed[fx][:5])}"
            )
        actual = dict(zip([name for _, name in sorted(group.outputs.items())], result.outputs[fx]))
        comparisons = _compare_outputs(group, actual, analysis, record)
        if record.check == "selection":  # the isolated indices' verdict: a tie, or a wrong index
            record.notes.extend(c.note for c in comparisons if c.note and c.note not in record.notes)
        isolated_by_name[fx] = {c.name: c for c in comparisons}
        record.isolated = _worst(comparisons)
        record.passed = judge(record, comparisons)
        record.artifacts = OpArtifacts(
            source=analysis.source_model, weights=analysis.weights, nodes=list(result.subgraphs[fx].nodes),
            inputs=result.inputs.get(fx, {}),
            expected={name: as_array(_torch_output(analysis, group, index))
                      for index, name in sorted(group.outputs.items())
                      if _comparable(_torch_output(analysis, group, index))},
            reference="torch", device=analysis.device, tolerance=record.tolerance,
            environment=analysis.environment, isolated_outputs=actual,
        )
    return isolated_by_name


def _folded(record: OpRecord, group: NodeGroup, analysis: FxAnalysis) -> None:
    """An FX value the export computed itself (constant folding): nothing runs it, so its row
    compares the initializer it became with torch's value, as the accumulated error."""
    name = group.folded_into
    record.not_isolable = (f"folded into the initializer {name!r} at export (do_constant_folding): no ONNX "
                           "node computes it when the model runs; its accumulated row compares that initializer")
    expected = _torch_output(analysis, group, 0)
    array = _initializer_array(analysis, name)
    if array is not None and _comparable(expected):
        tolerance = _tolerance(record)
        record.accumulated = compare(array, as_array(expected), atol=tolerance.atol, rtol=tolerance.rtol, name=name)


def _initializer_array(analysis: FxAnalysis, name: str) -> np.ndarray | None:
    """An initializer's value: the shared array, else the data in the source model."""
    if analysis.weights is not None and name in analysis.weights.arrays:
        return analysis.weights.arrays[name]
    for tensor in analysis.source_model.graph.initializer:
        if tensor.name == name and tensor.data_location != onnx.TensorProto.EXTERNAL:
            return onnx.numpy_helper.to_array(tensor)
    return None


# --- fp64 truth and attribution --------------------------------------------------------------


class _TruthPass:
    """The fp64 truth and attribution of the rows, chunk by chunk in graph order, on one
    Replayer: each fp64 input is converted once and released after its last reader."""

    def __init__(self, records: Mapping[str, OpRecord], analysis: FxAnalysis) -> None:
        self.analysis = analysis
        self.nodes = {n.name: n for n in analysis.program.graph.nodes}  # a region's members looked up here
        self.by_name = {name: n for name, n in self.nodes.items() if name in records}
        self.replay = Replayer(list(self.by_name.values()), analysis.values, device="cpu", dtype=torch.float64,
                               weights=analysis.float64_weights, in_slices=True)
        self.wanted = runtime_regions.first_members(analysis.runtime_fusions, analysis.groups)

    def measure(self, records: Mapping[str, OpRecord], isolated: Mapping[str, Mapping[str, Comparison]],
                after: Callable[[torch.fx.Node, Mapping[str, TruthPair]], None] | None = None
                ) -> dict[str, dict[str, TruthPair]]:
        """Fill the truth and attribution of `records`; return each op's comparisons with the
        truth, by FX node and value name. `after(node, its comparisons)` runs once each replayed
        row is filled, before the next is replayed."""
        with replay_memory(self.analysis.values):
            return self._measure(records, isolated, after)

    def _measure(self, records: Mapping[str, OpRecord], isolated: Mapping[str, Mapping[str, Comparison]],
                 after: Callable[[torch.fx.Node, Mapping[str, TruthPair]], None] | None
                 ) -> dict[str, dict[str, TruthPair]]:
        analysis, replay = self.analysis, self.replay
        found: dict[str, dict[str, TruthPair]] = {}
        for node in (self.by_name[fx] for fx in records if fx in self.by_name):
            record = records[node.name]

            def fill(truth: Any, args: Any, length: int | None, members: Sequence[torch.fx.Node],
                     node: torch.fx.Node = node, record: OpRecord = record) -> None:
                if node.name in self.wanted:  # a fused layer starts here: its region replay starts from this truth
                    analysis.region_truths[node.name] = (_whole(truth), tuple(m.name for m in members) or (node.name,))
                found[node.name] = _fill_truth(record, analysis.groups[node.name], node, truth, args, analysis,
                                               isolated.get(node.name, {}), length=length)

            _replay_truth(node, analysis, replay, [record], fill, self.nodes)
            if after is not None:
                after(node, found.get(node.name, {}))
        return found


def _replay_truth(node: torch.fx.Node, analysis: FxAnalysis, replay: Replayer, rows: Sequence[OpRecord],
                  fill: Callable[[Any, Any, int | None, Sequence[torch.fx.Node]], None],
                  by_name: Mapping[str, torch.fx.Node]) -> None:
    """Replay `node` (or its optimised region's members, in sequence) in float64 and hand the
    truth to `fill(truth, args, region_length, region_members)`; the rows of every backend get
    the note when there is no truth: the op has none by nature, float64 has no kernel for it,
    or the harness's own code failed (raised in strict mode). `by_name`: the program's nodes by
    name, read once per pass (not once per region)."""
    group = analysis.groups[node.name]
    members = _region_members(group, analysis.program, by_name)
    reason = no_truth_reason(node) or next((no_truth_reason(m) for m in members if no_truth_reason(m)), "")
    if reason or not group.outputs:
        for record in rows if reason else ():
            record.notes.append(f"no fp64 truth: {reason}")
        replay.skip(node)
        return
    notes: list[str] = []
    try:
        with harness_errors(f"computing the fp64 truth of {node.name}", analysis.strict, notes,
                            findings=(OpCallFailed,)):
            if members:  # an optimised region: its members replayed in sequence
                replay.skip(node)
                truth, length = replay_region(members, analysis.values)
                args = None
            else:
                truth, args = replay(node)
                length = None
            fill(truth, args, length, members)
    except OpCallFailed as failed:  # an overload without a float64 kernel, say
        notes.append(f"no fp64 truth: the float64 call failed: {failed}"[:300])
    for record in rows:
        record.notes.extend(notes)


def _truth(measured: Sequence[tuple[dict[str, OpRecord], FxAnalysis, Mapping[str, Mapping[str, Comparison]]]]
           ) -> list[dict[str, dict[str, TruthPair]]]:
    """Fill every row's truth and attribution, each op's fp64 truth computed once for every
    backend's rows (`measured`: each backend's rows, analysis and isolated comparisons, on the
    same program and torch values); return each backend's comparisons with the truth, by FX
    node and value name."""
    found: list[dict[str, dict[str, TruthPair]]] = [{} for _ in measured]
    records, analysis, _ = measured[0]
    by_name = {n.name: n for n in analysis.program.graph.nodes}
    nodes = [n for n in by_name.values() if n.name in records]
    replay = Replayer(nodes, analysis.values, device="cpu", dtype=torch.float64, weights=analysis.float64_weights,
                      in_slices=True)
    wanted = {name for _, each, _ in measured for name in runtime_regions.first_members(each.runtime_fusions, each.groups)}
    for node in nodes:

        def fill(truth: Any, args: Any, length: int | None, members: Sequence[torch.fx.Node],
                 node: torch.fx.Node = node) -> None:
            if node.name in wanted:  # a fused layer starts here: its region replay starts from this truth
                for _, each, _ in measured:
                    each.region_truths[node.name] = (_whole(truth), tuple(m.name for m in members) or (node.name,))
            torch_sides: dict[tuple[str, float, float], Comparison] = {}  # torch against the truth, once
            for index, (rows, backend_analysis, isolated) in enumerate(measured):
                found[index][node.name] = _fill_truth(rows[node.name], analysis.groups[node.name], node, truth, args,
                                                      backend_analysis, isolated.get(node.name, {}), length=length,
                                                      torch_sides=torch_sides)

        _replay_truth(node, analysis, replay, [rows[node.name] for rows, _, _ in measured], fill, by_name)
    return found


def _whole(truth: Any) -> Any:
    """A replayed truth as one tensor (a TruthInSlices assembled)."""
    return truth.whole() if isinstance(truth, TruthInSlices) else truth


def _region_members(group: NodeGroup, program: torch.export.ExportedProgram,
                    by_name: Mapping[str, torch.fx.Node] | None = None) -> list[torch.fx.Node]:
    """The FX nodes of an optimised region in graph order; [] for an op of its own. `by_name`:
    the program's nodes by name, when the caller holds them."""
    if len(group.region) < 2:
        return []
    by_name = {n.name: n for n in program.graph.nodes} if by_name is None else by_name
    return [by_name[m.fx_node] for m in group.region if m.fx_node in by_name]


def _fill_truth(record: OpRecord, group: NodeGroup, node: torch.fx.Node, truth: Any, args: list[Any] | None,
                analysis: FxAnalysis, isolated_comparisons: Mapping[str, Comparison], *,
                length: int | None = None,
                torch_sides: dict[tuple[str, float, float], Comparison] | None = None) -> dict[str, TruthPair]:
    """Compare torch's and the backend's outputs of one row with its truth; `length` is the
    reduction length when the caller knows it (a region's largest), else computed from `args`.
    `torch_sides` holds torch's comparisons with the truth by (value, atol, rtol) across the
    backends judged on the same truth: each is computed once, and every backend's row gets a copy.
    A TruthInSlices is compared slice by slice (harness.analysis.truth.compare_with_truth)."""
    tolerance = _tolerance(record)
    isolated = record.artifacts.isolated_outputs if record.artifacts is not None else {}
    length = reduction_length(node, args, truth) if length is None else length
    roundings = max(len(group.region), 1)
    backend_side, torch_side = [], []
    pairs: dict[str, TruthPair] = {}
    noise = 0.0
    spec = ties.index_output(record.aten)
    for index, name in sorted(group.outputs.items()):
        if spec is not None and index == spec.output and record.check == "selection":
            continue  # indices: judged through the values they select, not against the truth's own ties
        expected = output_at(truth, index)
        in_slices = isinstance(expected, TruthInSlices)
        torch_value = _torch_output(analysis, group, index)
        if not (in_slices or _comparable(expected)) or not _comparable(torch_value):
            continue
        expected_array = expected if in_slices else as_array(expected)
        torch_array = as_array(torch_value)
        backend_array = as_array(isolated[name]) if name in isolated else None
        if len(group.region) < 2 and not in_slices:  # a nearest grid sample's picks on .5 ties: the truth's
            # (analysis.nearest_rows; a truth in slices is an exact element-wise op's, never a sample's)
            torch_array, backend_array = settle_row_ties(record, node, analysis.values, index, name, torch_array,
                                                         backend_array, expected_array, isolated_comparisons)
        noise = max(noise, analysis.noise_model.bound(
            torch_value.dtype if isinstance(torch_value, torch.Tensor) else torch_array.dtype, length, roundings))
        key = (name, tolerance.atol, tolerance.rtol)
        known = torch_sides.get(key) if torch_sides is not None else None
        compared = name in isolated and not _identical(isolated_comparisons.get(name))
        made = compare_with_truth([torch_array] * (known is None) + [backend_array] * compared, expected_array,
                                  atol=tolerance.atol, rtol=tolerance.rtol, name=name)
        if known is not None:
            torch_side.append(copy.copy(known))
        else:
            torch_side.append(made.pop(0))
            if torch_sides is not None:
                torch_sides[key] = copy.copy(torch_side[-1])
        if name in isolated:
            backend = backend_array
            backend_side.append(made.pop(0) if compared else
                                dataclasses.replace(torch_side[-1], dtype_actual=dtype_name(backend.dtype)))
        dtype = dtype_key(torch_value.dtype) if isinstance(torch_value, torch.Tensor) else dtype_name(torch_array.dtype)
        pairs[name] = TruthPair(backend_side[-1] if name in isolated else None, torch_side[-1], length, dtype,
                                roundings, cell_roundings(node))
        scale = _truth_scale(torch_side[-1], expected_array)
        record.truth_scale = max(record.truth_scale or 0.0, scale)
        note = overflow_note(dtype, scale)
        if note:
            record.notes.append(note)
    if not torch_side:
        return pairs
    record.reduction_length = length
    record.noise_bound = noise
    record.torch_truth = max(torch_side, key=lambda c: c.normalized)
    record.truth = max(backend_side, key=lambda c: c.normalized) if backend_side else None
    record.attribution = attribute(record.truth, record.torch_truth, record.noise_bound, analysis.noise_model)
    return pairs


def _truth_scale(comparison: Comparison, expected: np.ndarray | TruthInSlices) -> float:
    """The truth's largest finite magnitude: the scale `comparison` (against `expected`) already
    found when every element of both sides was finite, else counted again."""
    floating = (comparison.dtype_expected.startswith("float") if isinstance(expected, TruthInSlices)
                else expected.dtype.kind == "f")
    if comparison.shape_match and floating and not comparison.nonfinite_expected and not comparison.nonfinite_mismatch:
        return comparison.scale
    return truth_largest_finite(expected)


def _identical(isolated: Comparison | None) -> bool:
    """The isolated comparison found the backend's output equal to torch's (so their errors
    against the truth are the same comparison)."""
    return (isolated is not None and isolated.shape_match and isolated.dtype_match
            and isolated.max_abs == 0 and isolated.nonfinite_mismatch == 0)


# --- noise floor (CUDA) ------------------------------------------------------------------------


def _noise_floor(records: dict[str, OpRecord], analysis: FxAnalysis) -> None:
    """torch CPU fp32 against torch on the device, per op, on the same inputs."""
    nodes = [n for n in analysis.program.graph.nodes if n.name in records]
    replay = Replayer(nodes, analysis.values, device="cpu", dtype=None)
    for node in nodes:
        record, group = records[node.name], analysis.groups[node.name]
        if no_truth_reason(node) or not group.outputs:
            replay.skip(node)
            continue
        try:
            with harness_errors(f"computing the noise floor of {node.name}", analysis.strict, record.notes,
                                findings=(OpCallFailed,)) as failed_here:
                cpu_value, _ = replay(node)
        except OpCallFailed as failed:
            record.notes.append(f"no noise floor: the CPU call failed: {failed}"[:300])
            continue
        if failed_here:
            continue
        tolerance = _tolerance(record)
        floors = [
            compare(as_array(_torch_output(analysis, group, index)), as_array(output_at(cpu_value, index)),
                    atol=tolerance.atol, rtol=tolerance.rtol, name=name)
            for index, name in sorted(group.outputs.items())
            if _comparable(_torch_output(analysis, group, index)) and _comparable(output_at(cpu_value, index))
        ]
        record.noise_floor = _worst(floors)
