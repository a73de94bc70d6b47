"""What changed between two parity reports: regressions, improvements, new worst ops.

Regressions (any one makes `roundtrip diff` exit 1):

* a case that passed and now fails, crashed or errors;
* an op that passed and now fails (its isolated error crossed its tolerance);
* an op whose isolated error grew by more than `growth_factor` and is no longer negligible
  (at least `min_ratio` of its tolerance);
* an op that was isolated and no longer is (newly unsupported).

Ops are matched by (case, FX node): one build of one model names its nodes the same way every
run. The thresholds are data (data/diff.json) with their reasons.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from harness.report.summary import fmt, max_output_error, op_text, ops_of, ratio, worst_ops

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


def _op_entry(case: str, op: Mapping[str, Any], kind: str, detail: str, base: Any = None, new: Any = None
              ) -> dict[str, Any]:
    return {"case": case, "fx_node": op["fx_node"], "aten": op["aten"], "kind": kind, "detail": detail,
            "scope": op.get("scope", ""), "source": op.get("source", ""),
            "base_ratio": base, "new_ratio": new}


def _compare_op(case: str, old: Mapping[str, Any], new: Mapping[str, Any], limits: Thresholds
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(regressions, improvements) of one op."""
    regressions: list[dict[str, Any]] = []
    improvements: list[dict[str, Any]] = []
    old_ratio, new_ratio = _isolated_ratio(old, new), _isolated_ratio(new, old)
    if old_ratio is not None and new_ratio is None and new.get("not_isolable"):
        regressions.append(_op_entry(case, new, "unsupported", f"no longer isolated: {new['not_isolable']}"))
        return regressions, improvements
    if old.get("passed") is not False and new.get("passed") is False:
        regressions.append(_op_entry(case, new, "crossed", f"now fails its tolerance at {fmt(new_ratio)}x "
                                     f"(was {fmt(old_ratio)}x)", old_ratio, new_ratio))
    elif old.get("passed") is False and new.get("passed") is True:
        improvements.append(_op_entry(case, new, "passes", f"now passes at {fmt(new_ratio)}x (was {fmt(old_ratio)}x)",
                                      old_ratio, new_ratio))
    elif old_ratio is not None and new_ratio is not None:
        if new_ratio >= limits.min_ratio and new_ratio > limits.growth_factor * old_ratio:
            growth = math.inf if old_ratio == 0 else new_ratio / old_ratio
            regressions.append(_op_entry(case, new, "grew", f"isolated error grew {fmt(growth)}x to "
                                         f"{fmt(new_ratio)}x its tolerance", old_ratio, new_ratio))
        elif old_ratio >= limits.min_ratio and old_ratio > limits.growth_factor * new_ratio:
            improvements.append(_op_entry(case, new, "shrank", f"isolated error shrank from {fmt(old_ratio)}x "
                                          f"to {fmt(new_ratio)}x its tolerance", old_ratio, new_ratio))
    return regressions, improvements


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
    regressions: list[dict[str, Any]] = []
    improvements: list[dict[str, Any]] = []
    for name, case in new_cases.items():
        old = base_cases.get(name)
        if old is None:
            continue
        if old["status"] == "pass" and case["status"] in FAILED:
            regressions.append({"case": name, "kind": f"case {case['status']}", "detail": _case_detail(case)})
        elif old["status"] in FAILED and case["status"] == "pass":
            improvements.append({"case": name, "kind": "case passes", "detail": f"was {old['status']}"})
        old_ops = {op["fx_node"]: op for op in ops_of(old)}
        for op in ops_of(case):
            if op["fx_node"] in old_ops:
                found, better = _compare_op(name, old_ops[op["fx_node"]], op, limits)
                regressions += found
                improvements += better
    old_worst = {(r.case, r.op["fx_node"]) for r in worst_ops(base)}
    new_worst = [
        {"case": r.case, "fx_node": r.op["fx_node"], "aten": r.op["aten"], "ratio": r.ratio, "text": op_text(r.op)}
        for r in worst_ops(new) if (r.case, r.op["fx_node"]) not in old_worst
    ]
    versions = {key: [base["versions"].get(key), value] for key, value in new["versions"].items()
                if base["versions"].get(key) != value}
    return {
        "schema_version": DIFF_SCHEMA_VERSION, "base": base_path, "new": new_path,
        "thresholds": {"growth_factor": limits.growth_factor, "min_ratio": limits.min_ratio},
        "regressed": bool(regressions), "regressions": regressions, "improvements": improvements,
        "new_worst_ops": new_worst,
        "missing_cases": sorted(set(base_cases) - set(new_cases)),
        "added_cases": sorted(set(new_cases) - set(base_cases)),
        "versions_changed": versions,
        "device": [base["device"], new["device"]], "exporter": [base["exporter"], new["exporter"]],
    }


def _table(rows: list[dict[str, Any]], empty: str) -> list[str]:
    if not rows:
        return [empty, ""]
    lines = ["| case | op | what | detail | source |", "|---|---|---|---|---|"]
    for row in rows:
        op = f"`{row['fx_node']}` {row['aten']}" if row.get("fx_node") else "-"
        lines.append(f"| {row['case']} | {op} | {row['kind']} | {row['detail']} | {row.get('source') or '-'} |")
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
    lines += [f"- {row['case']}: {row['text']}" for row in result["new_worst_ops"]] or ["None."]
    lines += ["", f"{heading}# Improvements", ""] + _table(improvements, "None.")
    for key, label in (("missing_cases", "Cases in the baseline only"), ("added_cases", "Cases new in this run")):
        if result[key]:
            lines += [f"{label}: {', '.join(result[key])}.", ""]
    return "\n".join(lines)
