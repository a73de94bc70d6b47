"""Variance and the cumulative reductions ONNX has no single op for (cumprod, logcumsumexp).

The variance divides by max(N - correction, 0) as torch does, N read from the input's shape at
run time, so a dynamic axis stays dynamic. The cumulative forms build an N x N lower-triangular
mask over the scanned axis (N at run time) and reduce each row of it: exact, at O(N^2) memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, normalize_dim, rank_of, reduce
from exporter.translate.symbolics.unary_math import is_infinite


def _dims(self: Value, dim: int | Sequence[int] | None) -> list[int]:
    rank = rank_of(self)
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({normalize_dim(d, rank) for d in dims})


def _count(g: Graph, self: Value, dims: list[int], dtype: torch.dtype) -> Value:
    """The number of elements reduced over `dims`, as a 0-d value of `dtype`."""
    sizes = g.op("Gather", g.op("Shape", self), g.constant(dims, torch.int64), axis_i=0)
    return g.op("Cast", reduce(g, "ReduceProd", sizes, [0], False), to_i=onnx_type(dtype))


def _variance(g: Graph, self: Value, dim, correction, keepdim: bool) -> tuple[Value, Value]:
    """(variance, mean) over `dim`, both with `keepdim`'s shape."""
    dtype = g.ctx.output_dtype
    self = cast_to(g, self, dtype)
    correction = 1 if correction is None else correction
    if rank_of(self) == 0:  # one element: deviation 0, over max(1 - correction, 0)
        divisor = g.constant(max(1 - correction, 0), dtype)
        return g.op("Div", g.op("Sub", self, self), divisor), g.op("Identity", self)
    dims = _dims(self, dim)
    count = _count(g, self, dims, dtype)
    # sum / N rather than ReduceMean: an empty input's mean is NaN in torch (0 in onnxruntime)
    mean = g.op("Div", reduce(g, "ReduceSum", self, dims, True), count)
    deviation = g.op("Sub", self, mean)
    squares = reduce(g, "ReduceSum", g.op("Mul", deviation, deviation), dims, keepdim)
    divisor = g.op("Max", g.op("Sub", count, g.constant(correction, dtype)), g.constant(0, dtype))
    if not keepdim:
        mean = g.op("Squeeze", mean, g.constant(dims, torch.int64))
    return g.op("Div", squares, divisor), mean


@symbolic("aten::var.correction")
def var(g: Graph, self: Value, dim=None, *, correction=None, keepdim=False) -> Value:
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor

    Two passes (mean, then squared deviations), as torch's kernel, not E[x^2] - E[x]^2.
    """
    return _variance(g, self, dim, correction, keepdim)[0]


@symbolic("aten::var_mean.correction")
def var_mean(g: Graph, self: Value, dim=None, *, correction=None, keepdim=False) -> tuple[Value, Value]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    return _variance(g, self, dim, correction, keepdim)


def _lower_triangle_rows(g: Graph, self: Value, dim: int, fill) -> tuple[Value, list[int] | None]:
    """`self` with `dim` moved last and repeated into an N x N matrix whose row i holds
    elements 0..i of the scan and `fill` after; also the permutation to undo (None: none)."""
    rank = rank_of(self)
    perm = None
    if dim != rank - 1:
        perm = [d for d in range(rank) if d != dim] + [dim]
        self = g.op("Transpose", self, perm_i=perm)
    length = g.op("Shape", self, start_i=rank - 1, end_i=rank)
    positions = g.op("Range", g.constant(0, torch.int64), g.op("Squeeze", length, g.constant([0], torch.int64)),
                     g.constant(1, torch.int64))
    # mask[i, j] = j <= i
    mask = g.op("LessOrEqual", g.op("Unsqueeze", positions, g.constant([0], torch.int64)),
                g.op("Unsqueeze", positions, g.constant([1], torch.int64)))
    rows = g.op("Unsqueeze", self, g.constant([rank - 1], torch.int64))  # [..., 1, N]
    return g.op("Where", mask, rows, fill), perm


def _restore(g: Graph, value: Value, perm: list[int] | None) -> Value:
    if perm is None:
        return value
    inverse = [perm.index(d) for d in range(len(perm))]
    return g.op("Transpose", value, perm_i=inverse)


def _scan(g: Graph, self: Value, dim: int, fill: float, reduce_rows: Callable[[Value, int], Value]) -> Value:
    """A cumulative reduction: `reduce_rows(rows, axis)` reduces each row of the scan's
    lower-triangular matrix (filled with `fill` past the diagonal) over `axis`."""
    dtype = g.ctx.output_dtype
    self = cast_to(g, self, dtype)
    rank = rank_of(self)
    if rank == 0:
        return g.op("Identity", self)
    rows, perm = _lower_triangle_rows(g, self, normalize_dim(dim, rank), g.constant(fill, dtype))
    return _restore(g, reduce_rows(rows, rank), perm)


@symbolic("aten::cumprod")
def cumprod(g: Graph, self: Value, dim: int, *, dtype=None) -> Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    Exact (no log/exp): ReduceProd over each row of the lower-triangular matrix of the scan.

    Limits: memory grows with the square of the scanned axis's length.
    """
    return _scan(g, self, dim, 1, lambda rows, axis: reduce(g, "ReduceProd", rows, [axis], False))


@symbolic("aten::logcumsumexp")
def logcumsumexp(g: Graph, self: Value, dim: int) -> Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    log(sum(exp)) over each row of the lower-triangular matrix of the scan (-inf past i), each
    row shifted by its max first so that no exp overflows.

    Limits: memory grows with the square of the scanned axis's length.
    """
    zero = g.constant(0, g.ctx.output_dtype)

    def log_sum_exp(rows: Value, axis: int) -> Value:
        peak = reduce(g, "ReduceMax", rows, [axis], True)
        peak = g.op("Where", is_infinite(g, peak, g.ctx.output_dtype), zero, peak)  # an infinite max: shift by 0
        total = reduce(g, "ReduceSum", g.op("Exp", g.op("Sub", rows, peak)), [axis], True)
        return g.op("Squeeze", g.op("Add", g.op("Log", total), peak), g.constant([axis], torch.int64))

    return _scan(g, self, dim, float("-inf"), log_sum_exp)


@symbolic("aten::histc")
def histc(g: Graph, self: Value, bins=100, min=0, max=0) -> Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor

    Equal-width bins over [min, max] (the data's own range when min == max, widened by 1 on
    each side if that is one value); values outside are not counted, max falls in the last bin.

    Limits: a value within float rounding of a bin edge may land in the neighbouring bin.
    """
    dtype = self.dtype
    flat = g.op("Reshape", self, g.constant([-1], torch.int64))
    if min == max:
        low, high = reduce(g, "ReduceMin", flat, [0], False), reduce(g, "ReduceMax", flat, [0], False)
        same = g.op("Equal", low, high)
        low = g.op("Where", same, g.op("Sub", low, g.constant(1, dtype)), low)
        high = g.op("Where", same, g.op("Add", high, g.constant(1, dtype)), high)
    else:
        low, high = g.constant(min, dtype), g.constant(max, dtype)
    inside = g.op("And", g.op("GreaterOrEqual", flat, low), g.op("LessOrEqual", flat, high))
    position = g.op("Div", g.op("Mul", g.op("Sub", flat, low), g.constant(bins, dtype)), g.op("Sub", high, low))
    index = g.op("Cast", g.op("Floor", position), to_i=onnx_type(torch.int64))
    index = g.op("Min", index, g.constant(bins - 1, torch.int64))
    index = g.op("Where", inside, index, g.constant(-1, torch.int64))  # counted in no bin
    edges = g.op("Range", g.constant(0, torch.int64), g.constant(bins, torch.int64), g.constant(1, torch.int64))
    hits = g.op("Equal", g.op("Unsqueeze", index, g.constant([1], torch.int64)), g.op("Unsqueeze", edges, g.constant([0], torch.int64)))
    return reduce(g, "ReduceSum", g.op("Cast", hits, to_i=onnx_type(dtype)), [0], False)
