"""What the plugin prints: the header (settings and CUDA placement) and, at the end of a run that
verified anything, a table of the failing verifications and the report's path."""

from __future__ import annotations

from typing import Any

import pytest

from harness.pytest_plugin.placement import describe
from harness.pytest_plugin.state import run_state

SUMMARY_ROWS = 30
"""Failing verifications listed at the end of a run; the report holds them all."""
_AUTO = "auto (cuda when torch and onnxruntime can use it, else cpu; decided at the first roundtrip test)"


def header_lines(config: pytest.Config) -> list[str]:
    """The header: settings, and for a CUDA run the placement of the workers on the GPUs."""
    state = run_state(config)
    settings = state.settings
    device = _AUTO if settings.device == "auto" else settings.device
    lines = [
        f"roundtrip: device={device} exporter={settings.exporter} opset={settings.opset or 'default'} "
        f"tolerances={settings.tolerances or 'shipped'} zoo tier={settings.tier} cases={settings.cases or 'all'} "
        f"report={settings.report_dir or 'none (--roundtrip-report-dir)'}"
        + (f" dtype={settings.dtype}" if settings.dtype else "")  # models as built unless asked
    ]
    if settings.device == "cuda":  # torch is loaded already: the start-up check imported it
        import torch

        lines.append(f"roundtrip: CUDA placement: {describe(state.workers, torch.cuda.device_count())}; "
                     f"torch {torch.__version__}")
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return header_lines(config)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "-" if value in (None, "") else str(value)


def failing_rows(headlines: list[dict[str, Any]]) -> list[list[str]]:
    """[test, status, worst op, ratio, scope, source] per failing, crashed or erroring case,
    worst ratio first (crashes and errors, which have none, first of all)."""
    bad = [h for h in headlines if h.get("status") not in ("pass", None)]
    bad.sort(key=lambda h: -(h.get("worst_ratio") or float("inf")))
    rows = []
    for h in bad:
        worst = f"{h['worst_op']} [{h.get('worst_op_onnx') or '-'}]" if h.get("worst_op") else _cell(h.get("detail"))
        rows.append([h["test"], h["status"].upper(), worst, _cell(h.get("worst_ratio")), _cell(h.get("scope")),
                     _cell(h.get("source"))])
    return rows


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = run_state(config)
    if state.role == "worker" or not state.cases:
        return
    write = terminalreporter.write_line
    terminalreporter.section("roundtrip")
    counts: dict[str, int] = {}
    for case in state.cases:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    write(f"{len(state.cases)} verification(s): " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    rows = failing_rows(state.headlines)
    if rows:
        table = [["test", "verdict", "worst op", "ratio", "scope", "source"], *rows[:SUMMARY_ROWS]]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            write("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if len(rows) > SUMMARY_ROWS:
            write(f"  ... and {len(rows) - SUMMARY_ROWS} more (see the report)")
    if state.report_paths:
        write(f"report: {state.report_paths.get('parity.json') or next(iter(state.report_paths.values()))}")
    elif state.report_error:
        write(f"report: NOT written: {state.report_error}")
    else:
        write("report: none (pass --roundtrip-report-dir DIR, or set roundtrip_report_dir in the ini file)")
