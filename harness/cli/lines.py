"""What `roundtrip run` prints per case and at the end, fitted to a screen.

The short form (the default) is one line per case, at most WIDTH characters: verdict, case, max
output error, worst op, its x-allowed ratio, seconds; a case that did not pass gets a second
line, as wide at most, with why (harness.cli.reasons). A name too long for its column keeps its
head and its tail around an ellipsis (`resnext101…8d`): the ends are what tell models and ops
apart. The long form (`-v`) is the report's whole line (checker, errors at both sizes, worst op,
its region, truth errors, allowance, scope and source) with the reason after it.

The summary after the run is two small tables: the cases that did not pass, and the run's ten
worst ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.cli.reasons import failure_reason, terminal_line
from harness.report.summary import fmt, max_output_error, op_types, ratio, worst_op, worst_ops

WIDTH = 120
ELLIPSIS = "…"
NAME_WIDTH = 24  # the case column: the zoo's longest names (word_language_model_lstm_tied) keep both ends
OP_WIDTH = 36
RATIO_WIDTH = 17  # `1.62e+06x allowed`
REASON_INDENT = "    "
VERDICTS = {"pass": "PASS", "fail": "FAIL", "crashed": "CRASH", "error": "ERROR"}


def middle_ellipsis(text: str, width: int) -> str:
    """`text` in at most `width` characters: its head, an ellipsis, its tail."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + ELLIPSIS + (text[-tail:] if tail else "")


def end_ellipsis(text: str, width: int) -> str:
    """`text` cut to `width` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def _seconds(case: Mapping[str, Any]) -> str:
    seconds = case.get("seconds")
    return "-" if seconds is None else f"{float(seconds):.1f}s"


def _worst(case: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The case's worst op; for a failing case, only one that failed (a passing one would point
    at a healthy op)."""
    op = worst_op(case)
    if op is not None and case.get("status") == "fail" and op.get("passed") is not False:
        return None
    return op


def op_label(op: Mapping[str, Any], width: int = OP_WIDTH) -> str:
    """`relu_3 [Sigmoid]`; an optimised region: `batch_norm_3+1 [Conv]` (one more FX node fused),
    in at most `width` characters: the op types give way first, then the middle of the name."""
    members = len(op.get("region") or [])
    name = f"{op.get('fx_node')}{f'+{members - 1}' if members > 1 else ''}"
    types = op_types(op.get("onnx_ops", []))
    if len(name) + len(types) + 3 > width:
        types = end_ellipsis(types, max(6, width - len(name) - 3))
    return f"{middle_ellipsis(name, width - len(types) - 3)} [{types}]"


def _aten(op: Mapping[str, Any]) -> str:
    """`conv2d` for `aten.conv2d.default`, `add.Tensor` for `aten.add.Tensor`."""
    return str(op.get("aten", "")).removeprefix("aten.").removesuffix(".default")


def short_lines(case: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """The case's line, and for a case that did not pass the reason's line; each <= `width`."""
    status = case.get("status", "")
    verdict = f"{VERDICTS.get(status, status.upper()):<5}"
    name = f"{middle_ellipsis(str(case.get('name', '')), NAME_WIDTH):<{NAME_WIDTH}}"
    seconds = f"{_seconds(case):>7}"
    if status in ("crashed", "error"):
        head = f"{verdict} {name} {seconds}"
    else:
        op = _worst(case)
        out = f"out {fmt(max_output_error(case)):>8}"
        # the op column gives way to a narrower width: everything else is fixed (77 characters)
        op_width = max(12, min(OP_WIDTH, width - 77))
        if op is None:
            worst = f"worst {'-':<{op_width}} {'':>{RATIO_WIDTH}}"
        else:
            allowed = fmt(ratio(op)) + "x allowed"
            worst = f"worst {op_label(op, op_width):<{op_width}} {allowed:>{RATIO_WIDTH}}"
        head = f"{verdict} {name} {out}  {worst} {seconds}"
    lines = [end_ellipsis(head.rstrip(), width)]
    if status != "pass":
        reason = failure_reason(case) or status
        lines.append(end_ellipsis(REASON_INDENT + reason, width))
    return lines


def long_line(case: Mapping[str, Any]) -> str:
    """The long form (-v): the report's line for the case, then `: <reason>` when it did not pass."""
    return terminal_line(case)


def case_lines(case: Mapping[str, Any], *, verbose: bool = False, width: int = WIDTH) -> list[str]:
    return [long_line(case)] if verbose else short_lines(case, width)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int, stretch: int) -> list[str]:
    """Left-aligned columns; column `stretch` takes what is left of `width` (middle ellipsis)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    others = sum(w for i, w in enumerate(widths) if i != stretch) + 2 * (len(header) - 1)
    widths[stretch] = max(8, min(widths[stretch], width - others))
    out = []
    for row in [list(header), *rows]:
        cells = [middle_ellipsis(cell, widths[i]) if i == stretch else cell for i, cell in enumerate(row)]
        out.append(end_ellipsis("  ".join(f"{c:<{widths[i]}}" for i, c in enumerate(cells)).rstrip(), width))
    return out


def summary_lines(document: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """The cases that did not pass (status, max output error, failing ops, reason) and the ten
    worst ops of the run (x allowed, isolated error, attribution), each line <= `width`."""
    lines: list[str] = []
    failing = [c for c in document.get("cases", []) if c.get("status") != "pass"]
    if failing:
        rows = []
        for case in failing:
            ops = [op for op in (case.get("verification") or {}).get("ops", []) if op.get("passed") is False]
            rows.append([middle_ellipsis(case["name"], NAME_WIDTH), VERDICTS.get(case["status"], case["status"]),
                         fmt(max_output_error(case)), str(len(ops)), failure_reason(case)])
        lines.append(f"Not passed ({len(failing)}):")
        lines += _table(["case", "verdict", "max out", "ops", "reason"], rows, width, 4)
    ranked = worst_ops(document)
    if ranked:
        rows = []
        for item in ranked:
            op = item.op
            isolated = (op.get("isolated") or {}).get("max_abs")
            rows.append([middle_ellipsis(item.case, NAME_WIDTH), op_label(op),
                         _aten(op),
                         fmt(item.ratio) + "x", fmt(isolated), str(op.get("attribution") or "-"),
                         "FAIL" if op.get("passed") is False else "pass"])
        lines.append(f"Worst {len(ranked)} ops (error over what the verdict allowed):")
        lines += _table(["case", "op", "aten", "allowed", "isolated", "attribution", ""], rows, width, 2)
    return lines
