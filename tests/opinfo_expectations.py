"""What the OpInfo sweep (tests/test_opinfo.py) expects to fail, and why: expectations in code,
each scoped to OpInfo entries, dtypes and a predicate on the sample, as onnxscript's torch_lib
tests scope theirs.

An `Expectation` names the results keys it covers (an OpInfo entry, "entry@aten.overload" for a
kernel form, "module.nn.LSTM" for a module; fnmatch patterns allowed), the dtypes, a predicate
`when(sample)` (every sample by default) and `error`, a regex the failure must match: a sample
it covers that fails otherwise is an unexpected failure, not an expected one. `strict` ones
must fail: a covered sample that passes fails the test, so the expectation is taken off when
its cause is fixed. Non-strict ones (numerics that depend on the sample's values) may pass.
The reason says what would fix it.

Samples are judged as the harness judges an op (op_table.opinfo.judge: its tolerance rows and its
verdict against the fp64 truth; a random op's draw by its law, an op's indices through the
values they select, `torch.empty` by shape and dtype). Numerics that differ by a known amount
are not excused by any `values differ` (an `error` that any numeric failure would match is
refused: ANY_NUMERIC_FAILURE): such an expectation carries `tolerance={dtype: (rtol, atol)}`
(onnxscript torch_lib's form), an override row its samples are judged at against torch instead
of the verdict, measured on the recorded sweep with a margin; a sample beyond it (a regression
to garbage) fails, which tests/test_opinfo.py checks for every bounded expectation.

`NO_SAMPLES` lists the (entry, dtype) pairs for which no sample reaches a registered overload,
with the reason; every other recorded pair must run exactly as many samples as the recorded
sweep (docs/opinfo.json) did.

To add the expectations of a new symbolic module: run `python tools/opinfo_sweep.py --only
'aten.new_op.*'`, then `pytest tests/test_opinfo.py -m nightly -k new_op`; each unexpected
failure is printed with its sample; add one Expectation per cause below, grouped by cause.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Predicate = Callable[[Any], bool]


def every_sample(sample: Any) -> bool:
    return True


# What the judge says of any numeric difference (op_table.opinfo.judge): an expected failure's
# regex may match none of these, so that it cannot excuse a regression to garbage.
ANY_NUMERIC_FAILURE = ("output 0: values differ: max abs 1 against torch; truth rule: e_backend 1 > 2 x "
                       "max(e_torch 0, floor 0)", "output 1: values differ (exact dtype)",
                       "output 0: indices differ: 1 of 4 indices select values not tied with torch's choice")


@dataclass(frozen=True)
class Expectation:
    """Samples expected to fail: results keys (patterns), dtypes, a predicate, the failure's
    regex and the reason."""

    entries: tuple[str, ...]
    dtypes: tuple[str, ...]
    reason: str
    error: str | None = None
    when: Predicate = every_sample
    strict: bool = True
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype -> (rtol, atol)
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.reason.strip() or not self.entries or not self.dtypes:
            raise ValueError(f"an expectation needs entries, dtypes and a reason: {self}")
        if (self.error is None) == (not self.tolerance):
            raise ValueError(f"an expectation needs the failure's regex or a tolerance, not both: {self}")
        if self.tolerance and (self.strict or set(self.tolerance) != set(self.dtypes)):
            raise ValueError(f"a tolerance is non-strict and gives each of its dtypes (rtol, atol): {self}")
        object.__setattr__(self, "_pattern", re.compile(self.error) if self.error is not None else None)
        if self._pattern is not None and any(self._pattern.search(text) for text in ANY_NUMERIC_FAILURE):
            raise ValueError(f"an expected failure names its failure; one that any numeric difference matches "
                             f"must be a tolerance: {self}")

    def covers(self, entry_key: str, dtype: str, sample: Any) -> bool:
        return (dtype in self.dtypes and any(fnmatch.fnmatchcase(entry_key, p) for p in self.entries)
                and bool(self.when(sample)))

    def explains(self, failure: str) -> bool:
        """Whether `failure` is the expected one; a tolerance explains no failure (the sample is
        judged at it, and must pass there)."""
        return self._pattern is not None and bool(self._pattern.search(failure))

    def tolerance_for(self, dtype: str) -> tuple[float, float] | None:
        """(rtol, atol) the covered samples of `dtype` are judged at, or None (the default)."""
        return self.tolerance.get(dtype)


# The relative tolerance of a bounded expectation per dtype (the sweep's comparison with torch
# before it judged samples by the harness's verdict, at which the bounds were measured): a bounded
# expectation is an override row (op_table.opinfo.judge), its atol the measured bound.
DEFAULT_RTOL = {"float16": 1e-2, "bfloat16": 2e-2}


def bounded(entries: tuple[str, ...], dtype: str, atol: float, reason: str, when: Predicate = every_sample
            ) -> Expectation:
    """Samples of `entries` in `dtype` judged at `atol` (1.5 times the largest error the recorded
    sweep measured on them, rounded up) instead of the sweep's default: a non-strict expectation
    in torch_lib's form, `tolerance={dtype: (rtol, atol)}`."""
    return Expectation(entries, (dtype,), reason, when=when, strict=False,
                       tolerance={dtype: (DEFAULT_RTOL[dtype], atol)})


# -- predicates on OpInfo samples ------------------------------------------------------------


def _sizes(value: Any, rank: int) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value] * rank


def input_is_2d(sample: Any) -> bool:
    return sample.input.dim() == 2


def dropout(sample: Any) -> bool:
    return sample.kwargs.get("dropout_p", 0.0) > 0


def projection(sample: Any) -> bool:
    return getattr(sample.input, "proj_size", 0) > 0


def empty_1d_inference(sample: Any) -> bool:
    return sample.input.dim() == 1 and sample.input.numel() == 0 and not sample.kwargs.get("training", False)


# -- the expectations, grouped by cause -------------------------------------------------------

CAST_WRAP = ("the exporter emits it as is and onnxruntime refuses the graph; extend the Cast wrapping "
             "of exporter/optimize/legalize_dtypes.py to integer types and take this expectation off")
NO_TYPE = r"does not take tensor\("


def no_onnx_type(op: str, dtype: str, entries: tuple[str, ...], when: Predicate = every_sample) -> Expectation:
    """ONNX `op` does not define `dtype` at the sweep's opset."""
    return Expectation(entries, (dtype,), f"ONNX {op} does not define {dtype}: {CAST_WRAP}",
                       rf"(ONNX {op} {NO_TYPE}|Type 'tensor\(\w+\)' of input parameter .* of operator \({op}\))", when)


def no_kernel(op: str, dtype: str, entries: tuple[str, ...], when: Predicate = every_sample) -> Expectation:
    """ONNX defines `op` for `dtype` but onnxruntime's CPU provider has no kernel for it."""
    return Expectation(entries, (dtype,), f"onnxruntime CPU has no {dtype} kernel for {op}: compute it in "
                       f"float32/double with Casts around {op} (exact for this dtype), or take it off when "
                       "onnxruntime gains one", rf"(no {dtype} kernel for {op}|Could not find an implementation for {op})",
                       when)


CONV = ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv1d@*",
        "nn.functional.conv2d@*", "nn.functional.conv3d@*")
CONV_TRANSPOSE = ("nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d")
MAX_POOL = ("nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d")
AVG_POOL = ("nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d")
RESIZE = ("nn.functional.interpolate.bicubic", "nn.functional.interpolate.bilinear", "nn.functional.interpolate.linear",
          "nn.functional.interpolate.trilinear", "nn.functional.upsample_bilinear")

# The int64 forms ONNX does not define at the target opset; their bfloat16 forms are wrapped
# in Casts by the exporter (exporter.optimize.legalize_dtypes), so they run.
UNDEFINED_TYPES: list[Expectation] = [
    no_onnx_type("Conv", "int64", CONV),
    no_onnx_type("ConvTranspose", "int64", CONV_TRANSPOSE),
    no_onnx_type("MaxPool", "int64", MAX_POOL[1:]),  # max_pool1d has no int64 samples
    no_onnx_type("AveragePool", "int64", AVG_POOL),
]

MISSING_KERNELS: list[Expectation] = [
    no_kernel("Gemm", "int64", ("addmm", "addmm.decomposed")),
    no_kernel("Gemm", "int64", ("nn.functional.linear",), input_is_2d),
    no_kernel("DepthToSpace", "int64", ("nn.functional.pixel_shuffle",)),  # zero-size inputs too: it fails at load
    no_kernel("SpaceToDepth", "int64", ("nn.functional.pixel_unshuffle",)),
]

# onnxruntime has no bfloat16 kernel for these ops, so the sweep runs them on onnx.reference,
# whose bfloat16 arithmetic (ml_dtypes) rounds after every elementary step where torch
# accumulates in float32 and rounds once. Judged against the fp64 truth, its sums, cumsums and
# Resizes are within the rule (torch's own bfloat16 error is as large); attention's two chained
# MatMuls are not, on two samples: 8x and 11x torch's error against the truth.
SDPA_BFLOAT16_ATOL = 0.45  # 1.5 x 0.297, the largest |onnx.reference - torch| of the samples it covers
REFERENCE_BFLOAT16: list[Expectation] = [
    bounded(("nn.functional.scaled_dot_product_attention",), "bfloat16", SDPA_BFLOAT16_ATOL,
            "onnx.reference's bfloat16 MatMul rounds every partial sum (torch accumulates in float32): up to 0.3 "
            "from torch on outputs of magnitude ~9; compare against a float32 run of the same graph instead",
            lambda s: not dropout(s)),
]

NOT_EXPORTED: list[Expectation] = [
    Expectation(("nn.functional.scaled_dot_product_attention",), ("float32", "float16", "bfloat16"),
                "dropout_p > 0 is random; the exporter refuses it by design (export the model in eval mode, "
                "where attention dropout is off)", r"dropout_p > 0 is random", dropout),
    Expectation(("module.nn.LSTM",), ("float32",),
                "ONNX LSTM has no projection of the hidden state (proj_size > 0); the exporter refuses it "
                "by design", r"proj_size", projection),
    Expectation(("nn.functional.batch_norm",), ("float32", "float16", "bfloat16"),
                "onnxruntime's BatchNormalization shape inference refuses an empty 1-D input (no channel "
                "axis) in inference: export a 1-D batch norm of an empty tensor as the empty tensor itself",
                r"BatchNormalization", empty_1d_inference),
]

# Numerics of a backend kernel that differ from torch's by a known, measured amount, bounded:
# a regression to garbage fails.
SIGMOID_ATOL = 2.7e-7  # 1.5 x 1.79e-7, the largest |onnxruntime - torch| of float32 sigmoid over x in [-100, 100]
KERNEL_NUMERICS: list[Expectation] = [
    Expectation(("sigmoid",), ("float32", "int64"),
                "onnxruntime's float32 Sigmoid (MLAS's approximation) is within 1.8e-7 of torch in absolute terms "
                "everywhere but not in relative terms in the negative tail (1.5e-4 relative at x = -8.5, 0 below "
                "-18, measured on a grid of [-100, 100]): a 0-d sample there fails the truth rule, which "
                "normalises by the sample's own tiny scale. onnxruntime's kernel to fix, not the export; the bound "
                "fails any regression past 1.5x the measured error",
                tolerance={"float32": (0.0, SIGMOID_ATOL), "int64": (0.0, SIGMOID_ATOL)}, strict=False),
]

EXPECTATIONS: list[Expectation] = [*UNDEFINED_TYPES, *MISSING_KERNELS, *REFERENCE_BFLOAT16, *NOT_EXPORTED,
                                   *KERNEL_NUMERICS]

# (results key, dtype) pairs of the recorded sweep where no sample reaches a registered
# overload, and why. The test fails on any other pair that runs no sample: a capture
# regression must not shrink the sweep silently.
_CLAMP_ONE = ("OpInfo's samples bound with tensors (aten.clamp_min.Tensor / clamp_max.Tensor); the registered "
              "Scalar overload runs them through its kernel form, clamp_min@aten.clamp_min.default")
_AREA = ("mode='area' is adaptive average pooling, captured as aten._adaptive_avg_pool*, not the upsample "
         "overloads this entry is a candidate for; the nn.functional.adaptive_avg_pool* entries run it")
_NEAREST_EXACT = ("mode='nearest-exact' is captured as aten._upsample_nearest_exact*d, an overload the registry "
                  "does not translate (tools/torchlib_gap.py lists it); the upsample_nearest* entries run 'nearest'")
_UNFOLD = ("nn.functional.unfold is im2col (aten.im2col), not Tensor.unfold (aten.unfold), whose name made it a "
           "candidate; the registry does not translate im2col")
_SPLIT = ("split with a list of sizes is captured as aten.split_with_sizes, not aten.split.Tensor; the "
          "split_with_sizes entry runs it")
NO_SAMPLES: dict[tuple[str, str], str] = {
    **{("rand_like", dtype): "rand_like's samples capture as aten.rand_like with a dtype/device the sweep's "
       "direct call does not reach (its recorded rows are empty); the random-op rows check it by distribution"
       for dtype in ("float32", "float16", "bfloat16")},
    **{("normal.in_place", dtype): "Tensor.normal_ (in place, on an input) is not captured as a functional "
       "normal overload; the normal and normal.number_mean entries run those" for dtype in ("float32", "float16", "bfloat16")},
    **{(entry, dtype): _CLAMP_ONE for entry in ("clamp_min", "clamp_max")
       for dtype in ("float32", "float16", "bfloat16", "int64")},
    **{("nn.functional.interpolate.area", dtype): _AREA for dtype in ("float32", "float16", "bfloat16")},
    **{("nn.functional.interpolate.nearest-exact", dtype): _NEAREST_EXACT for dtype in ("float32", "float16", "bfloat16")},
    **{("nn.functional.unfold", dtype): _UNFOLD for dtype in ("float32", "float16", "bfloat16")},
    **{("split.list_args", dtype): _SPLIT for dtype in ("float32", "float16", "bfloat16", "int64")},
}


def expectation_for(entry_key: str, dtype: str, sample: Any) -> Expectation | None:
    """The first expectation that covers the sample, or None."""
    return next((e for e in EXPECTATIONS if e.covers(entry_key, dtype, sample)), None)
