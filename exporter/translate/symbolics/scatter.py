"""scatter, scatter_add, scatter_reduce and diagonal.

torch's scatter reads only the leading `index.shape` block of `src`; ONNX ScatterElements wants
updates shaped like the indices, so `src` is sliced to the index's shape (read at run time).
Reductions map onto ScatterElements' `reduction` (add and mul from opset 16, max and min from
18); `include_self=False` first overwrites the scattered positions with the reduction's
identity, and `mean` divides a sum by the number of values that met at each position.
"""

from __future__ import annotations

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, normalize_dim, rank_of

MAX_MIN_SINCE = 18  # ScatterElements reduction="max"/"min"
_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min", "mean": "add"}


def _updates_like_index(g: Graph, src: Value, index: Value) -> Value:
    """`src` cut to the shape of `index` (torch scatters only that block)."""
    rank = rank_of(index)
    return g.op("Slice", src, g.constant([0] * rank, torch.int64), g.op("Shape", index), g.constant(list(range(rank)), torch.int64))


def _scatter(g: Graph, rank: int, self: Value, dim: int, index: Value, updates: Value, reduction: str = "none") -> Value:
    """ScatterElements along `dim` of a rank-`rank` tensor (a 0-d one as one element)."""
    if rank == 0:  # torch's 0-d scatter: index and src are 0-d too
        self, index, updates = (g.op("Reshape", v, g.constant([1], torch.int64)) for v in (self, index, updates))
        out = g.op("ScatterElements", self, index, updates, axis_i=0, reduction_s=reduction)
        return g.op("Reshape", out, g.constant([], torch.int64))
    axis = normalize_dim(dim, rank)
    return g.op("ScatterElements", self, index, updates, axis_i=axis, reduction_s=reduction)


@symbolic("aten::scatter.src")
def scatter_src(g: Graph, self: Value, dim: int, index: Value, src: Value) -> Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor

    Limits: where `index` repeats a position, torch and onnxruntime may keep different writes.
    """
    src = cast_to(g, src, self.dtype)
    return _scatter(g, rank_of(self), self, dim, index, _updates_like_index(g, src, index))


@symbolic("aten::scatter.value")
def scatter_value(g: Graph, self: Value, dim: int, index: Value, value) -> Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    updates = g.op("Expand", cast_to(g, value, self.dtype), g.op("Shape", index))
    return _scatter(g, rank_of(self), self, dim, index, updates)


@symbolic("aten::scatter_add")
def scatter_add(g: Graph, self: Value, dim: int, index: Value, src: Value) -> Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    src = cast_to(g, src, self.dtype)
    return _scatter(g, rank_of(self), self, dim, index, _updates_like_index(g, src, index), "add")


def _identity(g: Graph, reduce: str, dtype: torch.dtype) -> Value:
    """The value a reduction starts from when `self` is left out."""
    if reduce in ("sum", "mean"):
        return g.constant(0, dtype)
    if reduce == "prod":
        return g.constant(1, dtype)
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    low, high = (float("-inf"), float("inf")) if dtype.is_floating_point else (info.min, info.max)
    return g.constant(low if reduce == "amax" else high, dtype)


def _scatter_reduce(g: Graph, self: Value, dim: int, index: Value, src: Value, reduce: str, include_self: bool) -> Value:
    if reduce not in _REDUCTIONS:
        raise ValueError(f"scatter_reduce: unknown reduce={reduce!r}; torch accepts {sorted(_REDUCTIONS)}")
    dtype, rank = self.dtype, rank_of(self)
    updates = _updates_like_index(g, cast_to(g, src, dtype), index)
    base = self
    if not include_self:
        fill = g.op("Expand", _identity(g, reduce, dtype), g.op("Shape", index))
        base = _scatter(g, rank, self, dim, index, fill)
    reduced = _scatter(g, rank, base, dim, index, updates, _REDUCTIONS[reduce])
    if reduce != "mean":
        return reduced
    ones = g.op("Expand", g.constant(1, dtype), g.op("Shape", index))
    start = g.constant(1 if include_self else 0, dtype)
    counts = _scatter(g, rank, g.op("Expand", start, g.op("Shape", self)), dim, index, ones, "add")
    counts = g.op("Max", counts, g.constant(1, dtype))  # positions nothing reached keep self
    if dtype.is_floating_point:
        return g.op("Div", reduced, counts)
    # torch floors integer means (onnxruntime's Div truncates toward zero)
    remainder = g.op("Mod", reduced, counts, fmod_i=0)
    return g.op("Div", g.op("Sub", reduced, remainder), counts)


@symbolic("aten::scatter_reduce.two", since=17)
def scatter_reduce(g: Graph, self: Value, dim: int, index: Value, src: Value, reduce: str, *, include_self=True) -> Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor

    Limits: reduce="amax" and "amin" need opset >= 18 (ScatterElements max/min).
    """
    if reduce in ("amax", "amin"):
        raise ValueError(
            f"scatter_reduce with reduce={reduce!r} needs ONNX ScatterElements reduction max/min "
            f"(opset >= {MAX_MIN_SINCE}); export at opset {MAX_MIN_SINCE} or later"
        )
    return _scatter_reduce(g, self, dim, index, src, reduce, include_self)


@symbolic("aten::scatter_reduce.two", since=MAX_MIN_SINCE)
def scatter_reduce_18(g: Graph, self: Value, dim: int, index: Value, src: Value, reduce: str, *, include_self=True) -> Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""
    return _scatter_reduce(g, self, dim, index, src, reduce, include_self)


@symbolic("aten::diagonal")
def diagonal(g: Graph, self: Value, offset=0, dim1=0, dim2=1) -> Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)

    The other axes in order, then the diagonal (its length min(rows, cols) less the offset,
    read at run time).
    """
    rank = rank_of(self)
    first, second = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    if first == second:
        raise ValueError(f"diagonal: dim1 and dim2 are the same axis ({first})")
    perm = [d for d in range(rank) if d not in (first, second)] + [first, second]
    moved = g.op("Transpose", self, perm_i=perm) if perm != list(range(rank)) else self
    shape = g.op("Shape", moved)
    rows = g.op("Shape", moved, start_i=rank - 2, end_i=rank - 1)
    cols = g.op("Shape", moved, start_i=rank - 1, end_i=rank)
    row_start, col_start = max(-offset, 0), max(offset, 0)
    length = g.op("Min", g.op("Sub", rows, g.constant([row_start], torch.int64)),
                  g.op("Sub", cols, g.constant([col_start], torch.int64)))
    length = g.op("Max", length, g.constant([0], torch.int64))
    positions = g.op("Range", g.constant(0, torch.int64), g.op("Squeeze", length, g.constant([0], torch.int64)),
                     g.constant(1, torch.int64))
    picked_rows = g.op("Gather", moved, g.op("Add", positions, g.constant(row_start, torch.int64)), axis_i=rank - 2)
    columns = g.op("Unsqueeze", g.op("Add", positions, g.constant(col_start, torch.int64)), g.constant([1], torch.int64))
    leading = g.op("Slice", shape, g.constant([0], torch.int64), g.constant([rank - 2], torch.int64))
    columns = g.op("Expand", columns, g.op("Concat", leading, length, g.constant([1], torch.int64), axis_i=0))
    picked = g.op("GatherElements", picked_rows, columns, axis_i=rank - 1)
    return g.op("Squeeze", picked, g.constant([rank - 1], torch.int64))
