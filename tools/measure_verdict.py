"""Measure what the verdict rule's constants rest on: the zoo's errors against the fp64 truth per dtype.

    python tools/measure_verdict.py --dtypes float32 float16 [--tier smoke] [--cases resnet18,alexnet]
                                    [--out measurements.json]

For every case and dtype (the module and its floating inputs cast with `.to(dtype)`), verifies
the model with the shipped defaults (no output tolerances: the rule decides the outputs too) and
prints one row per case: the worst op by verdict score with torch's and the backend's error
against the fp64 truth, their ratio, and the outputs' errors. The closing summary gives, per
dtype, the figures harness/metrics/data/verdict.json cites:

* the largest error of any op (torch or backend) in units of the dtype's rounding
  (max(u(dtype), u(accumulation) * sqrt(K))): what `floor_ulps` must cover;
* the largest e_backend / e_torch among ops whose e_torch is above the floor: what `factor`
  must cover;
* the largest isolated error (backend against torch) over the dtype's default row: what the
  cap factor must cover;
* the outputs' largest error against torch relative to their scale.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from typing import Any

import torch

import harness
import model_zoo_cases
from harness.metrics.noise import rounding_unit

logger = logging.getLogger("measure_verdict")


def _cast(module: torch.nn.Module, args: tuple[Any, ...], dtype: torch.dtype) -> tuple[torch.nn.Module, tuple]:
    return module.to(dtype), tuple(a.to(dtype) if a.is_floating_point() else a for a in args)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def measure_case(case: Any, dtype_name: str) -> dict[str, Any]:
    """One case in one dtype: its verdict, worst op and the per-op figures the summary needs."""
    module, args = _cast(case.build(), case.inputs(), getattr(torch, dtype_name))
    verification = harness.verify(
        module, args, dynamic_axes={k: v for k, v in case.dynamic_axes.items() if k in case.input_names},
        input_names=case.input_names, model_name=case.name)
    ops = []
    for op in verification.ops:
        verdict = op.verdict
        if verdict is None or verdict.rule != "truth":
            continue
        unit = rounding_unit(verdict.dtype, op.reduction_length or 1)
        ops.append({"fx_node": op.fx_node, "aten": op.aten, "dtype": verdict.dtype, "K": op.reduction_length,
                    "e_backend": verdict.e_backend, "e_torch": verdict.e_torch, "unit": unit,
                    "floor": verdict.floor, "score": verdict.score, "cap_ratio": verdict.tolerance_ratio,
                    "isolated_ratio": op.isolated.tolerance_ratio if op.isolated else None,
                    "attribution": op.attribution, "passed": op.passed, "members": max(len(op.region), 1)})
    worst = verification.worst_op
    worst_verdict = worst.verdict if worst is not None else None
    return {
        "case": case.name, "dtype": dtype_name, "passed": verification.passed,
        "worst_op": worst.fx_node if worst is not None else None,
        "worst_scope": worst.scope if worst is not None else None,
        "worst": worst_verdict.to_dict() if worst_verdict is not None else None,
        "outputs": [{"name": c.name, "against_torch_normalized": c.normalized, "max_abs": c.max_abs,
                     "scale": c.scale, "min_atol_at_rtol": c.min_atol, "rtol": c.rtol,
                     "verdict": v.to_dict()} for c, v in zip(verification.outputs, verification.output_verdicts)],
        "ops": ops, "first_nonfinite": verification.first_nonfinite, "overflows": verification.overflows,
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per dtype, the largest figures over every case (see the module docstring)."""
    summary: dict[str, dict[str, Any]] = {}
    for result in results:
        entry = summary.setdefault(result["dtype"], {"cases": 0, "ops": 0, "failed": [], "max_error_units": 0.0,
                                                     "max_ratio_above_floor": 0.0, "max_cap_ratio": 0.0,
                                                     "max_output_normalized": 0.0, "max_op_score": 0.0,
                                                     "max_units": {}})
        entry["cases"] += 1
        if not result["passed"]:
            entry["failed"].append(result["case"])
        for op in result["ops"]:
            entry["ops"] += 1
            if op["unit"]:
                entry["max_error_units"] = max(entry["max_error_units"], max(op["e_backend"], op["e_torch"]) / op["unit"])
                # split by side and by how many FX nodes the row stands for (1: an op of its own)
                units = entry["max_units"].setdefault(f"members={op.get('members', 1)}", {"torch": 0.0, "backend": 0.0})
                units["torch"] = max(units["torch"], op["e_torch"] / op["unit"])
                units["backend"] = max(units["backend"], op["e_backend"] / op["unit"])
            if op["e_torch"] > op["floor"] and op["e_torch"] > 0:
                entry["max_ratio_above_floor"] = max(entry["max_ratio_above_floor"], op["e_backend"] / op["e_torch"])
            entry["max_cap_ratio"] = max(entry["max_cap_ratio"], op["isolated_ratio"] or 0.0)
            entry["max_op_score"] = max(entry["max_op_score"], op["score"])
        for output in result["outputs"]:
            entry["max_output_normalized"] = max(entry["max_output_normalized"], output["against_torch_normalized"])
    return summary


def _fmt(value: Any) -> str:
    if value is None or isinstance(value, str):
        return str(value)
    return f"{value:.3g}" if math.isfinite(value) else str(value)


def table(results: list[dict[str, Any]]) -> str:
    """The Markdown table of the closing note: per case the worst op and both errors."""
    lines = ["| dtype | case | verdict | worst op | e_torch | e_backend | ratio | x allowed | output e_torch | "
             "output e_backend |", "|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        worst = result["worst"] or {}
        outputs = [o["verdict"] for o in result["outputs"]]
        lines.append(
            f"| {result['dtype']} | {result['case']} | {'pass' if result['passed'] else 'FAIL'} | "
            f"{result['worst_op']} | {_fmt(worst.get('e_torch'))} | {_fmt(worst.get('e_backend'))} | "
            f"{_fmt(worst.get('ratio'))} | {_fmt(worst.get('score'))} | "
            f"{', '.join(_fmt(o.get('e_torch')) for o in outputs)} | {', '.join(_fmt(o.get('e_backend')) for o in outputs)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16"])
    parser.add_argument("--tier", default="smoke")
    parser.add_argument("--cases", default=None, help="comma-separated case names (overrides --tier)")
    parser.add_argument("--out", default=None, help="write every figure as JSON here")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cases = (model_zoo_cases.select(tier=options.tier) if options.cases is None
             else [model_zoo_cases.get(name) for name in options.cases.split(",")])
    results = []
    for dtype_name in options.dtypes:
        for case in cases:
            results.append(measure_case(case, dtype_name))
            logger.info("%s %s: %s", dtype_name, case.name, "pass" if results[-1]["passed"] else "FAIL")
            if options.out:
                with open(options.out, "w") as handle:
                    json.dump({"results": results, "summary": summarise(results)}, handle, indent=1, default=str)
    sys.stdout.write(table(results) + "\n\n" + json.dumps(summarise(results), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
