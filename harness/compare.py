"""Compare one tensor with another: the metrics every report is built from.

Definitions (DESIGN.md): max abs, max rel `|a-b| / max(|b|, tiny)`, error normalised by the
expected tensor's scale (its largest finite magnitude), the fraction of elements outside
`atol + rtol*|expected|`, NaN/Inf disagreement, shape and dtype agreement, and a log10
histogram of abs error. NaN on both sides agrees, as do infinities of the same sign.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

TINY = float(np.finfo(np.float32).tiny)
HISTOGRAM_EDGES = tuple(range(-12, 3))  # log10 |error| bins: <1e-12, [1e-12,1e-11), ..., >=1e2


@dataclass
class Comparison:
    """How far `actual` is from `expected`; plain data, `to_dict()` is JSON-able."""

    name: str
    shape_actual: list[int]
    shape_expected: list[int]
    dtype_actual: str
    dtype_expected: str
    atol: float
    rtol: float
    shape_match: bool = True
    dtype_match: bool = True
    max_abs: float = 0.0
    max_rel: float = 0.0
    normalized: float = 0.0  # max_abs / max |expected|
    scale: float = 0.0
    mismatch_fraction: float = 0.0
    nonfinite_mismatch: int = 0  # elements where NaN/Inf disagree
    nonfinite_expected: int = 0
    tolerance_ratio: float = 0.0  # max |a-b| / (atol + rtol*|b|); <= 1 passes
    min_atol: float = 0.0  # smallest atol that passes at this rtol
    min_rtol: float = 0.0  # smallest rtol that passes at this atol (inf if none would)
    histogram: dict[str, int] = field(default_factory=dict)
    allowed_mismatch: float = 0.0
    passed: bool = True
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_number(v) for k, v in asdict(self).items()}


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return value


def compare(
    actual: Any,
    expected: Any,
    *,
    atol: float,
    rtol: float,
    name: str = "",
    allowed_mismatch: float = 0.0,
) -> Comparison:
    """Compare `actual` with `expected` under `atol + rtol*|expected|`.

    Passes when the shapes agree, NaN/Inf agree, and the fraction of elements outside the
    tolerance is at most `allowed_mismatch` (0 by default: every element must be inside).
    """
    a, b = np.asarray(actual), np.asarray(expected)
    result = Comparison(
        name=name,
        shape_actual=list(a.shape),
        shape_expected=list(b.shape),
        dtype_actual=str(a.dtype),
        dtype_expected=str(b.dtype),
        atol=float(atol),
        rtol=float(rtol),
        allowed_mismatch=float(allowed_mismatch),
    )
    result.dtype_match = a.dtype == b.dtype
    if a.shape != b.shape:
        result.shape_match = False
        result.passed = False
        result.note = f"shape {list(a.shape)} != expected {list(b.shape)}"
        for key in ("max_abs", "max_rel", "normalized", "tolerance_ratio", "min_atol", "min_rtol"):
            setattr(result, key, math.inf)
        result.mismatch_fraction = 1.0
        return result
    if a.size == 0:
        return result
    if a.dtype == bool or b.dtype == bool or a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return _compare_exact(a, b, result)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    finite_a, finite_b = np.isfinite(a64), np.isfinite(b64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    same_inf = np.isinf(a64) & np.isinf(b64) & (np.sign(a64) == np.sign(b64))
    agree_nonfinite = both_nan | same_inf
    finite = finite_a & finite_b
    disagree = ~finite & ~agree_nonfinite
    result.nonfinite_mismatch = int(disagree.sum())
    result.nonfinite_expected = int((~finite_b).sum())

    error = np.where(finite, np.abs(a64 - b64), 0.0)
    magnitude = np.where(finite, np.abs(b64), 0.0)
    bound = atol + rtol * magnitude
    outside = (error > bound) | disagree
    result.max_abs = float(error.max()) if finite.any() else 0.0
    result.max_rel = float((error / np.maximum(magnitude, TINY)).max()) if finite.any() else 0.0
    result.scale = float(magnitude.max()) if finite.any() else 0.0
    result.normalized = result.max_abs / result.scale if result.scale > 0 else result.max_abs
    result.mismatch_fraction = float(outside.mean())
    result.tolerance_ratio = float((error / np.maximum(bound, TINY)).max()) if finite.any() else 0.0
    result.min_atol = float(np.maximum(error - rtol * magnitude, 0.0).max()) if finite.any() else 0.0
    excess = np.maximum(error - atol, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.where(excess > 0, excess / magnitude, 0.0)
    result.min_rtol = float(np.nan_to_num(needed, nan=math.inf).max()) if finite.any() else 0.0
    if result.nonfinite_mismatch:
        result.tolerance_ratio = math.inf
        result.note = f"{result.nonfinite_mismatch} element(s) disagree on NaN/Inf"
    result.histogram = error_histogram(error[finite])
    result.passed = result.nonfinite_mismatch == 0 and result.mismatch_fraction <= allowed_mismatch
    return result


def _compare_exact(a: np.ndarray, b: np.ndarray, result: Comparison) -> Comparison:
    """Integers and booleans must be equal; the error metrics count differing elements."""
    differ = a != b
    result.mismatch_fraction = float(differ.mean())
    if differ.any():
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        result.max_abs = float(diff.max())
        result.max_rel = float((diff / np.maximum(np.abs(b.astype(np.float64)), TINY)).max())
        result.tolerance_ratio = math.inf
        result.min_atol = result.max_abs
        result.min_rtol = math.inf
    result.scale = float(np.abs(b.astype(np.float64)).max())
    result.passed = result.mismatch_fraction <= result.allowed_mismatch
    return result


def error_histogram(errors: np.ndarray) -> dict[str, int]:
    """Counts of abs errors per decade: keys like '1e-07' for [1e-7, 1e-6), 'zero', '<1e-12'."""
    if errors.size == 0:
        return {}
    counts: dict[str, int] = {}
    zero = errors == 0
    if zero.any():
        counts["zero"] = int(zero.sum())
    nonzero = errors[~zero]
    if nonzero.size:
        decades = np.floor(np.log10(nonzero)).astype(np.int64)
        low, high = HISTOGRAM_EDGES[0], HISTOGRAM_EDGES[-1]
        for decade, count in zip(*np.unique(np.clip(decades, low - 1, high), return_counts=True)):
            key = f"<1e{low}" if decade < low else (f">=1e{high}" if decade >= high else f"1e{int(decade):+03d}")
            counts[key] = counts.get(key, 0) + int(count)
    return counts
