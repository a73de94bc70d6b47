"""Complex values in the graph are (..., 2) real pairs: an op that would compute on the pairs as
if they were reals is refused, never translated; the harness compares torch's complex values
through their real pairs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import exporter
import harness
from harness.backend import prepare
from harness.metrics.arrays import as_array


class ComplexExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.exp(torch.fft.rfft(x)))  # exp(a + bi) is not exp of each part


class ComplexFromReals(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.polar(x, x))  # polar makes complex values from reals


def test_an_op_on_complex_values_without_a_complex_form_is_refused() -> None:
    with pytest.raises(exporter.UnsupportedOperatorError, match="reads a complex tensor"):
        exporter.export(ComplexExp(), (torch.randn(2, 8),))


def test_an_op_making_complex_values_without_a_complex_form_is_refused() -> None:
    """Not a Cast to complex64 that no ONNX checker accepts: the op is named as unsupported."""
    with pytest.raises(exporter.UnsupportedOperatorError, match="complex"):
        exporter.export(ComplexFromReals(), (torch.rand(2, 8),))


class ComplexProduct(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(x)
        return torch.view_as_real(spectrum * torch.fft.rfft(x.flip(-1)) * 0.5)  # complex * complex, then * a number


def test_a_complex_product_verifies_per_op() -> None:
    """(a + bi)(c + di) on the real pairs: each op's pairs match torch's complex values."""
    result = harness.verify(ComplexProduct(), (torch.randn(3, 16),), opset_version=18, strict=True, optimize=False)
    assert result.passed
    products = [op for op in result.ops if op.aten == "aten.mul.Tensor"]
    assert len(products) == 2 and all(op.passed and op.truth is not None for op in products), [op.to_dict() for op in products]


def test_complex_tensors_compare_as_real_pairs() -> None:
    value = torch.tensor([1 + 2j, -3j])
    np.testing.assert_array_equal(as_array(value), [[1, 2], [0, -3]])
    np.testing.assert_array_equal(as_array(value.conj()), [[1, -2], [0, 3]])


class Spectrum(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        spectrum = torch.fft.rfft(x, norm="ortho")
        return torch.view_as_real(spectrum), spectrum.abs(), torch.fft.irfft(spectrum, n=16, norm="ortho")


@pytest.mark.parametrize("opset", [18, 20])
@pytest.mark.parametrize("optimize", [False, True])
def test_fft_rows_verify_per_op(opset: int, optimize: bool) -> None:
    # optimised, the Identity of view_as_real goes and _fft_r2c's value takes its name: both
    # FX nodes keep their rows, read off the value that carries them (roundtrip.aliased_values)
    result = harness.verify(Spectrum(), (torch.randn(3, 16),), opset_version=opset, strict=True, optimize=optimize)
    assert result.passed
    rows = {op.aten: op for op in result.ops}
    for target in ("aten._fft_r2c.default", "aten.view_as_real.default", "aten._fft_c2r.default",
                   "aten.abs.default"):
        assert rows[target].passed and rows[target].truth is not None, rows[target].to_dict()


class HalfComplex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x) * (1 - 2j) + 0.5)


def test_complex32_travels_as_float16_pairs() -> None:
    """ONNX has no complex32 element type, but the graph never holds one: float16 pairs."""
    x = torch.randn(3, 4, 2).half()
    (actual,) = prepare(exporter.export(HalfComplex(), (x,)), "CPU").run([x])
    assert actual.dtype == np.float16
    np.testing.assert_allclose(actual.astype(np.float32), HalfComplex()(x).float().numpy(), atol=1e-2, rtol=1e-2)
