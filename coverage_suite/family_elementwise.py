"""Elementwise families: unary ops, binary ops with broadcasting and dtypes, comparisons and logic."""

from __future__ import annotations

import torch

from .case import B, D, F, I, P, Spec, U, Table

unary = Table("unary")
# op name -> (function, input kind): the kind keeps the input inside the op's domain
UNARY = {
    "abs": (torch.abs, F), "neg": (torch.neg, F), "exp": (torch.exp, F), "exp2": (torch.exp2, F),
    "expm1": (torch.expm1, F), "log": (torch.log, P), "log1p": (torch.log1p, P), "log2": (torch.log2, P),
    "log10": (torch.log10, P), "sqrt": (torch.sqrt, P), "rsqrt": (torch.rsqrt, P), "sin": (torch.sin, F),
    "cos": (torch.cos, F), "tan": (torch.tan, U), "asin": (torch.asin, U), "acos": (torch.acos, U),
    "atan": (torch.atan, F), "sinh": (torch.sinh, F), "cosh": (torch.cosh, F), "tanh": (torch.tanh, F),
    "asinh": (torch.asinh, F), "acosh": (lambda x: torch.acosh(x + 1.0), P), "atanh": (torch.atanh, U),
    "sigmoid": (torch.sigmoid, F), "relu": (torch.relu, F), "floor": (torch.floor, F), "ceil": (torch.ceil, F),
    "round": (lambda x: torch.round(x * 3.3), F), "round_decimals": (lambda x: torch.round(x, decimals=2), F),
    "trunc": (torch.trunc, F), "frac": (torch.frac, F), "sign": (torch.sign, F), "sgn": (torch.sgn, F),
    "reciprocal": (torch.reciprocal, P), "square": (torch.square, F), "erf": (torch.erf, F),
    "erfinv": (torch.erfinv, U), "logit": (lambda x: torch.logit(x * 0.5 + 0.5), U),
    "isnan": (lambda x: torch.isnan(torch.log(x)), F), "isinf": (lambda x: torch.isinf(1.0 / (x > 0).float()), F),
    "isfinite": (lambda x: torch.isfinite(torch.log(x)), F), "signbit": (torch.signbit, F),
    "nan_to_num": (lambda x: torch.nan_to_num(torch.log(x), nan=0.5, neginf=-3.0), F),
    "clamp_both": (lambda x: torch.clamp(x, -0.5, 0.7), F), "clamp_min": (lambda x: torch.clamp(x, min=0.1), F),
    "clamp_max": (lambda x: torch.clamp(x, max=0.2), F), "deg2rad": (torch.deg2rad, F),
    "rad2deg": (torch.rad2deg, F), "positive": (lambda x: +x * 1.0, F), "lgamma": (torch.lgamma, P),
    "digamma": (torch.digamma, P), "sinc": (torch.sinc, F), "i0": (torch.i0, F),
}
for _name, (_fn, _kind) in UNARY.items():
    unary.fn(f"{_name}_f32", f"torch.{_name} on a float32 (3, 4, 5) tensor", _fn, _kind(3, 4, 5))
for _name in ("abs", "neg", "exp", "sqrt", "tanh", "sigmoid", "floor", "sin", "log"):
    _fn = UNARY[_name][0]
    unary.fn(f"{_name}_f64", f"torch.{_name} on a float64 tensor (of |x| + 0.5)",
             lambda x, f=_fn: f(x.abs() + 0.5), D(4, 6))
for _name, _fn in {"abs": torch.abs, "neg": torch.neg, "sign": torch.sign, "square": torch.square,
                   "bitwise_not": torch.bitwise_not}.items():
    unary.fn(f"{_name}_i64", f"torch.{_name} on an int64 tensor", _fn, I(4, 6, low=-5, high=5))
unary.fn("logical_not_bool", "torch.logical_not on a bool tensor", torch.logical_not, B(4, 6))
unary.fn("bitwise_not_bool", "~ on a bool tensor", torch.bitwise_not, B(4, 6))
unary.fn("abs_i32", "torch.abs on an int32 tensor", torch.abs, Spec((4, 6), "int32", -5, 5))

binary = Table("binary")
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "fmax": torch.fmax, "fmin": torch.fmin,
}
# broadcast name -> (shape of x, shape of y)
BROADCASTS = {"same": ((3, 4, 5), (3, 4, 5)), "row": ((3, 4, 5), (5,)), "col": ((3, 4, 1), (1, 4, 5)),
              "scalar_tensor": ((3, 4, 5), ())}
for _name, _fn in BINARY.items():
    for _b, (_xs, _ys) in BROADCASTS.items():
        binary.fn(f"{_name}_{_b}", f"torch.{_name} of {_xs} and {_ys} (broadcast {_b})", _fn, F(*_xs), F(*_ys))
for _name, _fn in {"pow": torch.pow, "remainder": torch.remainder, "fmod": torch.fmod,
                   "floor_divide": torch.floor_divide, "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
                   "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"), "xlogy": torch.xlogy}.items():
    for _b, (_xs, _ys) in list(BROADCASTS.items())[:3]:
        binary.fn(f"{_name}_{_b}", f"{_name} of positive {_xs} and {_ys}", _fn, P(*_xs), P(*_ys))
for _name, _fn in {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
                   "floor_divide": torch.floor_divide, "remainder": torch.remainder,
                   "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
                   "shift_left": torch.bitwise_left_shift, "shift_right": torch.bitwise_right_shift,
                   "true_divide": torch.true_divide}.items():
    binary.fn(f"{_name}_i64", f"{_name} of two int64 tensors (broadcast row)", _fn, I(4, 6, low=1, high=9), I(6, low=1, high=4))
binary.fn("add_i64_f32", "int64 + float32 (type promotion)", torch.add, I(4, 6), F(4, 6))
binary.fn("mul_f64_f32", "float64 * float32 (type promotion)", torch.mul, D(4, 6), F(4, 6))
binary.fn("add_bool_f32", "bool + float32 (type promotion)", torch.add, B(4, 6), F(4, 6))
binary.fn("and_bool", "bool & bool", torch.bitwise_and, B(4, 6), B(4, 6))
SCALARS = {
    "add_scalar": lambda x: x + 2.5, "rsub_scalar": lambda x: 1.0 - x, "mul_scalar": lambda x: x * -0.5,
    "div_scalar": lambda x: x / 3.0, "rdiv_scalar": lambda x: 2.0 / x, "pow_scalar_2": lambda x: x ** 2,
    "pow_scalar_half": lambda x: x ** 0.5, "rpow_scalar": lambda x: 2.0 ** x, "pow_int_exponent_3": lambda x: x ** 3,
    "add_alpha": lambda x: torch.add(x, x * 0.5, alpha=2.0), "sub_alpha": lambda x: torch.sub(x, 1.5, alpha=3),
    "lerp_scalar": lambda x: torch.lerp(x, x * 2, 0.3), "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "addcdiv": lambda x: torch.addcdiv(x, x, x + 3.0, value=0.5),
}
for _name, _fn in SCALARS.items():
    binary.fn(_name, f"{_name.replace('_', ' ')} on a positive float32 tensor", _fn, P(3, 4, 5))
binary.fn("lerp_tensor", "torch.lerp with a tensor weight", lambda x, y: torch.lerp(x, y, torch.sigmoid(y)), F(3, 4), F(3, 4))
binary.fn("where_broadcast", "torch.where(x > 0, x, y) with y broadcast", lambda x, y: torch.where(x > 0, x, y), F(3, 4), F(4))

compare = Table("compare")
COMPARISONS = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
for _name, _fn in COMPARISONS.items():
    compare.fn(f"{_name}_tensor", f"torch.{_name} of two float tensors (rounded, so some are equal)",
               lambda x, y, f=_fn: f(torch.round(x), torch.round(y)), F(4, 6), F(4, 6))
    compare.fn(f"{_name}_broadcast", f"torch.{_name} broadcasting (4, 1) against (6,)", _fn, F(4, 1), F(6))
    compare.fn(f"{_name}_scalar", f"torch.{_name} against the scalar 0.25", lambda x, f=_fn: f(x, 0.25), F(4, 6))
    compare.fn(f"{_name}_int", f"torch.{_name} of two int64 tensors", _fn, I(4, 6), I(4, 6))
for _name, _fn in {"logical_and": torch.logical_and, "logical_or": torch.logical_or,
                   "logical_xor": torch.logical_xor}.items():
    compare.fn(f"{_name}_bool", f"torch.{_name} of two bool tensors", _fn, B(4, 6), B(4, 6))
    compare.fn(f"{_name}_float", f"torch.{_name} of two float tensors (nonzero is true)",
               lambda x, y, f=_fn: f(torch.relu(x), torch.relu(y)), F(4, 6), F(4, 6))
compare.fn("where_scalar", "torch.where with a scalar branch", lambda x: torch.where(x > 0, x, 0.0), F(4, 6))
compare.fn("where_bool_input", "torch.where with a bool input condition", torch.where, B(4, 6), F(4, 6), F(4, 6))
compare.fn("isclose", "torch.isclose of two rounded tensors", lambda x, y: torch.isclose(torch.round(x), torch.round(y)),
           F(4, 6), F(4, 6))
compare.fn("eq_bool", "== of two bool tensors", torch.eq, B(4, 6), B(4, 6))
compare.fn("masked_fill_compare", "masked_fill where x < y", lambda x, y: x.masked_fill(x < y, -1.0), F(4, 6), F(4, 6))

TABLES = (unary, binary, compare)
