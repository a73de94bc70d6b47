"""Unary math (exporter/translate/symbolics/unary_math.py), variance, cumulative reductions and histc
(exporter/translate/symbolics/statistics.py) and addbmm (linalg.py): one row per form, each with a
dynamic axis."""

from __future__ import annotations

import torch

from ._samples import ints, mask, op, positive, randn
from .schema import OpCase


def batch(count: int = 1, axis: int = 0) -> dict[str, dict[int, str]]:
    """The first `count` inputs share one dynamic axis."""
    return {f"args_{i}": {axis: "batch"} for i in range(count)}


def _unit(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Floats in (-0.9, 0.9): the domain of asin, acos, atanh."""
    return (torch.rand(shape, generator=gen) * 2 - 1) * 0.9


def _specials(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Normal floats with inf, -inf, nan, 0 and -0 planted in the first row."""
    values = randn(gen, *shape)
    values.view(-1)[:5] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0])
    return values


def _tiny(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Magnitudes from 1e-9 to 10 with both signs: where log1p and expm1 lose precision naively."""
    exponents = torch.rand(shape, generator=gen) * 10 - 9
    signs = torch.randint(0, 2, shape, generator=gen) * 2 - 1
    return signs * 10.0**exponents


def _halves(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Multiples of 0.5 (ties for round) and of 0.25."""
    return torch.randint(-12, 13, shape, generator=gen) / 4


def _unary(name: str, fn, inputs, target: str, **fields) -> OpCase:
    return op(name, fn, inputs, [f"aten.{target}"], dynamic_axes=batch(), **fields)


TRIG = [
    _unary("tan", torch.tan, lambda g: (_unit(g, 3, 4),), "tan.default"),
    _unary("asin", torch.asin, lambda g: (_unit(g, 3, 4),), "asin.default"),
    _unary("acos", torch.acos, lambda g: (_unit(g, 3, 4),), "acos.default"),
    _unary("atan", torch.atan, lambda g: (randn(g, 3, 4) * 3,), "atan.default"),
    _unary("sinh", torch.sinh, lambda g: (randn(g, 3, 4),), "sinh.default"),
    _unary("cosh", torch.cosh, lambda g: (randn(g, 3, 4),), "cosh.default"),
    _unary("asinh", torch.asinh, lambda g: (randn(g, 3, 4) * 3,), "asinh.default"),
    _unary("acosh", torch.acosh, lambda g: (positive(g, 3, 4) + 1,), "acosh.default"),
    _unary("atanh", torch.atanh, lambda g: (_unit(g, 3, 4),), "atanh.default"),
    _unary("tan_int_to_float", torch.tan, lambda g: (ints(g, -3, 4, 3, 4),), "tan.default"),
    op("atan2", torch.atan2, lambda g: (randn(g, 3, 4), randn(g, 3, 4)), ["aten.atan2.default"], dynamic_axes=batch(2)),
    op("atan2_axes_and_origin", torch.atan2,
       lambda g: (torch.tensor([[0.0, 1.0, -1.0, 0.0, 2.0, -2.0]] * 2), torch.tensor([[0.0, 0.0, 0.0, -1.0, -3.0, -3.0]] * 2)),
       ["aten.atan2.default"], dynamic_axes=batch(2)),
    op("atan2_broadcast_ints", torch.atan2, lambda g: (ints(g, -3, 4, 3, 4), randn(g, 4)), ["aten.atan2.default"], dynamic_axes=batch(1)),
]

EXP_LOG = [
    _unary("erf", torch.erf, lambda g: (randn(g, 3, 4),), "erf.default"),
    _unary("erfc", torch.erfc, lambda g: (randn(g, 3, 4),), "erfc.default"),
    _unary("exp2", torch.exp2, lambda g: (randn(g, 3, 4) * 3,), "exp2.default"),
    _unary("exp2_int_to_float", torch.exp2, lambda g: (ints(g, -4, 5, 3, 4),), "exp2.default"),
    _unary("log2", torch.log2, lambda g: (positive(g, 3, 4),), "log2.default"),
    _unary("log10", torch.log10, lambda g: (positive(g, 3, 4) * 100,), "log10.default"),
    _unary("log10_int_to_float", torch.log10, lambda g: (ints(g, 1, 1000, 3, 4),), "log10.default"),
    _unary("log1p", torch.log1p, lambda g: (positive(g, 3, 4) - 0.4,), "log1p.default"),
    _unary("log1p_tiny_keeps_precision", torch.log1p, lambda g: (_tiny(g, 3, 8) * 0.09,), "log1p.default", rtol=1e-5, atol=0.0),
    _unary("log1p_special_values", torch.log1p, lambda g: (torch.tensor([[-1.0, float("inf"), 0.0, -0.5, 1e30, float("nan")]] * 2),), "log1p.default"),
    _unary("expm1", torch.expm1, lambda g: (randn(g, 3, 4),), "expm1.default"),
    _unary("expm1_tiny_keeps_precision", torch.expm1, lambda g: (_tiny(g, 3, 8),), "expm1.default", rtol=1e-5, atol=0.0),
    _unary("expm1_special_values", torch.expm1, lambda g: (torch.tensor([[float("inf"), float("-inf"), 0.0, -40.0, 100.0, float("nan")]] * 2),), "expm1.default"),
    _unary("reciprocal", torch.reciprocal, lambda g: (positive(g, 3, 4),), "reciprocal.default"),
    _unary("reciprocal_int_to_float", torch.reciprocal, lambda g: (ints(g, 1, 9, 3, 4),), "reciprocal.default"),
]

ROUNDING = [
    _unary("floor", torch.floor, lambda g: (randn(g, 3, 4) * 3,), "floor.default"),
    _unary("floor_int_is_identity", torch.floor, lambda g: (ints(g, -9, 9, 3, 4),), "floor.default"),
    _unary("ceil", torch.ceil, lambda g: (randn(g, 3, 4) * 3,), "ceil.default"),
    _unary("trunc", torch.trunc, lambda g: (randn(g, 3, 4) * 3,), "trunc.default"),
    _unary("trunc_int_is_identity", torch.trunc, lambda g: (ints(g, -9, 9, 3, 4, dtype=torch.int32),), "trunc.default"),
    _unary("round_half_to_even", torch.round, lambda g: (_halves(g, 3, 8),), "round.default"),
    _unary("round_int_is_identity", torch.round, lambda g: (ints(g, -9, 9, 3, 4),), "round.default"),
    _unary("round_decimals", lambda a: torch.round(a, decimals=2), lambda g: (randn(g, 3, 4) * 10,), "round.decimals"),
    _unary("round_negative_decimals", lambda a: torch.round(a, decimals=-1), lambda g: (randn(g, 3, 4) * 100,), "round.decimals"),
]

SIGNS = [
    _unary("sign_float", torch.sign, lambda g: (_specials(g, 3, 4),), "sign.default"),
    _unary("sign_int", torch.sign, lambda g: (ints(g, -3, 4, 3, 4),), "sign.default"),
    _unary("sign_bool", torch.sign, lambda g: (mask(g, 3, 4),), "sign.default"),
    _unary("signbit_float", torch.signbit, lambda g: (_specials(g, 3, 4).nan_to_num(),), "signbit.default"),
    _unary("signbit_int", torch.signbit, lambda g: (ints(g, -3, 4, 3, 4),), "signbit.default"),
    _unary("isnan", torch.isnan, lambda g: (_specials(g, 3, 4),), "isnan.default"),
    _unary("isnan_int", torch.isnan, lambda g: (ints(g, -3, 4, 3, 4),), "isnan.default"),
    _unary("isinf", torch.isinf, lambda g: (_specials(g, 3, 4),), "isinf.default"),
    _unary("isinf_int", torch.isinf, lambda g: (ints(g, -3, 4, 3, 4),), "isinf.default"),
    _unary("remainder_scalar_tensor", lambda a: torch.remainder(5.5, a), lambda g: (randn(g, 3, 4) * 3,), "remainder.Scalar_Tensor"),
    _unary("remainder_scalar_tensor_ints", lambda a: torch.remainder(7, a),
           lambda g: (torch.randint(1, 5, (3, 4), generator=g) * (torch.randint(0, 2, (3, 4), generator=g) * 2 - 1),),
           "remainder.Scalar_Tensor"),
]

VAR, VAR_MEAN = "aten.var.correction", "aten.var_mean.correction"
STATISTICS = [
    op("var_dim", lambda a: torch.var(a, 1), lambda g: (randn(g, 3, 5),), [VAR], dynamic_axes=batch()),
    op("var_all_unbiased_false", lambda a: torch.var(a, unbiased=False), lambda g: (randn(g, 3, 5) + 10,), [VAR], dynamic_axes=batch()),
    op("var_over_dynamic_axis", lambda a: torch.var(a, 0, keepdim=True), lambda g: (randn(g, 3, 5),), [VAR], dynamic_axes=batch()),
    op("var_correction_2_dims", lambda a: torch.var(a, (0, 2), correction=2), lambda g: (randn(g, 3, 4, 2),), [VAR], dynamic_axes=batch()),
    op("var_float64", lambda a: torch.var(a, -1), lambda g: (randn(g, 3, 5, dtype=torch.float64),), [VAR], dynamic_axes=batch()),
    op("std_is_var_sqrt", lambda a: torch.std(a, 1), lambda g: (randn(g, 3, 5),), [VAR, "aten.sqrt.default"], dynamic_axes=batch()),
    op("var_0d_is_nan", lambda a: torch.var(a[0, 0]) + a, lambda g: (randn(g, 3, 5),), [VAR], dynamic_axes=batch()),
    op("var_mean_dim", lambda a: torch.var_mean(a, 1), lambda g: (randn(g, 3, 5),), [VAR_MEAN], dynamic_axes=batch()),
    op("var_mean_keepdim_all", lambda a: torch.var_mean(a, (0, 1), keepdim=True, correction=0), lambda g: (randn(g, 3, 5),), [VAR_MEAN], dynamic_axes=batch()),
    op("var_mean_0d", lambda a: torch.var_mean(a.sum(), correction=0), lambda g: (randn(g, 3, 5),), [VAR_MEAN], dynamic_axes=batch()),
    op("cumprod_last", lambda a: torch.cumprod(a, -1), lambda g: (positive(g, 3, 5),), ["aten.cumprod.default"], dynamic_axes=batch()),
    op("cumprod_dynamic_axis", lambda a: torch.cumprod(a, 0), lambda g: (positive(g, 4, 3),), ["aten.cumprod.default"], dynamic_axes=batch()),
    op("cumprod_int", lambda a: torch.cumprod(a, 1), lambda g: (ints(g, -3, 4, 3, 5),), ["aten.cumprod.default"], dynamic_axes=batch()),
    op("cumprod_bool_to_int64", lambda a: torch.cumprod(a, 1), lambda g: (mask(g, 3, 5),), ["aten.cumprod.default"], dynamic_axes=batch()),
    op("cumprod_dtype", lambda a: torch.cumprod(a, 1, dtype=torch.float64), lambda g: (randn(g, 3, 4),), ["aten.cumprod.default"], dynamic_axes=batch()),
    op("logcumsumexp_last", lambda a: torch.logcumsumexp(a, -1), lambda g: (randn(g, 3, 5) * 10,), ["aten.logcumsumexp.default"], dynamic_axes=batch()),
    op("logcumsumexp_dynamic_axis", lambda a: torch.logcumsumexp(a, 0), lambda g: (randn(g, 4, 3) * 50,), ["aten.logcumsumexp.default"], dynamic_axes=batch()),
    op("logcumsumexp_infinities", lambda a: torch.logcumsumexp(a, 1),
       lambda g: (torch.tensor([[float("-inf"), 0.0, float("-inf"), 1.0], [2.0, float("-inf"), -1.0, 0.5]]),),
       ["aten.logcumsumexp.default"], dynamic_axes=batch()),
]

CASES: list[OpCase] = [*TRIG, *EXP_LOG, *ROUNDING, *SIGNS, *STATISTICS]

HISTOGRAMS = [
    op("histc_data_range", lambda a: torch.histc(a, 5), lambda g: (randn(g, 3, 8),), ["aten.histc.default"], dynamic_axes=batch()),
    op("histc_fixed_range_drops_outside", lambda a: torch.histc(a, 4, -1.0, 1.0), lambda g: (randn(g, 3, 8),), ["aten.histc.default"], dynamic_axes=batch()),
    op("histc_constant_input", lambda a: torch.histc(a * 0 + 2, 3), lambda g: (randn(g, 3, 4),), ["aten.histc.default"], dynamic_axes=batch()),
    op("histc_double", lambda a: torch.histc(a, 6, 0, 3), lambda g: (positive(g, 3, 8).double(),), ["aten.histc.default"], dynamic_axes=batch()),
]

ADDBMM = "aten.addbmm.default"
MATMULS = [
    op("addbmm", torch.addbmm, lambda g: (randn(g, 3, 5), randn(g, 4, 3, 2), randn(g, 4, 2, 5)), [ADDBMM], dynamic_axes={"args_1": {0: "batch"}, "args_2": {0: "batch"}}),
    op("addbmm_alpha_beta_broadcast", lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=2), lambda g: (randn(g, 5), randn(g, 4, 3, 2), randn(g, 4, 2, 5)), [ADDBMM], dynamic_axes={"args_1": {0: "batch"}, "args_2": {0: "batch"}}),
    op("addbmm_beta_0_ignores_nan", lambda s, a, b: torch.addbmm(s, a, b, beta=0), lambda g: (torch.full((3, 5), float("nan")), randn(g, 4, 3, 2), randn(g, 4, 2, 5)), [ADDBMM], dynamic_axes={"args_1": {0: "batch"}, "args_2": {0: "batch"}}),
]

DET = "aten._linalg_det.default"
MATRICES = [
    op("det", torch.det, lambda g: (randn(g, 3, 3),), [DET]),
    op("linalg_det_batched", torch.linalg.det, lambda g: (randn(g, 2, 4, 4),), [DET], dynamic_axes=batch()),
    op("det_float64", torch.det, lambda g: (randn(g, 3, 3, dtype=torch.float64),), [DET],
       xfail="onnxruntime has no float64 kernel for ONNX Det (NOT_IMPLEMENTED at load; its float32 kernel works): "
             "the export is valid ONNX; run a float64 det on onnx.reference, or make the model compute it in float32",
       fails_with=r"NOT_IMPLEMENTED : Could not find an implementation for Det\(\d+\)"),
    op("view_copy", lambda a: torch.view_copy(a, [a.shape[0], 2, 2]), lambda g: (randn(g, 3, 4),), ["aten.view_copy.default"], dynamic_axes=batch()),
]

CASES += [*HISTOGRAMS, *MATMULS, *MATRICES]

HALF = [  # float16 at opset 18: no IsInf (which takes float16 only from opset 20) in these graphs
    _unary("log1p_float16", torch.log1p, lambda g: (positive(g, 3, 4).half(),), "log1p.default", atol=1e-3, rtol=1e-3),
    _unary("expm1_float16", torch.expm1, lambda g: (randn(g, 3, 4, dtype=torch.float16),), "expm1.default", atol=1e-3, rtol=1e-3),
    _unary("isinf_float16", torch.isinf, lambda g: (_specials(g, 3, 4).half(),), "isinf.default"),
    op("var_mean_of_empty_is_nan", lambda a: torch.var_mean(a[:, :0], 1), lambda g: (randn(g, 3, 4),), [VAR_MEAN], dynamic_axes=batch()),
]

CASES += HALF
