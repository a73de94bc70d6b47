"""Deciding an op row: the verdict rule against the fp64 truth, a row that overrides it, or the
dtype's default row where there is no truth (harness.metrics.verdict says which and why)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.analysis.rows import OpRecord
from harness.metrics.comparison import Comparison
from harness.metrics.noise import unit_roundoff
from harness.metrics.tolerances import Tolerance, is_override
from harness.metrics.verdict import (
    OVERRIDE, TOLERANCE, Verdict, VerdictRule, by_row, by_truth, overflow_limit, worst,
)


@dataclass(frozen=True)
class TruthPair:
    """One output's comparisons with its fp64 truth: the backend's (None when it has no isolated
    value) and torch's, with the op's reduction length, the output's dtype, the roundings the
    row stands for (an optimised region's member count, else 1) and those of one step of its
    recurrent cell (harness.analysis.truth.cell_roundings; 1 for other ops), which count only
    where the backend ran the op below the dtype torch computed it in."""

    backend: Comparison | None
    torch_side: Comparison
    reduction_length: int
    dtype: str
    roundings: int = 1
    cell_roundings: int = 1


def decide(record: OpRecord, isolated: Mapping[str, Comparison], truths: Mapping[str, TruthPair],
           rule: VerdictRule, default: Tolerance, precision: str | None = None) -> None:
    """Set the row's `verdict` (its worst output's) and `passed` from its isolated comparisons
    (each against torch under the row's tolerance) and their truths. A row that was not
    isolated keeps what the isolation said. `precision`: the dtype the backend really ran the
    op at, when lower than declared: its floating outputs are judged by that dtype's rule."""
    if record.isolated is None or not isolated:
        return
    verdicts = verdicts_for(record, isolated, truths, rule, default, precision)
    record.verdict = worst(verdicts)
    record.passed = all(v.passed for v in verdicts)


def verdicts_for(record: OpRecord, isolated: Mapping[str, Comparison], truths: Mapping[str, TruthPair],
                 rule: VerdictRule, default: Tolerance, precision: str | None = None) -> list[Verdict]:
    """One verdict per isolated output (see `decide`), without touching the row."""
    row = Tolerance(**record.tolerance)
    verdicts = []
    for name, against_torch in isolated.items():
        pair = truths.get(name)
        dtype = pair.dtype if pair is not None else record.dtype
        roundings = pair.roundings if pair is not None else 1
        if precision and unit_roundoff(dtype) and unit_roundoff(precision) > unit_roundoff(dtype):
            dtype = precision  # torch's error, at its own precision, holds no rounding of the cell's there
            roundings *= pair.cell_roundings if pair is not None else 1
        if is_override(row):
            verdicts.append(by_row(against_torch, dtype=dtype, row=row, rule=OVERRIDE,
                                   reason=f"the row for {row.aten} ({row.dtype}) overrides the rule",
                                   backend=pair.backend if pair else None, torch_side=pair.torch_side if pair else None))
        elif pair is None or pair.backend is None or not unit_roundoff(dtype):
            verdicts.append(by_row(against_torch, dtype=dtype, row=row, rule=TOLERANCE, reason=_no_truth(record, pair)))
        else:
            verdicts.append(by_truth(pair.backend, pair.torch_side, against_torch, dtype=dtype,
                                     reduction_length=pair.reduction_length, rule=rule, row=default,
                                     roundings=roundings))
    return verdicts


def _no_truth(record: OpRecord, pair: TruthPair | None) -> str:
    if record.check == "selection" and pair is None:
        return ("indices judged through the values they select in torch's input (harness.metrics.ties): a "
                "different index among values tied within the dtype's rounding is a tie, not a divergence")
    if pair is not None and pair.backend is not None:
        return f"{pair.dtype} output: compared exactly with torch (no rounding to judge)"
    reasons = [note for note in record.notes if note.startswith("no fp64 truth")]
    return (reasons[0] if reasons else "no fp64 truth for this output") + "; judged by the dtype's default row"


def overflow_note(dtype: str, truth_scale: float) -> str:
    """A note when the fp64 truth of a value (its largest finite magnitude `truth_scale`) lies
    beyond the largest finite value of `dtype`."""
    limit = overflow_limit(dtype)
    if limit is None or truth_scale <= limit:
        return ""
    return (f"overflows {dtype}: the fp64 truth reaches {truth_scale:.4g}, beyond {dtype}'s largest "
            f"finite value {limit:.4g}")
