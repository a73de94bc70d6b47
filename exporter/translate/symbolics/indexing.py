"""Indexing: `x[...]` (select, slice, index), index_select, embedding lookups, nonzero.

torch.export splits Python indexing into its pieces: integers are `select.int`, slices with
steps are `slice.Tensor`, None is `unsqueeze`, an ellipsis is nothing, and tensor (advanced)
indices, long or boolean, are one `index.Tensor` with None for the dims they leave alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import (
    INT64_MAX,
    cast_to,
    dim_size,
    int64_vector,
    normalize_dim,
    rank_of,
    reduce,
    scalar_of,
    unsqueeze,
)


@symbolic("aten::select.int")
def select(g: Graph, self: Value, dim: int, index) -> Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)

    A Gather with a 0-d index, which drops the dim; negative indices count from the end.
    """
    axis = normalize_dim(dim, rank_of(self))
    return g.op("Gather", self, scalar_of(g, index, torch.int64), axis_i=axis)


@symbolic("aten::slice.Tensor")
def slice_tensor(g: Graph, self: Value, dim=0, start=None, end=None, step=1) -> Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    axis = normalize_dim(dim, rank_of(self))
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    size = self.shape[axis] if self.shape else None
    whole = isinstance(end, int) and (end >= INT64_MAX or isinstance(size, int) and end >= size)
    if start == 0 and step == 1 and whole:
        return self
    return g.op(
        "Slice", self, int64_vector(g, [start]), int64_vector(g, [end]),
        g.constant([axis], torch.int64), int64_vector(g, [step]),
    )


def _advanced_indices(g: Graph, indices: Sequence[Value | None]) -> list[tuple[int, Value]]:
    """(dim, int64 index) for every indexed dim; a k-D boolean mask gives k of them (NonZero)."""
    advanced: list[tuple[int, Value]] = []
    position = 0
    for index in indices:
        if index is None:
            position += 1
        elif index.dtype in (torch.bool, torch.uint8):
            coordinates = g.op("NonZero", index)  # (k, count)
            for j in range(rank_of(index)):
                advanced.append((position + j, g.op("Gather", coordinates, g.constant(j), axis_i=0)))
            position += rank_of(index)
        else:
            advanced.append((position, cast_to(g, index, torch.int64)))
            position += 1
    return advanced


def _stack_broadcast(g: Graph, indices: list[Value]) -> Value:
    """The index tensors broadcast together and stacked on a last axis: (B..., k)."""
    shapes = {i.shape for i in indices}
    if len(shapes) != 1 or None in shapes or any(not isinstance(d, int) for d in next(iter(shapes))):
        common = indices[0]  # Expand broadcasts both ways: this ends as the first index, broadcast
        for index in indices[1:]:
            common = g.op("Expand", common, g.op("Shape", index))
        shape = g.op("Shape", common)
        indices = [common, *(g.op("Expand", i, shape) for i in indices[1:])]
    return g.op("Concat", *(unsqueeze(g, i, [-1]) for i in indices), axis_i=-1)


@symbolic("aten::index.Tensor")
def index(g: Graph, self: Value, indices) -> Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor

    One index tensor is a Gather. Several are broadcast together and read with one GatherND
    after moving the indexed dims first; as in torch (and numpy), the result dims go where the
    indexed dims were when those are adjacent, and first otherwise. Boolean masks become
    their NonZero coordinates.
    """
    rank = rank_of(self)
    advanced = _advanced_indices(g, indices)
    if len(advanced) == 1:
        axis, single = advanced[0]
        return g.op("Gather", self, single, axis_i=axis)
    dims = [d for d, _ in advanced]
    rest = [d for d in range(rank) if d not in dims]
    moved = self if dims + rest == list(range(rank)) else g.op("Transpose", self, perm_i=dims + rest)
    gathered = g.op("GatherND", moved, _stack_broadcast(g, [i for _, i in advanced]))
    first = dims[0]
    if first == 0 or dims != list(range(first, first + len(dims))):
        return gathered
    batch_rank = len(g.ctx.output_meta.shape) - len(rest)
    before, after = range(batch_rank, batch_rank + first), range(batch_rank + first, batch_rank + len(rest))
    perm = [*before, *range(batch_rank), *after]
    return g.op("Transpose", gathered, perm_i=perm)


@symbolic("aten::index_select")
def index_select(g: Graph, self: Value, dim: int, index: Value) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor

    A 0-d `self` (whose only valid index is 0) is returned as it is: ONNX Gather needs rank >= 1.
    """
    if rank_of(self) == 0:
        return self
    if rank_of(index) == 0:
        index = unsqueeze(g, index, [0])
    return g.op("Gather", self, index, axis_i=normalize_dim(dim, rank_of(self)))


@symbolic("aten::nonzero")
def nonzero(g: Graph, self: Value) -> Value:
    """nonzero(Tensor self) -> Tensor

    ONNX NonZero gives (rank, count); torch wants (count, rank). A 0-d tensor has no
    coordinates: (1, 0) when it is nonzero, (0, 0) when not (ONNX NonZero says (1, 1) / (1, 0)).
    """
    if rank_of(self) == 0:
        count = cast_to(g, g.op("Not", g.op("Equal", self, g.constant(0, self.dtype))), torch.int64)
        shape = g.op("Concat", g.op("Reshape", count, g.constant([1], torch.int64)), g.constant([0], torch.int64), axis_i=0)
        return g.op("ConstantOfShape", shape, value_t=np.zeros(1, np.int64))
    return g.op("Transpose", g.op("NonZero", self), perm_i=[1, 0])


# -- embeddings -------------------------------------------------------------------------------------


@symbolic("aten::embedding")
def embedding(g: Graph, weight: Value, indices: Value, padding_idx=-1, scale_grad_by_freq=False, sparse=False) -> Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor

    A Gather of rows. padding_idx, scale_grad_by_freq and sparse only change gradients.
    """
    return g.op("Gather", weight, indices, axis_i=0)


def _row_norms(g: Graph, weight: Value, norm_type: float) -> Value:
    """The p-norm of each row, shape (rows, 1)."""
    if norm_type == 2:
        return reduce(g, "ReduceL2", weight, [1], True)
    if norm_type == 1:
        return reduce(g, "ReduceL1", weight, [1], True)
    power = g.op("Pow", g.op("Abs", weight), g.constant(norm_type, weight.dtype))
    total = g.op("ReduceSum", power, g.constant([1], torch.int64), keepdims_i=1)
    return g.op("Pow", total, g.constant(1 / norm_type, weight.dtype))


def _looked_up_rows(g: Graph, weight: Value, indices: Value) -> Value:
    """A (rows, 1) bool: whether `indices` names the row."""
    rows = dim_size(g, weight, 0)
    if isinstance(rows, int):
        row_ids = g.constant(np.arange(rows, dtype=np.int64)[None, :])
    else:
        count = g.op("Reshape", rows, g.constant([], torch.int64))
        row_ids = unsqueeze(g, g.op("Range", g.constant(0), count, g.constant(1)), [0])
    flat = unsqueeze(g, g.op("Reshape", cast_to(g, indices, torch.int64), g.constant([-1], torch.int64)), [1])
    hits = g.op("Cast", g.op("Equal", flat, row_ids), to_i=onnx_type(torch.int32))  # (n, rows)
    used = reduce(g, "ReduceMax", hits, [0], False)
    return unsqueeze(g, g.op("Cast", used, to_i=onnx_type(torch.bool)), [1])


@symbolic("aten::embedding_renorm")
def embedding_renorm(g: Graph, self: Value, indices: Value, max_norm: float, norm_type: float) -> Value:
    """embedding_renorm(Tensor self, Tensor indices, float max_norm, float norm_type) -> Tensor

    What `Embedding(max_norm=...)` does to its weight before the lookup: every row that
    `indices` names and whose norm exceeds max_norm is scaled by max_norm / (norm + 1e-7).
    The other rows are left as they are, exactly as torch's in-place renorm does.
    """
    norms = _row_norms(g, self, norm_type)
    too_long = g.op("Greater", norms, g.constant(max_norm, self.dtype))
    renorm = g.op("And", _looked_up_rows(g, self, indices), too_long)
    scale = g.op("Div", g.constant(max_norm, self.dtype), g.op("Add", norms, g.constant(1e-7, self.dtype)))
    return g.op("Where", renorm, g.op("Mul", self, scale), self)


# -- scatters of slices ------------------------------------------------------------------------------


def _slice_start(g: Graph, self: Value, axis: int, start) -> Any:
    """A slice's first index along `axis` as Python slicing reads it: negative counts from the
    end, clamped at 0 (an int, or a 0-d int64 Value when it depends on a dynamic size)."""
    start = 0 if start is None else start
    if isinstance(start, int) and start >= 0:
        return start
    size = dim_size(g, self, axis)
    if isinstance(start, int) and isinstance(size, int):
        return max(start + size, 0)
    start = scalar_of(g, start, torch.int64)
    size = scalar_of(g, size, torch.int64)
    wrapped = g.op("Where", g.op("Less", start, g.constant(0)), g.op("Add", start, size), start)
    return g.op("Max", wrapped, g.constant(0))


def _scatter_along(g: Graph, self: Value, src: Value, axis: int, start, step: int, count=None) -> Value:
    """`self` with the positions start, start+step, ... along `axis` replaced by `src`
    (src's length along `axis` says how many): one ScatterElements with those positions
    broadcast to src's shape. Dynamic sizes work (Range, Shape)."""
    rank = rank_of(self)
    src = cast_to(g, src, self.dtype)
    count = dim_size(g, src, axis) if count is None else count
    if isinstance(count, int) and isinstance(start, int):
        positions = g.constant(np.arange(start, start + step * count, step, dtype=np.int64)[:count])
    else:
        steps = g.op("Range", g.constant(0), scalar_of(g, count, torch.int64), g.constant(1))
        positions = g.op("Add", g.op("Mul", steps, g.constant(step)), scalar_of(g, start, torch.int64))
    shape = [1] * rank
    shape[axis] = -1
    indices = g.op("Expand", g.op("Reshape", positions, g.constant(shape)), g.op("Shape", src))
    return g.op("ScatterElements", self, indices, src, axis_i=axis)


@symbolic("aten::slice_scatter")
def slice_scatter(g: Graph, self: Value, src: Value, dim=0, start=None, end=None, step=1) -> Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor

    `self` with `self[..., start:end:step, ...] = src` along `dim` (the functional form of an
    in-place slice assignment). `end` needs no reading: src's size along `dim` is the count.
    Limits: `step` must be static.
    """
    axis = normalize_dim(dim, rank_of(self))
    if not isinstance(step, int):
        raise ValueError("slice_scatter needs a static step")
    return _scatter_along(g, self, src, axis, _slice_start(g, self, axis, start), step)


@symbolic("aten::select_scatter")
def select_scatter(g: Graph, self: Value, src: Value, dim: int, index) -> Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor

    `self` with `self.select(dim, index) = src`: src gains the selected dim back, then is
    scattered at that one position.
    """
    axis = normalize_dim(dim, rank_of(self))
    src = unsqueeze(g, src, [axis])
    return _scatter_along(g, self, src, axis, _slice_start(g, self, axis, index), 1, count=1)


@symbolic("aten::gather")
def gather(g: Graph, self: Value, dim: int, index: Value, *, sparse_grad=False) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor

    ONNX GatherElements; torch allows an index smaller than self in the other dims, which
    GatherElements reads the same way (output shape = index shape). torch also accepts an
    empty index of any rank (its output is empty, of the index's shape), which
    GatherElements refuses: that case is written as an empty tensor of the index's shape.
    """
    if rank_of(self) == 0:
        return self if rank_of(index) == 0 else g.op("Expand", self, g.op("Shape", index))
    if rank_of(index) == 0 and rank_of(self) == 1:  # torch reads a 0-d index as a 1-element one
        one = g.op("GatherElements", self, g.op("Reshape", cast_to(g, index, torch.int64), g.constant([1])), axis_i=0)
        return g.op("Reshape", one, g.constant([], torch.int64))
    if rank_of(index) != rank_of(self):
        if index.shape is None or 0 not in index.shape:
            raise ValueError(f"gather: index of rank {rank_of(index)} on self of rank {rank_of(self)}; torch "
                             "accepts other ranks only for an empty index")
        empty = g.op("ConstantOfShape", g.op("Shape", index))
        return cast_to(g, empty, self.dtype)
    return g.op("GatherElements", self, cast_to(g, index, torch.int64), axis_i=normalize_dim(dim, rank_of(self)))
