"""Table-driven tests for `harness.metrics.comparison`: the metrics every report is built from."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from harness.metrics.comparison import TINY, Comparison, compare, error_histogram

NAN, INF = float("nan"), float("inf")


def f32(*values):
    return np.array(values, dtype=np.float32)


# (id, actual, expected, atol, rtol, expected fields). Values chosen to be exact in fp32.
CASES = [
    ("identical", f32(1, 2, 3), f32(1, 2, 3), 0.0, 0.0,
     dict(passed=True, max_abs=0.0, max_rel=0.0, mismatch_fraction=0.0, tolerance_ratio=0.0,
          min_atol=0.0, min_rtol=0.0, scale=3.0, histogram={"zero": 3})),
    ("inside atol", f32(1.5, 2), f32(1, 2), 0.5, 0.0,
     dict(passed=True, max_abs=0.5, max_rel=0.5, mismatch_fraction=0.0, tolerance_ratio=1.0, min_atol=0.5)),
    ("outside atol", f32(1.5, 2, 3.25), f32(1, 2, 3), 0.25, 0.0,
     dict(passed=False, max_abs=0.5, mismatch_fraction=1 / 3, tolerance_ratio=2.0, min_atol=0.5)),
    ("rtol scales with expected", f32(1.5, 4.5), f32(1, 4), 0.0, 0.5,
     dict(passed=True, max_abs=0.5, max_rel=0.5, tolerance_ratio=1.0, min_atol=0.0, min_rtol=0.5)),
    ("min_atol at the given rtol", f32(2, 10), f32(1, 8), 0.0, 0.125,
     dict(passed=False, max_abs=2.0, min_atol=2.0 - 0.125 * 8, min_rtol=1.0)),
    ("min_rtol at the given atol", f32(1.5, 10), f32(1, 8), 0.25, 0.0,
     dict(passed=False, min_atol=2.0, min_rtol=(0.5 - 0.25) / 1)),
    ("error where expected is 0 needs atol", f32(0.5, 1), f32(0, 1), 0.0, 0.1,
     dict(passed=False, min_atol=0.5, min_rtol=INF, max_rel=0.5 / float(np.finfo(np.float32).tiny))),
    ("normalised by the expected scale", f32(1, 2.5), f32(1, 2), 0.0, 0.0,
     dict(passed=False, max_abs=0.5, scale=2.0, normalized=0.25)),
    ("NaN on both sides agrees", f32(NAN, 1), f32(NAN, 1), 0.0, 0.0,
     dict(passed=True, nonfinite_mismatch=0, nonfinite_expected=1, mismatch_fraction=0.0, max_abs=0.0)),
    ("NaN on one side mismatches", f32(NAN, 1), f32(0, 1), 1.0, 1.0,
     dict(passed=False, nonfinite_mismatch=1, mismatch_fraction=0.5, tolerance_ratio=INF, min_atol=INF,
          min_rtol=INF)),
    ("NaN expected, finite actual mismatches", f32(0, 1), f32(NAN, 1), 1.0, 1.0,
     dict(passed=False, nonfinite_mismatch=1, nonfinite_expected=1)),
    ("inf of the same sign agrees", f32(INF, -INF, 1), f32(INF, -INF, 1), 0.0, 0.0,
     dict(passed=True, nonfinite_mismatch=0, nonfinite_expected=2, max_abs=0.0)),
    ("inf against -inf mismatches", f32(INF, 1), f32(-INF, 1), 0.0, 0.0,
     dict(passed=False, nonfinite_mismatch=1)),
    ("inf against a finite value mismatches", f32(INF, 1), f32(3e38, 1), 1e38, 1.0,
     dict(passed=False, nonfinite_mismatch=1)),
    ("finite errors ignore the non-finite elements", f32(NAN, 1.5), f32(NAN, 1), 0.0, 0.0,
     dict(passed=False, max_abs=0.5, mismatch_fraction=0.5, nonfinite_mismatch=0)),
    ("all NaN on both sides", f32(NAN, NAN), f32(NAN, NAN), 0.0, 0.0,
     dict(passed=True, max_abs=0.0, mismatch_fraction=0.0)),
    ("finite values whose difference overflows", f32(3e38, 1), f32(-3e38, 1), 1.0, 1.0,
     dict(passed=False, max_abs=INF, nonfinite_mismatch=0, mismatch_fraction=0.5, histogram={"zero": 1, ">=1e2": 1})),
    ("shape mismatch is reported, not raised", np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), 1.0, 1.0,
     dict(passed=False, shape_match=False, max_abs=INF, tolerance_ratio=INF, min_atol=INF, mismatch_fraction=1.0,
          shape_actual=[2, 3], shape_expected=[3, 2])),
    ("rank mismatch (broadcastable) is a shape mismatch", np.zeros((1,), np.float32), np.zeros((), np.float32),
     1.0, 1.0, dict(passed=False, shape_match=False)),
    ("integers are exact: tolerances do not apply", np.array([1, 2, 4]), np.array([1, 2, 3]), 10.0, 10.0,
     dict(passed=False, max_abs=1.0, mismatch_fraction=1 / 3, tolerance_ratio=INF, min_atol=INF, min_rtol=INF)),
    ("equal integers pass", np.array([5, -2], np.int64), np.array([5, -2], np.int64), 0.0, 0.0,
     dict(passed=True, max_abs=0.0, scale=5.0)),
    ("booleans are exact", np.array([True, False]), np.array([True, True]), 1.0, 1.0,
     dict(passed=False, mismatch_fraction=0.5)),
    ("dtype mismatch fails and is reported", np.array([1, 2], np.int32), np.array([1, 2], np.int64), 0.0, 0.0,
     dict(passed=False, dtype_match=False, max_abs=0.0)),
    ("float dtype mismatch fails", f32(1, 2), np.array([1, 2], np.float64), 0.0, 0.0,
     dict(passed=False, dtype_match=False, max_abs=0.0)),
    ("empty tensors agree", np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), 0.0, 0.0,
     dict(passed=True, max_abs=0.0)),
    ("0-d tensors", np.float32(2.5), np.float32(2.0), 0.5, 0.0, dict(passed=True, max_abs=0.5)),
    ("complex error is a modulus", np.array([1 + 1j]), np.array([1 + 0j]), 0.0, 0.0,
     dict(passed=False, max_abs=1.0, scale=1.0)),
]


@pytest.mark.parametrize("actual, expected, atol, rtol, fields", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_compare_table(actual, expected, atol, rtol, fields):
    result = compare(actual, expected, atol=atol, rtol=rtol)
    for key, want in fields.items():
        got = getattr(result, key)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-6, abs=0.0) or (math.isinf(want) and got == want), \
                f"{key}: {got} != {want}"
        else:
            assert got == want, f"{key}: {got} != {want}"


@pytest.mark.parametrize("atol, rtol", [(0.0, 0.0), (1e-3, 0.0), (0.0, 1e-2), (1e-4, 1e-3)])
def test_min_tolerances_are_the_smallest_that_pass(atol, rtol):
    """At (min_atol, rtol) and at (atol, min_rtol) the comparison passes; any less fails."""
    rng = np.random.default_rng(0)
    expected = rng.normal(size=1000).astype(np.float64)
    actual = expected + rng.normal(scale=1e-3, size=1000)
    result = compare(actual, expected, atol=atol, rtol=rtol)
    assert compare(actual, expected, atol=result.min_atol, rtol=rtol).passed
    assert not compare(actual, expected, atol=result.min_atol * (1 - 1e-6), rtol=rtol).passed
    assert compare(actual, expected, atol=atol, rtol=result.min_rtol * (1 + 1e-12)).passed
    assert not compare(actual, expected, atol=atol, rtol=result.min_rtol * (1 - 1e-6)).passed


def test_tolerance_ratio_is_one_at_the_boundary_and_decides_passing():
    expected = f32(1, 2, 4)
    actual = expected + f32(0.25, 0.5, 1.0)  # exactly 0.25 * |expected|
    assert compare(actual, expected, atol=0.0, rtol=0.25).tolerance_ratio == pytest.approx(1.0)
    assert compare(actual, expected, atol=0.0, rtol=0.25).passed
    assert compare(actual, expected, atol=0.0, rtol=0.125).tolerance_ratio == pytest.approx(2.0)


@pytest.mark.parametrize("fraction, allowed, passed", [(0.25, 0.25, True), (0.25, 0.2, False), (0.0, 0.0, True)])
def test_allowed_mismatch(fraction, allowed, passed):
    expected = np.zeros(8, np.float32)
    actual = expected.copy()
    actual[: int(fraction * 8)] = 1.0
    result = compare(actual, expected, atol=0.5, rtol=0.0, allowed_mismatch=allowed)
    assert result.mismatch_fraction == fraction and result.passed is passed


HISTOGRAMS = [
    ("empty", np.zeros(0), {}),
    ("zeros only", np.zeros(3), {"zero": 3}),
    ("one per decade", np.array([3e-7, 3e-6, 0.5, 0.0]),
     {"zero": 1, "1e-07": 1, "1e-06": 1, "1e-01": 1}),
    ("below and above the range", np.array([1e-15, 1e-20, 5e2, 1e9]), {"<1e-12": 2, ">=1e2": 2}),
    ("edges of the range", np.array([1e-12, 99.0]), {"1e-12": 1, "1e+01": 1}),
    ("counts add up", np.full(10, 2e-5), {"1e-05": 10}),
    ("fp32 errors", np.array([0, 2e-7, 3e-7, 4e-3], np.float32), {"zero": 1, "1e-07": 2, "1e-03": 1}),
]


@pytest.mark.parametrize("errors, want", [h[1:] for h in HISTOGRAMS], ids=[h[0] for h in HISTOGRAMS])
def test_error_histogram(errors, want):
    got = error_histogram(errors)
    assert got == want
    assert sum(got.values()) == errors.size


def test_histogram_keys_increase_with_error():
    errors = np.array([0.0, 1e-14, 3e-9, 3e-9, 0.2, 7.0, 1e4])
    keys = list(error_histogram(errors))
    assert keys == ["zero", "<1e-12", "1e-09", "1e-01", "1e+00", ">=1e2"]


def test_histogram_of_a_comparison_counts_only_finite_elements():
    result = compare(f32(NAN, 1.5, 1.0), f32(NAN, 1.0, 1.0), atol=1.0, rtol=0.0)
    assert result.histogram == {"zero": 1, "1e-01": 1}


def test_accepts_torch_tensors_and_scalars():
    result = compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), atol=0.0, rtol=0.0)
    assert result.max_abs == 0.5 and result.dtype_actual == "float32"
    assert compare(torch.tensor([1.0], dtype=torch.bfloat16), np.array([1.0], np.float32), atol=0, rtol=0).passed
    assert compare(np.asarray(3, np.int64), 3, atol=0, rtol=0).passed  # a SymInt's value


def test_check_dtype_false_compares_fp32_with_fp64():
    result = compare(f32(1.0), np.array([1.0 + 2 ** -30]), atol=0.0, rtol=1e-6, check_dtype=False)
    assert result.passed and not result.dtype_match and result.max_abs == pytest.approx(2 ** -30)


def test_to_dict_is_json_with_infinities_as_strings():
    result = compare(np.zeros(2, np.float32), np.zeros(3, np.float32), atol=0.0, rtol=0.0)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["max_abs"] == "inf" and data["shape_match"] is False
    assert set(data) == {f for f in Comparison.__dataclass_fields__}


def test_fp64_expected_keeps_small_errors():
    """An fp32 result against an fp64 truth: the error below fp32 resolution is still seen."""
    expected = np.array([1.0 + 2 ** -40], dtype=np.float64)
    result = compare(f32(1.0), expected, atol=0.0, rtol=0.0, check_dtype=False)
    assert result.max_abs == pytest.approx(2 ** -40)


TINY32 = float(np.finfo(np.float32).tiny)


@pytest.mark.parametrize("expected, actual, want", [
    # every |expected| at least tiny: the error over |expected| itself
    (f32(2.0, 4.0), f32(2.5, 4.5), 0.25),
    # a subnormal |expected| (below tiny) divides by tiny, not by itself (which would give 1.0)
    (f32(2.0, 1e-39), f32(2.0, 2e-39), float(np.float32(np.float32(2e-39) - np.float32(1e-39)) / np.float32(TINY32))),
    # an exact 0 beside normal values: tiny too
    (f32(0.0, 4.0), f32(1e-30, 4.0), float(np.float32(1e-30) / np.float32(TINY32))),
], ids=["normal", "subnormal expected", "zero expected"])
def test_max_rel_divides_by_the_expected_magnitude_or_tiny(expected, actual, want):
    result = compare(actual, expected, atol=0.0, rtol=0.0)
    assert result.max_rel == pytest.approx(want, rel=1e-6)
    assert 0.0 < result.max_rel < math.inf


def _exact_whole(actual: np.ndarray, expected: np.ndarray) -> dict:
    """An exact comparison's metrics computed on the whole tensors at once (the definitions)."""
    a64, b64 = actual.astype(np.float64).reshape(-1), expected.astype(np.float64).reshape(-1)
    diff = np.abs(a64 - b64)
    differing = int(np.count_nonzero(actual.reshape(-1) != expected.reshape(-1)))
    found = dict(mismatch_fraction=differing / actual.size, scale=float(np.abs(b64).max()), passed=differing == 0)
    if differing:
        found.update(max_abs=float(diff.max()), max_rel=float((diff / np.maximum(np.abs(b64), TINY)).max()),
                     histogram=error_histogram(diff), tolerance_ratio=INF,
                     note=f"{differing} element(s) differ (exact comparison)"
                     + ("" if actual.dtype == expected.dtype else f"; dtype {actual.dtype} != expected {expected.dtype}"))
    return found


_RNG = np.random.default_rng(5)
_INTS = _RNG.integers(-40, 40, 61)
EXACT_IN_BLOCKS = [
    ("equal int64 over 8 blocks", _INTS, _INTS.copy()),
    ("one difference in the last, partial block", _INTS, np.where(np.arange(61) == 60, 1000, _INTS)),
    ("differences in one block only", _INTS, np.where((np.arange(61) > 8) & (np.arange(61) < 14), 0, _INTS)),
    ("differences of every decade across blocks", _INTS,
     _INTS + np.array([0, 1, 10, 100, 1000, 10**6] * 10 + [3], np.int64)),
    ("booleans", _INTS > 0, _INTS > 5),
    ("uint8 against int32", np.arange(61, dtype=np.uint8), np.arange(61, dtype=np.uint8)[::-1].astype(np.int32)),
    ("a 2-d tensor", _INTS[:60].reshape(6, 10), _INTS[:60].reshape(6, 10) * 2),
    ("a largest expected of 0", np.ones(20, np.int64), np.zeros(20, np.int64)),
]


@pytest.mark.parametrize("actual, expected", [c[1:] for c in EXACT_IN_BLOCKS], ids=[c[0] for c in EXACT_IN_BLOCKS])
def test_exact_comparison_in_blocks_gives_the_whole_tensors_metrics(monkeypatch, actual, expected):
    from harness.metrics import comparison

    monkeypatch.setattr(comparison, "BLOCK_ELEMENTS", 8)  # 61 elements: 7 full blocks and a partial one
    got = compare(actual, expected, atol=1e-5, rtol=1e-5, check_dtype=False)
    want = _exact_whole(actual, expected)
    assert {key: getattr(got, key) for key in want} == want
    assert list(got.histogram) == list(want.get("histogram", {}))
    assert got.normalized == (got.max_abs / got.scale if got.scale > 0 else got.max_abs)


_MIXED_BASE = np.random.default_rng(7).standard_normal(300) * 10.0 ** np.random.default_rng(8).integers(-9, 3, 300)
MIXED_PRECISIONS = [
    # (id, actual, expected, the working precision both are cast to first)
    ("fp32 against an fp64 truth", (_MIXED_BASE * (1 + 3e-7)).astype(np.float32), _MIXED_BASE, np.float64),
    ("fp64 against fp32", _MIXED_BASE * (1 + 1e-5), _MIXED_BASE.astype(np.float32), np.float64),
    ("fp16 against fp16", (_MIXED_BASE * 1.001).astype(np.float16), _MIXED_BASE.astype(np.float16), np.float32),
    ("fp16 against fp32", (_MIXED_BASE * 1.001).astype(np.float16), _MIXED_BASE.astype(np.float32), np.float32),
    ("errors exactly at powers of ten", np.array([1.0, 2.0, 0.5, 7.0]) + np.array([1e-3, 1e-6, 0.0, 1e-12]),
     np.array([1.0, 2.0, 0.5, 7.0], np.float32), np.float64),
    ("an error of exactly 10", np.array([11.0, 3.0, 1.0]), np.array([1.0, 3.0, 1.0]), np.float64),
    ("NaN and infinities, cast", np.array([NAN, INF, 1.5, -INF, 2.0, NAN] * 3, np.float32),
     np.array([NAN, INF, 1.0, INF, NAN, 2.0] * 3), np.float64),
]


@pytest.mark.parametrize("actual, expected, work", [c[1:] for c in MIXED_PRECISIONS], ids=[c[0] for c in MIXED_PRECISIONS])
@pytest.mark.parametrize("block", [7, 1 << 16])
def test_mixed_precisions_compare_as_both_cast_to_the_working_precision(monkeypatch, actual, expected, work, block):
    from harness.metrics import comparison

    monkeypatch.setattr(comparison, "BLOCK_ELEMENTS", block)
    got = compare(actual, expected, atol=1e-5, rtol=1e-4, check_dtype=False).to_dict()
    want = compare(actual.astype(work), expected.astype(work), atol=1e-5, rtol=1e-4).to_dict()
    for key in ("dtype_actual", "dtype_expected", "dtype_match", "note"):
        got.pop(key), want.pop(key)
    assert got == want
    finite = np.isfinite(actual) & np.isfinite(expected)  # the histogram counts finite elements only
    errors = np.abs(actual[finite].astype(work) - expected[finite].astype(work))
    assert got["histogram"] == error_histogram(errors)


_EXPANDED = torch.arange(12, dtype=torch.int64).reshape(3, 1, 4).expand(3, 5, 4).numpy()  # strides (32, 0, 8)
FLAT_BLOCKS = [
    ("contiguous: views of the flat array", np.arange(20.0).reshape(4, 5), 8, [8, 8, 4]),
    ("an expanded view: whole rows of the first axis", _EXPANDED, 40, [40, 20]),
    ("an expanded view, a row over the size: one inner row at a time", _EXPANDED, 6, [4] * 15),
    ("transposed", np.arange(24.0).reshape(4, 6).T, 10, [8, 8, 8]),
    ("1-d with a step", np.arange(30.0)[::3], 4, [4, 4, 2]),
]


@pytest.mark.parametrize("array, size, lengths", [c[1:] for c in FLAT_BLOCKS], ids=[c[0] for c in FLAT_BLOCKS])
def test_flat_blocks_cover_the_array_in_order_never_past_the_size(array, size, lengths):
    from harness.metrics.arrays import flat_blocks

    other = array * 2
    blocks = list(flat_blocks((array, other), size))
    assert [len(a) for a, _ in blocks] == lengths and max(lengths) <= size
    assert np.array_equal(np.concatenate([a for a, _ in blocks]), array.reshape(-1))
    assert np.array_equal(np.concatenate([b for _, b in blocks]), other.reshape(-1))


@pytest.mark.parametrize("values, want", [
    (np.array([[-3.0, np.inf], [np.nan, 2.0]]), 3.0),
    (torch.tensor([[-7, 2]]).expand(100, 2).numpy(), 7.0),
    (np.full((4, 4), np.nan), 0.0),
    (np.array(-2.5), 2.5),
], ids=["skips non-finite", "an expanded view", "no finite element", "0-d"])
def test_largest_finite(values, want):
    from harness.metrics import arrays

    assert arrays.largest_finite(values) == want


# --- comparisons made part by part --------------------------------------------------------------

_PARTED_BASE = np.random.default_rng(11).standard_normal((7, 5, 3)) * 10.0 ** np.random.default_rng(12).integers(-6, 3, (7, 5, 3))
_WITH_NONFINITE = _PARTED_BASE.copy()
_WITH_NONFINITE[0, 0, :3] = [NAN, INF, -INF]  # the first part: where the NaN/Inf count must survive the merge
_OFF_IN_FIRST = _PARTED_BASE.astype(np.float32)
_OFF_IN_FIRST[0, 1, 2] += 50.0  # the worst element in the first part, every other error small
_INTS_3D = np.random.default_rng(13).integers(-50, 50, (7, 5, 3))
PARTED = [
    # (id, actual, expected, atol, rtol)
    ("fp32 against an fp64 truth", (_PARTED_BASE * (1 + 3e-7)).astype(np.float32), _PARTED_BASE, 1e-6, 1e-5),
    ("fp64 against fp32", _PARTED_BASE * (1 + 1e-5), _PARTED_BASE.astype(np.float32), 1e-6, 1e-5),
    ("fp16 against fp32", (_PARTED_BASE * 1.001).astype(np.float16), _PARTED_BASE.astype(np.float32), 1e-3, 1e-3),
    ("the worst element in the first part", _OFF_IN_FIRST, _PARTED_BASE, 1e-5, 1e-5),
    ("NaN and infinities in the first part only", _WITH_NONFINITE.astype(np.float32), _WITH_NONFINITE, 1e-5, 1e-5),
    ("NaN/Inf disagreeing in the first part", np.where(np.isfinite(_WITH_NONFINITE), _WITH_NONFINITE, 0.0),
     _WITH_NONFINITE, 1e-5, 1e-5),
    ("identical but for the last row", np.concatenate([_PARTED_BASE[:6], _PARTED_BASE[6:] + 1.0]), _PARTED_BASE, 0.0, 0.0),
    ("integers differing in two parts", np.where(np.arange(105).reshape(7, 5, 3) % 40 == 3, 0, _INTS_3D), _INTS_3D, 0.0, 0.0),
    ("equal integers", _INTS_3D, _INTS_3D.copy(), 0.0, 0.0),
    ("booleans", _INTS_3D > 0, _INTS_3D > 7, 0.0, 0.0),
    ("strings", np.array(list("abcdefg")), np.array(list("abcxefy")), 0.0, 0.0),
]
CUTS = {"one part": [0, 7], "row by row": list(range(8)), "uneven": [0, 1, 4, 7], "a first part of 5": [0, 5, 7]}


@pytest.mark.parametrize("cuts", list(CUTS.values()), ids=list(CUTS))
@pytest.mark.parametrize("actual, expected, atol, rtol", [c[1:] for c in PARTED], ids=[c[0] for c in PARTED])
def test_a_comparison_in_parts_is_the_whole_comparison(monkeypatch, actual, expected, atol, rtol, cuts):
    from harness.metrics import comparison
    from harness.metrics.comparison import ComparisonInParts

    monkeypatch.setattr(comparison, "BLOCK_ELEMENTS", 4)  # blocks cut across the parts' bounds too
    want = compare(actual, expected, atol=atol, rtol=rtol, name="v", check_dtype=False).to_dict()
    parts = ComparisonInParts(actual.shape, actual.dtype, expected.shape, expected.dtype, atol=atol, rtol=rtol,
                              name="v", check_dtype=False)
    for start, stop in zip(cuts, cuts[1:]):
        parts.add(actual[start:stop], expected[start:stop])
    assert parts.result().to_dict() == want


def _compare_whole_and_merge_last_part_only(actual, expected):
    """A wrong merge (the last part's comparison taken for the whole), to check the table sees it."""
    from harness.metrics.comparison import ComparisonInParts

    parts = ComparisonInParts(actual[5:].shape, actual.dtype, expected[5:].shape, expected.dtype, atol=1e-5,
                              rtol=1e-5, check_dtype=False)
    parts.add(actual[5:], expected[5:])
    return parts.result().to_dict()


@pytest.mark.parametrize("index", [3, 4, 5, 7])
def test_the_parts_table_tells_a_wrong_merge(index):
    """The table's cases where the first part decides fail when only a later part is kept."""
    _, actual, expected, atol, rtol = PARTED[index]
    whole = compare(actual, expected, atol=1e-5, rtol=1e-5, check_dtype=False).to_dict()
    wrong = _compare_whole_and_merge_last_part_only(actual, expected)
    whole.pop("shape_actual"), whole.pop("shape_expected"), wrong.pop("shape_actual"), wrong.pop("shape_expected")
    assert wrong != whole


@pytest.mark.parametrize("actual, expected", [
    (np.zeros((2, 3), np.float32), np.zeros((3, 2))),  # shapes disagree: the result needs no value
    (np.zeros((0, 3), np.float32), np.zeros((0, 3))),
], ids=["shapes differ", "empty"])
def test_a_comparison_of_no_values_takes_no_part(actual, expected):
    from harness.metrics.comparison import ComparisonInParts

    parts = ComparisonInParts(actual.shape, actual.dtype, expected.shape, expected.dtype, atol=0, rtol=0)
    assert not parts.compares_values
    with pytest.raises(ValueError):
        parts.add(actual, expected)
    assert parts.result().to_dict() == compare(actual, expected, atol=0, rtol=0).to_dict()


def test_parts_must_cover_the_tensors_once_in_their_dtypes():
    from harness.metrics.comparison import ComparisonInParts

    actual, expected = np.ones((4, 2), np.float32), np.ones((4, 2))
    parts = ComparisonInParts(actual.shape, actual.dtype, expected.shape, expected.dtype, atol=0, rtol=0,
                              check_dtype=False)
    parts.add(actual[:3], expected[:3])
    with pytest.raises(ValueError, match="of the tensors' 8"):
        parts.result()  # a row missing
    with pytest.raises(ValueError, match="dtypes"):
        parts.add(actual[3:], expected[3:].astype(np.float32))
    with pytest.raises(ValueError, match="past the tensors' 8"):
        parts.add(actual[1:], expected[1:])
    parts.add(actual[3:], expected[3:])
    assert parts.result().passed and parts.result() is parts.result()
