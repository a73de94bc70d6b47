"""One line per case on the terminal, ending, for a case that did not pass, with why.

A failing case's reason is the first thing that went wrong, in the order a reader would check:
the checker, the backend (it refused or failed to run the model), the outputs (which one, by
how much, against which tolerance), the ops over their tolerance, the other input size. When
the outputs fail but every op agrees with its reference, the line says so: the per-op analysis
cannot see a model that computes something else op by op correctly, and says how to find it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report.summary import case_line, fmt

BACKEND_NOTES = ("the backend refused the model", "the backend failed to run the model")
MODEL_DIFFERS = (
    "every op agrees with {reference} op by op, so the difference is in the model itself (it computes "
    "something else); verify the module it came from (roundtrip verify package.module:factory) to localise it"
)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _output_reason(outputs: list[Mapping[str, Any]], where: str = "") -> str:
    failing = [o for o in outputs if not o.get("passed")]
    if not failing:
        return ""
    worst = failing[0]
    for output in failing:
        if (output.get("tolerance_ratio") or 0) > (worst.get("tolerance_ratio") or 0):
            worst = output
    name = worst.get("name") or "output"
    if worst.get("shape_match") is False:
        detail = f"shape {worst.get('shape_actual')} where {worst.get('shape_expected')} was expected"
    elif worst.get("dtype_match") is False:
        detail = f"dtype {worst.get('dtype_actual')} where {worst.get('dtype_expected')} was expected"
    elif worst.get("nonfinite_mismatch"):
        detail = f"NaN/Inf disagree ({worst.get('nonfinite_mismatch')})"
    else:
        fraction = worst.get("mismatch_fraction")
        share = f", {100 * fraction:.3g}% of elements outside" if isinstance(fraction, (int, float)) else ""
        detail = (f"max_abs {fmt(worst.get('max_abs'))} ({fmt(worst.get('tolerance_ratio'))}x its tolerance, "
                  f"atol {fmt(worst.get('atol'))} rtol {fmt(worst.get('rtol'))}{share})")
    more = f" (and {len(failing) - 1} more output(s))" if len(failing) > 1 else ""
    return f"{where}output {name!r}: {detail}{more}"


def failure_reason(case: Mapping[str, Any]) -> str:
    """Why a case did not pass, in one line ('' for a passing case)."""
    status = case.get("status")
    if status == "pass":
        return ""
    if status == "error":
        return _first_line(case.get("error", ""))
    if status == "crashed":
        return _first_line((case.get("crash") or {}).get("reason", ""))
    record = case.get("verification") or {}
    notes = [_first_line(note) for note in record.get("notes", [])]
    checker = record.get("checker") or {}
    if not checker.get("passed", True):
        return f"checker: {_first_line(checker.get('message', ''))}"
    backend = next((note for note in notes if note.startswith(BACKEND_NOTES)), "")
    if backend:
        return backend
    failing_ops = [op for op in record.get("ops", []) if op.get("passed") is False]
    reason = _output_reason(record.get("outputs", []))
    if reason:
        if failing_ops:
            return f"{reason}; {len(failing_ops)} op(s) over tolerance, first {failing_ops[0]['fx_node']}"
        if record.get("ops"):
            reference = record.get("op_reference") or "the reference"
            return f"{reason}; {MODEL_DIFFERS.format(reference=reference)}"
        return reason
    if not record.get("outputs"):
        return next((note for note in notes if note), "no output was compared")
    if failing_ops:
        return f"{len(failing_ops)} op(s) over tolerance, first {failing_ops[0]['fx_node']}"
    other = case.get("other")
    if other is not None and not other.get("passed"):
        sizes = case.get("sizes") or ["traced", "other"]
        return _output_reason(other.get("outputs", []), f"at {sizes[-1]}: ") or f"at {sizes[-1]}: failed"
    return next((note for note in notes if note), "failed")


def terminal_line(case: Mapping[str, Any]) -> str:
    """The report's line for the case, then `: <reason>` when it did not pass. A failing case
    whose worst op passed names no worst op: it would point at a healthy one."""
    status = case.get("status")
    if status == "crashed":
        seconds = case.get("seconds")
        return f"CRASH {case['name']:<28} after {fmt(seconds)}s: {failure_reason(case)}"
    if status != "fail":
        return case_line(case)
    record = case.get("verification") or {}
    worst = next((op for op in record.get("ops", []) if op.get("fx_node") == record.get("worst_op")), None)
    if worst is not None and worst.get("passed") is not False:
        case = {**case, "verification": {**record, "worst_op": None}}
    return f"{case_line(case)}: {failure_reason(case)}"
