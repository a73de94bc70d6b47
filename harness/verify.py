"""`harness.verify`: prove, op by op, that an ONNX model computes what the module computes.

Steps: export (or take the given ONNX model) -> onnx checker -> torch values of every FX node
-> production backend run vs torch outputs -> per-op analysis:

* with an FX mapping (roundtrip, torch.onnx): ONE instrumented run (accumulated error per
  op), ONE batched isolation run (isolated error per op, fed torch's values), the fp64 truth
  and attribution per op, and on CUDA the torch CPU-vs-CUDA noise floor (harness.per_op);
* without one (torchscript): the same per ONNX node against onnx's ReferenceEvaluator
  (harness.reference).

On onnxruntime CPU the production, instrumented and isolation sessions take the weight arrays
directly (backend.SharedWeights) instead of each parsing them out of a serialised model; CUDA
sessions load their models whole.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import torch

from harness import backend as backends
from harness.compare import as_array, compare
from harness.devices import device_context
from harness.exporters import EXPORTERS, ExportedForVerification, export_for_verification
from harness.records import CheckerResult, Verification
from harness.tolerances import ToleranceTable, load as load_tolerances
from harness.torch_values import output_values, record_values

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
    request that cannot run on CUDA raises `backend.BackendUnavailableError` with the reason.
    """
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    args = args if isinstance(args, tuple) else (args,)
    spec = backends.DeviceSpec.parse(device)
    if spec.kind == "cuda":  # fail before exporting: the reason is the answer
        reason = backends.cuda_unavailable_reason()
        if reason:
            raise backends.BackendUnavailableError(f"CUDA was requested but cannot be used: {reason}")
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
    table = tolerances if isinstance(tolerances, ToleranceTable) else load_tolerances(tolerances)
    spec = backends.DeviceSpec.parse(device)
    onnx_proto = exported.model
    timings: dict[str, float] = {}
    verification = Verification(
        model_name=model_name, exporter=exported.exporter,
        device=spec.torch_device if spec.kind != "reference" else "reference",
        passed=False, checker=run_checker(onnx_proto), outputs=[], timings=timings,
        notes=list(exported.notes), onnx_model=onnx_proto,
    )
    if exported.program is None and module is None:
        raise ValueError("an export without an FX program needs the module to compute torch's outputs")

    with device_context(spec, tf32=tf32) as environment:
        verification.environment = {**environment, **versions(), "torch_seed": torch.initial_seed()}
        started = time.perf_counter()
        torch_args = tuple(a.to(spec.torch_device) if isinstance(a, torch.Tensor) else a for a in args)
        values: dict[str, Any] = {}
        if exported.program is not None:
            values = record_values(exported.program, torch_args, device=spec.torch_device)
            expected_outputs = _flatten(output_values(exported.program, values))
        else:
            expected_outputs = _flatten(_run_eager(module, torch_args, spec.torch_device))
        timings["torch_s"] = time.perf_counter() - started

        started = time.perf_counter()
        shared = backends.SharedWeights.of(onnx_proto) if spec.kind == "cpu" else None
        feeds = dict(zip(backends.real_inputs(onnx_proto), _numpy_args(args)))
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


def run_production(verification: Verification, model: onnx.ModelProto, spec: backends.DeviceSpec,
                   feeds: dict[str, np.ndarray], *, tf32: bool, shared: backends.SharedWeights | None = None
                   ) -> list[np.ndarray] | None:
    """The production run: the model as given, on the device under test. A model the backend
    refuses or fails to run is a finding (a note, and None), not an exception; on CUDA the
    nodes onnxruntime placed on the CPU are recorded. With `shared` the session gets the weight
    arrays directly instead of parsing them out of the serialised model (the same graph and
    the same bytes: results are bitwise identical, and loading is several times faster)."""
    loaded = shared.stubbed(model) if shared is not None else model
    try:
        rep = backends.prepare(loaded, spec.backend_device, tf32=tf32, profile=spec.kind == "cuda",
                               shared_weights=shared)
    except backends.ModelLoadError as error:
        verification.notes.append(f"the backend refused the model: {_first_line(error)}")
        return None
    verification.environment["providers"] = list(rep.providers)
    try:
        outputs = rep.run(feeds)
    except Exception as error:  # onnxruntime raises its own Fail/RuntimeException types
        verification.notes.append(f"the backend failed to run the model: {_first_line(error)}")
        return None
    if spec.kind == "cuda":
        verification.cpu_placed_nodes = backends.cpu_placed_nodes(backends.node_placement(rep))
        if verification.cpu_placed_nodes:
            verification.notes.append(
                f"onnxruntime ran {len(verification.cpu_placed_nodes)} node(s) on the CPU inside the "
                "CUDA session; see cpu_placed_nodes"
            )
    return outputs


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]


def model_runner(spec: backends.DeviceSpec, tf32: bool, shared: backends.SharedWeights | None):
    """A function that loads a model variant on the device under test and runs it once."""
    def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        options = {} if spec.kind == "reference" else {"spinning": False}
        rep = backends.prepare(model, spec.backend_device, tf32=tf32, shared_weights=shared, **options)
        return dict(zip(rep.output_names, rep.run(feeds)))

    return run


def _per_op(verification, exported, values, feeds, spec, table, tf32, shared, production) -> None:
    run = model_runner(spec, tf32, shared)
    source = exported.model
    loaded = shared.stubbed(source) if shared is not None else source
    initializer = shared.stub if shared is not None else (lambda t: t)
    groups = None
    if exported.program is not None:
        from harness.mapping import map_model

        groups = map_model(source, exported.program, verification.model_name)
        if not any(g.outputs for g in groups.values()):
            verification.notes.append(
                "no ONNX value carries an FX node's name: the model is verified per ONNX node instead"
            )
            groups = None
    if groups is not None:
        from harness import per_op as fx_analysis

        analysis = fx_analysis.FxAnalysis(
            onnx_model=loaded, source_model=source, program=exported.program, groups=groups,
            values=values, feeds=feeds, device=spec.kind, table=table, run=run,
            initializer=initializer, production=production, environment=verification.environment,
        )
        fx_analysis.analyse(verification, analysis)
        return
    from harness.reference import analyse_nodes

    analyse_nodes(verification, loaded, source, feeds, spec.kind, table, run, initializer, production=production)


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


def _flatten(outputs: Any) -> list[Any]:
    if isinstance(outputs, (tuple, list)):
        return [leaf for item in outputs for leaf in _flatten(item)]
    return [outputs]


def _numpy_args(args: Sequence[Any]) -> list[np.ndarray]:
    return [as_array(a) for a in args if isinstance(a, (torch.Tensor, np.ndarray))]


def versions() -> dict[str, Any]:
    """Library versions a report records beside its numbers."""
    import onnxruntime

    return {
        "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
    }
