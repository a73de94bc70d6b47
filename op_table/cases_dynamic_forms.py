"""Forms whose values or sizes depend on a dynamic axis, run at the traced size, at larger
sizes and at each row's `sizes` (0 and 1 where the form allows them).

Each row is one form users write: an integer arange with a fractional step, views through -1
at an empty axis, squeeze of an axis that is 1 only sometimes, numel of an empty input, and
the size arithmetic of padding to a multiple, negative slices and float-scaled sizes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._samples import ints, op, randn
from .schema import OpCase

ARANGE, SYM_SIZE = "aten.arange.start_step", "aten.sym_size.int"
VIEW, SQUEEZE, SQUEEZE_DIM = "aten.view.default", "aten.squeeze.default", "aten.squeeze.dim"


def _axis(dim: int, name: str = "n") -> dict[str, dict[int, str]]:
    """The first input's dynamic axis `dim`, named `name`."""
    return {"args_0": {dim: name}}


def _at(*sizes: int, name: str = "n") -> tuple[dict[str, int], ...]:
    return tuple({name: size} for size in sizes)


# torch's CPU kernel converts the bounds to the integer result's accumulation type before it
# counts off the elements: arange(2, 8.5, 1.5, dtype=int64) is [2, 3, 4, 5, 6] (its count,
# ceil((8.5 - 2) / 1.5) = 5, from the bounds as given), not the casts of 2, 3.5, 5, 6.5, 8.
INTEGER_ARANGE = [
    op("arange_int64_symbolic_start_float_step", lambda x: torch.arange(x.size(0), 8.5, 1.5, dtype=torch.int64),
       lambda g: (randn(g, 2, 3),), [ARANGE, SYM_SIZE], dynamic_axes=_axis(0), sizes=_at(0, 1, 7)),
    op("arange_int32_symbolic_float_end", lambda x: torch.arange(0.5, x.size(0) * 2.5, 1.5, dtype=torch.int32),
       lambda g: (randn(g, 4, 3),), [ARANGE, "torch.sym_float", "_operator.mul"], dynamic_axes=_axis(0),
       sizes=_at(1, 2)),
    op("arange_int64_symbolic_float_step", lambda x: torch.arange(1, 20, x.size(0) * 0.75, dtype=torch.int64),
       lambda g: (randn(g, 4, 3),), [ARANGE, "torch.sym_float", "_operator.mul"], dynamic_axes=_axis(0),
       sizes=_at(1, 2)),
    op("arange_uint8_negative_symbolic_start", lambda x: torch.arange(-x.size(0), 4.5, 1.5, dtype=torch.uint8),
       lambda g: (randn(g, 3, 2),), [ARANGE, "_operator.neg"], dynamic_axes=_axis(0), sizes=_at(0, 1)),
    op("arange_int64_end_tensor", lambda x, end: torch.arange(x.size(0), end, 1.5, dtype=torch.int64),
       lambda g: (randn(g, 2, 3), torch.tensor(8.5)), [ARANGE, "aten._local_scalar_dense.default"],
       dynamic_axes=_axis(0), sizes=_at(0, 1, 7)),
]

EMPTY_VIEWS = [
    op("view_minus_one_then_flat", lambda x: x.view(-1, 2).view(1, -1), lambda g: (randn(g, 4, 2),), [VIEW],
       dynamic_axes=_axis(0), sizes=_at(0, 1)),
    op("reshape_minus_one_dynamic_width", lambda x: x.reshape(-1, x.size(1)) * 2, lambda g: (randn(g, 3, 4, 2),),
       [VIEW], dynamic_axes={"args_0": {0: "a", 1: "b"}}, sizes=({"a": 0, "b": 3}, {"a": 1, "b": 1})),
]

# A dynamic axis whose example is 1 (or 0) stays dynamic (captured size-oblivious, as
# torch.onnx does); squeeze then tests the axis at run time, as torch does.
ONE_OR_EMPTY = [
    op("squeeze_all_axis_traced_one", lambda x: x.squeeze(), lambda g: (randn(g, 1, 3),), [SQUEEZE],
       dynamic_axes=_axis(0), sizes=_at(0)),
    op("squeeze_all_axis_one_at_run_time", lambda x: x.squeeze() * 2, lambda g: (randn(g, 2, 1, 3),), [SQUEEZE],
       dynamic_axes=_axis(0), sizes=_at(0, 1)),
    op("squeeze_dim_axis_traced_one", lambda x: x.squeeze(0) + 1, lambda g: (randn(g, 1, 3),), [SQUEEZE_DIM],
       dynamic_axes=_axis(0), sizes=_at(0)),
    op("numel_times_empty_input", lambda x: x.numel() * x, lambda g: (randn(g, 0, 3),),
       ["aten.sym_numel.default", "aten.mul.Tensor"], dynamic_axes=_axis(0), sizes=_at(7)),
]


def _pad_to_multiple(x: torch.Tensor) -> torch.Tensor:
    """A U-Net's pad of the last axis up to a multiple of 8."""
    return F.pad(x, (0, (8 - x.size(-1) % 8) % 8))


def _float_scaled_slices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    return x[: math.floor(n * 0.5)] + 1, x[: math.ceil(n / 3)] * 2


def _checked_prefix(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """x[:k] for a k read from a tensor, with the checks a model states on it."""
    k = count.item()
    torch._check(k < 9)
    torch._check(k > 0)
    torch._check(k != 5)
    return x[:k] * 2


SIZE_ARITHMETIC = [
    op("pad_to_multiple_mod", _pad_to_multiple, lambda g: (randn(g, 2, 3, 13),), ["_operator.mod"],
       dynamic_axes=_axis(2, "w"), sizes=_at(16, 1, 0, name="w")),
    op("slice_negative_size", lambda x: x[-x.size(0) + 1:] * 2, lambda g: (randn(g, 5, 3),),
       ["_operator.neg", "aten.slice.Tensor"], dynamic_axes=_axis(0), sizes=_at(0, 1)),
    op("slices_floor_ceil_of_float_sizes", _float_scaled_slices, lambda g: (randn(g, 8, 2),),
       ["math.floor", "math.ceil", "torch.sym_float", "_operator.truediv"], dynamic_axes=_axis(0),
       sizes=_at(0, 1, 5)),
    op("split_sizes_from_values", lambda x, lengths: x.split(lengths.tolist()),
       lambda g: (randn(g, 10), torch.tensor([3, 7])), ["_operator.eq", "aten.split_with_sizes.default"]),
    op("checks_on_a_value_read", _checked_prefix, lambda g: (randn(g, 10), torch.tensor(3)),
       ["_operator.lt", "_operator.gt", "_operator.eq", "torch.sym_not", "aten._assert_scalar.default"]),
    op("zeros_of_trunc_of_float_size", lambda x: x.new_zeros(torch.sym_int(x.size(0) * 0.3)) + 1,
       lambda g: (randn(g, 10, 2),), ["math.trunc"], dynamic_axes=_axis(0), sizes=_at(0, 1, 4)),
    op("adaptive_avg_pool2d_dynamic", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda g: (randn(g, 1, 2, 8, 9),),
       ["aten.adaptive_avg_pool2d.default"], dynamic_axes={"args_0": {2: "h", 3: "w"}},
       sizes=({"h": 7, "w": 10}, {"h": 2, "w": 3}, {"h": 1, "w": 2})),
    op("adaptive_max_pool2d_dynamic", lambda x: F.adaptive_max_pool2d(x, (2, 3)), lambda g: (randn(g, 1, 2, 8, 9),),
       ["aten.adaptive_max_pool2d.default"], dynamic_axes={"args_0": {2: "h", 3: "w"}},
       sizes=({"h": 7, "w": 10}, {"h": 2, "w": 3}, {"h": 1, "w": 2})),
    op("adaptive_max_pool2d_dynamic_indices", lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
       lambda g: (ints(g, 0, 4, 1, 2, 7, 5).float(),), ["aten.adaptive_max_pool2d.default"],
       dynamic_axes={"args_0": {2: "h", 3: "w"}}, sizes=({"h": 3, "w": 2}, {"h": 10, "w": 9})),
    op("adaptive_avg_pool1d_dynamic", lambda x: F.adaptive_avg_pool1d(x, 4), lambda g: (randn(g, 2, 3, 9),),
       ["aten.adaptive_avg_pool1d.default"], dynamic_axes=_axis(2, "w"), sizes=_at(4, 1, name="w")),
]

CASES: list[OpCase] = [*INTEGER_ARANGE, *EMPTY_VIEWS, *ONE_OR_EMPTY, *SIZE_ARITHMETIC]


def _window_stft(x: torch.Tensor, **options) -> torch.Tensor:
    window = torch.hann_window(16, dtype=x.dtype)
    return torch.view_as_real(torch.stft(x, 16, hop_length=4, window=window, return_complex=True, **options))


def _spd(g: torch.Generator, batch: int, n: int) -> torch.Tensor:
    """Symmetric positive definite matrices (a positive determinant: logdet defined)."""
    a = randn(g, batch, n, n)
    return a @ a.transpose(-1, -2) + n * torch.eye(n)


R2C, C2C, AS_REAL = "aten._fft_r2c.default", "aten._fft_c2c.default", "aten.view_as_real.default"

# Forms torch.onnx exports that were refused: a fill read from a 0-d tensor, as_strided of a
# contiguous input, (s)logdet, baddbmm with a beta read at run time, stft's options and 1-D signal.
REFUSED_BEFORE = [
    op("full_fill_from_0d_tensor", lambda x, v: torch.full((3, 4), v) + x, lambda g: (randn(g, 3, 4), torch.tensor(2.5)),
       ["aten.full.default", "aten._local_scalar_dense.default"]),
    op("full_like_fill_from_0d_int_tensor", lambda x, v: torch.full_like(x, v), lambda g: (randn(g, 3, 4), torch.tensor(7)),
       ["aten.full_like.default"], dynamic_axes=_axis(0), sizes=_at(0, 1)),
    op("as_strided_overlapping_windows", lambda x: x.as_strided((3, 3), (1, 2), 1) * 2, lambda g: (randn(g, 4, 4),),
       ["aten.as_strided.default"]),
    op("logdet_batched", torch.logdet, lambda g: (_spd(g, 3, 4),), ["aten._linalg_slogdet.default"], atol=1e-4),
    op("slogdet_signs", lambda a: torch.linalg.slogdet(a), lambda g: (randn(g, 3, 4, 4),),
       ["aten._linalg_slogdet.default"], atol=1e-4),
    op("baddbmm_beta_read_from_tensor", lambda i, a, b, beta: torch.baddbmm(i, a, b, beta=beta.item(), alpha=0.5),
       lambda g: (randn(g, 2, 3, 5), randn(g, 2, 3, 4), randn(g, 2, 4, 5), torch.tensor(0.25)),
       ["aten.baddbmm.default"]),
    op("baddbmm_beta_zero_read_ignores_nan", lambda i, a, b, beta: torch.baddbmm(i, a, b, beta=beta.item()),
       lambda g: (torch.full((2, 3, 5), float("nan")), randn(g, 2, 3, 4), randn(g, 2, 4, 5), torch.tensor(0.0)),
       ["aten.baddbmm.default"]),
    op("stft_normalized", lambda x: _window_stft(x, normalized=True), lambda g: (randn(g, 2, 64),),
       [R2C, AS_REAL], atol=1e-4),
    op("stft_two_sided", lambda x: _window_stft(x, onesided=False), lambda g: (randn(g, 2, 64),),
       [AS_REAL], atol=1e-4),
    op("stft_one_dimensional_signal", _window_stft, lambda g: (randn(g, 64),), [R2C, AS_REAL, SQUEEZE_DIM],
       atol=1e-4),
    op("none_among_the_outputs", lambda x: (x + 1, None, x * 2), lambda g: (randn(g, 3),), ["aten.add.Tensor"]),
]

CASES += REFUSED_BEFORE
