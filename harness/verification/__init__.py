"""`harness.verify`: prove, op by op, that an ONNX model computes what the module computes.

Steps: export (or take the given ONNX model) -> onnx checker -> torch values of every FX node
-> production backend run vs torch outputs -> per-op analysis:

* with an FX mapping (roundtrip, torch.onnx): ONE instrumented run (accumulated error per
  op), ONE batched isolation run (isolated error per op, fed torch's values), the fp64 truth
  and attribution per op, and on CUDA the torch CPU-vs-CUDA noise floor
  (harness.analysis.fx_rows);
* without one (torchscript): the same per ONNX node against onnx's ReferenceEvaluator
  (harness.analysis.onnx_rows).

The outputs are judged like the ops (harness.metrics.verdict): against the module's outputs in
float64, capped by the table's `output` row for their dtype, unless output tolerances are given.

The production, instrumented and isolation sessions (CPU and CUDA) take the weight arrays
directly (runtime.SharedWeights) instead of each parsing them out of a serialised model; a
roundtrip export hands over its skeleton and the arrays of the module's own parameters, so no
weight is copied or serialised on the way to onnxruntime. The sessions run one at a time, each
released before torch computes again, with their threads sized to torch's and never spinning.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
import torch
import torch.utils._pytree as pytree

from exporter.contract.metadata import describe_check, dropped_checks
from harness import runtime
from harness.analysis.backend_runs import DEFAULT_BACKEND, BackendRun, annotate_node_rows, resolve_backends
from harness.analysis import overlap
from harness.analysis.budget import values_budget
from harness.analysis.quant_rows import QUANT_STEPS_RULE
from harness.analysis.strictness import harness_errors
from harness.analysis.truth import Float64Weights
from harness.analysis.torch_values import (
    VALUES_BUDGET, TorchValues, describe_value, flat_user_inputs, output_values, record_values,
)
from harness.verification.checker import run_checker
from harness.exporters import EXPORTERS, ExportedForVerification, export_for_verification
from harness.metrics.arrays import as_array, flatten_outputs
from harness.metrics.detections import detection_layout, mark_matched_rows
from harness.metrics.tolerances import ToleranceTable
from harness.verification.options import VerifyOptions
from harness.verification.outputs import (  # noqa: F401  (judge_outputs, tolerance_table: read from here too)
    judge_detections, judge_outputs, nearest_outputs, quantized_outputs, run_eager, tolerance_table,
)
from harness.records import Verification
from harness.runtime.dtypes import cast_for_dtype, run_dtype, value_dtypes
from harness.runtime.memory import release_freed_memory, reusing_freed_memory

logger = logging.getLogger(__name__)


def verify(
    model: torch.nn.Module,
    args: Any,
    *,
    kwargs: Mapping[str, Any] | None = None,
    device: str = "cpu",
    exporter: str = "roundtrip",
    onnx_model: onnx.ModelProto | str | None = None,
    opset_version: int | None = None,
    tolerances: ToleranceTable | str | None = None,
    per_op: bool = True,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    input_names: Sequence[str] | None = None,
    output_atol: float | None = None,
    output_rtol: float | None = None,
    allowed_mismatch: float = 0.0,
    tf32: bool = False,
    model_name: str | None = None,
    strict: bool | None = None,
    dtype: str | torch.dtype | None = None,
    optimize: bool = True,
    session_options: Any = None,
    backends: Sequence[Any] = (DEFAULT_BACKEND,),
    shapes: int | Sequence[Mapping[str, int]] | None = None,
    axis_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> Verification:
    """Export `model` on `args` and `kwargs` (or take `onnx_model`, made by `exporter`) and
    verify it. `optimize=False` verifies roundtrip's one-node-per-op graph instead of the
    optimised one.

    The other keyword arguments are `VerifyOptions` (harness.verification.options), documented there.

    `shapes` verifies the same ONNX model over a sweep of sizes of its dynamic axes
    (harness.shapes): a count N (the traced size and the N - 1 most informative others: moved to
    primes, non-square, the range's bounds, both sides of each guard torch.export recorded) or a
    list of {axis name: size}. `axis_ranges` ({axis name: (lowest, highest)}) bounds the axes
    (default: the ranges the captured program allows). The verdict covers every size; the sweep
    is in `Verification.shape_sweep`, which names the first failing size and its first failing op.

    `dtype` ("float16", torch.bfloat16, ...) verifies a copy of the module with its floating
    parameters, buffers and inputs cast to it (harness.runtime.dtypes); `model` is left as it is.

    `args` and `kwargs` may hold any inputs torch.export accepts (tensors, Python scalars,
    dicts, lists, tuples, nested); the ONNX model's inputs are their tensor leaves, flattened.
    The model passes when the checker passes and every output passes its verdict
    (harness.verification.outputs). Failing rows of further backends say who is wrong
    (harness.analysis.blame).
    """
    options = VerifyOptions.from_arguments(locals(), model_name=model_name or type(model).__name__)
    options = replace(options, backends=resolve_backends(options.backends, options.device))
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    args = args if isinstance(args, tuple) else (args,)
    training = training_mode_note(model)
    if dtype is not None:
        model, args, kwargs = cast_for_dtype(model, args, kwargs, dtype)
    if runtime.DeviceSpec.parse(options.device).kind == "cuda":  # fail before exporting: the reason is the answer
        runtime.require_cuda()
    started = time.perf_counter()
    exported = export_for_verification(
        exporter, model, args, kwargs=kwargs, onnx_model=onnx_model, opset_version=opset_version,
        dynamic_axes=dynamic_axes, input_names=input_names, optimize=optimize,
    )
    export_s = time.perf_counter() - started
    if training:
        exported.notes.insert(0, training)
    verification = verify_with_options(exported, args, kwargs, model, options)
    verification.timings = {"export_s": export_s, **verification.timings}
    if shapes is not None:
        sweep_shapes(verification, exported, model, args, shapes, kwargs=kwargs, dynamic_axes=dynamic_axes,
                     axis_ranges=axis_ranges, device=options.device, tolerances=options.tolerances,
                     output_atol=output_atol, output_rtol=output_rtol, allowed_mismatch=allowed_mismatch, tf32=tf32,
                     strict=strict, session_options=session_options, backends=tuple(options.backends))
    return verification


def sweep_shapes(verification: Verification, exported: ExportedForVerification, module: torch.nn.Module,
                 args: tuple[Any, ...], shapes: int | Sequence[Mapping[str, int]], *,
                 kwargs: Mapping[str, Any] | None = None, dynamic_axes: Any = None,
                 axis_ranges: Mapping[str, tuple[int, int]] | None = None, make_inputs: Any = None,
                 locate: bool = True, **settings: Any) -> None:
    """Run a shape sweep (harness.shapes) of `exported` around the traced `verification`, put it
    on `verification.shape_sweep` and fold its verdict into `verification.passed`."""
    from exporter.capturing.signature import normalize_dynamic_axes
    from harness.shapes.sweep import SweepSettings, run_sweep

    if isinstance(shapes, bool) or (isinstance(shapes, int) and shapes < 1):
        raise ValueError(f"shapes={shapes!r}: give a count of sizes (at least 1) or a list of {{axis: size}}")
    sweep = run_sweep(exported, module, args, verification, shapes, kwargs=kwargs,
                      dynamic_axes=normalize_dynamic_axes(dynamic_axes), axis_ranges=axis_ranges,
                      make_inputs=make_inputs, verify=verify_with_options,
                      settings=SweepSettings(model_name=verification.model_name, locate=locate, **settings))
    verification.shape_sweep = sweep
    verification.notes.extend(sweep.axes.fixed + sweep.axes.notes)
    verification.notes.extend(f"shape sweep at {size.point.label()}" + (f" on {size.backend}" if size.backend else "")
                              + f": {size.error}" for size in sweep.static_sizes)
    verification.notes.extend(f"shape sweep: {backend} skipped: {why}" for backend, why in sweep.skipped_backends.items())
    if sweep.diagnosis:
        verification.notes.append(f"shape sweep: {sweep.diagnosis}")
    verification.timings["sweep_s"] = sum(sweep.timings.values())
    verification.passed = verification.passed and sweep.passed


def training_mode_note(model: torch.nn.Module) -> str:
    """The note for a module found in training mode ('' in eval mode): every exporter captures
    it in eval mode, so eval-mode behaviour is what gets verified. A PT2E-quantized module, which
    refuses eval(), is captured as its graph stands: its flags say nothing, so no note."""
    from exporter.capturing.trace import refuses_mode_switch

    if refuses_mode_switch(model):
        return ""
    training = [name or type(model).__name__ for name, module in model.named_modules() if module.training]
    if not training:
        return ""
    listed = ", ".join(training[:4]) + (", ..." if len(training) > 4 else "")
    return (
        f"the module was in training mode ({listed}); it was exported and verified in eval mode "
        "(dropout off, batch norm on its running statistics), and left in the mode it was found in"
    )


def verify_exported(
    exported: ExportedForVerification,
    args: tuple[Any, ...],
    *,
    kwargs: Mapping[str, Any] | None = None,
    module: torch.nn.Module | None = None,
    device: str = "cpu",
    tolerances: ToleranceTable | str | None = None,
    per_op: bool = True,
    output_atol: float | None = None,
    output_rtol: float | None = None,
    allowed_mismatch: float = 0.0,
    tf32: bool = False,
    model_name: str = "model",
    strict: bool | None = None,
    session_options: Any = None,
    backends: Sequence[Any] = (DEFAULT_BACKEND,),
) -> Verification:
    """Verify an already exported model (`verify` without the export; benchmarks time this).

    Torch's values come from `exported.program` run on the flattened `args` and `kwargs`, or
    from `module` run eagerly when there is no program (then per-op analysis is per ONNX node
    against the ReferenceEvaluator). Only the user outputs are compared: buffers and inputs the
    module updates in place are named in a note, since an ONNX model cannot express the update.
    The keyword arguments are `VerifyOptions` (harness.verification.options).
    """
    return verify_with_options(exported, args, kwargs, module, VerifyOptions.from_arguments(locals()))


@dataclass
class _Run:
    """One verification's state, carried through its steps."""

    exported: ExportedForVerification
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] | None
    module: torch.nn.Module | None
    options: VerifyOptions
    spec: runtime.DeviceSpec
    table: ToleranceTable
    ort_config: Any
    backends: Sequence[Any]
    verification: Verification
    torch_args: tuple[Any, ...] = ()
    torch_kwargs: dict[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    expected: list[Any] = field(default_factory=list)
    layout: Any = None
    shared: Any = None
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    production: Any = None
    others: list[BackendRun] = field(default_factory=list)
    float64_weights: Any = None  # truth.Float64Weights: parameters' fp64 copies shared by the fp64 passes

    @property
    def actual(self) -> list[Any] | None:
        return self.production.outputs if self.production is not None else None


def verify_with_options(exported: ExportedForVerification, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
                        module: torch.nn.Module | None, options: VerifyOptions) -> Verification:
    """`verify_exported` with its options gathered, as named steps: torch's values, the
    production runs, the outputs' verdicts, the per-op rows, the draws' distributions."""
    if exported.program is None and module is None:
        raise ValueError("an export without an FX program needs the module to compute torch's outputs")
    spec = runtime.DeviceSpec.parse(options.device)
    backends = resolve_backends(options.backends, options.device)
    verification = new_verification(exported.model, spec, model_name=options.model_name or "model",
                                    exporter=exported.exporter, notes=exported.notes)
    verification.backend = str(backends[0].spec)
    with _heap_frozen():
        return _verify_steps(exported, args, kwargs, module, options, spec, backends, verification)


@contextlib.contextmanager
def _heap_frozen() -> Any:
    """Python's cyclic collector leaves alone, while the verification runs, the objects alive
    when it starts (torch's, onnx's and the model's: about 470,000 for a zoo model, each full
    collection of which took 0.27 s, one or more per verification of densenet121). Objects the
    verification makes are collected as usual; the others go back to the collector at the end, and
garbage among them that only a full collection finds waits until then."""
    frozen = gc.get_freeze_count() > 0  # an outer verification froze them (a shape sweep's sizes)
    if not frozen:
        gc.collect(1)  # the young garbage first (cheap): a cycle frozen would be kept to the end
        gc.freeze()
    try:
        yield
    finally:
        if not frozen:
            gc.unfreeze()


def _verify_steps(exported: ExportedForVerification, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
                  module: torch.nn.Module | None, options: VerifyOptions, spec: runtime.DeviceSpec,
                  backends: Sequence[Any], verification: Verification) -> Verification:
    """The steps of `verify_with_options`, each timed."""
    run = _Run(exported, args, kwargs, module, options, spec, tolerance_table(options.tolerances),
               runtime.OrtConfig.of(options.session_options), backends, verification)
    with runtime.device_context(spec, tf32=options.tf32) as environment, \
            overlap.worker(spec.kind == "cpu" and len(backends) > 1) as worker:
        verification.environment = {**environment, **runtime.versions(), "torch_seed": torch.initial_seed(),
                                     "onnxruntime_session": runtime.session_record(run.ort_config),
                                     "dtype": run_dtype(module, (args, kwargs)),
                                     "value_dtypes": value_dtypes(exported.program)}
        _model_inputs(run)
        # the first backend's production run before torch's values are held: its session (and
        # the weights it packs, a Llama's 1.3 GiB) is gone by then
        _timed(run, "backend_s", _production_run)
        others = worker.submit(_start_other_backends, run)  # their production runs, beside torch's work
        with contextlib.ExitStack() as reuse:
            # a model whose values and float64 weights are held whole reuses the blocks each phase
            # frees (harness.runtime.memory.reusing_freed_memory) and trims once at the end, instead
            # of trimming after every session and having the next phase fault the same pages in
            # again; a streamed model (or one whose float64 weights are not held) trims as it goes
            reuse.enter_context(reusing_freed_memory())
            _timed(run, "torch_s", _torch_values)
            run.float64_weights = _float64_weights(run)
            run.others = others.result()
            if run.float64_weights is None:
                reuse.close()
            if run.actual is not None:
                _judge_outputs(run)
            per_op = options.per_op or _outputs_need_rows(run)
            if per_op:
                _timed(run, "per_op_s", _per_op_rows)
            if run.float64_weights is not None:  # the fp64 passes are done
                run.float64_weights.clear()
        if exported.program is not None and run.actual is not None:
            _judge_draws(run)
        if per_op and exported.program is not None and run.actual is not None:
            _dequantized_outputs_by_rows(verification, quantized_outputs(exported.program, run.values))
    verification.passed = verification.verdict(
        backend_ran=run.actual is not None,
        output_counts_match=run.actual is not None and len(run.actual) == len(run.expected),
    )
    _fold_quantized_rows(verification)
    verification.backend_results = [other.finish(verification.checker.passed, len(run.expected))
                                    for other in run.others]
    return verification


def _outputs_need_rows(run: _Run) -> bool:
    """Whether a verification of the outputs alone (per_op=False) needs the per-op rows all the
    same: a dequantized output outside the float rule cannot be judged by outputs alone, since its
    distance from torch is the quantized regions' allowed differences compounded; only their rows
    can judge it (`_dequantized_outputs_by_rows`), as where per-op analysis was asked for. Noted."""
    if run.exported.program is None or run.actual is None:
        return False
    verdicts = run.verification.output_verdicts
    quantized = quantized_outputs(run.exported.program, run.values)
    outside = [verdict.output or f"#{index}" for index, (verdict, qparams) in enumerate(zip(verdicts, quantized))
               if qparams is not None and not verdict.passed]
    if len(verdicts) != len(quantized) or not outside:
        return False
    run.verification.notes.append(
        f"per-op rows computed although only the outputs were asked for: the dequantized output(s) "
        f"{', '.join(outside)} outside the float rule are judged by the quantized regions' rows")
    return True


def _dequantized_outputs_by_rows(verification: Verification, quantized: Sequence[Any]) -> None:
    """A dequantized output of a model whose quantized regions the step rule judged: its distance
    from torch is what those regions' allowed differences (a step at a rounding tie, or where the
    runtime requantizes) became after every later layer, which the network may amplify without a
    bound the harness could state beforehand (quantized mobilenet_v2 at onnxruntime's `all`: every
    region within the rule, the output 53 steps from torch). So the rows decide: the output
    passes when no row fails, and its distance from torch stays in the verdict's reason. Without
    step-rule rows (per-op analysis off or impossible) the float rule decides, as before."""
    rows = [op for op in verification.ops if op.verdict is not None and op.verdict.rule == QUANT_STEPS_RULE]
    if not rows or len(verification.output_verdicts) != len(quantized):
        return
    failing = [op.fx_node for op in verification.ops if op.passed is False]
    for index, (verdict, qparams) in enumerate(zip(verification.output_verdicts, quantized)):
        if qparams is None or verdict.passed:
            continue
        verification.output_verdicts[index] = replace(
            verdict, passed=not failing, decided_by=QUANT_STEPS_RULE,
            reason=(f"{verdict.reason}; decided by the {len(rows)} quantized rows: "
                    + (f"{len(failing)} fail, first {failing[0]}" if failing else
                       "every one within the step rule, so the distance is their allowed differences compounded")))


def _fold_quantized_rows(verification: Verification) -> None:
    """A quantized model also fails where a quantize or dequantize row fails the step rule: that
    rule is exact up to named ties and requantization (0 false alarms on the quantized tier),
    while the dequantized outputs are judged by the float rule, whose allowance (twice torch's own
    quantization error against the fp64 truth) hides a zero point off by one step."""
    failing = [op for op in verification.ops if op.passed is False and op.verdict is not None
               and op.verdict.rule == QUANT_STEPS_RULE]
    if not failing:
        return
    if verification.passed:
        verification.notes.append(
            f"{len(failing)} quantized row(s) outside the step rule although the outputs are inside their "
            f"tolerance; first {failing[0].fx_node}: {failing[0].verdict.reason}")
    verification.passed = False


def _timed(run: _Run, key: str, step: Any) -> None:
    """Run `step(run)`, its seconds recorded under `key` in the record's timings."""
    started = time.perf_counter()
    step(run)
    run.verification.timings[key] = time.perf_counter() - started


def _torch_values(run: _Run) -> None:
    """Torch's value of every FX node (or the module's outputs run eagerly, without a program)."""
    exported, device = run.exported, run.spec.torch_device
    run.torch_args, run.torch_kwargs = pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(device), (tuple(run.args), dict(run.kwargs or {})))
    if exported.program is not None:
        run.values = record_values(exported.program, run.torch_args, kwargs=run.torch_kwargs, device=device,
                                   budget=_values_budget())
        run.expected = flatten_outputs(output_values(exported.program, run.values))
        run.layout = detection_layout(_output_tree(exported.program, run.expected))
        run.verification.notes.extend(_mutation_notes(exported.program))
    else:
        eager = run_eager(run.module, run.torch_args, run.torch_kwargs, device)
        run.expected, run.layout = flatten_outputs(eager), detection_layout(eager)


def _values_budget() -> int:
    """Bytes of values a verification holds whole: `VALUES_BUDGET` where set (tests), else sized
    from the memory available; torch's values and the fp64 weight copies read the same one."""
    return VALUES_BUDGET or values_budget()


def _float64_weights(run: _Run) -> Float64Weights | None:
    """Where the fp64 passes (the outputs' truth, then each op's) share their float64 copies of
    the parameters and buffers: per-op verification of a program whose values are held whole
    and whose float placeholders' float64 copies all fit in half the values budget (so a large
    model, or one whose values are streamed, never holds them longer than each pass needs)."""
    if not run.options.per_op or run.exported.program is None or (
            isinstance(run.values, TorchValues) and run.values.streaming):
        return None
    budget = _values_budget() // 2
    placeholders = [describe_value(run.values, node.name) for node in run.exported.program.graph.nodes
                    if node.op == "placeholder"]
    needed = sum(value.numel() * 8 for value in placeholders
                 if isinstance(value, torch.Tensor) and value.is_floating_point())
    return Float64Weights(budget) if needed <= budget else None


def _model_inputs(run: _Run) -> None:
    """The ONNX model's inputs (views of the user's tensors) and its weights to share between
    the sessions: what every backend's production run needs, before torch computes."""
    exported, model = run.exported, run.exported.model
    run.shared = runtime.SharedWeights.of(model, exported.weights)
    leaves = (flat_user_inputs(exported.program, run.args, run.kwargs) if exported.program is not None
              else (run.args, run.kwargs))
    run.feeds = dict(zip(runtime.real_inputs(model), _numpy_args(leaves)))


def _production_run(run: _Run) -> None:
    """The first backend's production run on the model's inputs."""
    run.production = run_production(run.verification, run.exported.model, run.spec, run.feeds,
                                    tf32=run.options.tf32, shared=run.shared, ort_config=run.ort_config,
                                    backend=run.backends[0])


def _start_other_backends(run: _Run) -> list[BackendRun]:
    """Each further backend's production run, judged with the first one's values later (on the
    verification's worker thread where harness.analysis.overlap is on: it reads only the model, its inputs
    and the shared weights)."""
    model, tf32 = run.exported.model, run.options.tf32
    return [BackendRun.start(backend, model, run.spec, run.feeds, tf32=tf32, shared=run.shared,
                             ort_config=run.ort_config) for backend in run.backends[1:]]


def _judge_outputs(run: _Run) -> None:
    """Every backend's outputs against torch's (harness.verification.outputs): detections matched box
    to box, other outputs by the rule against the fp64 truth unless tolerances are given."""
    verification, options, actual, expected = run.verification, run.options, run.actual, run.expected
    names = [o.name for o in run.exported.model.graph.output]
    judged = dict(table=run.table, device=run.spec.kind, atol=options.output_atol, rtol=options.output_rtol)
    if run.layout is not None and len(actual) == len(expected):  # detections: matched
        truth = _output_truth(run, module_first=True)
        judge = lambda record, outputs, precision: judge_detections(  # noqa: E731
            record, outputs, expected, run.layout, names, truth=truth, detector=run.module, **judged)
        judge(verification, actual, None)
    else:
        lowered = run.production.lowest_precision() or any(  # a backend below the declared precision
            other.production is not None and other.production.lowest_precision() for other in run.others)
        truth = None if options.given_output_tolerances and not lowered else _output_truth(run)
        steps, quantized = _rounding_steps(run.exported, run.values), quantized_outputs(run.exported.program, run.values)
        nearest = nearest_outputs(run.exported.program, run.values) if truth is not None else []
        judge = lambda record, outputs, precision: judge_outputs(  # noqa: E731
            record, outputs, expected, truth, names, allowed_mismatch=options.allowed_mismatch,
            rounding_steps=steps, precision=precision, quantized=quantized, nearest=nearest, **judged)
        judge(verification, actual, run.production.lowest_precision())
    for other in run.others:
        other.judge(judge)
    if len(actual) != len(expected):
        verification.notes.append(f"the ONNX model has {len(actual)} outputs, torch {len(expected)}")


def _per_op_rows(run: _Run) -> None:
    """The per-op rows of every backend that ran; outputs computed from a tied selection compared
    again where the selections agree; detections' rows marked where boxes matched."""
    analyses = _per_op(run)
    if run.exported.program is not None and run.actual is not None:
        _match_selected_outputs(run.verification, analyses, run.others, run.exported.program, run.values, run.actual,
                                run.expected)
    if run.layout is not None:
        run.verification.notes.extend(mark_matched_rows(run.verification.ops, run.verification.outputs))


def _judge_draws(run: _Run) -> None:
    """Outputs that are, or come from, random draws: compared and judged by their distribution."""
    from harness.analysis.draws import output_comparisons

    verification = run.verification
    by_value = verification.outputs
    verification.outputs = output_comparisons(run.exported.program, run.values, by_value,
                                              run.actual, run.expected, verification.ops)
    if len(verification.output_verdicts) == len(by_value):  # a draw is judged by its distribution
        verification.output_verdicts = [
            verdict if new is old else replace(verdict, passed=new.passed, decided_by="distribution",
                                               reason=new.note or "checked by distribution, not by value")
            for verdict, old, new in zip(verification.output_verdicts, by_value, verification.outputs)]


def _rounding_steps(exported: ExportedForVerification, values: Mapping[str, Any]) -> int:
    """How many ops rounded a floating result on the way to the outputs: the program's calls with
    a floating tensor value (the ONNX model's nodes when there is no program)."""
    if exported.program is None:
        return len(exported.model.graph.node)
    return sum(1 for node in exported.program.graph.nodes if node.op == "call_function"
               and isinstance(described := describe_value(values, node.name), torch.Tensor)
               and described.is_floating_point())


def _output_truth(run: _Run, module_first: bool = False) -> list[Any] | None:
    """The model's outputs in float64 (the program replayed node by node from torch's recorded
    inputs and weights, else the module run in float64; `module_first`: the module when there is
    one, as for detectors, whose captured program holds float32 dtype checks and casts), flattened;
    None, with a note, when it cannot run in float64. An error of the replay's own code is the
    harness's: raised in strict mode, else a note (harness.analysis.strictness), never an fp64
    failure of the model."""
    from harness.analysis.truth import OpCallFailed, model_truth, program_truth, replay_memory

    verification, exported, module = run.verification, run.exported, run.module
    if exported.program is None and module is None:
        return None
    started = time.perf_counter()
    try:
        with harness_errors("computing the fp64 truth of the outputs", run.options.strict, verification.notes,
                            findings=(OpCallFailed,)):
            if exported.program is not None and not (module_first and module is not None):
                with replay_memory(run.values):
                    return flatten_outputs(program_truth(exported.program, run.values, run.float64_weights))
            # a copy: a detector's forward keeps dtype-dependent state (torchvision's AnchorGenerator
            # stores its cell anchors in the dtype it last ran in), which a later export would capture
            return flatten_outputs(model_truth(_stateless_copy(module) if module_first else module, run.torch_args,
                                               run.torch_kwargs))
    except OpCallFailed as failed:
        verification.notes.append(f"no fp64 truth for the outputs: the float64 run failed: {failed}"[:300])
    finally:
        release_freed_memory()  # the float64 copies of the weights and values, freed
        verification.timings["output_truth_s"] = time.perf_counter() - started
    return None


def _stateless_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of `module` whose parameters and buffers are the module's own tensors, not
    copies (model_truth swaps in their float64 copies by name and changes none of them): the
    state its forward keeps in plain attributes is the copy's, at no copy of the weights."""
    shared = {id(tensor): tensor for tensor in (*module.parameters(), *module.buffers())}
    return copy.deepcopy(module, memo=shared)


def new_verification(model: onnx.ModelProto, spec: runtime.DeviceSpec, *, model_name: str, exporter: str,
                     notes: Sequence[str] = (), path: str | None = None) -> Verification:
    """A record for verifying `model` on `spec`, with the checker's verdict and nothing run yet;
    the checker reads `path` when the model came from a file (its external data where it lies)."""
    return Verification(
        model_name=model_name, exporter=exporter,
        device=spec.torch_device if spec.kind != "reference" else "reference",
        passed=False, checker=run_checker(path if path is not None else model), outputs=[],
        notes=[*notes, *(describe_check(check) for check in dropped_checks(model))],
        onnx_model=model,
    )


def run_production(verification: Verification, model: onnx.ModelProto, spec: runtime.DeviceSpec,
                   feeds: dict[str, np.ndarray], *, tf32: bool, shared: runtime.SharedWeights | None = None,
                   ort_config: runtime.OrtConfig | None = None, backend: Any = None) -> runtime.ProductionRun:
    """The production run (runtime.run_production) on `backend` (onnxruntime's CPU or CUDA
    session when None), its findings put on `verification`."""
    production = runtime.run_production(model, spec, feeds, tf32=tf32, shared=shared, ort_config=ort_config,
                                        backend=backend)
    if production.providers:
        verification.environment["providers"] = production.providers
    if backend is not None:
        verification.backend_settings = {**backend.settings(), **({"runtime": production.hints} if production.hints
                                                                  else {})}
    verification.cpu_placed_nodes = production.cpu_placed_nodes
    verification.notes.extend(production.notes)
    return production


def _match_selected_outputs(verification, analyses, others, program, values, actual_outputs, expected_outputs) -> None:
    """Each backend's failing outputs computed from an index row tied with torch's selection,
    compared again where the selections agree (harness.analysis.selections)."""
    from harness.analysis.selections import judged_again, match_outputs

    ran = [other for other in others if other.production is not None]
    for record, analysis, outputs in [(verification, analyses[0] if analyses else None, actual_outputs)] + [
            (other.result, result, other.production.outputs) for other, result in zip(ran, analyses[1:])]:
        if analysis is None or not analysis.selections or outputs is None or len(record.outputs) != len(outputs):
            continue
        before = record.outputs
        record.outputs = match_outputs(program, values, analysis.selections, before, outputs, expected_outputs)
        if len(record.output_verdicts) == len(before):
            record.output_verdicts = judged_again(record.output_verdicts, before, record.outputs)


def _per_op(run: _Run) -> list:
    """The per-op rows of the first backend into the run's verification, and of every further
    backend that ran (`run.others`, BackendRuns) into theirs; then who is wrong where they
    disagree. Returns each backend's OpAnalysis (first backend first)."""
    verification, exported, values, feeds, spec, table = (run.verification, run.exported, run.values, run.feeds,
                                                          run.spec, run.table)
    tf32, shared, strict, ort_config, others = (run.options.tf32, run.shared, run.options.strict, run.ort_config,
                                                run.others)
    backend, production = run.backends[0], run.production
    runs = [(backend, production, verification.environment)] + [
        (other.backend, other.production, {}) for other in others if other.production is not None]
    source = exported.model  # a roundtrip skeleton's stubs are restored from `shared` where needed
    loaded = shared.stubbed(source) if shared is not None else source
    initializer = shared.stub if shared is not None else (lambda t: t)
    groups = None
    if exported.program is not None:
        from harness.analysis.fx_mapping import map_model

        groups = map_model(source, exported.program, verification.model_name)
        if not any(g.outputs for g in groups.values()):
            verification.notes.append(
                "no ONNX value carries an FX node's name: the model is verified per ONNX node instead"
            )
            groups = None
    if groups is not None:
        from harness.analysis import fx_rows

        analyses = [fx_rows.FxAnalysis(
            onnx_model=loaded, source_model=source, program=exported.program, groups=groups,
            values=values, feeds=feeds, device=spec.kind, table=table,
            run=runtime.model_runner(spec, tf32, shared, ort_config, run_backend),
            initializer=initializer, production=run_production_outputs.outputs, environment=environment,
            strict=strict, weights=shared, fallback=reference_fallback(spec, shared),
            backend=str(run_backend.spec) if run_backend is not None else DEFAULT_BACKEND,
            runtime_precisions=run_production_outputs.runtime_precisions,
            runtime_fusions=run_production_outputs.runtime_fusions,
            declared_only=run_backend is None or run_backend.RUNS_DECLARED, float64_weights=run.float64_weights,
        ) for run_backend, run_production_outputs, environment in runs]
        results = fx_rows.analyse_backends(analyses)
    else:
        from harness.analysis.onnx_rows import analyse_nodes

        restored = shared.restore(source) if shared is not None else source  # the evaluator needs the weights
        results = []
        for run_backend, run_production_outputs, environment in runs:
            result = analyse_nodes(
                loaded, restored, feeds, spec.kind, table, runtime.model_runner(spec, tf32, shared, ort_config,
                                                                                 run_backend),
                initializer, production=run_production_outputs.outputs, environment=environment, strict=strict,
            )
            annotate_node_rows(result.ops, str(run_backend.spec) if run_backend is not None else DEFAULT_BACKEND,
                               run_production_outputs.runtime_precisions,
                               run_backend is None or run_backend.RUNS_DECLARED)
            results.append(result)
    verification.add_analysis(results[0])
    for other, result in zip([o for o in others if o.production is not None], results[1:]):
        other.add_analysis(result)
    from harness.analysis.blame import assign_blame

    assign_blame([verification.ops, *[o.ops for o in others if o.production is not None]])
    return results


def reference_fallback(spec: runtime.DeviceSpec, shared: runtime.SharedWeights | None) -> runtime.ModelRunner | None:
    """The runner of the subgraphs onnxruntime has no kernel for (bfloat16 ops on the CPU):
    onnx's ReferenceEvaluator, with ml_dtypes for bfloat16; none when verifying on it."""
    return None if spec.kind == "reference" else runtime.model_runner(runtime.DeviceSpec.parse("reference"), False, shared)


def _output_tree(program: torch.export.ExportedProgram, flat: list[Any]) -> Any:
    """The user outputs in the structure forward() returned them (None when it cannot be rebuilt)."""
    try:
        return pytree.tree_unflatten(list(flat), program.call_spec.out_spec)
    except (ValueError, TypeError):  # a program whose output spec does not fit its user outputs
        return None


def _mutation_notes(program: torch.export.ExportedProgram) -> list[str]:
    from exporter.capturing.trace import describe_mutations, mutated_state

    mutations = mutated_state(program)
    if not mutations:
        return []
    return [
        f"the module updates {describe_mutations(mutations)} in place, which the ONNX model cannot "
        "express (it has no state): only the returned outputs are compared"
    ]


def _numpy_args(inputs: Any) -> list[np.ndarray]:
    """The tensor leaves of any pytree of inputs, in torch's flattening order: the ONNX inputs."""
    return [as_array(a) for a in pytree.tree_leaves(inputs) if isinstance(a, (torch.Tensor, np.ndarray))]
