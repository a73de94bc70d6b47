"""Special functions: `special_erfcx` over the whole real line.

Each row spans both sides of the forms' switch point (|x| = 2, exporter/translate/symbolics/special.py),
large x where exp(x^2) erfc(x) written out would give inf * 0, and large -x where erfcx
overflows as torch's does. The export computes in float64 and rounds once; the float32 rows'
tolerance is torch's own error: its float32 kernel rounds x*x for x < 0 before exp, an error
exp multiplies by x^2 (up to 86 * 2^-24 = 5e-6 before erfcx overflows near x = -9.3).
"""

from __future__ import annotations

import torch

from ._samples import op, randn
from .schema import OpCase

ERFCX = "aten.special_erfcx.default"
EDGES = [0.0, -0.0, 1.999, 2.0, 2.001, -1.999, -2.0, -2.001, 5.0, 26.0, 1e4, 1e30, -9.0, -27.0,
         float("inf"), float("-inf"), float("nan")]


def _spread(gen: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor]:
    """Normal draws scaled to reach |x| ~ 12, then the edge values."""
    draws = randn(gen, 4, 16, dtype=torch.float64) * 4
    return (torch.cat([draws.flatten(), torch.tensor(EDGES, dtype=torch.float64)]).to(dtype).reshape(3, -1),)


CASES: list[OpCase] = [
    op("special_erfcx_float32", torch.special.erfcx, lambda g: _spread(g, torch.float32), [ERFCX], rtol=1e-5,
       atol=0.0, dynamic_axes={"args_0": {1: "n"}}),
    op("special_erfcx_float64", torch.special.erfcx, lambda g: _spread(g, torch.float64), [ERFCX], rtol=1e-13,
       atol=0.0),
    op("special_erfcx_int64", torch.special.erfcx, lambda g: (torch.arange(-6, 30).reshape(4, 9),), [ERFCX],
       rtol=1e-5, atol=0.0),
]
