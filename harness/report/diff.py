"""What changed between two parity reports: regressions, improvements, new worst ops.

Regressions (any one makes `roundtrip diff` exit 1):

* a case that passed and now fails, crashed or errors;
* an op that passed and now fails (its isolated error crossed its tolerance);
* an op whose isolated error grew by more than `growth_factor` and is no longer negligible
  (at least `min_ratio` of its tolerance);
* an op that was isolated and no longer is (newly unsupported).

Ops are matched by (case, backend, FX node): one build of one model names its nodes the same way
every run, and a row is compared only with the row of the same backend spec (its canonical
spelling: `openvino:precision=f32` is another backend than `openvino`). A backend that one side
has and the other lacks is listed (`missing_backends`, `added_backends`), never compared with
another backend; one skipped on either side is listed with why (`not_compared`). A report from
before the backend axis was verified on `onnxruntime`. With several backends, a backend whose
verdict went from pass to fail is a regression of its own. The thresholds are data
(data/diff.json) with their reasons.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from harness.report.summary import BackendEntry, backend_entries, backend_names, fmt, max_output_error, op_text, ratio, worst_ops

DIFF_SCHEMA_VERSION = 1
FAILED = ("fail", "crashed", "error")


@dataclass(frozen=True)
class Thresholds:
    growth_factor: float
    min_ratio: float

    @classmethod
    def shipped(cls, growth_factor: float | None = None) -> Thresholds:
        data = json.loads(resources.files("harness.report").joinpath("data/diff.json").read_text())
        return cls(float(growth_factor or data["growth_factor"]), float(data["min_ratio"]))


def _isolated_ratio(op: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> float | None:
    """The op's ratio (its verdict's score); against a report whose row has no verdict (`like`),
    the isolated tolerance ratio, so both sides measure the same thing."""
    if not op.get("isolated"):
        return None
    if like is not None and bool(op.get("verdict")) != bool(like.get("verdict")):
        return ratio({key: value for key, value in op.items() if key != "verdict"})
    return ratio(op)


def _op_entry(case: str, op: Mapping[str, Any], kind: str, detail: str, base: Any = None, new: Any = None,
              backend: str = "") -> dict[str, Any]:
    return {"case": case, "backend": backend, "fx_node": op["fx_node"], "aten": op["aten"], "kind": kind,
            "detail": detail,
            "scope": op.get("scope", ""), "source": op.get("source", ""),
            "base_ratio": base, "new_ratio": new}


def _compare_op(case: str, old: Mapping[str, Any], new: Mapping[str, Any], limits: Thresholds, backend: str = ""
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(regressions, improvements) of one op on one backend."""
    regressions: list[dict[str, Any]] = []
    improvements: list[dict[str, Any]] = []
    old_ratio, new_ratio = _isolated_ratio(old, new), _isolated_ratio(new, old)
    if old_ratio is not None and new_ratio is None and new.get("not_isolable"):
        regressions.append(_op_entry(case, new, "unsupported", f"no longer isolated: {new['not_isolable']}",
                                     backend=backend))
        return regressions, improvements
    if old.get("passed") is not False and new.get("passed") is False:
        regressions.append(_op_entry(case, new, "crossed", f"now fails its tolerance at {fmt(new_ratio)}x "
                                     f"(was {fmt(old_ratio)}x)", old_ratio, new_ratio, backend))
    elif old.get("passed") is False and new.get("passed") is True:
        improvements.append(_op_entry(case, new, "passes", f"now passes at {fmt(new_ratio)}x (was {fmt(old_ratio)}x)",
                                      old_ratio, new_ratio, backend))
    elif old_ratio is not None and new_ratio is not None:
        if new_ratio >= limits.min_ratio and new_ratio > limits.growth_factor * old_ratio:
            growth = math.inf if old_ratio == 0 else new_ratio / old_ratio
            regressions.append(_op_entry(case, new, "grew", f"isolated error grew {fmt(growth)}x to "
                                         f"{fmt(new_ratio)}x its tolerance", old_ratio, new_ratio, backend))
        elif old_ratio >= limits.min_ratio and old_ratio > limits.growth_factor * new_ratio:
            improvements.append(_op_entry(case, new, "shrank", f"isolated error shrank from {fmt(old_ratio)}x "
                                          f"to {fmt(new_ratio)}x its tolerance", old_ratio, new_ratio, backend))
    return regressions, improvements


@dataclass
class _Found:
    regressions: list[dict[str, Any]]
    improvements: list[dict[str, Any]]
    missing_backends: list[dict[str, str]]
    added_backends: list[dict[str, str]]
    not_compared: list[dict[str, str]]


def _compare_backends(name: str, old_case: Mapping[str, Any], new_case: Mapping[str, Any], limits: Thresholds,
                      found: _Found) -> None:
    """Each backend of `new_case` against the same backend of `old_case`, and only that."""
    old_entries = {e.backend: e for e in backend_entries(old_case)}
    new_entries = {e.backend: e for e in backend_entries(new_case)}
    several = len(old_entries) > 1 or len(new_entries) > 1
    for backend, entry in new_entries.items():
        before = old_entries.get(backend)
        if before is None:
            found.added_backends.append({"case": name, "backend": backend})
            continue
        if before.skipped or entry.skipped:
            found.not_compared.append({"case": name, "backend": backend,
                                       "why": f"skipped in the {'baseline' if before.skipped else 'new run'}: "
                                              f"{before.skipped or entry.skipped}"})
            continue
        if several:
            _compare_verdicts(name, before, entry, found)
        old_ops = {op["fx_node"]: op for op in before.ops}
        for op in entry.ops:
            if op["fx_node"] in old_ops:
                regressions, improvements = _compare_op(name, old_ops[op["fx_node"]], op, limits, backend)
                found.regressions += regressions
                found.improvements += improvements
    found.missing_backends += [{"case": name, "backend": backend} for backend in old_entries if backend not in new_entries]


def _compare_verdicts(name: str, before: BackendEntry, entry: BackendEntry, found: _Found) -> None:
    if before.passed and entry.passed is False:
        found.regressions.append({"case": name, "backend": entry.backend, "kind": "backend fails",
                                  "detail": f"{entry.backend}: max output error {fmt(entry.max_output_error)} "
                                            f"(was {fmt(before.max_output_error)})"})
    elif before.passed is False and entry.passed:
        found.improvements.append({"case": name, "backend": entry.backend, "kind": "backend passes",
                                   "detail": f"{entry.backend}: max output error {fmt(entry.max_output_error)}"})


def _worst_key(case_name: str, op: Mapping[str, Any]) -> tuple[str, str, str]:
    return case_name, op.get("backend") or "", op["fx_node"]


def _case_detail(case: Mapping[str, Any]) -> str:
    if case["status"] == "crashed":
        return case["crash"]["reason"]
    if case["status"] == "error":
        return case["error"]
    return f"max output error {fmt(max_output_error(case))}"


def diff(base: Mapping[str, Any], new: Mapping[str, Any], *, thresholds: Thresholds | None = None,
         base_path: str = "", new_path: str = "") -> dict[str, Any]:
    """The differences of `new` against `base` (two parity documents) as a JSON-able dict."""
    limits = thresholds or Thresholds.shipped()
    base_cases = {c["name"]: c for c in base["cases"]}
    new_cases = {c["name"]: c for c in new["cases"]}
    found = _Found([], [], [], [], [])
    for name, case in new_cases.items():
        old = base_cases.get(name)
        if old is None:
            continue
        if old["status"] == "pass" and case["status"] in FAILED:
            found.regressions.append({"case": name, "kind": f"case {case['status']}", "detail": _case_detail(case)})
        elif old["status"] in FAILED and case["status"] == "pass":
            found.improvements.append({"case": name, "kind": "case passes", "detail": f"was {old['status']}"})
        _compare_backends(name, old, case, limits, found)
    old_worst = {_worst_key(r.case, r.op) for r in worst_ops(base)}
    new_worst = [
        {"case": r.case, "backend": r.op.get("backend") or "", "fx_node": r.op["fx_node"], "aten": r.op["aten"],
         "ratio": r.ratio, "text": op_text(r.op)}
        for r in worst_ops(new) if _worst_key(r.case, r.op) not in old_worst
    ]
    regressions, improvements = found.regressions, found.improvements
    versions = {key: [base["versions"].get(key), value] for key, value in new["versions"].items()
                if base["versions"].get(key) != value}
    return {
        "schema_version": DIFF_SCHEMA_VERSION, "base": base_path, "new": new_path,
        "thresholds": {"growth_factor": limits.growth_factor, "min_ratio": limits.min_ratio},
        "regressed": bool(regressions), "regressions": regressions, "improvements": improvements,
        "new_worst_ops": new_worst,
        "missing_cases": sorted(set(base_cases) - set(new_cases)),
        "added_cases": sorted(set(new_cases) - set(base_cases)),
        "missing_backends": found.missing_backends, "added_backends": found.added_backends,
        "not_compared": found.not_compared, "backends": [backend_names(base), backend_names(new)],
        "versions_changed": versions,
        "device": [base["device"], new["device"]], "exporter": [base["exporter"], new["exporter"]],
    }


def _table(rows: list[dict[str, Any]], empty: str) -> list[str]:
    if not rows:
        return [empty, ""]
    lines = ["| case | backend | op | what | detail | source |", "|---|---|---|---|---|---|"]
    for row in rows:
        op = f"`{row['fx_node']}` {row['aten']}" if row.get("fx_node") else "-"
        lines.append(f"| {row['case']} | {row.get('backend') or '-'} | {op} | {row['kind']} | {row['detail']} | "
                     f"{row.get('source') or '-'} |")
    return lines + [""]


def markdown(result: Mapping[str, Any], *, heading: str = "##") -> str:
    """The diff as Markdown (regressions first)."""
    regressions, improvements = result["regressions"], result["improvements"]
    verdict = f"**{len(regressions)} regression(s)**" if regressions else "no regressions"
    lines = [f"{heading} Against the baseline: {verdict}, {len(improvements)} improvement(s)", ""]
    if result.get("base"):
        lines += [f"Baseline `{result['base']}`; growth counted beyond {fmt(result['thresholds']['growth_factor'])}x "
                  f"once above {fmt(result['thresholds']['min_ratio'])}x of tolerance.", ""]
    if result["versions_changed"]:
        changed = ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in sorted(result["versions_changed"].items()))
        lines += [f"Versions changed: {changed}.", ""]
    if result["device"][0] != result["device"][1] or result["exporter"][0] != result["exporter"][1]:
        lines += [f"Compared across device {result['device'][0]} -> {result['device'][1]}, exporter "
                  f"{result['exporter'][0]} -> {result['exporter'][1]}.", ""]
    lines += [f"{heading}# Regressions", ""] + _table(regressions, "None.")
    lines += [f"{heading}# New worst ops", ""]
    lines += [f"- {row['case']}" + (f" on {row['backend']}" if row.get("backend") else "") + f": {row['text']}"
              for row in result["new_worst_ops"]] or ["None."]
    lines += ["", f"{heading}# Improvements", ""] + _table(improvements, "None.")
    for key, label in (("missing_cases", "Cases in the baseline only"), ("added_cases", "Cases new in this run")):
        if result[key]:
            lines += [f"{label}: {', '.join(result[key])}.", ""]
    for key, label in (("missing_backends", "Backends in the baseline only (not compared)"),
                       ("added_backends", "Backends new in this run (not compared)")):
        if result.get(key):
            lines += [f"{label}: " + ", ".join(f"{row['case']} on {row['backend']}" for row in result[key]) + ".", ""]
    if result.get("not_compared"):
        lines += ["Not compared: " + "; ".join(f"{row['case']} on {row['backend']} ({row['why']})"
                                               for row in result["not_compared"]) + ".", ""]
    return "\n".join(lines)
