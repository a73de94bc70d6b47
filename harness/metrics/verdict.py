"""The verdict of one op row or model output: judged against the fp64 truth, in the dtype it runs in.

For a value with fp64 truth r, torch's value T and the backend's value B (the same dtype), both
errors are normalised by the truth's scale (max |r|):

    e_backend = max|B - r| / scale      e_torch = max|T - r| / scale

    unit(dtype, K) = max(u(dtype), u(accumulation) * sqrt(K))
                     u = eps/2 of the dtype; float16 and bfloat16 accumulate in float32 (torch
                     on CPU and CUDA, onnxruntime's MLAS, cuDNN and cuBLAS by default), so a
                     result carries its final rounding, u(dtype), and the accumulation's
                     random walk, u(float32) * sqrt(K), whichever is larger; float32 and
                     float64 accumulate in themselves (unit = u * sqrt(K), the noise model's)
    floor          = floor_ulps(dtype) * unit(dtype, K) * R
                     R = the roundings the row stands for: 1 for an op, an optimised region's
                     member count (torch rounds after each member; the fused node rounds its
                     folded parameters instead)
    allowed        = factor * max(e_torch, floor)
    rule passes    when e_backend <= allowed

The backend may be `factor` times worse than torch itself, and never has to be better than the
dtype's rounding allows. Because factor * floor_ulps >= the attribution's noise ulps (checked on
load), an op attributed `both-noise` cannot fail the rule, and an op that fails it is attributed
`backend` or `both`.

The tolerance table stays, in two roles:
- **override**: a row for the op's own ATen overload (a calibrated or hand-written row) decides
  alone, backend against torch, as before the rule existed; so does an explicit output
  atol/rtol given to `harness.verify`.
- **cap**: the dtype's default row (`*`), times the dtype's `cap_factor`, bounds how loose the
  rule may get. float32's cap factor is 1 and its cap is the comparison against torch the table
  always made, so a float32 verdict is never looser than the table alone made it, except where
  torch is the one off the truth: a backend at least as near the truth as torch, and within the
  row's rtol of the truth's scale, is not capped by its distance from torch (a bilinear resize
  to 800 px: both sides round the sampling coordinates in float32 and land 1.7e-4 apart, each
  within 5e-5 of the scale from the truth). In float16 and bfloat16 the backend's comparison
  with the truth must be inside the cap (torch's own rounding is not the backend's fault). A
  model output's cap is the table's `output` row for its
  dtype, as it stands.

Values without a truth (random ops, overloads without a float64 kernel, integer and boolean
outputs, ONNX-level rows against onnx's reference) are judged by the dtype's default row
(`tolerance`), and the verdict says why.

The constants live in data/verdict.json with how they were measured.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

from harness.metrics.comparison import Comparison, json_number
from harness.metrics.noise import NoiseModel, dtype_key, rounding_unit, truth_error, unit_roundoff
from harness.metrics.tolerances import Tolerance

VERDICT_PATH = "data/verdict.json"

# How a verdict was reached (Verdict.rule).
TRUTH = "truth"  # the rule against the fp64 truth (capped by the dtype's default row)
OVERRIDE = "override"  # an explicit row for the op (or explicit output tolerances) decided
TOLERANCE = "tolerance"  # no truth: the dtype's default row decided


@dataclass(frozen=True)
class VerdictRule:
    """The rule's constants, each with where it came from (data/verdict.json)."""

    factor: float
    floor_ulps: float  # every dtype without a row in `floor_ulps_by_dtype`, and every model output
    cap_factors: dict[str, float]
    sources: dict[str, str] = field(default_factory=dict)
    floor_ulps_by_dtype: dict[str, float] = field(default_factory=dict)

    def cap_factor(self, dtype: str) -> float:
        return float(self.cap_factors.get(dtype, self.cap_factors.get("*", 1.0)))

    def floor_ulps_for(self, dtype: Any) -> float:
        """The floor's rounding units for one op's value in `dtype`."""
        return float(self.floor_ulps_by_dtype.get(dtype_key(dtype), self.floor_ulps))

    def floor(self, dtype: Any, reduction_length: int, roundings: int = 1) -> float:
        """Normalised error below which a value counts as rounded correctly in `dtype`, for a row
        that stands for `roundings` ops (1; an optimised region's member count)."""
        return self.floor_ulps_for(dtype) * rounding_unit(dtype, reduction_length) * max(roundings, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"factor": self.factor, "floor_ulps": self.floor_ulps,
                "floor_ulps_by_dtype": dict(self.floor_ulps_by_dtype), "cap_factors": dict(self.cap_factors),
                "sources": dict(self.sources)}


def load_rule(noise_model: NoiseModel | None = None) -> VerdictRule:
    """The shipped rule; ValueError when its constants would let the verdict disagree with the
    attribution (factor * floor_ulps below the noise model's ulps)."""
    data = json.loads(resources.files("harness.metrics").joinpath(VERDICT_PATH).read_text())
    rule = VerdictRule(float(data["factor"]), float(data["floor_ulps"]),
                       {k: float(v) for k, v in data["cap_factors"].items()},
                       {key: data.get(f"{key}_source", "")
                        for key in ("factor", "floor_ulps", "floor_ulps_by_dtype", "cap_factors")},
                       {k: float(v) for k, v in data.get("floor_ulps_by_dtype", {}).items()})
    if noise_model is not None:
        check_consistent(rule, noise_model)
    return rule


def check_consistent(rule: VerdictRule, noise_model: NoiseModel) -> None:
    """Raise ValueError unless every op the noise model calls `both-noise` passes the rule, in
    every dtype either names (both scale a region's bound by its member count alike)."""
    if rule.factor < 1:
        raise ValueError(f"verdict rule factor={rule.factor:g} is below 1: a backend as exact as torch would fail")
    for dtype in {"*", *rule.floor_ulps_by_dtype, *noise_model.ulps_by_dtype}:
        floor_ulps, ulps = rule.floor_ulps_for(dtype), noise_model.ulps_for(dtype)
        if rule.factor * floor_ulps < ulps:
            raise ValueError(
                f"verdict rule factor={rule.factor:g}, floor_ulps={floor_ulps:g} ({dtype}) would fail ops "
                f"attributed both-noise (needs factor * floor_ulps >= the noise model's {ulps:g} ulps in {dtype})")


@dataclass
class Verdict:
    """How one row's or output's `passed` was decided; plain data, `to_dict()` is JSON-able.

    `score` ranks failures: the error over what was allowed (the larger of the rule's
    e_backend / allowed and the cap's tolerance ratio); <= 1 passes."""

    rule: str  # TRUTH | OVERRIDE | TOLERANCE
    passed: bool
    dtype: str
    output: str = ""  # the output that decided (the worst of the row's)
    e_backend: float | None = None
    e_torch: float | None = None
    ratio: float | None = None  # e_backend / e_torch
    factor: float | None = None
    floor: float | None = None
    allowed: float | None = None  # factor * max(e_torch, floor)
    tolerance: dict[str, Any] = field(default_factory=dict)  # the row that capped or decided: atol, rtol, source
    tolerance_ratio: float | None = None  # the comparison against torch over that row
    score: float = 0.0
    decided_by: str = ""  # "rule", "cap", "override", "tolerance"
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        # scalars and one flat dict: copied directly, not through asdict's recursive deep copy
        found = {f.name: json_number(getattr(self, f.name)) for f in fields(self)}
        found["tolerance"] = dict(self.tolerance)
        return found


def _ratio(numerator: float, denominator: float) -> float:
    if denominator > 0:
        return numerator / denominator
    return 0.0 if numerator == 0 else math.inf


def by_truth(backend: Comparison, torch_side: Comparison, against_torch: Comparison | None, *, dtype: str,
             reduction_length: int, rule: VerdictRule, row: Tolerance, cap_factor: float | None = None,
             unit: float | None = None, roundings: int = 1) -> Verdict:
    """The rule for one value with a truth: `backend` and `torch_side` are compared with the
    fp64 truth under `row` (the dtype's default), `against_torch` is the backend against torch
    under the same row. The cap is `row` times `cap_factor` (default: the dtype's; a model
    output's row is its cap as it stands). It bounds `against_torch` where the dtype's cap
    factor is 1 (float32, float64: the check the table always made, waived only where the backend
    is as near the truth as torch and within `row.rtol` of its scale), and `backend` elsewhere (half types: torch's own rounding may be the larger
    one, and the backend is not blamed for it), where it bounds only what torch's error admitted:
    a backend within `factor * floor` of the truth is rounding, whatever the row says. `unit`
    replaces the rounding unit of one op (a model output's: `output_unit`, with the default
    `floor_ulps`); `roundings` is the ops a region stands for."""
    e_backend, e_torch = truth_error(backend), truth_error(torch_side)
    floor = rule.floor(dtype, reduction_length, roundings) if unit is None else rule.floor_ulps * unit
    allowed = rule.factor * max(e_torch, floor)
    rule_passed = e_backend <= allowed
    against_truth = rule.cap_factor(dtype) != 1
    cap_factor = rule.cap_factor(dtype) if cap_factor is None else cap_factor
    capped = backend if against_truth else against_torch
    cap = {"atol": row.atol * cap_factor, "rtol": row.rtol * cap_factor,
           "source": (f"cap: {cap_factor:g}x the {row.dtype} row ({row.aten})" if cap_factor != 1 else
                      f"cap: the {row.dtype} row ({row.aten})") + (", against the truth" if against_truth else
                                                                   ", against torch")}
    cap_ratio, cap_passed = None, True
    # torch the farther from the truth: its distance from the backend is torch's, but a wrong
    # shape, dtype or non-finite value never is
    torch_farther = (not against_truth and e_backend <= min(e_torch, row.rtol) and capped is not None
                     and capped.shape_match and capped.dtype_match and not capped.nonfinite_mismatch)
    if capped is not None and not (against_truth and e_backend <= rule.factor * floor) and not torch_farther:
        cap_ratio = capped.tolerance_ratio / cap_factor
        cap_passed = capped.passed if cap_factor == 1 else (
            capped.shape_match and not capped.nonfinite_mismatch and cap_ratio <= 1)
    reason = (f"e_backend {e_backend:.3g} {'<=' if rule_passed else '>'} {rule.factor:g} x max(e_torch "
              f"{e_torch:.3g}, floor {floor:.3g})")
    if not cap_passed:
        reason += f"; {'against the truth' if against_truth else 'against torch'} {cap_ratio:.3g}x the {dtype} cap"
    elif torch_farther and not capped.passed:
        reason += (f"; {capped.tolerance_ratio:.3g}x the {dtype} cap against torch, which is the farther from the "
                   f"truth (the backend is within the row's rtol {row.rtol:g} of its scale)")
    return Verdict(TRUTH, rule_passed and cap_passed, dtype, backend.name, e_backend, e_torch,
                   _ratio(e_backend, e_torch), rule.factor, floor, allowed, cap, cap_ratio,
                   max(_ratio(e_backend, allowed), cap_ratio or 0.0), "rule" if not rule_passed or cap_passed else "cap",
                   reason)


def output_unit(dtype: str, rounding_steps: int) -> float:
    """The rounding unit of a model output that went through `rounding_steps` ops, each of which
    rounded its result to `dtype`: u(dtype) * sqrt(steps), the random walk of the op-level rule
    taken along the graph (a half-type op accumulates in float32 but stores in its dtype)."""
    return unit_roundoff(dtype) * math.sqrt(max(rounding_steps, 1))


def by_row(against_torch: Comparison, *, dtype: str, row: Tolerance, rule: str, reason: str,
           backend: Comparison | None = None, torch_side: Comparison | None = None) -> Verdict:
    """A verdict decided by a tolerance row alone (OVERRIDE or TOLERANCE); the errors against
    the truth are recorded when there is one."""
    e_backend = truth_error(backend) if backend is not None else None
    e_torch = truth_error(torch_side) if torch_side is not None else None
    ratio = _ratio(e_backend, e_torch) if e_backend is not None and e_torch is not None else None
    return Verdict(rule, against_torch.passed, dtype, against_torch.name, e_backend, e_torch, ratio,
                   tolerance={"atol": row.atol, "rtol": row.rtol, "source": row.source},
                   tolerance_ratio=against_torch.tolerance_ratio, score=against_torch.tolerance_ratio,
                   decided_by=OVERRIDE if rule == OVERRIDE else TOLERANCE, reason=reason)


# the largest finite value of the dtypes that overflow in practice
_LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}


def overflow_limit(dtype: str) -> float | None:
    """The largest finite value of `dtype` (None for dtypes that do not overflow in practice)."""
    return _LARGEST.get(dtype)


def worst(verdicts: list[Verdict]) -> Verdict | None:
    """The verdict that fails, or comes closest to failing."""
    return max(verdicts, key=lambda v: (not v.passed, v.score), default=None)
