"""Compare one tensor with another: the metrics every report is built from.

Definitions (docs/ARCHITECTURE.md): max abs, max rel `|a-b| / max(|b|, tiny)`, error normalised by the
expected tensor's scale (its largest finite magnitude), the fraction of elements outside
`atol + rtol*|expected|`, NaN/Inf disagreement, shape and dtype agreement, and a log10
histogram of abs error. NaN on both sides agrees, as do infinities of the same sign.

Integers and booleans are compared exactly (atol/rtol do not apply). The smallest tolerances
that would have passed (`min_atol` at the given rtol, `min_rtol` at the given atol) are for
every element: they ignore `allowed_mismatch`, and are infinite when no tolerance can pass
(shape or NaN/Inf disagreement, integers that differ, an error where `expected` is 0 for
`min_rtol`).

Speed matters: a per-op verification compares four tensors per op, so the common case (all
finite, same shape) takes a handful of vectorised passes in the arrays' own precision (fp32
stays fp32; anything compared with fp64 is computed in fp64).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness.metrics.arrays import as_array

TINY = float(np.finfo(np.float32).tiny)
HISTOGRAM_DECADES = (-12, 2)  # keys '<1e-12', '1e-12' ... '1e+01', '>=1e2' (and 'zero')
_NUMERIC_KINDS = "biufc"


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
    normalized: float = 0.0  # max_abs / max |expected| (max_abs itself when expected is all 0)
    scale: float = 0.0  # max |expected| over finite elements
    mismatch_fraction: float = 0.0
    nonfinite_mismatch: int = 0  # elements where NaN/Inf disagree
    nonfinite_expected: int = 0
    tolerance_ratio: float = 0.0  # max |a-b| / (atol + rtol*|b|); <= 1 passes
    min_atol: float = 0.0  # smallest atol that passes every element at this rtol
    min_rtol: float = 0.0  # smallest rtol that passes every element at this atol (inf if none would)
    histogram: dict[str, int] = field(default_factory=dict)
    allowed_mismatch: float = 0.0
    passed: bool = False  # fails closed: only `compare` sets it, once every check has run
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: json_number(v) for k, v in asdict(self).items()}


def json_number(value: Any) -> Any:
    """A float for JSON: infinities and NaN as the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return value


_DTYPE_NAMES: dict[np.dtype, str] = {}


def dtype_name(dtype: np.dtype) -> str:
    """str(dtype), cached: numpy computes it slowly (a measurable cost at thousands of calls)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def compare(
    actual: Any,
    expected: Any,
    *,
    atol: float,
    rtol: float,
    name: str = "",
    allowed_mismatch: float = 0.0,
    check_dtype: bool = True,
) -> Comparison:
    """Compare `actual` with `expected` under `atol + rtol*|expected|`.

    Passes when the shapes agree, the dtypes agree (unless `check_dtype=False`), NaN/Inf
    agree, and the fraction of elements outside the tolerance is at most `allowed_mismatch`
    (0 by default: every element must be inside).
    """
    a, b = as_array(actual), as_array(expected)
    result = Comparison(
        name=name,
        shape_actual=list(a.shape),
        shape_expected=list(b.shape),
        dtype_actual=dtype_name(a.dtype),
        dtype_expected=dtype_name(b.dtype),
        atol=float(atol),
        rtol=float(rtol),
        allowed_mismatch=float(allowed_mismatch),
    )
    result.dtype_match = a.dtype == b.dtype
    if a.shape != b.shape:
        return _shape_mismatch(result)
    if a.size == 0:
        result.passed = result.dtype_match or not check_dtype
        return result
    if a.ndim == 0:  # ufuncs on 0-d arrays return scalars; work on 1-element views
        a, b = a.reshape(1), b.reshape(1)
    if a.dtype.kind not in _NUMERIC_KINDS or b.dtype.kind not in _NUMERIC_KINDS:
        _compare_exact(a, b, result)
    elif a.dtype.kind in "biu" and b.dtype.kind in "biu":
        _compare_exact(a, b, result)
    elif a.size > CHUNK_ELEMENTS:
        _compare_inexact_in_chunks(a, b, result)
    else:
        _compare_inexact(a, b, result)
    if not result.dtype_match:
        message = f"dtype {a.dtype} != expected {b.dtype}"
        result.note = f"{result.note}; {message}" if result.note else message
    result.passed = (
        result.nonfinite_mismatch == 0
        and result.mismatch_fraction <= result.allowed_mismatch
        and (result.dtype_match or not check_dtype)
    )
    return result


def _shape_mismatch(result: Comparison) -> Comparison:
    result.shape_match = False
    result.passed = False
    result.note = f"shape {result.shape_actual} != expected {result.shape_expected}"
    for key in ("max_abs", "max_rel", "normalized", "tolerance_ratio", "min_atol", "min_rtol"):
        setattr(result, key, math.inf)
    result.mismatch_fraction = 1.0
    return result


def _working_dtype(a: np.ndarray, b: np.ndarray) -> np.dtype:
    """fp32 when neither side is wider (fast, and exact enough for an error metric), else fp64;
    complex data is compared as complex128 (errors are moduli)."""
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        return np.dtype(np.complex128)
    if a.dtype.itemsize <= 4 and b.dtype.itemsize <= 4:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _compare_inexact(a: np.ndarray, b: np.ndarray, result: Comparison) -> None:
    work = _working_dtype(a, b)
    a_w = a.astype(work, copy=False)
    b_w = b.astype(work, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.subtract(a_w, b_w)
        error = np.abs(error, out=error) if error.dtype.kind == "f" else np.abs(error)
    magnitude = np.abs(b_w)
    max_abs, scale = error.max(), magnitude.max()
    disagree_count = 0
    finite = None
    if not (np.isfinite(max_abs) and np.isfinite(scale)):  # |a-b| and |b| finite <=> a, b finite
        finite = np.isfinite(a_w) & np.isfinite(b_w)
        both_nan = np.isnan(a_w) & np.isnan(b_w)
        same_inf = np.isinf(a_w) & np.isinf(b_w) & (a_w == b_w)
        disagree_count = int(np.count_nonzero(~finite & ~(both_nan | same_inf)))
        result.nonfinite_expected = int(np.count_nonzero(~np.isfinite(b_w)))
        error[~finite] = 0
        magnitude[~finite] = 0
        max_abs, scale = error.max(), magnitude.max()
    result.nonfinite_mismatch = disagree_count
    outside = 0
    if finite is None or finite.any():
        outside = _fill_error_metrics(result, error, magnitude, float(max_abs), float(scale))
        result.histogram = error_histogram(error if finite is None else error[finite],
                                           result.max_abs if finite is None else None)
    result.mismatch_fraction = (outside + disagree_count) / error.size
    if disagree_count:
        result.tolerance_ratio = result.min_atol = result.min_rtol = math.inf
        result.note = f"{disagree_count} element(s) disagree on NaN/Inf"


CHUNK_ELEMENTS = 1 << 21
"""Tensors larger than this are compared in chunks of it: every metric is a maximum, a count or
a histogram, so merging the chunks' gives exactly the whole tensor's, while the scratch buffers
(a handful of the tensor's size in the working precision) stay a chunk's size."""

_MAX_FIELDS = ("max_abs", "max_rel", "scale", "tolerance_ratio", "min_atol", "min_rtol")


def _compare_inexact_in_chunks(a: np.ndarray, b: np.ndarray, result: Comparison) -> None:
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    outside = disagree = 0
    histogram: dict[str, int] = {}
    for start in range(0, flat_a.size, CHUNK_ELEMENTS):
        part = Comparison(name=result.name, shape_actual=[], shape_expected=[], dtype_actual="",
                          dtype_expected="", atol=result.atol, rtol=result.rtol)
        stop = min(start + CHUNK_ELEMENTS, flat_a.size)
        _compare_inexact(flat_a[start:stop], flat_b[start:stop], part)
        for key in _MAX_FIELDS:
            setattr(result, key, max(getattr(result, key), getattr(part, key)))
        outside += round(part.mismatch_fraction * (stop - start)) - part.nonfinite_mismatch
        disagree += part.nonfinite_mismatch
        result.nonfinite_expected += part.nonfinite_expected
        for key, count in part.histogram.items():
            histogram[key] = histogram.get(key, 0) + count
    result.normalized = result.max_abs / result.scale if result.scale > 0 else result.max_abs
    result.nonfinite_mismatch = disagree
    result.mismatch_fraction = (outside + disagree) / flat_a.size
    result.histogram = dict(sorted(histogram.items(), key=lambda item: _decade_order(item[0])))
    if disagree:
        result.tolerance_ratio = result.min_atol = result.min_rtol = math.inf
        result.note = f"{disagree} element(s) disagree on NaN/Inf"


def _decade_order(key: str) -> float:
    """Sort key of a histogram bucket: 'zero' < '<1e-12' < '1e-12' < ... < '>=1e2'."""
    if key == "zero":
        return -math.inf
    if key.startswith("<"):
        return float(key[3:]) - 0.5
    if key.startswith(">="):
        return float(key[4:]) + 0.5
    return float(key[2:])


def _fill_error_metrics(result: Comparison, error: np.ndarray, magnitude: np.ndarray,
                        max_abs: float, scale: float) -> int:
    """Fill the error metrics from |a-b| and |b| (finite elements; others are 0 in both) and
    return how many elements lie outside atol + rtol*|b|. Works in two scratch buffers."""
    atol, rtol = result.atol, result.rtol
    kind = error.dtype.type
    tiny = kind(TINY)
    result.max_abs, result.scale = max_abs, scale
    result.normalized = max_abs / scale if scale > 0 else max_abs
    if max_abs == 0:  # identical: every error metric is 0
        return 0
    scratch = np.maximum(magnitude, tiny)
    with np.errstate(over="ignore"):  # error / tiny may overflow to inf: a true max_rel
        np.divide(error, scratch, out=scratch)
    result.max_rel = float(scratch.max())
    np.multiply(magnitude, kind(rtol), out=scratch)  # rtol*|b|
    excess = np.subtract(error, scratch)  # |a-b| - rtol*|b|: outside when > atol
    result.min_atol = max(float(excess.max()), 0.0)  # the atol that lets the worst element in
    outside = int(np.count_nonzero(excess > atol))
    np.add(scratch, kind(atol), out=scratch)  # the bound atol + rtol*|b|
    np.maximum(scratch, tiny, out=scratch)
    with np.errstate(over="ignore"):
        np.divide(error, scratch, out=scratch)
    result.tolerance_ratio = float(scratch.max())
    if max_abs > atol:
        over_atol = error > atol
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = (error[over_atol] - kind(atol)) / magnitude[over_atol]
        result.min_rtol = float(needed.max())  # +inf where expected is 0 (no rtol helps)
    else:
        result.min_rtol = 0.0
    return outside


def _compare_exact(a: np.ndarray, b: np.ndarray, result: Comparison) -> None:
    """Integers, booleans and non-numeric data must be equal; metrics count what differs."""
    differ = np.asarray(a != b)
    result.mismatch_fraction = float(np.count_nonzero(differ)) / max(differ.size, 1)
    numeric = a.dtype.kind in _NUMERIC_KINDS and b.dtype.kind in _NUMERIC_KINDS
    if numeric:
        b64 = b.astype(np.float64)
        result.scale = float(np.abs(b64).max())
    if not differ.any():
        return
    result.tolerance_ratio = result.min_atol = result.min_rtol = math.inf
    result.note = f"{int(np.count_nonzero(differ))} element(s) differ (exact comparison)"
    if numeric:
        diff = np.abs(a.astype(np.float64) - b64)
        result.max_abs = float(diff.max())
        result.max_rel = float((diff / np.maximum(np.abs(b64), TINY)).max())
        result.normalized = result.max_abs / result.scale if result.scale > 0 else result.max_abs
        result.histogram = error_histogram(diff)
    else:
        result.max_abs = result.max_rel = result.normalized = math.inf


def error_histogram(errors: np.ndarray, max_abs: float | None = None) -> dict[str, int]:
    """Counts of abs errors per decade: '1e-07' counts [1e-7, 1e-6); also 'zero', '<1e-12'
    and '>=1e2'. Keys come in increasing order of error.

    Counted from the top decade down (cumulative counts of `errors >= 10**k`, thresholds in
    the errors' own precision), stopping once every nonzero error is placed: as many passes as
    there are decades in use.
    """
    if errors.size == 0:
        return {}
    low, high = HISTOGRAM_DECADES
    top = float(errors.max()) if max_abs is None else max_abs
    nonzero = int(np.count_nonzero(errors > 0)) if top > 0 else 0
    above: dict[int, int] = {}  # decade k -> count of errors >= 10**k
    if nonzero:
        kind = errors.dtype.type
        decade = min(math.floor(math.log10(top)) + 1, high)  # +1: log10 may round down at 10**k
        while decade >= low:
            above[decade] = int(np.count_nonzero(errors >= kind(10.0 ** decade)))
            if above[decade] == nonzero:
                break
            decade -= 1
    counts: dict[str, int] = {}
    if errors.size > nonzero:
        counts["zero"] = errors.size - nonzero
    if nonzero and (not above or min(above) == low) and above.get(low, 0) < nonzero:
        counts[f"<1e{low}"] = nonzero - above.get(low, 0)
    for decade in sorted(above):
        inside = above[decade] - above.get(decade + 1, 0)
        if inside:
            key = f">=1e{high}" if decade == high else f"1e{decade:+03d}"
            counts[key] = inside
    return counts
