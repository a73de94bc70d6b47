"""Complex values in the graph are (..., 2) real pairs: an op that would compute on the pairs as
if they were reals is refused, never translated; the harness compares torch's complex values
through their real pairs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import exporter
import harness
from harness.metrics.arrays import as_array


class ComplexProduct(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(x)
        return torch.view_as_real(spectrum * spectrum)  # a complex multiply, not an element-wise one


def test_an_op_on_complex_values_without_a_complex_form_is_refused() -> None:
    with pytest.raises(exporter.UnsupportedOperatorError, match="reads a complex tensor"):
        exporter.export(ComplexProduct(), (torch.randn(2, 8),))


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
