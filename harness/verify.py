"""`harness.verify`: prove, op by op, that an ONNX model computes what the module computes.

Steps: export (or take the given ONNX model) -> onnx checker -> production backend run vs
torch outputs -> ONE instrumented run exposing every mapped FX value (accumulated error per
op) -> per-op isolation and fp64 truth (harness.per_op) -> a `Verification` record.
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

from exporter.dtypes import onnx_type
from harness import backend as backends
from harness.compare import Comparison, compare
from harness.devices import device_context
from harness.mapping import NodeGroup, expose_values, map_model
from harness.records import CheckerResult, OpRecord, Verification
from harness.tolerances import ToleranceTable, load as load_tolerances
from harness.torch_values import output_values, record_values

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_ATOL = 1e-4
DEFAULT_OUTPUT_RTOL = 1e-3
EXPORTERS = ("roundtrip", "torch.onnx", "torchscript")


def run_checker(model: onnx.ModelProto) -> CheckerResult:
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
    """Export `model` on `args` (or take `onnx_model`) and verify it on `device` ("cpu"/"cuda").

    The model passes when the checker passes and every output is inside
    `output_atol + output_rtol*|expected|` (up to `allowed_mismatch` of the elements).
    """
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    args = args if isinstance(args, tuple) else (args,)
    table = tolerances if isinstance(tolerances, ToleranceTable) else load_tolerances(tolerances)
    spec = backends.DeviceSpec.parse(device)
    timings: dict[str, float] = {}

    started = time.perf_counter()
    from harness.exporters import export_for_verification

    exported = export_for_verification(
        exporter, model, args, onnx_model=onnx_model, opset_version=opset_version,
        dynamic_axes=dynamic_axes, input_names=input_names,
    )
    timings["export_s"] = time.perf_counter() - started
    onnx_proto = exported.model

    verification = Verification(
        model_name=model_name or type(model).__name__,
        exporter=exporter if onnx_model is None else "given",
        device=spec.torch_device if spec.kind != "reference" else "reference",
        passed=False,
        checker=run_checker(onnx_proto),
        outputs=[],
        timings=timings,
        onnx_model=onnx_proto,
    )

    with device_context(spec, tf32=tf32) as environment:
        verification.environment = {**environment, **_versions()}
        started = time.perf_counter()
        torch_args = tuple(a.to(spec.torch_device) if isinstance(a, torch.Tensor) else a for a in args)
        values = record_values(exported.program, torch_args, device=spec.torch_device)
        expected_outputs = _flatten_outputs(output_values(exported.program, values))
        timings["torch_s"] = time.perf_counter() - started

        started = time.perf_counter()
        rep = backends.prepare(onnx_proto, _backend_device(spec), tf32=tf32) if spec.kind != "reference" \
            else backends.prepare(onnx_proto, "reference")
        actual_outputs = rep.run(list(_numpy_args(args)))
        timings["backend_s"] = time.perf_counter() - started

    verification.outputs = [
        compare(a, _to_numpy(e), atol=output_atol, rtol=output_rtol, name=name,
                allowed_mismatch=allowed_mismatch)
        for a, e, name in zip(actual_outputs, expected_outputs, rep.output_names)
    ]
    if len(actual_outputs) != len(expected_outputs):
        verification.notes.append(
            f"the ONNX model has {len(actual_outputs)} outputs, torch {len(expected_outputs)}"
        )

    if per_op:
        started = time.perf_counter()
        groups = map_model(onnx_proto, exported.program)
        instrumented = accumulated_errors(
            onnx_proto, groups, values, args, spec, table, tf32=tf32, production=actual_outputs,
        )
        verification.ops = instrumented.ops
        verification.instrumented_vs_production = instrumented.final_vs_production
        if any(not c.passed for c in instrumented.final_vs_production):
            verification.notes.append(
                "the instrumented run's final outputs differ from the production run's "
                "(exposing intermediates changed fusions); see instrumented_vs_production"
            )
        timings["accumulated_s"] = time.perf_counter() - started
        from harness import per_op as per_op_analysis

        per_op_analysis.analyse(verification, onnx_proto, groups, exported.program, values, args, spec, table, tf32)
        timings["per_op_s"] = time.perf_counter() - started

    verification.passed = (
        verification.checker.passed
        and bool(verification.outputs)
        and len(actual_outputs) == len(expected_outputs)
        and all(c.passed for c in verification.outputs)
    )
    return verification


class _Instrumented:
    def __init__(self, ops: list[OpRecord], final_vs_production: list[Comparison]) -> None:
        self.ops = ops
        self.final_vs_production = final_vs_production


def accumulated_errors(
    onnx_proto: onnx.ModelProto,
    groups: dict[str, NodeGroup],
    values: dict[str, Any],
    args: tuple[Any, ...],
    spec: backends.DeviceSpec,
    table: ToleranceTable,
    *,
    tf32: bool = False,
    production: list[np.ndarray] | None = None,
) -> _Instrumented:
    """Per-op accumulated error from ONE run of the model with every mapped value exposed."""
    exposed: dict[str, int] = {}
    for group in groups.values():
        for index, name in group.outputs.items():
            torch_value = _output_at(values[group.fx_node], index)
            if isinstance(torch_value, torch.Tensor):
                exposed[name] = onnx_type(torch_value.dtype)
            elif isinstance(torch_value, (int, torch.SymInt)):
                exposed[name] = onnx.TensorProto.INT64
    instrumented = expose_values(onnx_proto, exposed)
    rep = backends.prepare(instrumented, _backend_device(spec), tf32=tf32) if spec.kind != "reference" \
        else backends.prepare(instrumented, "reference")
    results = dict(zip(rep.output_names, rep.run(list(_numpy_args(args)))))

    ops: list[OpRecord] = []
    for group in groups.values():
        tolerance = table.lookup(group.aten, spec.kind)
        record = OpRecord(
            fx_node=group.fx_node, aten=group.aten,
            onnx_nodes=[n.name for n in group.nodes], onnx_ops=[n.op_type for n in group.nodes],
            scope=group.scope, source=group.source, tolerance=tolerance.to_dict(),
        )
        comparisons = []
        for index, name in sorted(group.outputs.items()):
            torch_value = _output_at(values[group.fx_node], index)
            if name in results and torch_value is not None:
                comparisons.append(compare(results[name], _to_numpy(torch_value), atol=tolerance.atol,
                                           rtol=tolerance.rtol, name=name))
        if comparisons:
            record.accumulated = max(comparisons, key=lambda c: c.tolerance_ratio)
            record.passed = all(c.passed for c in comparisons)
        ops.append(record)

    final = []
    if production is not None:
        n_outputs = len(production)
        for name, prod in zip(rep.output_names[:n_outputs], production):
            final.append(compare(results[name], prod, atol=0.0, rtol=0.0, name=name))
    return _Instrumented(ops, final)


def _output_at(value: Any, index: int) -> Any:
    if isinstance(value, (tuple, list)):
        return value[index] if index < len(value) else None
    return value if index == 0 else None


def _flatten_outputs(outputs: Sequence[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in outputs:
        if isinstance(item, (tuple, list)):
            flat.extend(_flatten_outputs(item))
        else:
            flat.append(item)
    return flat


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _numpy_args(args: Sequence[Any]) -> list[np.ndarray]:
    return [_to_numpy(a) for a in args if isinstance(a, (torch.Tensor, np.ndarray))]


def _backend_device(spec: backends.DeviceSpec) -> str:
    return f"CUDA:{spec.index}" if spec.kind == "cuda" else "CPU"


def _versions() -> dict[str, Any]:
    import onnxruntime

    return {
        "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
    }
