"""Measure one coverage case with one exporter: export, then verify with the harness; the
result says whether it exported and verified, and when not, the failure class and a one-line
reason. Dynamic cases are verified again at a second size with the same ONNX model."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from .case import Case

# The failure classes of a result, in the order a case meets them.
EXPORT, CHECKER, ONNXRUNTIME, NUMERIC, VERIFY, TIMEOUT, CRASH = (
    "export error", "checker", "onnxruntime refused", "numeric mismatch", "harness error", "timeout", "crash")
FAILURE_CLASSES = (EXPORT, CHECKER, ONNXRUNTIME, NUMERIC, VERIFY, TIMEOUT, CRASH)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, without terminal colours, cut at `limit` characters."""
    return " ".join(_ANSI.sub("", text).split())[:limit]


def error_line(error: BaseException) -> str:
    return one_line(f"{type(error).__name__}: {error}")


def failed(failure: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"exported": failure not in (EXPORT, TIMEOUT, CRASH), "verified": False, "failure": failure,
            "reason": reason, **extra}


def judge(verification: Any) -> dict[str, Any] | None:
    """None when `verification` passed, else its failure class and reason."""
    if verification.passed:
        return None
    if not verification.checker.passed:
        return failed(CHECKER, one_line(verification.checker.message))
    if not verification.outputs:
        notes = [n for n in verification.notes if "onnxruntime" in n.lower() or "backend" in n.lower()]
        return failed(ONNXRUNTIME, one_line((notes or verification.notes or ["the backend did not run"])[-1]))
    for comparison in verification.outputs:
        if not comparison.passed:
            if not comparison.shape_match or not comparison.dtype_match:
                return failed(NUMERIC, f"output {comparison.name}: shape {comparison.shape_actual} dtype "
                              f"{comparison.dtype_actual}, torch {comparison.shape_expected} {comparison.dtype_expected}")
            return failed(NUMERIC, one_line(f"output {comparison.name}: max |error| {comparison.max_abs:.3g} "
                                            f"(tolerance ratio {comparison.tolerance_ratio:.3g}) {comparison.note}"))
    verdicts = [v for v in verification.output_verdicts if not v.passed]
    reason = verdicts[0].reason if verdicts else "; ".join(verification.notes[:1]) or "output count differs"
    return failed(NUMERIC, one_line(reason))


def measure(case: Case, exporter: str, *, per_op: bool = True) -> dict[str, Any]:
    """Export `case` with `exporter` and verify it (at a second size too when it is dynamic)."""
    from harness.exporters import ExportedForVerification, export_for_verification
    from harness.verification import verify_exported

    module, args = case.module(), case.inputs()
    started = time.perf_counter()
    try:
        exported = export_for_verification(exporter, module, args, dynamic_axes=case.dynamic_axes,
                                           input_names=case.input_names if case.dynamic else None)
    except Exception as error:  # the exporter's own refusal is the result
        return failed(EXPORT, error_line(error), export_s=round(time.perf_counter() - started, 2))
    timing = {"export_s": round(time.perf_counter() - started, 2)}
    runs: list[tuple[str, Any, Sequence[Any], bool]] = [("", exported, args, per_op)]
    static = exported_static(case, exported.model)
    if static:  # the exporter fixed a declared axis: the second size was never promised
        timing["static_axes"] = static
    elif case.dynamic and not case.random:  # the same ONNX model at the second size, against eager torch
        runs.append(("at the second size: ", ExportedForVerification(exported.model, None, exporter,
                                                                       weights=exported.weights),
                     case.inputs(other_size=True), False))
    errors = []
    for prefix, subject, inputs, with_ops in runs:
        try:
            verification = verify_exported(subject, tuple(inputs), module=module, per_op=with_ops,
                                           model_name=case.name)
        except Exception as error:  # the harness could not verify it: recorded, not raised
            return failed(VERIFY, prefix + error_line(error), **timing)
        errors += [c.max_abs for c in verification.outputs]
        verdict = judge(verification)
        if verdict is not None:
            verdict["reason"] = prefix + verdict["reason"]
            return {**verdict, **timing}
    return {"exported": True, "verified": True, "failure": "",
            "reason": f"declared dynamic, exported static: {', '.join(static)}" if static else "",
            "max_abs_error": max(errors, default=None), **timing}


def exported_static(case: Case, model: Any) -> list[str]:
    """The axes `case` declares dynamic that the ONNX `model` has a fixed size on ("x[0]")."""
    inputs = {value.name: value for value in model.graph.input}
    static = []
    for name, axes in (case.dynamic_axes or {}).items():
        value = inputs.get(name)
        if value is None:
            continue
        dims = value.type.tensor_type.shape.dim
        static += [f"{name}[{axis}]" for axis in axes if axis < len(dims) and dims[axis].HasField("dim_value")]
    return static
