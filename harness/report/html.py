"""index.html: the report as one self-contained page (jinja2 template, inline matplotlib SVG,
an inline script that sorts tables; nothing is loaded from the network)."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from typing import Any

from harness.report import model_explorer
from harness.report.document import as_float
from harness.report.markdown import headline
from harness.report.plots import error_along_graph, headroom_by_kind
from harness.report.summary import (
    backend_entries, backend_names, backend_status, failing_ops, fmt, max_output_error, measured, numeric_findings,
    op_kinds, op_types, ops_to_compare, ratio, runtime_layer, verdict_counts, worst_ops,
)

OPS_PER_CASE = 15
TEMPLATE = "index.html.j2"
# A run rewrites its report after every case: each case's plot is drawn once.
_PLOTS: dict[tuple[Any, ...], str | None] = {}
_PLOTS_KEPT = 256


def _plot(case: Mapping[str, Any]) -> str | None:
    ops = (case.get("verification") or {}).get("ops", [])
    key = (case["name"], case["status"], case.get("seconds"), len(ops),
           tuple(ratio(op) for op in ops))
    if key not in _PLOTS:
        if len(_PLOTS) >= _PLOTS_KEPT:
            _PLOTS.clear()
        _PLOTS[key] = error_along_graph(case)
    return _PLOTS[key]


@functools.cache
def _environment() -> Any:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    environment.filters["fmt"] = fmt
    environment.filters["sortkey"] = _sort_key
    environment.filters["op_types"] = op_types
    environment.filters["runtime_layer"] = runtime_layer
    return environment


def _sort_key(value: Any) -> str:
    """What a sortable cell sorts by: its number (infinity as a large one), else its text."""
    number = as_float(value)
    if number is None or math.isnan(number):
        return "" if value is None else str(value)
    return repr(min(number, 1e300))


def _op_row(case: str, op: Mapping[str, Any], reproducers: Mapping[str, str]) -> dict[str, Any]:
    kind, comparison = measured(op)
    return {"case": case, "op": op, "kind": kind, "comparison": comparison or {}, "ratio": ratio(op),
            "reproducer": reproducers.get(op["fx_node"])}


def _cells(case: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(status, label) of the case's two grid cells: traced size, other size."""
    if case["status"] in ("crashed", "error"):
        return [(case["status"], case["status"])] * 2
    traced = "pass" if case["verification"]["passed"] else "fail"
    other = case.get("other")
    if other is None:
        return [(traced, traced), ("not-run", "not run")]
    other_cell = ("pass", "pass") if other["passed"] else ("fail", "fail")
    return [(traced, traced), other_cell]


def _backend_cell(case: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """One cell of the case x backend grid: its status, the worst score, the rows below their
    declared precision, and why a skipped backend did not run."""
    status = backend_status(case, backend)
    entry = next((e for e in backend_entries(case) if e.backend == backend), None)
    cell: dict[str, Any] = {"backend": backend, "status": status, "label": status, "detail": "", "title": "",
                            "below": "", "failing": 0}
    if entry is None:
        return cell
    if entry.skipped:
        cell["title"] = entry.skipped
        return cell
    worst = entry.worst
    cell["label"] = "pass" if entry.passed else "FAIL"
    cell["detail"] = f"{fmt(ratio(worst))}x" if worst else ""
    below = entry.below_declared
    cell["title"] = (f"max output error {fmt(entry.max_output_error)}; worst op "
                     f"{worst['fx_node'] if worst else '-'}; runtime precision {entry.runtime_precision}"
                     + (f"; {below}/{len(entry.ops)} rows below their declared precision" if below else "")
                     + (f"; {len(entry.failing)} failing row(s)" if entry.failing else "")
                     + (f"; fails: {'; '.join(entry.failures)}" if entry.passed is False else ""))
    cell["below"] = f"{below}/{len(entry.ops)} {entry.runtime_precision}" if below else ""
    cell["failing"] = len(entry.failing)
    return cell


def _across_view(case: Mapping[str, Any], backends: list[str]) -> list[dict[str, Any]]:
    """Per op, each backend's row side by side: score, verdict, runtime precision, and the
    backend(s) at fault marked."""
    views = []
    for op in ops_to_compare(case, OPS_PER_CASE):
        cells = []
        for backend in backends:
            row = op.rows.get(backend)
            if row is None:
                cells.append({"backend": backend, "status": "not-run", "ratio": None, "fault": "", "precision": "",
                              "layer": ""})
                continue
            precision = (row.get("runtime_precision") or {}).get("precision") or ""
            cells.append({"backend": backend, "status": "fail" if row.get("passed") is False else "pass",
                          "ratio": ratio(row), "fault": op.faults.get(backend, ""),
                          "precision": precision if precision != row.get("dtype") else "",
                          "layer": runtime_layer(row.get("runtime_fusion"))})
        at_fault = ("the export (every backend)" if op.export_fault
                    else ", ".join(f"{backend} ({fault})" for backend, fault in op.faults.items()) or "-")
        views.append({"fx_node": op.fx_node, "aten": op.aten, "cells": cells, "at_fault": at_fault})
    return views


def _explorer_view(case: Mapping[str, Any], report_dir: str | None) -> dict[str, Any] | None:
    """The case's Model Explorer links and commands (when its files were written and the report
    directory is known: the server reads models by absolute path)."""
    entry = case.get("model_explorer")
    if not entry or report_dir is None:
        return None
    base = os.path.abspath(report_dir)
    return {"server": model_explorer.server_command(), "links": model_explorer.failing_links(case, base),
            "command": model_explorer.open_command(entry, base),
            "sync": os.path.join(base, entry["sync"]) if entry.get("sync") else None}


def _case_view(case: Mapping[str, Any], report_dir: str | None = None, backends: list[str] | None = None
               ) -> dict[str, Any]:
    reproducers = case.get("reproducers") or {}
    ops = (case.get("verification") or {}).get("ops", [])
    ranked = sorted(ops, key=lambda op: (op.get("isolated") is not None, ratio(op)), reverse=True)
    return {
        "case": case, "anchor": "case-" + "".join(ch if ch.isalnum() else "-" for ch in case["name"]),
        "cells": _cells(case), "sizes": case.get("sizes") or ["traced", "other"],
        "plot": _plot(case), "max_output_error": max_output_error(case),
        "failing": [_op_row(case["name"], op, reproducers) for op in failing_ops(case)],
        "worst": [_op_row(case["name"], op, reproducers) for op in ranked[:OPS_PER_CASE]],
        "findings": numeric_findings(case.get("verification") or {}),
        "explorer": _explorer_view(case, report_dir),
        "backend_cells": [_backend_cell(case, backend) for backend in backends or []],
        "across": _across_view(case, backends) if backends and len(backends) > 1 else [],
    }


def render(document: Mapping[str, Any], *, diff: Mapping[str, Any] | None = None,
           report_dir: str | os.PathLike | None = None) -> str:
    """index.html for `document`, with the diff against a baseline when one is given; with
    `report_dir`, links each failing op of a case written with Model Explorer files to its nodes."""
    where = None if report_dir is None else os.fspath(report_dir)
    backends = backend_names(document)
    cases = [_case_view(case, where, backends) for case in document["cases"]]
    reproducers = {c["case"]["name"]: c["case"].get("reproducers") or {} for c in cases}
    kinds = op_kinds(document)
    return _environment().get_template(TEMPLATE).render(
        document=document, headline=headline(document), counts=verdict_counts(document), cases=cases,
        worst=[_op_row(r.case, r.op, reproducers.get(r.case, {})) for r in worst_ops(document)],
        kinds=kinds, kinds_plot=headroom_by_kind(kinds), diff=diff, backends=backends,
    )
