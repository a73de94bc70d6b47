"""FFTs and complex views: `_fft_r2c`, `_fft_c2c`, `_fft_c2r` as ONNX DFT; `view_as_real` and
`view_as_complex` (and their `_copy` forms).

Inside the graph a complex tensor of shape S is a real tensor of shape (*S, 2): real and
imaginary parts on a trailing axis, which is ONNX DFT's own layout, so `view_as_real` and
`view_as_complex` are identities (translate gives complex values that layout; the harness
compares torch's complex values through `view_as_real`). Only the symbolics registered
`takes_complex=True` accept complex operands, and the forms of a few ops registered
`complex_operands=True` (below) stand in for their real symbolics on complex values: any other
op on a complex value is reported unsupported rather than computed on the pairs as if they were
reals.

torch.fft.fft/rfft/ifft/irfft/fftn/rfftn/irfftn and torch.stft (which decomposes into frames
and `_fft_r2c`) reach these. One DFT node transforms one axis, so n-d transforms chain them.
The inverse transform is computed as conj(DFT(conj(x))), unscaled, and every scale is torch's
`normalization` (0: none, 1: 1/sqrt(n), 2: 1/n over the signal sizes n) applied once, so
no convention of DFT's `inverse` attribute is relied on. DFT-17 takes its axis as an
attribute, DFT-20 as an input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, normalize_dim, rank_of, squeeze, unsqueeze

DFT_AXIS_INPUT_SINCE = 20


def _dft(g: Graph, pairs: Value, axis: int, onesided: bool = False) -> Value:
    """ONNX DFT along `axis` of the (..., 1 or 2)-shaped `pairs` (axis counted without the pair axis)."""
    if g.opset_version >= DFT_AXIS_INPUT_SINCE:
        return g.op("DFT", pairs, None, g.constant(axis, torch.int64), onesided_i=int(onesided))
    return g.op("DFT", pairs, axis_i=axis, onesided_i=int(onesided))


def _conj(g: Graph, pairs: Value, dtype: torch.dtype) -> Value:
    return g.op("Mul", pairs, g.constant([1.0, -1.0], dtype))


def _scaled(g: Graph, value: Value, normalization: int, sizes: Sequence[int], dtype: torch.dtype) -> Value:
    """`value` times torch's normalization factor over the signal `sizes`."""
    if normalization == 0:
        return value
    count = math.prod(sizes)
    factor = 1 / math.sqrt(count) if normalization == 1 else 1 / count
    return g.op("Mul", value, g.constant(factor, dtype))


def _static_sizes(meta: torch.Tensor, dims: Sequence[int]) -> list[int]:
    sizes = [meta.shape[d] for d in dims]
    if not all(isinstance(s, int) for s in sizes):
        raise ValueError(f"FFT over dims {list(dims)} needs static signal sizes, got {sizes}")
    return sizes


def _input_meta(g: Graph) -> torch.Tensor:
    return g.ctx.node.args[0].meta["val"]


def _real_dtype(g: Graph) -> torch.dtype:
    return _input_meta(g).dtype.to_real()


@symbolic("aten::_fft_r2c", takes_complex=True)
def fft_r2c(g: Graph, self: Value, dim, normalization: int, onesided: bool) -> Value:
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor

    The last of `dim` transformed from the real signal (one-sided when asked), the others as
    complex transforms of the result.
    """
    meta = _input_meta(g)
    dims = [normalize_dim(d, meta.dim()) for d in dim]
    out = _dft(g, unsqueeze(g, self, [-1]), dims[-1], onesided)
    for axis in dims[:-1]:
        out = _dft(g, out, axis)
    out.dtype = self.dtype
    return _scaled(g, out, normalization, _static_sizes(meta, dims), self.dtype)


@symbolic("aten::_fft_c2c", takes_complex=True)
def fft_c2c(g: Graph, self: Value, dim, normalization: int, forward: bool) -> Value:
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"""
    meta = _input_meta(g)
    dims = [normalize_dim(d, meta.dim()) for d in dim]
    dtype = _real_dtype(g)
    out = self if forward else _conj(g, self, dtype)
    for axis in dims:
        out = _dft(g, out, axis)
    out = out if forward else _conj(g, out, dtype)
    return _scaled(g, out, normalization, _static_sizes(meta, dims), dtype)


@symbolic("aten::_fft_c2r", takes_complex=True)
def fft_c2r(g: Graph, self: Value, dim, normalization: int, last_dim_size: int) -> Value:
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor

    The inverse of a one-sided transform: the other dims' inverse transforms, then the full
    Hermitian spectrum along the last dim (X[k] for k <= n/2, conj(X[n - k]) above) whose
    inverse transform's real part is the signal of length `last_dim_size`.

    Limits: the output length and the signal sizes must be static.
    """
    if not isinstance(last_dim_size, int):
        raise ValueError(f"irfft needs a static output length, got {last_dim_size!r}")
    meta = _input_meta(g)
    dims = [normalize_dim(d, meta.dim()) for d in dim]
    dtype = _real_dtype(g)
    n, last = last_dim_size, dims[-1]
    out = _conj(g, self, dtype)
    for axis in dims[:-1]:
        out = _dft(g, out, axis)
    axes = g.constant([last], torch.int64)
    kept = g.op("Slice", out, g.constant([0], torch.int64), g.constant([n // 2 + 1], torch.int64), axes)
    mirrored = g.op("Slice", out, g.constant([n - n // 2 - 1], torch.int64), g.constant([0], torch.int64), axes,
                    g.constant([-1], torch.int64))  # X[n - k] for k = n//2 + 1 .. n - 1, conj'ed below
    full = g.op("Concat", kept, _conj(g, mirrored, dtype), axis_i=last)  # conj(X) and its mirror, conj(conj(X))
    signal = _dft(g, full, last)
    real = g.op("Gather", signal, g.constant(0, torch.int64), axis_i=-1)  # real(conj(y)) = real(y)
    sizes = [*_static_sizes(meta, dims[:-1]), n]
    return _scaled(g, real, normalization, sizes, dtype)


@symbolic("aten::view_as_real", "aten::view_as_real_copy", takes_complex=True)
def view_as_real(g: Graph, self: Value) -> Value:
    """view_as_real(Tensor(a) self) -> Tensor(a)

    A complex value already is its (..., 2) pairs in the graph; the copy (a functionalised
    program's form) is the same value, as no view aliases it in ONNX.
    """
    return g.op("Identity", self)


@symbolic("aten::view_as_complex", "aten::view_as_complex_copy", takes_complex=True)
def view_as_complex(g: Graph, self: Value) -> Value:
    """view_as_complex(Tensor(a) self) -> Tensor(a)

    The (..., 2) pairs are the graph's layout of a complex value (the copy's too).
    """
    return g.op("Identity", self)


# -- ops that also read complex values: their forms for the (..., 2) layout ----------------------
# Registered `complex_operands=True`: translate uses them when a node reads or makes a complex
# tensor and its registered symbolic does not take complex operands; each is covered by an
# op-table row (stft, rfft abs, fft2's cast of the reals to complex, complex sums and products).


@symbolic("aten::transpose.int", complex_operands=True)
def _complex_transpose(g: Graph, self: Value, dim0: int, dim1: int) -> Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a), on a complex tensor:
    the dims count in the complex tensor's rank; the pair axis stays last."""
    rank = _input_meta(g).dim()
    perm = list(range(rank + 1))
    a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", self, perm_i=perm)


@symbolic("aten::abs", complex_operands=True)
def _complex_abs(g: Graph, self: Value) -> Value:
    """abs(Tensor self) -> Tensor, on a complex tensor: the modulus, sqrt(re^2 + im^2)."""
    if g.opset_version >= 18:
        return g.op("ReduceL2", self, g.constant([-1], torch.int64), keepdims_i=0)
    return g.op("ReduceL2", self, axes_i=[-1], keepdims_i=0)


def _result_real_dtype(g: Graph) -> torch.dtype:
    return g.ctx.node.meta["val"].dtype.to_real()


def _as_pairs(g: Graph, index: int, operand: Any, dtype: torch.dtype) -> tuple[Any, bool]:
    """Operand `index` of the node in `dtype`: (value, whether it is complex pairs). A real
    tensor gains a trailing axis of 1, so that it scales both parts of the pairs it meets."""
    meta = g.ctx.node.args[index]
    meta = meta.meta.get("val") if isinstance(meta, torch.fx.Node) else meta
    if isinstance(meta, complex):
        return g.constant([meta.real, meta.imag], dtype), True
    if isinstance(meta, torch.Tensor) and meta.dtype.is_complex:
        return cast_to(g, operand, dtype), True
    if isinstance(operand, Value):
        return unsqueeze(g, cast_to(g, operand, dtype), [-1]), False
    return g.constant(operand, dtype), False


@symbolic("aten::mul.Tensor", "aten::mul.Scalar", complex_operands=True)
def _complex_mul(g: Graph, self: Any, other: Any) -> Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor, with a complex operand: (a + bi)(c + di)
    = (ac - bd) + (ad + bc)i as a * c + (-b, a) * d on the pairs; a real operand (or a number)
    scales both parts."""
    dtype = _result_real_dtype(g)
    (a, a_complex), (b, b_complex) = _as_pairs(g, 0, self, dtype), _as_pairs(g, 1, other, dtype)
    if not (a_complex and b_complex):
        return g.op("Mul", a, b)
    axes, one = g.constant([-1], torch.int64), g.constant([1], torch.int64)
    real = g.op("Slice", b, g.constant([0], torch.int64), one, axes)
    imaginary = g.op("Slice", b, one, g.constant([2], torch.int64), axes)
    turned = g.op("Mul", g.op("Gather", a, g.constant([1, 0], torch.int64), axis_i=-1), g.constant([-1.0, 1.0], dtype))
    return g.op("Add", g.op("Mul", a, real), g.op("Mul", turned, imaginary))


def _with_zero_imaginary(g: Graph, real: Value, dtype: torch.dtype) -> Value:
    """(..., 1)-shaped reals as (..., 2) pairs: the imaginary parts 0, beside inf and NaN too."""
    zeros = g.op("Expand", g.constant(0.0, dtype), g.op("Shape", real))
    return g.op("Concat", real, zeros, axis_i=-1)


@symbolic("aten::add.Tensor", "aten::add.Scalar", complex_operands=True)
def _complex_add(g: Graph, self: Any, other: Any, alpha: Any = 1) -> Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor, with a complex
    operand: the parts add; a real operand (or number) adds to the real parts alone."""
    return _complex_sum(g, "Add", self, other, alpha)


@symbolic("aten::sub.Tensor", "aten::sub.Scalar", complex_operands=True)
def _complex_sub(g: Graph, self: Any, other: Any, alpha: Any = 1) -> Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor, with a complex
    operand: the parts subtract; a real operand (or number) from the real parts alone."""
    return _complex_sum(g, "Sub", self, other, alpha)


def _complex_sum(g: Graph, op_type: str, self: Any, other: Any, alpha: Any) -> Value:
    """`op_type` (Add or Sub) of two operands as pairs, `other` scaled by a real `alpha`."""
    dtype = _result_real_dtype(g)
    pairs = []
    for index, operand in enumerate((self, other)):
        value, is_complex = _as_pairs(g, index, operand, dtype)
        if not is_complex:
            value = _with_zero_imaginary(g, value if value.rank != 0 else unsqueeze(g, value, [-1]), dtype)
        pairs.append(value)
    first, second = pairs
    if isinstance(alpha, complex):
        raise ValueError(f"a complex alpha ({alpha}) is not translated")
    if alpha != 1:
        second = g.op("Mul", second, g.constant(alpha, dtype))
    return g.op(op_type, first, second)


@symbolic("aten::_to_copy", complex_operands=True)
def _complex_to_copy(g: Graph, self: Value, **options) -> Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor, to or from a complex
    dtype: reals become pairs with a zero imaginary part; pairs change their parts' dtype; a
    complex tensor copied to a real dtype keeps its real part, as torch does (with a warning)."""
    source = _input_meta(g).dtype
    target = g.ctx.node.meta["val"].dtype
    if not source.is_complex:
        return _with_zero_imaginary(g, unsqueeze(g, cast_to(g, self, target.to_real()), [-1]), target.to_real())
    if target.is_complex:
        return g.op("Identity", cast_to(g, self, target.to_real()))
    return cast_to(g, g.op("Gather", self, g.constant(0, torch.int64), axis_i=-1), target)


@symbolic("aten::squeeze.dim", "aten::squeeze.dims", complex_operands=True)
def _complex_squeeze(g: Graph, self: Value, dim) -> Value:
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a), of a complex tensor: the dim of the
    complex shape (the pairs' last axis is not one of its dims); stft of a 1-D signal ends so."""
    rank = rank_of(self) - 1
    dims = sorted({normalize_dim(d, rank) for d in (dim if isinstance(dim, (list, tuple)) else [dim])})
    dropped = [d for d in dims if self.shape is not None and self.shape[d] == 1]
    return squeeze(g, self, dropped) if dropped else self
