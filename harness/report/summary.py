"""Render run results (the JSON dicts of Verifications) as terminal lines and Markdown."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _op_types(onnx_ops: list[str]) -> str:
    """Distinct ONNX op types in emission order, Constants left out, with counts over one."""
    counts: dict[str, int] = {}
    for op in onnx_ops:
        if op != "Constant":
            counts[op] = counts.get(op, 0) + 1
    return "+".join(f"{op}x{n}" if n > 1 else op for op, n in counts.items()) or "-"


def worst_op_text(record: dict[str, Any]) -> str:
    name = record.get("worst_op")
    if not name:
        return "-"
    op = next(o for o in record["ops"] if o["fx_node"] == name)
    measured = op.get("isolated") or op.get("accumulated") or {}
    kind = "isolated" if op.get("isolated") else "accumulated"
    return (
        f"{name} [{_op_types(op['onnx_ops'])}] {kind} max_abs={_fmt(measured.get('max_abs', 0.0))} "
        f"({_fmt(measured.get('tolerance_ratio', 0.0))}x tol) at {op['scope']} {op['source']}"
    )


def case_line(case: str, record: dict[str, Any]) -> str:
    """One line per case: verdict, checker, max output error, worst op."""
    verdict = "PASS" if record["passed"] else "FAIL"
    checker = "ok" if record["checker"]["passed"] else "FAILED"
    max_err = max((o["max_abs"] for o in record["outputs"] if isinstance(o["max_abs"], float)), default=0.0)
    seconds = sum(v for v in record.get("timings", {}).values() if isinstance(v, float))
    return (
        f"{verdict} {case:<28} checker={checker:<6} max_out_err={max_err:.3g} ops={len(record['ops'])} "
        f"time={seconds:.1f}s worst_op={worst_op_text(record)}"
    )


def markdown(run: dict[str, Any]) -> str:
    """A table readable in a CI job summary."""
    lines = [
        f"# roundtrip run: {run['device']} ({run['environment'].get('torch', '')}, "
        f"onnxruntime {run['environment'].get('onnxruntime', '')})",
        "",
        "| case | verdict | checker | max output abs err | other batch | ops | worst op |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in run["cases"]:
        record = case.get("verification")
        if record is None:
            lines.append(f"| {case['name']} | ERROR | - | - | - | - | {case.get('error', '')[:120]} |")
            continue
        other = case.get("other_batch")
        other_text = "-" if other is None else ("pass" if other["passed"] else "FAIL")
        max_err = max((o["max_abs"] for o in record["outputs"] if isinstance(o["max_abs"], float)), default=0.0)
        lines.append(
            f"| {case['name']} | {'pass' if record['passed'] else 'FAIL'} | "
            f"{'ok' if record['checker']['passed'] else 'FAILED'} | {max_err:.3g} | {other_text} | "
            f"{len(record['ops'])} | {worst_op_text(record)} |"
        )
    return "\n".join(lines) + "\n"
