"""parity.md: the report as a GitHub job summary, read in a minute.

Verdict counts first; then what went wrong (the diff against a baseline, failing, crashed and
erroring cases); then the ten worst ops of the run with scope and source line; the case table;
and each op kind's observed maximum against its tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report import diff as diffs
from harness.report.summary import (
    backend_entries, backend_names, failing_ops, fmt, max_output_error, numeric_findings, op_kinds, op_name, op_text,
    op_types, ratio, verdict_counts, worst_op, worst_ops,
)

OP_KIND_ROWS = 20
FAILING_OPS_SHOWN = 3
NOTE_CHARS = 240


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline(document: Mapping[str, Any]) -> str:
    counts = verdict_counts(document)
    parts = ", ".join(f"{n} {status}" for status, n in counts.items() if n or status == "pass")
    status = "" if document["status"] == "complete" else f" ({document['status'].upper()})"
    return f"roundtrip parity{status}: {parts} of {sum(counts.values())} case(s)"


def _about(document: Mapping[str, Any]) -> list[str]:
    versions = document["versions"]
    shard = f", shard {document['shard']}" if document.get("shard") else ""
    return [
        f"Device **{document['device']}**, exporter **{document['exporter']}**{shard}; torch {versions.get('torch')}, "
        f"onnx {versions.get('onnx')}, onnxruntime {versions.get('onnxruntime')}; TF32 "
        f"{'on' if document['tf32'] else 'off'}; seed {document['seed']}; host {document['host'].get('name', '-')}; "
        f"{document['started']} to {document['finished'] or 'unfinished'}.",
        "",
        f"`{_cell(document['command'])}`",
        "",
    ]


def _problems(document: Mapping[str, Any]) -> list[str]:
    bad = [c for c in document["cases"] if c["status"] != "pass"]
    lines: list[str] = []
    if document.get("not_run"):
        lines += [f"**Interrupted**: {len(document['not_run'])} case(s) did not finish: "
                  f"{', '.join(document['not_run'])}.", ""]
    for error in document.get("internal_errors", []):
        lines += [f"**Internal error**: {_cell(error)}", ""]
    if not bad:
        return lines
    lines += ["## Failures", "", "| case | status | what |", "|---|---|---|"]
    for case in bad:
        if case["status"] == "crashed":
            crash = case["crash"]
            tail = " / ".join(crash["log_tail"][-2:])
            what = f"{crash['reason']}" + (f"; log: {tail}" if tail else "")
        elif case["status"] == "error":
            what = case["error"]
        else:
            ops = failing_ops(case)
            shown = "; ".join(op_text(op) for op in ops[:FAILING_OPS_SHOWN])
            sizes = case.get("sizes") or ["traced", "other"]
            traced = "pass" if case["verification"]["passed"] else "FAIL"
            other = case.get("other")
            other_text = f", {sizes[-1]} {'pass' if other['passed'] else 'FAIL'}" if other else ""
            what = (f"{sizes[0]} {traced}{other_text}, max output error {fmt(max_output_error(case))}; "
                    f"{len(ops)} op(s) over tolerance" + (f": {shown}" if shown else ""))
            notes = case["verification"]["notes"]
            if notes and not case["verification"]["outputs"]:
                what += f"; {notes[0][:NOTE_CHARS]}"
            what += "".join(f"; {text}" for text in numeric_findings(case["verification"]))
        lines.append(f"| {case['name']} | {case['status']} | {_cell(what)} |")
    return lines + [""]


def _worst(document: Mapping[str, Any]) -> list[str]:
    ranked = worst_ops(document)
    if not ranked:
        return []
    lines = ["## Ten worst ops", "",
             "Ratio: the error over what the op's verdict allowed (> 1 fails). Rule `truth`: e_backend <= factor x "
             "max(e_torch, floor), both against the fp64 truth; `override`/`tolerance`: the row (atol+rtol) decided.",
             "", "| # | case | op | ONNX | dtype | error | x allowed | rule | e_backend | e_torch | ratio | tolerance "
             "| attribution | scope | source |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for index, item in enumerate(ranked, 1):
        op = item.op
        kind = "isolated" if op.get("isolated") else "accumulated"
        comparison = op.get(kind) or {}
        verdict = op.get("verdict") or {}
        tolerance = verdict.get("tolerance") or op.get("tolerance") or {}
        lines.append(
            f"| {index} | {item.case} | `{op_name(op)}` {op['aten']} | {op_types(op['onnx_ops'])} | "
            f"{op.get('dtype') or '-'} | {fmt(comparison.get('max_abs'))} ({kind}) | {fmt(item.ratio)} | "
            f"{verdict.get('rule') or '-'} | {fmt(verdict.get('e_backend'))} | {fmt(verdict.get('e_torch'))} | "
            f"{fmt(verdict.get('ratio'))} | {fmt(tolerance.get('atol'))}+{fmt(tolerance.get('rtol'))}*\\|e\\| "
            f"({op.get('dtype') or '*'}) | {op.get('attribution') or '-'} | "
            f"{_cell(op.get('scope') or '-')} | {_cell(op.get('source') or '-')} |")
    return lines + [""]


def _cases(document: Mapping[str, Any]) -> list[str]:
    lines = ["## Cases", "", "| case | verdict | checker | traced size | other size | max output error | ops | "
             "worst op | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for case in document["cases"]:
        record = case.get("verification")
        if record is None:
            lines.append(f"| {case['name']} | {case['status']} | - | - | - | - | - | - | {fmt(case.get('seconds'))} |")
            continue
        sizes = case.get("sizes") or ["traced", "other"]
        other = case.get("other")
        other_text = "-" if other is None else f"{'pass' if other['passed'] else 'FAIL'} ({sizes[-1]})"
        worst = worst_op(case)
        lines.append(
            f"| {case['name']} | {case['status']} | {'ok' if record['checker']['passed'] else 'FAILED'} | "
            f"{'pass' if record['passed'] else 'FAIL'} ({sizes[0]}) | {other_text} | {fmt(max_output_error(case))} | "
            f"{len(record['ops'])} | {_cell(op_text(worst)) if worst else '-'} | {fmt(case.get('seconds'))} |")
    return lines + [""]


def _backends(document: Mapping[str, Any]) -> list[str]:
    """One table per backend (a run on several): each case's verdict on it, its output error, the
    precision it ran at, its worst op and what fails: the outputs (with the rule that decided) and the
    rows (with who is blamed)."""
    names = backend_names(document)
    if len(names) < 2:
        return []
    lines = ["## Backends", "",
             "Every backend is judged against the same torch values and fp64 truth. Score: the row's error over "
             "what its verdict allowed (> 1 fails). Blame: `export` (every backend fails the op), `runtime` (only "
             "this backend), `runtime-precision` (it ran the op below its declared precision).", ""]
    for backend in names:
        lines += [f"### {backend}", "", "| case | verdict | max output error | runtime precision | rows below declared "
                  "| worst op | score | what fails (blame) |", "|---|---|---|---|---|---|---|---|"]
        for case in document["cases"]:
            entry = next((e for e in backend_entries(case) if e.backend == backend), None)
            if case["status"] in ("crashed", "error") or entry is None:
                status = case["status"] if case["status"] in ("crashed", "error") else "not run"
                lines.append(f"| {case['name']} | {status} | - | - | - | - | - | - |")
                continue
            if entry.skipped:
                lines.append(f"| {case['name']} | skipped: {_cell(entry.skipped)} | - | - | - | - | - | - |")
                continue
            worst = entry.worst
            failures = entry.failures
            failing = "; ".join(_cell(text) for text in failures[:FAILING_OPS_SHOWN])
            more = len(failures) - FAILING_OPS_SHOWN
            failing += f" and {more} more" if more > 0 else ""
            lines.append(f"| {case['name']} | {'pass' if entry.passed else 'FAIL'} | {fmt(entry.max_output_error)} | "
                         f"{entry.runtime_precision} | {entry.below_declared}/{len(entry.ops)} | "
                         f"{_cell(op_name(worst)) if worst else '-'} | {fmt(ratio(worst)) if worst else '-'} | "
                         f"{failing or '-'} |")
        lines.append("")
    return lines


def _quantized(document: Mapping[str, Any]) -> list[str]:
    """Quantized cases, both ends kept apart: what quantizing cost (float module against the
    quantized torch module) and what the export and runtime added (quantized torch module
    against the QDQ model, in steps of each quantized tensor's scale)."""
    rows = []
    for case in document["cases"]:
        record = case.get("verification") or {}
        cost = record.get("quantization")
        if cost is None:
            continue
        steps = [op["quant_steps"] for op in record.get("ops", []) if op.get("quant_steps")
                 and op.get("aten", "").startswith("quantized_decomposed.quantize")]
        worst = max((s["max_steps"] for s in steps), default=None)
        off = sum(s["off_by_one_or_more"] for s in steps)
        ties = sum(s["at_ties"] for s in steps)
        failing = sum(1 for op in record.get("ops", []) if op.get("passed") is False)
        output_cost = ", ".join(fmt(o["max_rel"]) for o in cost.get("outputs", [])) or "-"
        rows.append(f"| {case['name']} | {output_cost} | {cost.get('worst') or '-'} | {len(steps)} | {fmt(worst)} | "
                    f"{off} | {ties} | {failing} |")
    if not rows:
        return []
    return ["## Quantized cases: the cost of quantizing, and the export's steps", "",
            "| case | quantizing: output max rel | quantizing: op moved most | quantized regions | export: max steps "
            "| export: elements off | of those at ties | failing rows |",
            "|---|---|---|---|---|---|---|---|", *rows, ""]


def _kinds(document: Mapping[str, Any]) -> list[str]:
    kinds = op_kinds(document)
    if not kinds:
        return []
    lines = [f"## Op kinds: observed maximum against tolerance (least headroom first, {min(len(kinds), OP_KIND_ROWS)} "
             f"of {len(kinds)})", "",
             "| ATen overload | dtype | ops | failed | observed max (min atol) | atol | rtol | headroom | worst in |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind in kinds[:OP_KIND_ROWS]:
        lines.append(f"| {kind.aten} | {kind.dtype} | {kind.count} | {kind.failed} | {fmt(kind.observed)} | "
                     f"{fmt(kind.atol)} | {fmt(kind.rtol)} | {fmt(kind.headroom)} | {kind.worst_case} |")
    return lines + [""]


def render(document: Mapping[str, Any], *, diff: Mapping[str, Any] | None = None) -> str:
    """parity.md for `document`, with the diff against a baseline when one is given."""
    lines = [f"# {headline(document)}", ""] + _about(document)
    if diff is not None:
        lines += [diffs.markdown(diff), ""]
    lines += _problems(document) + _worst(document) + _cases(document) + _backends(document) + _quantized(document) + _kinds(document)
    lines.append("Full data: `parity.json`; plots and sortable tables: `index.html`.")
    return "\n".join(lines) + "\n"
