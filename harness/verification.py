"""`harness.verify`: prove, op by op, that an ONNX model computes what the module computes.

Steps: export (or take the given ONNX model) -> onnx checker -> torch values of every FX node
-> production backend run vs torch outputs -> per-op analysis:

* with an FX mapping (roundtrip, torch.onnx): ONE instrumented run (accumulated error per
  op), ONE batched isolation run (isolated error per op, fed torch's values), the fp64 truth
  and attribution per op, and on CUDA the torch CPU-vs-CUDA noise floor
  (harness.analysis.fx_rows);
* without one (torchscript): the same per ONNX node against onnx's ReferenceEvaluator
  (harness.analysis.onnx_rows).

On onnxruntime CPU the production, instrumented and isolation sessions take the weight arrays
directly (runtime.SharedWeights) instead of each parsing them out of a serialised model; CUDA
sessions load their models whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import torch

from harness import runtime
from harness.analysis.torch_values import output_values, record_values
from harness.exporters import EXPORTERS, ExportedForVerification, export_for_verification
from harness.metrics.arrays import as_array, flatten_outputs
from harness.metrics.comparison import compare
from harness.metrics.tolerances import ToleranceTable, load as load_tolerances
from harness.records import CheckerResult, Verification

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_ATOL = 1e-4
DEFAULT_OUTPUT_RTOL = 1e-3


def run_checker(model: onnx.ModelProto | bytes) -> CheckerResult:
    """onnx.checker with full_check (shape inference included); failures are recorded, not raised."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # checker raises ValidationError and inference errors
        return CheckerResult(False, f"{type(error).__name__}: {error}")
    return CheckerResult(True)


def verify(
    model: torch.nn.Module,
    args: Any,
    *,
    device: str = "cpu",
    exporter: str = "roundtrip",
    onnx_model: onnx.ModelProto | str | None = None,
    opset_version: int | None = None,
    tolerances: ToleranceTable | str | None = None,
    per_op: bool = True,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    input_names: Sequence[str] | None = None,
    output_atol: float = DEFAULT_OUTPUT_ATOL,
    output_rtol: float = DEFAULT_OUTPUT_RTOL,
    allowed_mismatch: float = 0.0,
    tf32: bool = False,
    model_name: str | None = None,
) -> Verification:
    """Export `model` on `args` (or take `onnx_model`, made by `exporter`) and verify it on
    `device` ("cpu", "cuda[:n]" or "reference").

    The model passes when the checker passes and every output is inside
    `output_atol + output_rtol*|expected|` (up to `allowed_mismatch` of the elements). A CUDA
    request that cannot run on CUDA raises `runtime.BackendUnavailableError` with the reason.
    """
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    args = args if isinstance(args, tuple) else (args,)
    spec = runtime.DeviceSpec.parse(device)
    if spec.kind == "cuda":  # fail before exporting: the reason is the answer
        runtime.require_cuda()
    started = time.perf_counter()
    exported = export_for_verification(
        exporter, model, args, onnx_model=onnx_model, opset_version=opset_version,
        dynamic_axes=dynamic_axes, input_names=input_names,
    )
    export_s = time.perf_counter() - started
    verification = verify_exported(
        exported, args, module=model, device=device, tolerances=tolerances, per_op=per_op,
        output_atol=output_atol, output_rtol=output_rtol, allowed_mismatch=allowed_mismatch,
        tf32=tf32, model_name=model_name or type(model).__name__,
    )
    verification.timings = {"export_s": export_s, **verification.timings}
    return verification


def verify_exported(
    exported: ExportedForVerification,
    args: tuple[Any, ...],
    *,
    module: torch.nn.Module | None = None,
    device: str = "cpu",
    tolerances: ToleranceTable | str | None = None,
    per_op: bool = True,
    output_atol: float = DEFAULT_OUTPUT_ATOL,
    output_rtol: float = DEFAULT_OUTPUT_RTOL,
    allowed_mismatch: float = 0.0,
    tf32: bool = False,
    model_name: str = "model",
) -> Verification:
    """Verify an already exported model (`verify` without the export; benchmarks time this).

    Torch's values come from `exported.program`, or from `module` run eagerly when there is
    no program (then per-op analysis is per ONNX node against the ReferenceEvaluator).
    """
    table = tolerance_table(tolerances)
    spec = runtime.DeviceSpec.parse(device)
    onnx_proto = exported.model
    verification = new_verification(onnx_proto, spec, model_name=model_name, exporter=exported.exporter,
                                    notes=exported.notes)
    timings = verification.timings
    if exported.program is None and module is None:
        raise ValueError("an export without an FX program needs the module to compute torch's outputs")

    with runtime.device_context(spec, tf32=tf32) as environment:
        verification.environment = {**environment, **runtime.versions(), "torch_seed": torch.initial_seed()}
        started = time.perf_counter()
        torch_args = tuple(a.to(spec.torch_device) if isinstance(a, torch.Tensor) else a for a in args)
        values: dict[str, Any] = {}
        if exported.program is not None:
            values = record_values(exported.program, torch_args, device=spec.torch_device)
            expected_outputs = flatten_outputs(output_values(exported.program, values))
        else:
            expected_outputs = flatten_outputs(_run_eager(module, torch_args, spec.torch_device))
        timings["torch_s"] = time.perf_counter() - started

        started = time.perf_counter()
        shared = runtime.SharedWeights.of(onnx_proto) if spec.kind == "cpu" else None
        feeds = dict(zip(runtime.real_inputs(onnx_proto), _numpy_args(args)))
        actual_outputs = run_production(verification, onnx_proto, spec, feeds, tf32=tf32, shared=shared)
        timings["backend_s"] = time.perf_counter() - started

        output_names = [o.name for o in onnx_proto.graph.output]
        if actual_outputs is not None:
            verification.outputs = [
                compare(a, as_array(e), atol=output_atol, rtol=output_rtol, name=name,
                        allowed_mismatch=allowed_mismatch)
                for a, e, name in zip(actual_outputs, expected_outputs, output_names)
            ]
            if len(actual_outputs) != len(expected_outputs):
                verification.notes.append(
                    f"the ONNX model has {len(actual_outputs)} outputs, torch {len(expected_outputs)}"
                )
        if per_op:
            started = time.perf_counter()
            _per_op(verification, exported, values, feeds, spec, table, tf32, shared, actual_outputs)
            timings["per_op_s"] = time.perf_counter() - started

    verification.passed = verification.verdict(
        backend_ran=actual_outputs is not None,
        output_counts_match=actual_outputs is not None and len(actual_outputs) == len(expected_outputs),
    )
    return verification


def tolerance_table(tolerances: ToleranceTable | str | None) -> ToleranceTable:
    """The table given, the table at a path, or the shipped one (None)."""
    return tolerances if isinstance(tolerances, ToleranceTable) else load_tolerances(tolerances)


def new_verification(model: onnx.ModelProto, spec: runtime.DeviceSpec, *, model_name: str, exporter: str,
                     notes: Sequence[str] = ()) -> Verification:
    """A record for verifying `model` on `spec`, with the checker's verdict and nothing run yet."""
    return Verification(
        model_name=model_name, exporter=exporter,
        device=spec.torch_device if spec.kind != "reference" else "reference",
        passed=False, checker=run_checker(model), outputs=[], notes=list(notes), onnx_model=model,
    )


def run_production(verification: Verification, model: onnx.ModelProto, spec: runtime.DeviceSpec,
                   feeds: dict[str, np.ndarray], *, tf32: bool, shared: runtime.SharedWeights | None = None
                   ) -> list[np.ndarray] | None:
    """The production run (runtime.run_production), its findings put on `verification`."""
    production = runtime.run_production(model, spec, feeds, tf32=tf32, shared=shared)
    if production.providers:
        verification.environment["providers"] = production.providers
    verification.cpu_placed_nodes = production.cpu_placed_nodes
    verification.notes.extend(production.notes)
    return production.outputs


def _per_op(verification, exported, values, feeds, spec, table, tf32, shared, production) -> None:
    run = runtime.model_runner(spec, tf32, shared)
    source = exported.model
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

        analysis = fx_rows.FxAnalysis(
            onnx_model=loaded, source_model=source, program=exported.program, groups=groups,
            values=values, feeds=feeds, device=spec.kind, table=table, run=run,
            initializer=initializer, production=production, environment=verification.environment,
        )
        verification.add_analysis(fx_rows.analyse(analysis))
        return
    from harness.analysis.onnx_rows import analyse_nodes

    verification.add_analysis(analyse_nodes(
        loaded, source, feeds, spec.kind, table, run, initializer, production=production,
        environment=verification.environment,
    ))


def _run_eager(module: torch.nn.Module, args: tuple[Any, ...], device: str) -> Any:
    """`module(*args)` in eval mode on `device`, leaving the module as it was found."""
    from exporter.trace import eval_mode

    parameter = next(module.parameters(), None)
    original = parameter.device if parameter is not None else None
    try:
        with torch.no_grad(), eval_mode(module):
            return module.to(device)(*args)
    finally:
        if original is not None:
            module.to(original)


def _numpy_args(args: Sequence[Any]) -> list[np.ndarray]:
    return [as_array(a) for a in args if isinstance(a, (torch.Tensor, np.ndarray))]
