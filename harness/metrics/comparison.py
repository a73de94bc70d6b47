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

Speed matters: a per-op verification compares four tensors per op. Tensors are compared in
cache-sized blocks (harness.metrics.arrays.flat_blocks: a tensor that is not contiguous, an
expanded view say, is copied one block at a time, never whole). Inexact ones are compared in
scratch buffers reused from one comparison to the next, with a handful of vectorised passes per
block in the arrays' own precision (fp32 stays fp32; anything compared with fp64 is computed in
fp64); a block without error skips all but the first passes. Every metric merges across blocks
(a maximum, a count, a histogram of counts), so a comparison can also be made part by part
(`ComparisonInParts`: a truth too large to hold whole, compared a slice at a time).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from harness.metrics.arrays import as_array, flat_blocks

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
        # its fields are scalars, two lists and a dict of ints: copied directly, not through
        # asdict's recursive deep copy (a measurable cost at a comparison per row and region)
        found = {f.name: json_number(getattr(self, f.name)) for f in fields(self)}
        found.update(shape_actual=list(self.shape_actual), shape_expected=list(self.shape_expected),
                     histogram=dict(self.histogram))
        return found


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
    whole = ComparisonInParts(a.shape, a.dtype, b.shape, b.dtype, atol=atol, rtol=rtol, name=name,
                              allowed_mismatch=allowed_mismatch, check_dtype=check_dtype)
    if whole.compares_values:
        whole.add(a, b)
    return whole.result()


class ComparisonInParts:
    """`compare(actual, expected)` made from consecutive parts of the two tensors: `add` each
    pair of parts in C order (slices of the first dimension, say, of a value too large to hold
    whole, made a slice at a time), then `result()`, which is the whole comparison field by
    field: every metric is a maximum, a count or a histogram of counts over the elements,
    merged across parts as `compare` merges its blocks. `compare` itself is one part."""

    def __init__(self, shape_actual: tuple[int, ...], dtype_actual: np.dtype, shape_expected: tuple[int, ...],
                 dtype_expected: np.dtype, *, atol: float, rtol: float, name: str = "",
                 allowed_mismatch: float = 0.0, check_dtype: bool = True) -> None:
        dtype_actual, dtype_expected = np.dtype(dtype_actual), np.dtype(dtype_expected)
        self._comparison = Comparison(
            name=name, shape_actual=list(shape_actual), shape_expected=list(shape_expected),
            dtype_actual=dtype_name(dtype_actual), dtype_expected=dtype_name(dtype_expected),
            atol=float(atol), rtol=float(rtol), allowed_mismatch=float(allowed_mismatch),
        )
        self._comparison.dtype_match = dtype_actual == dtype_expected
        self._dtypes = (dtype_actual, dtype_expected)
        self._check_dtype = check_dtype
        self._size = math.prod(shape_actual)
        self._added = 0
        self._finished = False
        self._totals = _Totals()
        if tuple(shape_actual) != tuple(shape_expected):
            self._kind = "shape"
        elif dtype_actual.kind not in _NUMERIC_KINDS or dtype_expected.kind not in _NUMERIC_KINDS:
            self._kind = "other"
        elif dtype_actual.kind in "biu" and dtype_expected.kind in "biu":
            self._kind = "exact"
        else:
            self._kind = "inexact"
            self._work = _working_dtype(dtype_actual, dtype_expected)

    @property
    def compares_values(self) -> bool:
        """Whether the result needs the values (the shapes agree and hold elements)."""
        return self._kind != "shape" and self._size > 0

    def add(self, actual: Any, expected: Any) -> None:
        """Add the next part of each side (the same number of elements, in the declared
        dtypes); ValueError past the declared size or when nothing is compared by value."""
        a, b = as_array(actual), as_array(expected)
        if self._finished:
            raise ValueError("this comparison's result is made already")
        if not self.compares_values:
            raise ValueError("this comparison compares no values (the shapes differ, or hold no element)")
        if a.shape != b.shape or (a.dtype, b.dtype) != self._dtypes:
            raise ValueError(f"parts of shapes {a.shape}, {b.shape} and dtypes {a.dtype}, {b.dtype}: "
                             f"the two sides' parts must be of one shape, in dtypes {self._dtypes}")
        if self._added + a.size > self._size:
            raise ValueError(f"parts of {self._added + a.size} elements, past the tensors' {self._size}")
        self._added += a.size
        if a.size == 0:
            return
        if a.ndim == 0:  # ufuncs on 0-d arrays return scalars; work on 1-element views
            a, b = a.reshape(1), b.reshape(1)
        if self._kind == "inexact":
            _compare_inexact(a, b, self._work, self._totals, self._comparison.atol, self._comparison.rtol)
        else:
            _compare_exact(a, b, self._totals)

    def result(self) -> Comparison:
        """The comparison of the whole tensors (made once); ValueError unless every element was added."""
        result = self._comparison
        if self._finished:
            return result
        if self._kind == "shape":
            return _shape_mismatch(result)
        if self._added != self._size:
            raise ValueError(f"parts of {self._added} elements added, of the tensors' {self._size}")
        self._finished = True
        if self._size == 0:
            result.passed = result.dtype_match or not self._check_dtype
            return result
        if self._kind == "inexact":
            _finish_inexact(self._totals, result, self._size)
        else:
            _finish_exact(self._totals, result, self._size, numeric=self._kind == "exact")
        if not result.dtype_match:
            message = f"dtype {self._dtypes[0]} != expected {self._dtypes[1]}"
            result.note = f"{result.note}; {message}" if result.note else message
        result.passed = (
            result.nonfinite_mismatch == 0
            and result.mismatch_fraction <= result.allowed_mismatch
            and (result.dtype_match or not self._check_dtype)
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


def _working_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """fp32 when neither side is wider (fast, and exact enough for an error metric), else fp64;
    complex data is compared as complex128 (errors are moduli)."""
    if a.kind == "c" or b.kind == "c":
        return np.dtype(np.complex128)
    if a.itemsize <= 4 and b.itemsize <= 4:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


BLOCK_ELEMENTS = 1 << 16
"""Inexact tensors are compared block by block, in scratch buffers of this many elements kept
from one comparison to the next (`_Scratch`): every metric is a maximum, a count or a histogram
of counts, so merging the blocks' gives exactly the whole tensor's. The buffers stay in the
processor's cache, and no comparison allocates (and page-faults in) tensor-sized temporaries."""


class _Scratch(threading.local):
    """Per thread, per working precision: |a-b|, |b|, two work buffers and a mask, each of
    `BLOCK_ELEMENTS` (resized when that constant changes)."""

    def buffers(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        cache = self.__dict__.setdefault("by_dtype", {})
        held = cache.get(dtype)
        if held is None or held[0].size != BLOCK_ELEMENTS:
            held = cache[dtype] = (*(np.empty(BLOCK_ELEMENTS, dtype) for _ in range(4)),
                                   np.empty(BLOCK_ELEMENTS, np.bool_))
        return held


_SCRATCH = _Scratch()
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce  # ndarray.max/min less their Python wrapper (per block)
_DECADES = range(HISTOGRAM_DECADES[0], HISTOGRAM_DECADES[1] + 1)


@dataclass
class _Totals:
    """The metrics of the blocks seen so far (finite elements only)."""

    max_abs: float = 0.0
    scale: float = 0.0
    max_rel: float = 0.0
    tolerance_ratio: float = 0.0
    min_atol: float = 0.0
    min_rtol: float = 0.0
    outside: int = 0  # finite elements outside atol + rtol*|b| (an exact comparison: elements that differ)
    disagree: int = 0  # elements where NaN/Inf disagree
    nonfinite_expected: int = 0
    finite: int = 0
    nonzero: int = 0  # finite elements with a nonzero error
    above: list[int] = field(default_factory=lambda: [0] * len(_DECADES))  # errors >= 10**k, per decade k


def _compare_inexact(a: np.ndarray, b: np.ndarray, work: np.dtype, totals: _Totals, atol: float,
                     rtol: float) -> None:
    """Add the metrics of `a` against `b` (inexact, of one shape, at least 1-d) to `totals`,
    block by block in `work` precision."""
    metric = np.dtype(np.float64) if work.kind == "c" else work
    error, magnitude, scratch, excess, mask = _SCRATCH.buffers(metric)
    # one error state for every block: an overflow or a division by zero is a metric's true value
    # (inf), and NaN/Inf elements are counted apart, so no warning is due
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for block_a, block_b in flat_blocks((a, b), BLOCK_ELEMENTS):
            size = block_a.size
            _compare_block(block_a, block_b, work, totals, atol, rtol,
                           error[:size], magnitude[:size], scratch[:size], excess[:size], mask[:size])


def _finish_inexact(totals: _Totals, result: Comparison, size: int) -> None:
    """`result`'s metrics from the totals of every block of its `size` elements."""
    result.max_abs, result.scale = totals.max_abs, totals.scale
    result.normalized = totals.max_abs / totals.scale if totals.scale > 0 else totals.max_abs
    result.max_rel, result.tolerance_ratio = totals.max_rel, totals.tolerance_ratio
    result.min_atol, result.min_rtol = totals.min_atol, totals.min_rtol
    result.nonfinite_mismatch = totals.disagree
    result.nonfinite_expected = totals.nonfinite_expected
    result.mismatch_fraction = (totals.outside + totals.disagree) / size
    result.histogram = _histogram(totals) if totals.finite else {}
    if totals.disagree:
        result.tolerance_ratio = result.min_atol = result.min_rtol = math.inf
        result.note = f"{totals.disagree} element(s) disagree on NaN/Inf"


def _compare_block(a: np.ndarray, b: np.ndarray, work: np.dtype, totals: _Totals, atol: float, rtol: float,
                   error: np.ndarray, magnitude: np.ndarray, scratch: np.ndarray, excess: np.ndarray,
                   mask: np.ndarray) -> None:
    """Add one block's metrics to `totals`, computed in the given scratch buffers (of its size);
    run inside `_compare_inexact`'s error state."""
    if work.kind == "c":
        np.abs(np.subtract(a, b, dtype=work, casting="unsafe"), out=error)
        np.abs(b.astype(work, copy=False), out=magnitude)
    else:
        # a side in another precision is cast into a buffer first: a ufunc casting its operand
        # on the fly (buffered, in small chunks) takes about twice as long as a copy and a pass
        b_work = b if b.dtype == work else _cast(b, magnitude)
        np.subtract(a if a.dtype == work else _cast(a, error), b_work, out=error)
        np.abs(error, out=error)
        np.abs(b_work, out=magnitude)
    max_abs, scale = _MAX(error), _MAX(magnitude)
    finite_count = error.size
    if not (np.isfinite(max_abs) and np.isfinite(scale)):  # |a-b| and |b| finite <=> a, b finite
        a_w, b_w = a.astype(work, copy=False), b.astype(work, copy=False)
        finite = np.isfinite(a_w) & np.isfinite(b_w)
        both_nan = np.isnan(a_w) & np.isnan(b_w)
        same_inf = np.isinf(a_w) & np.isinf(b_w) & (a_w == b_w)
        totals.disagree += int(np.count_nonzero(~finite & ~(both_nan | same_inf)))
        totals.nonfinite_expected += int(np.count_nonzero(~np.isfinite(b_w)))
        error[~finite] = 0
        magnitude[~finite] = 0
        finite_count = int(np.count_nonzero(finite))
        max_abs, scale = _MAX(error), _MAX(magnitude)
    if not finite_count:
        return
    totals.finite += finite_count
    max_abs, scale = float(max_abs), float(scale)
    totals.max_abs, totals.scale = max(totals.max_abs, max_abs), max(totals.scale, scale)
    if max_abs == 0:  # identical: every error metric is 0
        return
    _add_error_metrics(totals, atol, rtol, max_abs, error, magnitude, scratch, excess, mask)
    _add_histogram(totals, max_abs, error, mask)


def _cast(array: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """`array` cast into `buffer` (of its size)."""
    np.copyto(buffer, array, casting="unsafe")
    return buffer


def _add_error_metrics(totals: _Totals, atol: float, rtol: float, max_abs: float, error: np.ndarray,
                       magnitude: np.ndarray, scratch: np.ndarray, excess: np.ndarray, mask: np.ndarray) -> None:
    """The error metrics of one block from |a-b| and |b| (finite elements; others are 0 in both)."""
    kind = error.dtype.type
    tiny = kind(TINY)
    if _MIN(magnitude) >= tiny:  # max(|b|, tiny) is |b| itself (np.maximum costs three divisions' time)
        np.divide(error, magnitude, out=scratch)
    else:  # error / tiny may overflow to inf: a true max_rel
        np.maximum(magnitude, tiny, out=scratch)
        np.divide(error, scratch, out=scratch)
    totals.max_rel = max(totals.max_rel, float(_MAX(scratch)))
    np.multiply(magnitude, kind(rtol), out=scratch)  # rtol*|b|
    np.subtract(error, scratch, out=excess)  # |a-b| - rtol*|b|: outside when > atol
    totals.min_atol = max(totals.min_atol, float(_MAX(excess)), 0.0)  # the atol that lets the worst element in
    if max_abs > atol:  # else no element is outside: |a-b| - rtol*|b| <= |a-b| <= atol
        np.greater(excess, atol, out=mask)
        totals.outside += int(np.count_nonzero(mask))
    np.add(scratch, kind(atol), out=scratch)  # the bound atol + rtol*|b|
    if not kind(atol) >= tiny:  # else the bound is at least atol, so at least tiny already
        np.maximum(scratch, tiny, out=scratch)
    np.divide(error, scratch, out=scratch)
    totals.tolerance_ratio = max(totals.tolerance_ratio, float(_MAX(scratch)))
    if max_abs > atol:
        np.greater(error, atol, out=mask)
        if mask.any():
            needed = (error[mask] - kind(atol)) / magnitude[mask]
            totals.min_rtol = max(totals.min_rtol, float(needed.max()))  # +inf where expected is 0 (no rtol helps)


def _add_histogram(totals: _Totals, top: float, errors: np.ndarray, mask: np.ndarray) -> None:
    """Add one block's counts of `errors >= 10**k` per decade, from its largest error's decade
    down, stopping once every nonzero error is placed (as many passes as decades in use)."""
    np.greater(errors, 0, out=mask)
    nonzero = int(np.count_nonzero(mask))
    totals.nonzero += nonzero
    low, high = HISTOGRAM_DECADES
    kind = errors.dtype.type
    # +1: log10 may round down at 10**k; an infinite error (finite values whose difference overflows) is >= 1e2
    decade = high if math.isinf(top) else min(math.floor(math.log10(top)) + 1, high)
    while decade >= low:
        threshold = kind(10.0 ** decade)
        if top < threshold:  # no error reaches it (the usual case at the first decade): no pass
            decade -= 1
            continue
        np.greater_equal(errors, threshold, out=mask)
        count = int(np.count_nonzero(mask))
        totals.above[decade - low] += count
        if count == nonzero:
            for below in range(low, decade):  # every nonzero error is at least 10**below
                totals.above[below - low] += nonzero
            return
        decade -= 1


def _histogram(totals: _Totals) -> dict[str, int]:
    """The histogram's keys, in increasing order of error, from the merged counts."""
    low, high = HISTOGRAM_DECADES
    counts: dict[str, int] = {}
    if totals.finite > totals.nonzero:
        counts["zero"] = totals.finite - totals.nonzero
    if totals.nonzero > totals.above[0]:
        counts[f"<1e{low}"] = totals.nonzero - totals.above[0]
    for decade in _DECADES:
        inside = totals.above[decade - low] - (totals.above[decade - low + 1] if decade < high else 0)
        if inside:
            counts[f">=1e{high}" if decade == high else f"1e{decade:+03d}"] = inside
    return counts


def _compare_exact(a: np.ndarray, b: np.ndarray, totals: _Totals) -> None:
    """Add `a` against `b` (of one shape, at least 1-d) to `totals`: integers, booleans and
    non-numeric data must be equal, and the metrics count what differs (`totals.outside`).
    Numeric data is compared in blocks of `BLOCK_ELEMENTS` (a mask of 800 x 1066 pixels per
    detection is 85 M elements: its float64 differences whole would be GBs), the metrics merged
    as `_compare_inexact` merges them: a maximum, a count, a histogram of counts."""
    if a.dtype.kind not in _NUMERIC_KINDS or b.dtype.kind not in _NUMERIC_KINDS:
        totals.outside += int(np.count_nonzero(np.asarray(a != b)))
        return
    mask = _SCRATCH.buffers(np.dtype(np.float64))[4]
    for block_a, block_b in flat_blocks((a, b), BLOCK_ELEMENTS):
        b64 = block_b.astype(np.float64)
        magnitude = np.abs(b64)
        totals.scale = max(totals.scale, float(magnitude.max()))
        totals.finite += block_a.size
        count = int(np.count_nonzero(block_a != block_b))
        if not count:
            continue
        totals.outside += count
        diff = np.abs(block_a.astype(np.float64) - b64)
        top = float(diff.max())
        totals.max_abs = max(totals.max_abs, top)
        totals.max_rel = max(totals.max_rel, float((diff / np.maximum(magnitude, TINY)).max()))
        _add_histogram(totals, top, diff, mask[:diff.size])


def _finish_exact(totals: _Totals, result: Comparison, size: int, numeric: bool) -> None:
    """`result`'s metrics from the totals of an exact comparison of `size` elements (`numeric`:
    numbers, whose differences have magnitudes; else any difference is infinite)."""
    differing = totals.outside
    result.mismatch_fraction = float(differing) / max(size, 1)
    if numeric:
        result.scale = totals.scale
    if not differing:
        return
    result.tolerance_ratio = result.min_atol = result.min_rtol = math.inf
    result.note = f"{differing} element(s) differ (exact comparison)"
    if not numeric:
        result.max_abs = result.max_rel = result.normalized = math.inf
        return
    result.max_abs, result.max_rel = totals.max_abs, totals.max_rel
    result.normalized = result.max_abs / result.scale if result.scale > 0 else result.max_abs
    result.histogram = _histogram(totals)


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
