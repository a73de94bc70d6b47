"""Uninitialised tensors, the cosine-sum windows (hamming, blackman) and the triangle indices.

torch's `empty` leaves memory uninitialised; a program can only rely on its shape and dtype
(what it writes afterwards), so the export fills it with zeros. The windows are computed in the
graph from the window length (a static int), as torch defines them:
w[k] = sum_i (-1)^i a_i cos(2 pi i k / N), N = length for a periodic window and length - 1
for a symmetric one; a window of length 1 is [1]. `tril_indices` / `triu_indices` enumerate the
row * col positions in row-major order and keep those on the triangle's side of the diagonal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, int64_vector
from exporter.translate.symbolics.shape import _fill

BLACKMAN = (0.42, 0.5, 0.08)  # torch.blackman_window's coefficients
HAMMING = (0.54, 0.46)  # torch.hamming_window's default alpha, beta


@symbolic("aten::empty.memory_format")
def empty(g: Graph, size, **options) -> Value:
    """empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    Zeros: torch promises no values, only the shape and dtype.
    """
    return _fill(g, int64_vector(g, list(size)), 0)


@symbolic("aten::empty_permuted")
def empty_permuted(g: Graph, size, physical_layout, **options) -> Value:
    """empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    `empty_like` reaches here; the layout only orders memory, which ONNX does not expose.
    """
    return _fill(g, int64_vector(g, list(size)), 0)


def _cosine_window(g: Graph, length: int, periodic: bool, coefficients: Sequence[float]) -> Value:
    """The window in the node's dtype (the length is an `int` in the schema: always static)."""
    dtype = g.ctx.output_dtype
    if length <= 1:
        return g.constant([1.0] * length, dtype)
    k = g.op("Range", g.constant(0, dtype), g.constant(length, dtype), g.constant(1, dtype))
    span = length if periodic else length - 1
    angle = g.op("Mul", k, g.constant(2 * math.pi / span, dtype))
    window = g.constant(coefficients[0], dtype)
    for i, a in enumerate(coefficients[1:], start=1):
        term = g.op("Mul", g.op("Cos", g.op("Mul", angle, g.constant(i, dtype))), g.constant(a, dtype))
        window = g.op("Sub" if i % 2 else "Add", window, term)
    return window


@symbolic("aten::hamming_window", "aten::hamming_window.periodic")
def hamming_window(g: Graph, window_length, periodic=True, **options) -> Value:
    """hamming_window(int window_length, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _cosine_window(g, window_length, periodic, HAMMING)


@symbolic("aten::hamming_window.periodic_alpha", "aten::hamming_window.periodic_alpha_beta")
def hamming_window_alpha(g: Graph, window_length, periodic, alpha, beta=HAMMING[1], **options) -> Value:
    """hamming_window.periodic_alpha_beta(int window_length, bool periodic, float alpha, float beta, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _cosine_window(g, window_length, periodic, (alpha, beta))


@symbolic("aten::blackman_window", "aten::blackman_window.periodic")
def blackman_window(g: Graph, window_length, periodic=True, **options) -> Value:
    """blackman_window(int window_length, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _cosine_window(g, window_length, periodic, BLACKMAN)


def _triangle_indices(g: Graph, row: int, col: int, offset: int, lower: bool) -> Value:
    """(2, N) row and column indices of the positions with col - row <= offset (lower) or >=
    offset (upper), in row-major order, in the node's dtype."""
    if row * col == 0:
        return g.constant(torch.zeros((2, 0), dtype=g.ctx.output_dtype))
    position = g.op("Range", g.constant(0, torch.int64), g.constant(row * col, torch.int64), g.constant(1, torch.int64))
    width = g.constant(col, torch.int64)
    rows, cols = g.op("Div", position, width), g.op("Mod", position, width)
    diagonal = g.op("Sub", cols, rows)
    side = "LessOrEqual" if lower else "GreaterOrEqual"
    kept = g.op(side, diagonal, g.constant(offset, torch.int64))
    pairs = g.op("Concat", g.op("Unsqueeze", rows, g.constant([0], torch.int64)),
                 g.op("Unsqueeze", cols, g.constant([0], torch.int64)), axis_i=0)
    return cast_to(g, g.op("Compress", pairs, kept, axis_i=1), g.ctx.output_dtype)


@symbolic("aten::tril_indices")
def tril_indices(g: Graph, row: int, col: int, offset: int = 0, **options) -> Value:
    """tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _triangle_indices(g, row, col, offset, lower=True)


@symbolic("aten::triu_indices")
def triu_indices(g: Graph, row: int, col: int, offset: int = 0, **options) -> Value:
    """triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _triangle_indices(g, row, col, offset, lower=False)
