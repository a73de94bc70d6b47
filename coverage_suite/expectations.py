"""Stated reasons for coverage cases that roundtrip fails: case name -> why. The nightly test
fails on a case torch.onnx verifies and roundtrip does not unless it is listed here; the CI
sample expects a listed case to fail, and fails when it starts to pass (remove its row).
Each reason names what to add or fix; rows come from the run in docs/coverage_suite.json."""

from __future__ import annotations

_NO_SYMBOLIC = "no symbolic in exporter/symbolics for {} at opset 18 (torch_lib translates it); add one with op-table rows"

KNOWN_FAILURES: dict[str, str] = {
    "create.tril_indices": _NO_SYMBOLIC.format("aten.tril_indices.default"),
    "data_dependent.bincount": _NO_SYMBOLIC.format("aten.bincount.default"),
    "data_dependent.bucketize": _NO_SYMBOLIC.format("aten.bucketize.Tensor"),
    "data_dependent.repeat_interleave_tensor": _NO_SYMBOLIC.format("aten.repeat_interleave.Tensor (data-dependent size)"),
    "data_dependent.unique_consecutive": _NO_SYMBOLIC.format("aten.unique_consecutive.default"),
    "layer.bilinear": _NO_SYMBOLIC.format("aten._trilinear.default (nn.Bilinear)"),
    "fft.fft2": "the complex fft2 result reaches a Cast to complex64 that the ONNX checker refuses; the FFT "
                "symbolics must keep complex values as real (..., 2) pairs up to view_as_real",
    "fft.view_as_complex": "aten.mul.Tensor on a complex tensor (view_as_complex then multiply) is refused: the "
                           "symbolics have no complex-as-real-pair form of elementwise ops",
}
