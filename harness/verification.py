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

import copy
import logging
import math
import os
import tempfile
import time
from dataclasses import replace
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import torch
import torch.utils._pytree as pytree

from exporter.contract.skeleton import EXTERNAL_MIN_BYTES, PROTOBUF_LIMIT, is_in_memory, stub
from exporter.contract.metadata import describe_check, dropped_checks
from harness import runtime
from harness.runtime.dtypes import cast_for_dtype, run_dtype, value_dtypes
from harness.analysis.quant_rows import DEQUANTIZE_OPS, QUANT_STEPS_RULE, qparams_of
from harness.analysis.torch_values import (
    VALUES_BUDGET, describe_value, flat_user_inputs, output_values, record_values,
)
from harness.exporters import EXPORTERS, ExportedForVerification, export_for_verification
from harness.metrics.arrays import as_array, flatten_outputs
from harness.metrics.comparison import Comparison, compare, dtype_name
from harness.metrics.detections import compare_detection_outputs, detection_layout, mark_matched_rows
from harness.metrics.noise import dtype_key, load_noise_model, unit_roundoff
from harness.metrics.tolerances import OUTPUT, Tolerance, ToleranceTable, load as load_tolerances
from harness.metrics.verdict import (
    OVERRIDE, TOLERANCE, Verdict, VerdictRule, by_row, by_truth, load_rule, output_unit,
)
from harness.records import CheckerResult, Verification
from harness.analysis.backend_runs import DEFAULT_BACKEND, BackendRun, annotate_node_rows, resolve_backends
from harness.runtime.backends import is_lower
from harness.runtime.memory import release_freed_memory
from harness.runtime.shared_weights import copy_model

logger = logging.getLogger(__name__)

# The float32 output row of the shipped table (harness/metrics/data/tolerances.json): what the
# outputs of a float32 model may differ by at most when no tolerance is given (the cap).
DEFAULT_OUTPUT_ATOL = 1e-4
DEFAULT_OUTPUT_RTOL = 1e-3


def run_checker(model: onnx.ModelProto | bytes | str | os.PathLike) -> CheckerResult:
    """onnx.checker with full_check (shape inference included) on a proto or a model file (a
    path: external data and models past 2 GB are checked where they lie); failures are
    recorded, not raised.

    A skeleton whose initializers are held in memory (a roundtrip export) is checked as written
    to a scratch folder, every weight pointing at one empty file: everything but the weight
    bytes is checked, and SharedWeights checks each array's dtype and shape against its stub.
    """
    try:
        if isinstance(model, onnx.ModelProto) and any(is_in_memory(t) for t in model.graph.initializer):
            _check_skeleton(model)
        elif isinstance(model, onnx.ModelProto) and _past_protobuf_limit(model):
            _check_skeleton(_without_weight_bytes(model))  # protobuf cannot serialise it whole
        else:
            onnx.checker.check_model(model if not isinstance(model, os.PathLike) else os.fspath(model),
                                     full_check=True)
    except Exception as error:  # checker raises ValidationError and inference errors
        return CheckerResult(False, f"{type(error).__name__}: {error}")
    return CheckerResult(True)


def _past_protobuf_limit(model: onnx.ModelProto) -> bool:
    """Whether `model` is too large for protobuf to serialise (2 GB), measured without doing it."""
    return sum(t.ByteSize() for t in model.graph.initializer) >= PROTOBUF_LIMIT - (1 << 20)


def _without_weight_bytes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose large inline initializers are in-memory stubs (name, dtype and
    shape; no bytes copied), so the checker sees everything but the weight bytes."""
    initializers = [
        stub(onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims))
        if t.data_location != onnx.TensorProto.EXTERNAL and t.ByteSize() >= EXTERNAL_MIN_BYTES else t
        for t in model.graph.initializer
    ]
    return copy_model(model, initializers)


def _check_skeleton(model: onnx.ModelProto) -> None:
    placeholder = "weights-held-in-memory"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # a skeleton: no weight bytes to copy
    for tensor in copy.graph.initializer:
        if is_in_memory(tensor):
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = placeholder
    with tempfile.TemporaryDirectory(prefix="roundtrip-check-") as folder:
        open(os.path.join(folder, placeholder), "wb").close()
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as handle:
            handle.write(copy.SerializeToString())
        onnx.checker.check_model(path, full_check=True)


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
    verify it on `device` ("cpu", "cuda[:n]" or "reference"). `optimize=False` verifies
    roundtrip's one-node-per-op graph instead of the optimised one.

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
    The model passes when the checker passes and every output passes its verdict: against the
    module's outputs in float64 (harness.metrics.verdict), capped by the table's output row for
    the output's dtype; `output_atol`/`output_rtol` given override the rule (every output inside
    `output_atol + output_rtol*|expected|`, up to `allowed_mismatch` of the elements). A CUDA
    request that cannot run on CUDA raises `runtime.BackendUnavailableError` with the reason.
    `strict=True` (default: the ROUNDTRIP_STRICT environment variable) raises the harness's own
    errors instead of recording them as notes (see harness.analysis.strictness).
    `session_options`: the onnxruntime configuration to verify (an onnxruntime.SessionOptions,
    a mapping or a JSON file; runtime.OrtConfig), default onnxruntime's own.
    `backends`: the backends to verify on ("onnxruntime", "openvino:precision=f32", BackendSpecs
    or Backends; harness.runtime.backends). The first one's outputs and rows are the record's
    own (`outputs`, `ops`, `passed`); each further one gets a BackendResult in
    `backend_results`, judged against the same torch values and fp64 truth (one that cannot run
    here is a named skip), and failing rows say who is wrong (harness.analysis.blame).
    """
    chosen = resolve_backends(backends, device)
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    args = args if isinstance(args, tuple) else (args,)
    training = training_mode_note(model)
    if dtype is not None:
        model, args, kwargs = cast_for_dtype(model, args, kwargs, dtype)
    spec = runtime.DeviceSpec.parse(device)
    if spec.kind == "cuda":  # fail before exporting: the reason is the answer
        runtime.require_cuda()
    started = time.perf_counter()
    exported = export_for_verification(
        exporter, model, args, kwargs=kwargs, onnx_model=onnx_model, opset_version=opset_version,
        dynamic_axes=dynamic_axes, input_names=input_names, optimize=optimize,
    )
    export_s = time.perf_counter() - started
    if training:
        exported.notes.insert(0, training)
    verification = verify_exported(
        exported, args, kwargs=kwargs, module=model, device=device, tolerances=tolerances, per_op=per_op,
        output_atol=output_atol, output_rtol=output_rtol, allowed_mismatch=allowed_mismatch,
        tf32=tf32, model_name=model_name or type(model).__name__, strict=strict, session_options=session_options,
        backends=chosen,
    )
    verification.timings = {"export_s": export_s, **verification.timings}
    if shapes is not None:
        sweep_shapes(verification, exported, model, args, shapes, kwargs=kwargs, dynamic_axes=dynamic_axes,
                     axis_ranges=axis_ranges, device=device, tolerances=tolerances, output_atol=output_atol,
                     output_rtol=output_rtol, allowed_mismatch=allowed_mismatch, tf32=tf32, strict=strict,
                     session_options=session_options, backends=tuple(chosen))
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
                      make_inputs=make_inputs, settings=SweepSettings(model_name=verification.model_name,
                                                                      locate=locate, **settings))
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
    """
    table = tolerance_table(tolerances)
    spec = runtime.DeviceSpec.parse(device)
    chosen = resolve_backends(backends, device)
    ort_config = runtime.OrtConfig.of(session_options)
    onnx_proto = exported.model
    verification = new_verification(onnx_proto, spec, model_name=model_name, exporter=exported.exporter,
                                    notes=exported.notes)
    verification.backend = str(chosen[0].spec)
    timings = verification.timings
    if exported.program is None and module is None:
        raise ValueError("an export without an FX program needs the module to compute torch's outputs")

    with runtime.device_context(spec, tf32=tf32) as environment:
        verification.environment = {**environment, **runtime.versions(), "torch_seed": torch.initial_seed(),
                                    "onnxruntime_session": runtime.session_record(ort_config),
                                    "dtype": run_dtype(module, (args, kwargs)),
                                    "value_dtypes": value_dtypes(exported.program)}
        started = time.perf_counter()
        torch_args, torch_kwargs = pytree.tree_map_only(
            torch.Tensor, lambda t: t.to(spec.torch_device), (tuple(args), dict(kwargs or {})))
        values: Mapping[str, Any] = {}
        if exported.program is not None:
            values = record_values(exported.program, torch_args, kwargs=torch_kwargs, device=spec.torch_device,
                                   budget=VALUES_BUDGET)
            expected_outputs = flatten_outputs(output_values(exported.program, values))
            layout = detection_layout(_output_tree(exported.program, expected_outputs))
            verification.notes.extend(_mutation_notes(exported.program))
        else:
            eager = _run_eager(module, torch_args, torch_kwargs, spec.torch_device)
            expected_outputs, layout = flatten_outputs(eager), detection_layout(eager)
        timings["torch_s"] = time.perf_counter() - started

        started = time.perf_counter()
        shared = runtime.SharedWeights.of(onnx_proto, exported.weights)
        leaves = flat_user_inputs(exported.program, args, kwargs) if exported.program is not None else (args, kwargs)
        feeds = dict(zip(runtime.real_inputs(onnx_proto), _numpy_args(leaves)))
        production = run_production(verification, onnx_proto, spec, feeds, tf32=tf32, shared=shared,
                                    ort_config=ort_config, backend=chosen[0])
        actual_outputs = production.outputs
        timings["backend_s"] = time.perf_counter() - started
        others = [BackendRun.start(backend, onnx_proto, spec, feeds, tf32=tf32, shared=shared, ort_config=ort_config)
                  for backend in chosen[1:]]

        output_names = [o.name for o in onnx_proto.graph.output]
        quantized: list[Any] = []
        if actual_outputs is not None:
            if layout is not None and len(actual_outputs) == len(expected_outputs):  # detections: matched
                truth = _output_truth(verification, exported, module, torch_args, torch_kwargs, values, timings,
                                      strict, module_first=True)
                judge_detections(verification, actual_outputs, expected_outputs, layout, output_names, table=table,
                                 device=spec.kind, atol=output_atol, rtol=output_rtol, truth=truth)
                for other in others:
                    other.judge(lambda record, outputs, precision: judge_detections(
                        record, outputs, expected_outputs, layout, output_names, table=table, device=spec.kind,
                        atol=output_atol, rtol=output_rtol, truth=truth))
            else:
                given = output_atol is not None or output_rtol is not None  # the given tolerances decide alone
                lowered = production.lowest_precision() or any(  # a backend below the declared precision
                    other.production is not None and other.production.lowest_precision() for other in others)
                truth = None if given and not lowered else _output_truth(verification, exported, module, torch_args, torch_kwargs,
                                                         values, timings, strict)
                steps = _rounding_steps(exported, values)
                quantized = quantized_outputs(exported.program, values)
                judge_outputs(verification, actual_outputs, expected_outputs, truth, output_names, table=table,
                              device=spec.kind, atol=output_atol, rtol=output_rtol, allowed_mismatch=allowed_mismatch,
                              rounding_steps=steps, precision=production.lowest_precision(), quantized=quantized)
                for other in others:
                    other.judge(lambda record, outputs, precision: judge_outputs(
                        record, outputs, expected_outputs, truth, output_names, table=table, device=spec.kind,
                        atol=output_atol, rtol=output_rtol, allowed_mismatch=allowed_mismatch, rounding_steps=steps,
                        precision=precision, quantized=quantized))
            if len(actual_outputs) != len(expected_outputs):
                verification.notes.append(
                    f"the ONNX model has {len(actual_outputs)} outputs, torch {len(expected_outputs)}"
                )
        if per_op:
            started = time.perf_counter()
            analyses = _per_op(verification, exported, values, feeds, spec, table, tf32, shared, production, strict,
                               ort_config, chosen[0], others)
            if exported.program is not None and actual_outputs is not None:
                _match_selected_outputs(verification, analyses, others, exported.program, values, actual_outputs,
                                        expected_outputs)
            if layout is not None:
                verification.notes.extend(mark_matched_rows(verification.ops, verification.outputs))
            timings["per_op_s"] = time.perf_counter() - started
        if exported.program is not None and actual_outputs is not None:  # outputs that are, or come from, draws
            from harness.analysis.draws import output_comparisons

            by_value = verification.outputs
            verification.outputs = output_comparisons(exported.program, values, by_value,
                                                      actual_outputs, expected_outputs, verification.ops)
            if len(verification.output_verdicts) == len(by_value):  # a draw is judged by its distribution
                verification.output_verdicts = [
                    verdict if new is old else replace(verdict, passed=new.passed, decided_by="distribution",
                                                       reason=new.note or "checked by distribution, not by value")
                    for verdict, old, new in zip(verification.output_verdicts, by_value, verification.outputs)]

    if per_op and quantized:
        _dequantized_outputs_by_rows(verification, quantized)
    verification.passed = verification.verdict(
        backend_ran=actual_outputs is not None,
        output_counts_match=actual_outputs is not None and len(actual_outputs) == len(expected_outputs),
    )
    _fold_quantized_rows(verification)
    verification.backend_results = [other.finish(verification.checker.passed, len(expected_outputs))
                                    for other in others]
    return verification


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


def _rounding_steps(exported: ExportedForVerification, values: Mapping[str, Any]) -> int:
    """How many ops rounded a floating result on the way to the outputs: the program's calls with
    a floating tensor value (the ONNX model's nodes when there is no program)."""
    if exported.program is None:
        return len(exported.model.graph.node)
    return sum(1 for node in exported.program.graph.nodes if node.op == "call_function"
               and isinstance(described := describe_value(values, node.name), torch.Tensor)
               and described.is_floating_point())


def _output_truth(verification: Verification, exported: ExportedForVerification, module: torch.nn.Module | None,
                  args: tuple[Any, ...], kwargs: dict[str, Any], values: dict[str, Any],
                  timings: dict[str, float], strict: bool | None = None,
                  module_first: bool = False) -> list[Any] | None:
    """The model's outputs in float64 (the program replayed node by node from torch's recorded
    inputs and weights, else the module run in float64; `module_first`: the module when there is
    one, as for detectors, whose captured program holds float32 dtype checks and casts), flattened;
    None, with a note, when it cannot run in float64. An error of the replay's own code is the
    harness's: raised in strict mode, else a note (harness.analysis.strictness), never an fp64
    failure of the model."""
    from harness.analysis.strictness import harness_error
    from harness.analysis.truth import OpCallFailed, model_truth, program_truth

    if exported.program is None and module is None:
        return None
    started = time.perf_counter()
    try:
        if exported.program is not None and not (module_first and module is not None):
            return flatten_outputs(program_truth(exported.program, values))
        # a copy: a detector's forward keeps dtype-dependent state (torchvision's AnchorGenerator
        # stores its cell anchors in the dtype it last ran in), which a later export would capture
        return flatten_outputs(model_truth(copy.deepcopy(module) if module_first else module, args, kwargs))
    except OpCallFailed as failed:
        verification.notes.append(f"no fp64 truth for the outputs: the float64 run failed: {failed}"[:300])
        return None
    except Exception as error:  # the replay's own code: a harness bug
        verification.notes.append(harness_error(error, "computing the fp64 truth of the outputs", strict))
        return None
    finally:
        release_freed_memory()  # the float64 copies of the weights and values, freed
        timings["output_truth_s"] = time.perf_counter() - started


# --- the outputs' verdicts -------------------------------------------------------------------

GIVEN = "given to verify (output_atol/output_rtol)"


def output_dtype(value: Any) -> str:
    """The dtype name of an output as torch computed it (bfloat16 included)."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and type(dtype).__module__ == "torch":
        return dtype_key(dtype)
    return dtype_name(as_array(value).dtype)


def judge_outputs(verification: Verification, actual: Sequence[Any], expected: Sequence[Any],
                  truth: Sequence[Any] | None, names: Sequence[str], *, table: ToleranceTable, device: str,
                  atol: float | None, rtol: float | None, allowed_mismatch: float, rounding_steps: int = 1,
                  precision: str | None = None, quantized: Sequence[Any] = ()) -> None:
    """Fill `verification.outputs` (each output against torch's, under its row) and
    `verification.output_verdicts`; the rule's floor for an output is `floor_ulps` times
    u(dtype) * sqrt(rounding_steps), the ops that rounded on the way to it. `precision`: the
    lowest precision the backend ran a node at; a floating output declared above it is judged
    by its rule and row (a backend running convolutions in bfloat16 makes bfloat16 outputs).
    `quantized[i]`, when given, holds the quantization parameters of output i, a dequantized
    value: it is judged by the rule alone (the float32 row's cap does not apply to a value on a
    grid of steps), its distance from torch in steps named in the verdict."""
    rule = load_rule(load_noise_model())
    given = atol is not None or rtol is not None
    comparisons, verdicts = [], []
    for index, (backend_value, torch_value, name) in enumerate(zip(actual, expected, names)):
        dtype = output_dtype(torch_value)
        lowered = bool(precision and unit_roundoff(dtype) and is_lower(precision, dtype))
        if lowered:  # tolerances given for the declared dtype do not hold the lower precision
            dtype = precision
        row = table.lookup(OUTPUT, device, dtype)
        if given and not lowered:
            row = Tolerance(OUTPUT, device, row.atol if atol is None else atol, row.rtol if rtol is None else rtol,
                            GIVEN, dtype)
        torch_array = as_array(torch_value)
        against_torch = compare(backend_value, torch_array, atol=row.atol, rtol=row.rtol, name=name,
                                allowed_mismatch=allowed_mismatch)
        comparisons.append(against_torch)
        reference = truth[index] if truth is not None and index < len(truth) else None
        backend_side = torch_side = None
        if reference is not None and hasattr(reference, "shape") and tuple(reference.shape) == torch_array.shape:
            reference_array = as_array(reference)
            backend_side = compare(backend_value, reference_array, atol=row.atol, rtol=row.rtol, name=name,
                                   check_dtype=False, allowed_mismatch=allowed_mismatch)
            torch_side = compare(torch_array, reference_array, atol=row.atol, rtol=row.rtol, name=name,
                                 check_dtype=False)
        qparams = quantized[index] if index < len(quantized) else None
        if qparams is not None and backend_side is not None and not given:
            verdicts.append(quantized_output_verdict(backend_value, torch_array, backend_side, torch_side, against_torch,
                                                     qparams, dtype, row, rule, rounding_steps))
            continue
        verdict = _verdict(against_torch, backend_side, torch_side, dtype, row, rule, given and not lowered,
                           rounding_steps)
        if lowered:
            verdict = replace(verdict, reason=f"the backend ran below the declared {output_dtype(torch_value)}: "
                                              f"judged as {precision}; " + verdict.reason)
        verdicts.append(verdict)
    verification.outputs = comparisons
    verification.output_verdicts = verdicts


def judge_detections(verification: Verification, actual: Sequence[Any], expected: Sequence[Any],
                     layout: Sequence[Any], names: Sequence[str], *, table: ToleranceTable, device: str,
                     atol: float | None, rtol: float | None, truth: Sequence[Any] | None = None) -> None:
    """A detector's outputs: detections matched box to box by label and IoU (harness.metrics.
    detections), each field judged by the float32 output row (or the tolerances given): the
    number and order of detections may legitimately differ, so there is no element-wise truth;
    `truth` (the outputs in float64) lets torch's own error set a continuous field's atol."""
    row = table.lookup(OUTPUT, device, "float32")
    given = atol is not None or rtol is not None
    if given:
        row = Tolerance(OUTPUT, device, row.atol if atol is None else atol, row.rtol if rtol is None else rtol,
                        GIVEN, "float32")
    verification.outputs = compare_detection_outputs(
        actual, [as_array(e) for e in expected], layout, atol=row.atol, rtol=row.rtol, names=names,
        truth=truth if truth is not None and len(truth) == len(expected) else None)
    reason = "detections matched box to box by label and IoU; judged by the output row"
    verification.output_verdicts = [
        by_row(c, dtype=c.dtype_expected, row=row, rule=OVERRIDE if given else TOLERANCE, reason=reason)
        for c in verification.outputs
    ]


def _verdict(against_torch: Comparison, backend_side: Comparison | None, torch_side: Comparison | None, dtype: str,
             row: Tolerance, rule: VerdictRule, given: bool, rounding_steps: int) -> Verdict:
    if given:
        return by_row(against_torch, dtype=dtype, row=row, rule=OVERRIDE, reason="output tolerances " + GIVEN,
                      backend=backend_side, torch_side=torch_side)
    if backend_side is None or not unit_roundoff(dtype):
        why = ("no fp64 truth for the outputs" if backend_side is None
               else f"{dtype} output: compared exactly with torch (no rounding to judge)")
        return by_row(against_torch, dtype=dtype, row=row, rule=TOLERANCE, reason=why + "; judged by the output row")
    return by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=1, rule=rule, row=row,
                    cap_factor=1.0, unit=output_unit(dtype, rounding_steps))


def _backend_ort_config(backend: Any, ort_config: Any) -> Any:
    """The onnxruntime configuration a backend's sessions run with (its level included); None
    for a backend that is not onnxruntime."""
    if backend is None:
        return ort_config
    return backend.ort_config(ort_config) if hasattr(backend, "ort_config") else None


def quantized_outputs(program: torch.export.ExportedProgram | None, values: Mapping[str, Any]) -> list[Any]:
    """Per user output, the quantization parameters (analysis.quant_rows.QParams) of the
    dequantize that writes it, else None."""
    if program is None:
        return []
    from exporter.capturing.signature import user_outputs

    return [qparams_of(item, values) if isinstance(item, torch.fx.Node) and str(item.target) in DEQUANTIZE_OPS
            else None for item in user_outputs(program)]


def quantized_output_verdict(backend: Any, torch_value: np.ndarray, backend_side: Comparison, torch_side: Comparison,
                             against_torch: Comparison, qparams: Any, dtype: str, row: Tolerance, rule: VerdictRule,
                             rounding_steps: int) -> Verdict:
    """A dequantized output: the rule against the fp64 truth decides (uncapped: one step of a
    coarse grid is far beyond the float32 row), with its distance from torch in steps."""
    verdict = by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=1, rule=rule, row=row,
                       cap_factor=math.inf, unit=output_unit(dtype, rounding_steps))
    steps = np.abs(np.rint(qparams.positions(as_array(backend))) - np.rint(qparams.positions(torch_value)))
    off = int((steps >= 1).sum())
    return replace(verdict, decided_by="rule", tolerance={}, tolerance_ratio=None,
                   score=verdict.e_backend / verdict.allowed if verdict.allowed else 0.0,
                   reason=(f"{verdict.reason.split(';')[0]}; a dequantized output (scale {qparams.largest_scale:.4g}): "
                           f"max {float(steps.max(initial=0)):g} step(s) from torch, {off} of {steps.size} elements off, "
                           "judged by the rule alone"))


def tolerance_table(tolerances: ToleranceTable | str | None) -> ToleranceTable:
    """The table given, the table at a path, or the shipped one (None)."""
    return tolerances if isinstance(tolerances, ToleranceTable) else load_tolerances(tolerances)


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


def _per_op(verification, exported, values, feeds, spec, table, tf32, shared, production, strict,
            ort_config=None, backend=None, others=()) -> list:
    """The per-op rows of the first backend into `verification`, and of every further backend
    that ran (`others`, BackendRuns) into theirs; then who is wrong where they disagree. Returns
    each backend's OpAnalysis (first backend first)."""
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
            declared_only=run_backend is None or run_backend.RUNS_DECLARED,
            ort_config=_backend_ort_config(run_backend, ort_config),
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


def _run_eager(module: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any], device: str) -> Any:
    """`module(*args, **kwargs)` in eval mode on `device`, leaving the module as it was found."""
    from exporter.capturing.trace import eval_mode

    parameter = next(module.parameters(), None)
    original = parameter.device if parameter is not None else None
    try:
        with torch.no_grad(), eval_mode(module):
            return module.to(device)(*args, **kwargs)
    finally:
        if original is not None:
            module.to(original)


def _numpy_args(inputs: Any) -> list[np.ndarray]:
    """The tensor leaves of any pytree of inputs, in torch's flattening order: the ONNX inputs."""
    return [as_array(a) for a in pytree.tree_leaves(inputs) if isinstance(a, (torch.Tensor, np.ndarray))]
