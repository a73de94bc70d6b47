"""FFTs and complex views: torch.fft's transforms, torch.stft, view_as_real / view_as_complex.

Complex values are (..., 2) real pairs inside the graph, so every row returns real tensors
(through view_as_real, abs or an inverse transform). Opset 20 is included: DFT takes its axis
as an input from there.
"""

from __future__ import annotations

import torch

from ._samples import op, randn
from .schema import OpCase

OPSETS = (17, 18, 20, 26)
BATCH = {"args_0": {0: "batch"}}
R2C, C2C, C2R = "aten._fft_r2c.default", "aten._fft_c2c.default", "aten._fft_c2r.default"
AS_REAL, AS_COMPLEX = "aten.view_as_real.default", "aten.view_as_complex.default"


def fft_op(name, fn, shape, targets, **fields) -> OpCase:
    return op(name, fn, lambda g: (randn(g, *shape),), targets, opsets=OPSETS, atol=1e-4, **fields)


def _stft(x: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(8)
    return torch.view_as_real(torch.stft(x, 8, hop_length=4, window=window, return_complex=True))


CASES: list[OpCase] = [
    fft_op("rfft", lambda x: torch.view_as_real(torch.fft.rfft(x)), (3, 16), [R2C, AS_REAL], dynamic_axes=BATCH),
    fft_op("rfft_ortho_odd_length", lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")), (2, 15), [R2C, AS_REAL]),
    fft_op("fft_of_real_forward_norm", lambda x: torch.view_as_real(torch.fft.fft(x, norm="forward")), (2, 12), [R2C, AS_REAL]),
    fft_op("fft_first_dim", lambda x: torch.view_as_real(torch.fft.fft(x, dim=0)), (6, 4), [R2C, AS_REAL]),
    fft_op("ifft_of_complex", lambda x: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(x))), (3, 8, 2),
           [AS_COMPLEX, C2C, AS_REAL]),
    fft_op("fft_of_complex_ortho", lambda x: torch.view_as_real(torch.fft.fft(torch.view_as_complex(x), norm="ortho")),
           (3, 10, 2), [AS_COMPLEX, C2C, AS_REAL]),
    fft_op("irfft_even", lambda x: torch.fft.irfft(torch.fft.rfft(x), n=16), (2, 16), [R2C, C2R]),
    fft_op("irfft_odd_ortho", lambda x: torch.fft.irfft(torch.fft.rfft(x, norm="ortho"), n=15, norm="ortho"), (2, 15),
           [R2C, C2R]),
    fft_op("rfft2", lambda x: torch.view_as_real(torch.fft.rfft2(x)), (2, 4, 6), [R2C, AS_REAL]),
    fft_op("irfft2", lambda x: torch.fft.irfft2(torch.fft.rfft2(x), s=(4, 6)), (2, 4, 6), [R2C, C2R]),
    fft_op("rfft_magnitude", lambda x: torch.fft.rfft(x).abs(), (3, 16), [R2C, "aten.abs.default"]),
    fft_op("stft_hann", _stft, (2, 32), [R2C, AS_REAL, "aten.transpose.int"]),
    fft_op("fft2_of_real", lambda x: torch.view_as_real(torch.fft.fft2(x)), (2, 4, 6),
           ["aten._to_copy.default", C2C, AS_REAL], dynamic_axes=BATCH),
    fft_op("ifft2_of_real_float64", lambda x: torch.view_as_real(torch.fft.ifft2(x.double(), norm="ortho")), (3, 5),
           ["aten._to_copy.default", C2C, AS_REAL]),
    fft_op("complex_times_complex", lambda x: torch.view_as_real(torch.fft.rfft(x) * torch.fft.rfft(x.flip(-1))), (3, 8),
           [R2C, "aten.mul.Tensor", AS_REAL], dynamic_axes=BATCH),
    fft_op("complex_times_real_and_number", lambda x: torch.view_as_real(torch.view_as_complex(x) * x[..., 0] * 2.5),
           (4, 3, 2), [AS_COMPLEX, "aten.mul.Tensor", AS_REAL]),
    fft_op("complex_times_complex_number", lambda x: torch.view_as_real(torch.view_as_complex(x) * (1 - 2j)),
           (4, 3, 2), [AS_COMPLEX, "aten.mul.Tensor", AS_REAL]),
    fft_op("complex_plus_complex", lambda x: torch.view_as_real(torch.fft.rfft(x) + torch.fft.rfft(x.flip(-1))), (3, 8),
           [R2C, "aten.add.Tensor", AS_REAL], dynamic_axes=BATCH),
    fft_op("complex_minus_real_alpha", lambda x: torch.view_as_real(torch.sub(torch.view_as_complex(x), x[..., 1], alpha=3)),
           (4, 3, 2), [AS_COMPLEX, "aten.sub.Tensor", AS_REAL]),
    fft_op("real_plus_complex_number", lambda x: torch.view_as_real(torch.view_as_complex(x) + (0.5 + 2j) - 1.5),
           (4, 3, 2), [AS_COMPLEX, "aten.add.Tensor", "aten.sub.Tensor", AS_REAL]),
    fft_op("complex_to_complex128", lambda x: torch.view_as_real(torch.view_as_complex(x).to(torch.complex128)), (3, 2),
           [AS_COMPLEX, "aten._to_copy.default", AS_REAL]),
    # the `_copy` forms, as a functionalised program spells the views
    fft_op("view_as_complex_copy_fft", lambda x: torch.ops.aten.view_as_real_copy(
        torch.fft.fft(torch.ops.aten.view_as_complex_copy(x))), (3, 8, 2),
        ["aten.view_as_complex_copy.default", C2C, "aten.view_as_real_copy.default"], dynamic_axes=BATCH),
    fft_op("view_as_real_copy_rfft", lambda x: torch.ops.aten.view_as_real_copy(torch.fft.rfft(x)), (2, 10),
           [R2C, "aten.view_as_real_copy.default"]),
]
