"""`special_erfcx`'s export against mpmath at 40 digits, in float32 and float64, over the whole
real line: near 0, around the switch between the series and the continued fraction (|x| = 2),
for large x (where exp(x^2) erfc(x) written out is inf * 0) and down to where it overflows."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

import exporter
from harness.backend import prepare

POINTS = np.concatenate([
    np.linspace(-9.0, 9.0, 721),
    np.linspace(1.99, 2.01, 41), np.linspace(-2.01, -1.99, 41),
    np.geomspace(9.0, 1e30, 120),
    np.linspace(-26.5, -9.0, 36),
])
# Upper bounds of the relative error against the exact value (values that overflow excluded):
# float32 is rounded once from a float64 result (half an ulp, 2^-24, plus the float64 error);
# the float64 bound is the forms' truncation error at |x| = 2 with rounding (measured 1e-14).
BOUND = {torch.float32: 2.0 ** -24 * 1.01, torch.float64: 4e-14}


class Erfcx(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.erfcx(x)


def _exact(points: np.ndarray) -> np.ndarray:
    with mpmath.workdps(40):
        return np.array([float(mpmath.exp(mpmath.mpf(x) ** 2) * mpmath.erfc(mpmath.mpf(x))) for x in points])


def _relative_error(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(actual.dtype).max)
    return np.abs(actual[finite].astype(np.float64) - exact[finite]) / np.abs(exact[finite])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_erfcx_export_is_accurate_over_the_real_line(dtype: torch.dtype) -> None:
    x = torch.tensor(POINTS, dtype=dtype)
    model = exporter.export(Erfcx(), (x,), opset_version=18)
    (actual,) = prepare(model, "CPU").run([x])
    exact = _exact(x.double().numpy())
    error = _relative_error(np.asarray(actual), exact)
    assert error.max() <= BOUND[dtype], f"worst relative error {error.max():.3g} at x = {x[np.argmax(error)]}"
    # torch's own kernel, for scale: the export is at least as close to the exact value
    torch_error = _relative_error(torch.special.erfcx(x).numpy(), exact)
    assert error.max() <= max(torch_error.max(), BOUND[dtype])


def test_erfcx_export_keeps_the_limits() -> None:
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), -30.0, 1e38])
    model = exporter.export(Erfcx(), (x,), opset_version=18)
    (actual,) = prepare(model, "CPU").run([x])
    np.testing.assert_array_equal(np.asarray(actual), torch.special.erfcx(x).numpy())
