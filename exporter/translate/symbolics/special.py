"""Special functions ONNX has no op for: `special_erfcx`, the scaled complementary error function.

erfcx(x) = exp(x^2) erfc(x). Computing it as written loses everything for large x (erfc
underflows while exp overflows) and most digits for moderate x (1 - erf(x) cancels), so it is
built from two forms that are stable where they are used, in float64 whatever the input dtype,
and picked with Where:

- |x| < SERIES_LIMIT: the power series erfcx(x) = sum_n (-x)^n / Gamma(n/2 + 1), SERIES_TERMS
  terms (Horner);
- x >= SERIES_LIMIT: Laplace's continued fraction
  erfcx(x) = 1/sqrt(pi) / (x + (1/2)/(x + (2/2)/(x + (3/2)/(x + ...)))), FRACTION_TERMS deep;
- x <= -SERIES_LIMIT: the reflection erfcx(x) = 2 exp(x^2) - erfcx(-x), which overflows to inf
  where torch's does.

The term counts were chosen against mpmath at 40 digits: at the switch point |x| = 2, the
worst place for both forms, the series' relative error is 1e-14 and the fraction's 2e-15, and
both shrink away from it (tests/test_special.py measures the whole range against mpmath and
torch in float32 and float64).
"""

from __future__ import annotations

import math

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to

SERIES_LIMIT = 2.0
SERIES_TERMS = 60
FRACTION_TERMS = 48


def _series(g: Graph, x: Value) -> Value:
    """sum_{n <= SERIES_TERMS} (-x)^n / Gamma(n/2 + 1), by Horner's rule in -x."""
    minus_x = g.op("Neg", x)
    total = g.constant(1 / math.gamma(SERIES_TERMS / 2 + 1), torch.float64)
    for n in range(SERIES_TERMS - 1, -1, -1):
        total = g.op("Add", g.op("Mul", total, minus_x), g.constant(1 / math.gamma(n / 2 + 1), torch.float64))
    return total


def _continued_fraction(g: Graph, x: Value) -> Value:
    """1/sqrt(pi) / (x + (1/2)/(x + (2/2)/(x + ...))), evaluated from the deepest level up."""
    tail = g.constant(0.0, torch.float64)
    for k in range(FRACTION_TERMS, 0, -1):
        tail = g.op("Div", g.constant(k / 2, torch.float64), g.op("Add", x, tail))
    return g.op("Div", g.constant(1 / math.sqrt(math.pi), torch.float64), g.op("Add", x, tail))


@symbolic("aten::special_erfcx")
def special_erfcx(g: Graph, self: Value) -> Value:
    """special_erfcx(Tensor self) -> Tensor

    The series near 0, the continued fraction for large x, the reflection for large -x (see
    the module's docstring), in float64 and rounded once to the result's dtype. Integer inputs
    compute in the result's float dtype, as torch promotes them.
    """
    x = cast_to(g, self, torch.float64)
    limit = g.constant(SERIES_LIMIT, torch.float64)
    magnitude = g.op("Abs", x)
    near = g.op("Min", g.op("Max", x, g.op("Neg", limit)), limit)  # the series' branch stays finite elsewhere
    series = _series(g, near)
    fraction = _continued_fraction(g, g.op("Max", magnitude, limit))
    reflected = g.op("Sub", g.op("Mul", g.constant(2.0, torch.float64), g.op("Exp", g.op("Mul", x, x))), fraction)
    out = g.op("Where", g.op("Less", magnitude, limit), series,
               g.op("Where", g.op("Less", x, g.constant(0.0, torch.float64)), reflected, fraction))
    # NaN fails every comparison above and would take the fraction's branch of |NaN|: keep it
    out = g.op("Where", g.op("IsNaN", x), x, out)
    out.dtype = torch.float64
    return cast_to(g, out, g.ctx.output_dtype)
