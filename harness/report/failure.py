"""The compact per-op failure table of a verification: what a failing test prints.

`failure_message(record, reproducer=...)` renders a Verification (or its `to_dict()`, or a
report's compact verification) as: one headline (model, exporter, device), the outputs outside
their tolerance, the checker's verdict, then the worst ops by tolerance ratio (isolated error /
the op's tolerance; accumulated when the op was not isolated), one row each with its FX node,
ONNX ops, isolated and accumulated max abs, tolerance, attribution, scope and source line; the
ops that could not be isolated or failed to run; the notes; and the reproducer's folder.

`headline(record)` gives the few numbers a one-line summary, a junit property or a terminal
table needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report.document import as_float
from harness.report.summary import fmt, measured, numeric_findings, op_name, op_types, ratio, worst_op

ROWS_SHOWN = 8
"""Measured ops shown in a failure table: the worst by tolerance ratio."""
UNMEASURED_SHOWN = 6
"""Ops without an isolated error (not isolable, failed to run) listed by name and reason."""
NOTES_SHOWN = 4
SCOPE_WIDTH = 44
REASON_WIDTH = 160
_FAILED_TO_RUN = "the backend cannot run"


def _record(verification: Any) -> Mapping[str, Any]:
    return verification.to_dict() if hasattr(verification, "to_dict") else verification


def _ratio(op: Mapping[str, Any]) -> float | None:
    """The op's tolerance ratio (isolated; accumulated when not isolated), None when unmeasured."""
    return ratio(op) if measured(op)[1] else None


def _max_abs(comparison: Mapping[str, Any] | None) -> str:
    if not comparison:
        return "-"
    if comparison.get("shape_match") is False:
        return "shape!"
    return fmt(comparison.get("max_abs"))


def _tolerance(row: Mapping[str, Any]) -> str:
    tolerance = (row.get("verdict") or {}).get("tolerance") or row.get("tolerance") or {}
    if tolerance.get("atol") is None and tolerance.get("rtol") is None:
        return "-"
    return f"{fmt(tolerance.get('atol'))}+{fmt(tolerance.get('rtol'))}*|e|"


def _clip(text: str, width: int) -> str:
    """`text` cut to `width` characters, keeping its end (the innermost scope, the line number)."""
    return text if len(text) <= width else "..." + text[-(width - 3):]


def headline(verification: Any) -> dict[str, Any]:
    """verdict, worst op (FX node, ONNX ops, ratio, isolated max abs, scope, source) and the
    largest output error of a verification: plain data for summaries and junit properties."""
    record = _record(verification)
    worst = worst_op({"verification": record}) or {}
    comparison = measured(worst)[1] or {}
    errors = [as_float(o.get("max_abs")) for o in record.get("outputs", [])]
    return {
        "verdict": "pass" if record.get("passed") else "fail",
        "worst_op": record.get("worst_op"),
        "worst_op_onnx": op_types(list(worst.get("onnx_ops", []))) if worst else None,
        "worst_ratio": ratio(worst) if worst else None,
        "worst_op_max_abs": as_float(comparison.get("max_abs")),
        "max_abs": max((e for e in errors if e is not None), default=None),
        "scope": worst.get("scope") or None,
        "source": worst.get("source") or None,
    }


def _output_lines(record: Mapping[str, Any]) -> list[str]:
    lines = []
    verdicts = list(record.get("output_verdicts") or [])
    for index, output in enumerate(record.get("outputs", [])):
        verdict = verdicts[index] if index < len(verdicts) and verdicts[index] else None
        if verdict is not None and verdict.get("passed") and output.get("passed") is not False or (
                verdict is None and output.get("passed")):
            continue
        if verdict is not None and verdict.get("rule") == "truth" and output.get("passed") is not False:
            lines.append(f"  output {output.get('name')!r} ({verdict.get('dtype')}): against the fp64 truth "
                         f"{verdict.get('reason')}")
            continue
        if output.get("shape_match") is False:
            lines.append(f"  output {output.get('name')!r}: shape {output.get('shape_actual')} != "
                         f"expected {output.get('shape_expected')}")
            continue
        fraction = as_float(output.get("mismatch_fraction")) or 0.0
        lines.append(
            f"  output {output.get('name')!r}: max abs {fmt(output.get('max_abs'))}, "
            f"{fraction:.1%} of elements outside atol {fmt(output.get('atol'))} + "
            f"rtol {fmt(output.get('rtol'))}*|expected|"
            + (f" ({verdict.get('dtype')})" if verdict else "")
            + (f"; {output['note']}" if output.get("note") else "")
        )
    if not record.get("outputs"):
        lines.append("  no output was compared (the backend did not run the model; see the notes)")
    return lines


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["    " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _op_rows(ops: list[Mapping[str, Any]]) -> list[str]:
    header = ["op", "ratio", "FX node", "ONNX ops", "isolated", "accumulated", "tolerance (atol+rtol*|e|)",
              "attribution", "scope", "source"]
    rows = [header]
    for op in ops:
        rows.append([
            {True: "ok", False: "FAIL"}.get(op.get("passed"), "?"),
            fmt(_ratio(op)) + ("" if op.get("isolated") else " (acc)"), op_name(op),
            op_types(list(op.get("onnx_ops", []))), _max_abs(op.get("isolated")), _max_abs(op.get("accumulated")),
            _tolerance(op), op.get("attribution") or "-", _clip(op.get("scope") or "-", SCOPE_WIDTH),
            op.get("source") or "-",
        ])
    return _table(rows) + _verdict_lines(ops)


def _verdict_lines(ops: list[Mapping[str, Any]]) -> list[str]:
    """One line per shown op that has a verdict: its dtype, the rule that decided and its numbers
    (the ratio above is the error over what that verdict allowed)."""
    lines = []
    for op in ops:
        verdict = op.get("verdict") or {}
        if verdict:
            lines.append(f"  verdict {op.get('fx_node')} ({verdict.get('dtype') or '?'}, rule {verdict.get('rule')}): "
                         f"{_clip(str(verdict.get('reason') or ''), REASON_WIDTH)}")
    return lines


def _unmeasured_lines(ops: list[Mapping[str, Any]]) -> list[str]:
    failed = [op for op in ops if _FAILED_TO_RUN in op.get("not_isolable", "")]
    other = [op for op in ops if op not in failed]
    lines = []
    for title, group in (("failed to run alone", failed), ("not isolable (no own error)", other)):
        if not group:
            continue
        lines.append(f"  {len(group)} op(s) {title}:")
        for op in group[:UNMEASURED_SHOWN]:
            where = " ".join(part for part in (op.get("scope"), op.get("source")) if part)
            lines.append(f"    {op.get('fx_node')} [{op_types(list(op.get('onnx_ops', [])))}]"
                         f"{' at ' + where if where else ''}: {_clip(op.get('not_isolable', ''), REASON_WIDTH)}")
        if len(group) > UNMEASURED_SHOWN:
            lines.append(f"    ... and {len(group) - UNMEASURED_SHOWN} more")
    return lines


def _first_line(record: Mapping[str, Any]) -> str:
    """What pytest's one-line summary shows: the verdict and the worst op, where it came from."""
    verdict = "passed" if record.get("passed") else "FAILED"
    setup = f"exporter {record.get('exporter')}, device {record.get('device')}"
    worst = worst_op({"verification": record})
    if worst is None:
        return f"roundtrip: {record.get('model_name')} {verdict} ({setup})"
    where = " ".join(part for part in (worst.get("scope"), f"({worst['source']})" if worst.get("source") else "")
                     if part)
    return (f"roundtrip: {record.get('model_name')} {verdict}: worst op {op_name(worst)} "
            f"[{op_types(list(worst.get('onnx_ops', [])))}] at {fmt(_ratio(worst))}x its tolerance"
            f"{' in ' + where if where else ''} ({setup})")


def failure_message(verification: Any, *, reproducer: str | None = None, reproducer_note: str = "",
                    rows: int = ROWS_SHOWN) -> str:
    """The per-op failure table of a verification (see the module docstring)."""
    record = _record(verification)
    ops = list(record.get("ops", []))
    ranked = sorted((op for op in ops if _ratio(op) is not None), key=lambda op: -(_ratio(op) or 0.0))
    unmeasured = [op for op in ops if _ratio(op) is None]
    failing = [op for op in ops if op.get("passed") is False]
    lines = [_first_line(record)]
    lines += _output_lines(record)
    checker = record.get("checker") or {}
    lines.append("  onnx checker: ok" if checker.get("passed") else
                 f"  onnx checker: FAILED: {_clip(str(checker.get('message', '')), REASON_WIDTH)}")
    if not ops:
        lines.append("  no per-op rows (per_op=False, or the model never ran): pass per_op=True to localise")
    elif ranked:
        where = f"{len(failing)} of {len(ops)} op(s) outside their own tolerance" if failing else (
            f"none of {len(ops)} op(s) is outside its own tolerance: the error builds up across ops")
        shown = ranked[:rows]
        lines.append(f"  {where}; worst {len(shown)} by ratio = error / what the op's verdict allowed "
                     f"({record.get('op_reference') or 'torch'} as reference):")
        lines += _op_rows(shown)
    lines += [f"  {text}" for text in numeric_findings(record)]
    lines += _unmeasured_lines(unmeasured)
    notes = list(record.get("notes", []))
    for note in notes[:NOTES_SHOWN]:
        lines.append(f"  note: {_clip(note, REASON_WIDTH)}")
    if len(notes) > NOTES_SHOWN:
        lines.append(f"  ... and {len(notes) - NOTES_SHOWN} more note(s)")
    if reproducer:
        lines.append(f"  reproducer: {reproducer}  (python run.py)")
    elif reproducer_note:
        lines.append(f"  no reproducer: {reproducer_note}")
    return "\n".join(lines)
