"""Element-wise arithmetic, comparisons, activations and casts: one row per form."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import ints, mask, module_op, nonzero_ints, op, positive, randn, with_nans
from .schema import OpCase

ADD, SUB, MUL = "aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor"
DIV, DIV_MODE = "aten.div.Tensor", "aten.div.Tensor_mode"

ARITHMETIC = [
    op("add_tensor_broadcast", torch.add, lambda g: (randn(g, 2, 3), randn(g, 3)), [ADD], seed_ops=("add",)),
    op("add_alpha", lambda a, b: torch.add(a, b, alpha=2), lambda g: (randn(g, 2, 3), randn(g, 2, 3)), [ADD], seed_ops=("add",)),
    op("add_alpha_float", lambda a, b: torch.add(a, b, alpha=-0.5), lambda g: (randn(g, 4), randn(g, 4)), [ADD], seed_ops=("add",)),
    op("add_python_scalar", lambda a: a + 2.5, lambda g: (randn(g, 2, 3),), [ADD], seed_ops=("add",)),
    op("add_scalar_first", lambda a: 3 + a, lambda g: (ints(g, -5, 5, 2, 3),), [ADD], seed_ops=("add",)),
    op("add_int_tensor_float_scalar", lambda a: a + 0.5, lambda g: (ints(g, -5, 5, 2, 3),), [ADD], seed_ops=("add",)),
    op("add_int_float_tensors", torch.add, lambda g: (ints(g, -5, 5, 2, 3), randn(g, 2, 3)), [ADD], seed_ops=("add",)),
    op("add_int32_int64", torch.add, lambda g: (ints(g, -5, 5, 3, dtype=torch.int32), ints(g, -5, 5, 3)), [ADD], seed_ops=("add",)),
    op("add_0d_double_keeps_float", torch.add, lambda g: (randn(g, 3), randn(g, dtype=torch.float64)), [ADD], seed_ops=("add",)),
    op("add_int_alpha", lambda a, b: torch.add(a, b, alpha=3), lambda g: (ints(g, -5, 5, 4), ints(g, -5, 5, 4)), [ADD], seed_ops=("add",)),
    op("add_bools_is_or", torch.add, lambda g: (mask(g, 6), mask(g, 6)), [ADD], seed_ops=("add",)),
    op("add_Scalar_overload", lambda a: torch.ops.aten.add.Scalar(a, 2, 3), lambda g: (randn(g, 4),), ["aten.add.Scalar"], seed_ops=("add",)),
    op("sub_tensor", torch.sub, lambda g: (randn(g, 2, 3), randn(g, 1, 3)), [SUB], seed_ops=("sub",)),
    op("sub_alpha", lambda a, b: torch.sub(a, b, alpha=2), lambda g: (randn(g, 2, 3), randn(g, 2, 3)), [SUB], seed_ops=("sub",)),
    op("sub_int_float_scalar", lambda a: a - 1.5, lambda g: (ints(g, -5, 5, 4),), [SUB], seed_ops=("sub",)),
    op("rsub_python_scalar", lambda a: 2 - a, lambda g: (randn(g, 2, 3),), [SUB], seed_ops=("sub",)),
    op("rsub_alpha", lambda a, b: torch.rsub(a, b, alpha=3), lambda g: (randn(g, 4), randn(g, 4)), [SUB], seed_ops=("sub",)),
    op("sub_Scalar_overload", lambda a: torch.ops.aten.sub.Scalar(a, 2, 2), lambda g: (ints(g, -5, 5, 4),), ["aten.sub.Scalar"], seed_ops=("sub",)),
    op("mul_tensor", torch.mul, lambda g: (randn(g, 2, 3), randn(g, 2, 1)), [MUL], seed_ops=("mul",)),
    op("mul_int_scalar", lambda a: a * 3, lambda g: (ints(g, -5, 5, 2, 3),), [MUL], seed_ops=("mul",)),
    op("mul_int_float_tensors", torch.mul, lambda g: (ints(g, -5, 5, 3), randn(g, 3)), [MUL], seed_ops=("mul",)),
    op("mul_bools_is_and", torch.mul, lambda g: (mask(g, 6), mask(g, 6)), [MUL], seed_ops=("mul",)),
    op("mul_Scalar_overload", lambda a: torch.ops.aten.mul.Scalar(a, 0.5), lambda g: (randn(g, 4),), ["aten.mul.Scalar"], seed_ops=("mul",)),
    op("div_float", torch.div, lambda g: (randn(g, 2, 3), positive(g, 2, 3)), [DIV], seed_ops=("div",)),
    op("div_ints_true_division", torch.div, lambda g: (ints(g, -9, 10, 6), nonzero_ints(g, 6)), [DIV], seed_ops=("div",)),
    op("div_python_scalar", lambda a: a / 4, lambda g: (ints(g, -9, 10, 6),), [DIV], seed_ops=("div",)),
    op("div_trunc_ints", lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda g: (ints(g, -9, 10, 12), nonzero_ints(g, 12)), [DIV_MODE], seed_ops=("div",)),
    op("div_floor_ints", lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda g: (ints(g, -9, 10, 12), nonzero_ints(g, 12)), [DIV_MODE], seed_ops=("div",)),
    op("div_floor_int32", lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda g: (ints(g, -9, 10, 12, dtype=torch.int32), nonzero_ints(g, 12, dtype=torch.int32)), [DIV_MODE], seed_ops=("div",)),
    op("div_trunc_floats", lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda g: (randn(g, 12) * 5, randn(g, 12)), [DIV_MODE], seed_ops=("div",)),
    op("div_floor_floats", lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda g: (randn(g, 12) * 5, randn(g, 12)), [DIV_MODE], seed_ops=("div",)),
    # 0.3 // 0.1 is 2 in torch and Python (fmod-based), where Floor(0.3 / 0.1) is 3
    op(
        "div_floor_floats_exact", lambda a, b: a // b,
        lambda g: (torch.tensor([0.3, -0.3, 1.0, 7.0, -7.5, 0.0, -0.0, 2.0]), torch.tensor([0.1, 0.1, 0.1, 2.0, 2.0, -3.0, 3.0, 0.0])),
        [DIV_MODE], seed_ops=("div",),
    ),
    op("floordiv_operator_ints", lambda a, b: a // b, lambda g: (ints(g, -9, 10, 12), nonzero_ints(g, 12)), [DIV_MODE], seed_ops=("div",)),
    op("div_trunc_int_scalar", lambda a: torch.div(a, -3, rounding_mode="trunc"), lambda g: (ints(g, -9, 10, 12),), [DIV_MODE], seed_ops=("div",)),
    op("div_Scalar_overload", lambda a: torch.ops.aten.div.Scalar(a, 4), lambda g: (randn(g, 4),), ["aten.div.Scalar"], seed_ops=("div",)),
    op(
        "div_Scalar_mode_overload", lambda a: torch.ops.aten.div.Scalar_mode(a, -3, rounding_mode="floor"),
        lambda g: (ints(g, -9, 10, 12),), ["aten.div.Scalar_mode"], seed_ops=("div",),
    ),
]

UNARY = [
    op("neg_float", torch.neg, lambda g: (randn(g, 2, 3),), ["aten.neg.default"], seed_ops=("neg",)),
    op("neg_int", torch.neg, lambda g: (ints(g, -5, 5, 6),), ["aten.neg.default"], seed_ops=("neg",)),
    op("abs_float", torch.abs, lambda g: (randn(g, 2, 3),), ["aten.abs.default"], seed_ops=("abs",)),
    op("abs_int32", torch.abs, lambda g: (ints(g, -5, 5, 6, dtype=torch.int32),), ["aten.abs.default"], seed_ops=("abs",)),
    op("sqrt_float", torch.sqrt, lambda g: (positive(g, 2, 3),), ["aten.sqrt.default"], seed_ops=("sqrt",)),
    op("sqrt_int_to_float", torch.sqrt, lambda g: (ints(g, 0, 9, 6),), ["aten.sqrt.default"], seed_ops=("sqrt",)),
    op("exp_float", torch.exp, lambda g: (randn(g, 2, 3),), ["aten.exp.default"], seed_ops=("exp",)),
    op("exp_int_to_float", torch.exp, lambda g: (ints(g, -3, 3, 6),), ["aten.exp.default"], seed_ops=("exp",)),
    op("tanh_float", torch.tanh, lambda g: (randn(g, 2, 3),), ["aten.tanh.default"], seed_ops=("tanh",)),
    op("sigmoid_float", torch.sigmoid, lambda g: (randn(g, 2, 3),), ["aten.sigmoid.default"], seed_ops=("sigmoid",)),
    op("sigmoid_int_to_float", torch.sigmoid, lambda g: (ints(g, -3, 3, 6),), ["aten.sigmoid.default"], seed_ops=("sigmoid",)),
]

POW = ("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
POWERS = [
    op("pow_tensor_int_scalar", lambda a: a**2, lambda g: (randn(g, 2, 3),), [POW[0]], seed_ops=("pow",)),
    op("pow_tensor_float_scalar", lambda a: a**1.5, lambda g: (positive(g, 2, 3),), [POW[0]], seed_ops=("pow",)),
    op("pow_int_tensor_int_scalar", lambda a: a**3, lambda g: (ints(g, -4, 4, 6),), [POW[0]], seed_ops=("pow",)),
    op("pow_int_tensor_float_scalar", lambda a: a**0.5, lambda g: (ints(g, 0, 9, 6),), [POW[0]], seed_ops=("pow",)),
    op("pow_tensor_tensor", torch.pow, lambda g: (positive(g, 2, 3), randn(g, 2, 3)), [POW[1]], seed_ops=("pow",)),
    op("pow_float_base_int_exponent", torch.pow, lambda g: (randn(g, 6), ints(g, 0, 4, 6)), [POW[1]], seed_ops=("pow",)),
    op("pow_scalar_base", lambda a: 2**a, lambda g: (randn(g, 2, 3),), [POW[2]], seed_ops=("pow",)),
    op("pow_float_scalar_int_exponent", lambda a: 1.5**a, lambda g: (ints(g, -3, 4, 6),), [POW[2]], seed_ops=("pow",)),
]

CLAMP, CLAMP_T = "aten.clamp.default", "aten.clamp.Tensor"
CLAMPS = [
    op("clamp_both", lambda a: a.clamp(-0.5, 0.5), lambda g: (randn(g, 2, 3),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_min_only", lambda a: a.clamp(min=0.1), lambda g: (randn(g, 2, 3),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_max_only", lambda a: a.clamp(max=-0.1), lambda g: (randn(g, 2, 3),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_int", lambda a: a.clamp(-2, 3), lambda g: (ints(g, -6, 6, 8),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_int_float_bounds", lambda a: a.clamp(-1.5, 2.5), lambda g: (ints(g, -6, 6, 8),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_nan_propagates", lambda a: a.clamp(-0.5, 0.5), lambda g: (with_nans(g, 12),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_tensor_nan_propagates", lambda a, lo: a.clamp(lo), lambda g: (with_nans(g, 12), with_nans(g, 12)), [CLAMP_T], seed_ops=("clamp",)),
    op("clamp_min_above_max", lambda a: a.clamp(0.5, -0.5), lambda g: (randn(g, 6),), [CLAMP], seed_ops=("clamp",)),
    op("clamp_tensor_bounds", lambda a, lo, hi: a.clamp(lo, hi), lambda g: (randn(g, 2, 3), randn(g, 3) - 1, randn(g, 2, 1) + 1), [CLAMP_T], seed_ops=("clamp",)),
    op("clamp_tensor_min_only", lambda a, lo: torch.clamp(a, min=lo), lambda g: (randn(g, 2, 3), randn(g, 2, 3)), [CLAMP_T], seed_ops=("clamp",)),
    op("clamp_tensor_max_only", lambda a, hi: torch.clamp(a, max=hi), lambda g: (randn(g, 2, 3), randn(g, 3)), [CLAMP_T], seed_ops=("clamp",)),
    op("clamp_min_function", lambda a: torch.clamp_min(a, 0.2), lambda g: (randn(g, 2, 3),), ["aten.clamp_min.default"], seed_ops=("clamp",)),
    op("clamp_max_function", lambda a: torch.clamp_max(a, 0.2), lambda g: (randn(g, 2, 3),), ["aten.clamp_max.default"], seed_ops=("clamp",)),
    op("clamp_min_tensor_function", torch.clamp_min, lambda g: (randn(g, 2, 3), randn(g, 3)), [CLAMP_T], seed_ops=("clamp",)),
    op("maximum", torch.maximum, lambda g: (randn(g, 2, 3), randn(g, 3)), ["aten.maximum.default"], seed_ops=("max",)),
    op("minimum", torch.minimum, lambda g: (randn(g, 2, 3), randn(g, 3)), ["aten.minimum.default"], seed_ops=("min",)),
    op("maximum_int32_int64", torch.maximum, lambda g: (ints(g, -5, 5, 6, dtype=torch.int32), ints(g, -5, 5, 6)), ["aten.maximum.default"], seed_ops=("max",)),
    op("maximum_bools", torch.maximum, lambda g: (mask(g, 6), mask(g, 6)), ["aten.maximum.default"], seed_ops=("max",)),
    op("minimum_bools", torch.minimum, lambda g: (mask(g, 6), mask(g, 6)), ["aten.minimum.default"], seed_ops=("min",)),
    op("maximum_nan_propagates", torch.maximum, lambda g: (with_nans(g, 12), with_nans(g, 12)), ["aten.maximum.default"], seed_ops=("max",)),
    op("minimum_nan_propagates", torch.minimum, lambda g: (with_nans(g, 12), with_nans(g, 12)), ["aten.minimum.default"], seed_ops=("min",)),
    op("max_binary", torch.max, lambda g: (randn(g, 2, 3), randn(g, 2, 3)), ["aten.max.other"], seed_ops=("max",)),
    op("min_binary", torch.min, lambda g: (randn(g, 2, 3), randn(g, 2, 3)), ["aten.min.other"], seed_ops=("min",)),
]


def _compare_rows(name: str, fn) -> list[OpCase]:
    tensor, scalar = f"aten.{name}.Tensor", f"aten.{name}.Scalar"
    seed = ("eq",) if name == "eq" else ()
    return [
        op(f"{name}_tensor_int", fn, lambda g: (ints(g, -2, 2, 12), ints(g, -2, 2, 12)), [tensor], seed_ops=seed),
        op(f"{name}_tensor_float_broadcast", fn, lambda g: (randn(g, 2, 3), randn(g, 3)), [tensor], seed_ops=seed),
        op(f"{name}_int_vs_float_tensor", fn, lambda g: (ints(g, -2, 2, 12), ints(g, -2, 2, 12).float() + 0.5), [tensor], seed_ops=seed),
        op(f"{name}_bools", fn, lambda g: (mask(g, 6), mask(g, 6)), [tensor], seed_ops=seed),
        op(f"{name}_scalar", lambda a: fn(a, 1), lambda g: (ints(g, -2, 3, 12),), [scalar], seed_ops=seed),
        # 2.5 against ints must compare in float (torch's promotion), never truncate 2.5 to 2
        op(f"{name}_int_vs_float_scalar", lambda a: fn(a, 2.5), lambda g: (ints(g, 0, 5, 12),), [scalar], seed_ops=seed),
    ]


COMPARISONS = [
    *_compare_rows("eq", torch.eq), *_compare_rows("ne", torch.ne), *_compare_rows("lt", torch.lt),
    *_compare_rows("le", torch.le), *_compare_rows("gt", torch.gt), *_compare_rows("ge", torch.ge),
    # a 0-d float tensor promotes an int tensor to float (a category change); a 0-d float64 does
    # not widen a float32 tensor, so 0.1 compares as float32(0.1)
    op("lt_int_vs_0d_float_tensor", lambda a: a < torch.tensor(2.5), lambda g: (ints(g, 0, 5, 12),), ["aten.lt.Tensor"]),
    op("eq_float_vs_0d_double_tensor", lambda a: a == torch.tensor(0.1, dtype=torch.float64), lambda g: (torch.full((3,), 0.1),), ["aten.eq.Tensor"], seed_ops=("eq",)),
    op("where_tensors", lambda c, a, b: torch.where(c, a, b), lambda g: (mask(g, 2, 3), randn(g, 2, 3), randn(g, 3)), ["aten.where.self"]),
    op("where_promotes", lambda c, a, b: torch.where(c, a, b), lambda g: (mask(g, 6), ints(g, -5, 5, 6), randn(g, 6)), ["aten.where.self"]),
    op("where_scalar_other", lambda a: torch.where(a > 0, a, 0.0), lambda g: (randn(g, 2, 3),), ["aten.where.self", "aten.scalar_tensor.default", "aten.gt.Scalar"]),
    op("masked_fill", lambda a: a.masked_fill(a < 0, -1.0), lambda g: (randn(g, 2, 3),), ["aten.where.self", "aten.lt.Scalar"]),
]

ACTIVATIONS = [
    op("relu", torch.relu, lambda g: (randn(g, 2, 3),), ["aten.relu.default"]),
    op("relu6", F.relu6, lambda g: (randn(g, 2, 3) * 5,), ["aten.relu6.default"]),
    op("hardtanh", lambda a: F.hardtanh(a, -0.5, 0.8), lambda g: (randn(g, 2, 3),), ["aten.hardtanh.default"]),
    op("leaky_relu", lambda a: F.leaky_relu(a, 0.2), lambda g: (randn(g, 2, 3),), ["aten.leaky_relu.default"], seed_ops=("leaky_relu",)),
    op("leaky_relu_default_slope", F.leaky_relu, lambda g: (randn(g, 2, 3),), ["aten.leaky_relu.default"], seed_ops=("leaky_relu",)),
    op("elu", F.elu, lambda g: (randn(g, 2, 3),), ["aten.elu.default"], seed_ops=("elu",)),
    op("elu_alpha", lambda a: F.elu(a, alpha=0.5), lambda g: (randn(g, 2, 3),), ["aten.elu.default"], seed_ops=("elu",)),
    op("selu_scaled_elu", F.selu, lambda g: (randn(g, 2, 3),), ["aten.elu.default"], seed_ops=("elu",)),
    op("threshold", lambda a: F.threshold(a, 0.5, -1.0), lambda g: (randn(g, 2, 3),), ["aten.threshold.default"], seed_ops=("threshold",)),
    op("threshold_zero", lambda a: F.threshold(a, 0.0, 0.0), lambda g: (randn(g, 2, 3),), ["aten.threshold.default"], seed_ops=("threshold",)),
    op("threshold_int", lambda a: F.threshold(a, 1, 7), lambda g: (ints(g, -3, 4, 8),), ["aten.threshold.default"], seed_ops=("threshold",)),
    module_op("prelu_shared_weight", lambda: torch.nn.PReLU(), lambda g: (randn(g, 2, 3, 4),), ["aten.prelu.default"], seed_ops=("prelu",)),
    module_op("prelu_per_channel", lambda: _prelu(3), lambda g: (randn(g, 2, 3, 4, 2),), ["aten.prelu.default"], seed_ops=("prelu",)),
    module_op("prelu_per_channel_2d", lambda: _prelu(3), lambda g: (randn(g, 4, 3),), ["aten.prelu.default"], seed_ops=("prelu",)),
    module_op("prelu_1d_input", lambda: torch.nn.PReLU(), lambda g: (randn(g, 5),), ["aten.prelu.default"], seed_ops=("prelu",)),
    op("glu_last_dim", F.glu, lambda g: (randn(g, 2, 3, 4),), ["aten.glu.default"], seed_ops=("glu",)),
    op("glu_dim1", lambda a: F.glu(a, 1), lambda g: (randn(g, 2, 6, 3),), ["aten.glu.default"], seed_ops=("glu",)),
    op("gelu", F.gelu, lambda g: (randn(g, 2, 3),), ["aten.gelu.default"], opsets=(17, 18, 20, 26)),
    op("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), lambda g: (randn(g, 2, 3),), ["aten.gelu.default"], opsets=(17, 18, 20, 26)),
    op("silu_decomposed", F.silu, lambda g: (randn(g, 2, 3),), ["aten.sigmoid.default", MUL]),
]

COPIES = [
    op("to_int32", lambda a: a.to(torch.int32), lambda g: (randn(g, 2, 3) * 4,), ["aten._to_copy.default", "aten._assert_tensor_metadata.default"]),
    op("to_float_from_int", lambda a: a.float(), lambda g: (ints(g, -5, 5, 6),), ["aten._to_copy.default"]),
    op("to_bool", lambda a: a.bool(), lambda g: (ints(g, -1, 2, 6),), ["aten._to_copy.default"]),
    op("to_float64", lambda a: a.double() * 2, lambda g: (randn(g, 6),), ["aten._to_copy.default"]),
    op("clone", lambda a: a.clone() + 1, lambda g: (randn(g, 2, 3),), ["aten.clone.default"]),
    op("contiguous_is_clone", lambda a: a.t().contiguous(), lambda g: (randn(g, 2, 3),), ["aten.clone.default"]),
    # capture drops `detach` (a local decomposition: detach is its input), so no alias is left
    op("detach_is_dropped", lambda a: a.detach() * 2, lambda g: (randn(g, 2, 3),), ["aten.mul.Tensor"]),
    op("alias", lambda a: torch.ops.aten.alias(a) * 2, lambda g: (randn(g, 2, 3),), ["aten.alias.default"]),
]


def _prelu(channels: int) -> torch.nn.Module:
    module = torch.nn.PReLU(channels)
    with torch.no_grad():
        module.weight.copy_(torch.linspace(-0.5, 0.5, channels))
    return module


CASES: list[OpCase] = [*ARITHMETIC, *UNARY, *POWERS, *CLAMPS, *COMPARISONS, *ACTIVATIONS, *COPIES]

