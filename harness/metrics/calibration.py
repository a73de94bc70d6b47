"""Calibrate the per-op tolerance table from observed isolated errors in run reports.

For each (ATen overload, device) the new atol is the largest isolated `min_atol` observed (the
smallest atol that would have passed at the row's rtol) times `margin`, never below the
device's default row: a calibrated row may only be as strict as fp32 noise allows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.metrics.tolerances import Tolerance, ToleranceTable

DEFAULT_MARGIN = 4.0


@dataclass
class Observation:
    aten: str
    device: str
    min_atol: float
    case: str


def observations(reports: Iterable[tuple[str, dict[str, Any]]]) -> list[Observation]:
    """Isolated errors of every op in every case of the given (path, report) pairs."""
    found: list[Observation] = []
    for _, report in reports:
        device = "cuda" if str(report.get("device", "cpu")).startswith("cuda") else "cpu"
        for case in report.get("cases", []):
            record = case.get("verification") or {}
            for op in record.get("ops", []):
                isolated = op.get("isolated")
                if not isolated or not isolated.get("shape_match", True):
                    continue
                value = isolated.get("min_atol")
                if isinstance(value, (int, float)):
                    found.append(Observation(op["aten"], device, float(value), case.get("name", "")))
    return found


def calibrate(table: ToleranceTable, reports: list[tuple[str, dict[str, Any]]],
              margin: float = DEFAULT_MARGIN) -> ToleranceTable:
    """A new table: calibrated rows for every observed op, defaults kept, others untouched."""
    by_key: dict[tuple[str, str], list[Observation]] = {}
    for obs in observations(reports):
        by_key.setdefault((obs.aten, obs.device), []).append(obs)
    sources = ", ".join(path for path, _ in reports)
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    rows = {(r.aten, r.device): r for r in table.rows}
    for (aten, device), found in sorted(by_key.items()):
        default = table.lookup("*", device)
        worst = max(found, key=lambda o: o.min_atol)
        atol = max(default.atol, worst.min_atol * margin)
        rows[(aten, device)] = Tolerance(
            aten, device, float(f"{atol:.3g}"), default.rtol,
            f"calibrated {stamp} from {sources}: {len(found)} sample(s), max isolated min_atol "
            f"{worst.min_atol:.3g} ({worst.case}) x{margin:g} margin, floored at the default {default.atol:g}",
        )
    return ToleranceTable(list(rows.values()), table.description)
