"""Calibrate a per-op tolerance table from observed isolated errors in run reports.

Only rows the fp64 truth vouches for teach the table: an op row is an observation when it
passed and its attribution is "both-noise" (backend and torch both within fp32 noise of the
float64 result), so a bug never becomes a tolerance. For each (ATen overload, device, dtype)
the new atol is the largest isolated `min_atol` observed (the smallest atol that would have
passed at the row's rtol) times the table's margin, never below the device's default row.
A row is never loosened past `max_loosen_factor` times the row that applied before, unless
`allow_loosen` says so: it is held at that cap and the change says it was capped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.metrics.tolerances import ANY, Tolerance, ToleranceTable, normalise_device

LEARNS_FROM = "both-noise"


@dataclass
class Observation:
    aten: str
    device: str
    dtype: str
    min_atol: float
    case: str


@dataclass
class Change:
    """One calibrated row against the row that applied before it."""

    aten: str
    device: str
    dtype: str
    before: float
    after: float
    samples: int
    capped: bool

    @property
    def loosened(self) -> bool:
        return self.after > self.before


@dataclass
class Calibration:
    table: ToleranceTable
    changes: list[Change]
    observations: int
    ignored: int  # rows seen but not learned from (failing, not both-noise, not isolated)


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _observation(op: dict[str, Any], device: str, case: str) -> Observation | None:
    isolated = op.get("isolated")
    if not isolated or op.get("passed") is not True or op.get("attribution") != LEARNS_FROM:
        return None
    if isolated.get("shape_match") is False:
        return None
    value = _float(isolated.get("min_atol"))
    if value is None or not math.isfinite(value):
        return None
    dtype = op.get("dtype") or isolated.get("dtype_expected") or ANY
    return Observation(op["aten"], device, str(dtype), value, case)


def observations(reports: Iterable[tuple[str, dict[str, Any]]]) -> tuple[list[Observation], int]:
    """(what the reports teach, how many op rows were ignored) over (path, report) pairs."""
    found: list[Observation] = []
    ignored = 0
    for _, report in reports:
        device = normalise_device(str(report.get("device", "cpu")))
        for case in report.get("cases", []):
            record = case.get("verification") or {}
            for op in record.get("ops", []):
                observation = _observation(op, device, case.get("name", ""))
                if observation is None:
                    ignored += 1
                else:
                    found.append(observation)
    return found, ignored


def calibrate(table: ToleranceTable, reports: list[tuple[str, dict[str, Any]]], margin: float | None = None,
              *, allow_loosen: bool = False) -> Calibration:
    """A new table: a calibrated row for every observed op whose atol differs from the row that
    applied to it, the others untouched."""
    policy = table.calibration
    margin = policy.margin if margin is None else margin
    found, ignored = observations(reports)
    by_key: dict[tuple[str, str, str], list[Observation]] = {}
    for obs in found:
        by_key.setdefault((obs.aten, obs.device, obs.dtype), []).append(obs)
    sources = ", ".join(path for path, _ in reports)
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    rows = {(r.aten, r.device, r.dtype): r for r in table.rows}
    changes = []
    for (aten, device, dtype), samples in sorted(by_key.items()):
        default = table.lookup(ANY, device, dtype)
        before = table.lookup(aten, device, dtype)
        worst = max(samples, key=lambda o: o.min_atol)
        atol = float(f"{max(default.atol, worst.min_atol * margin):.3g}")
        cap = before.atol * policy.max_loosen_factor
        capped = atol > cap and not allow_loosen
        if capped:
            atol = cap
        source = (f"calibrated {stamp} from {sources}: {len(samples)} both-noise sample(s), max isolated min_atol "
                  f"{worst.min_atol:.3g} ({worst.case}) x{margin:g} margin, floored at the default {default.atol:g}")
        if atol == before.atol and not capped:
            continue  # the row that applies already says this: no row of its own
        if capped:
            source += f"; held at {policy.max_loosen_factor:g}x the previous {before.atol:g} (--allow-loosen lifts it)"
        rows[(aten, device, dtype)] = Tolerance(aten, device, atol, before.rtol, source, dtype)
        changes.append(Change(aten, device, dtype, before.atol, atol, len(samples), capped))
    return Calibration(ToleranceTable(list(rows.values()), table.description, table.calibration), changes,
                       len(found), ignored)
