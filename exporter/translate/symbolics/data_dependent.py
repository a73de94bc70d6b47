"""Ops whose values (or output sizes) depend on the data: `.item()`, boolean-mask writes and
reads (`index_put`, `masked_select`, `masked_scatter`), `unique` (sorted and consecutive),
`bincount`, `repeat_interleave` with tensor repeats, and the data checks that come with them.

torch.export captures a data-dependent size as an unbacked symbol (`u0`); here it becomes a
size computed at run time (NonZero's count, Unique's length), never a constant. The harness
compares such outputs when torch and the backend agree on the size, which they do when the
symbolic computes what torch computes.
"""

from __future__ import annotations

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.dtypes import to_numpy
from exporter.translate.symbolics._helpers import (INT64_MAX, cast_to, dim_size, emits_no_nodes, int64_vector, narrowed,
                                        normalize_dim, rank_of, reduce, widened)
from exporter.translate.symbolics.indexing import _advanced_indices, _stack_broadcast
from exporter.translate.symbolics.shape import _fill


@symbolic("aten::_local_scalar_dense")
def local_scalar_dense(g: Graph, self: Value) -> Value:
    """_local_scalar_dense(Tensor self) -> Scalar

    `.item()`: the one element as a 0-d value, int64 for integer tensors (a SymInt), float64
    for floating ones (a SymFloat, as Python's float), bool for bool.
    """
    meta = g.ctx.output_meta
    dtype = torch.bool if isinstance(meta, (bool, torch.SymBool)) else (
        torch.int64 if isinstance(meta, (int, torch.SymInt)) else torch.float64)
    scalar = g.op("Reshape", self, g.constant([], torch.int64))
    scalar.dtype, scalar.shape = self.dtype, ()
    out = cast_to(g, scalar, dtype)
    if out is scalar:
        out = g.op("Identity", scalar)
    out.dtype, out.shape = dtype, ()
    return out


@symbolic("aten::_assert_async.msg")
@emits_no_nodes
def assert_async(g: Graph, self: Value, assert_msg: str) -> None:
    """_assert_async.msg(Tensor self, str assert_msg) -> ()

    A check of the data (e.g. one_hot's "class values must be smaller than num_classes"). ONNX
    has no assertion op; as torch.onnx does, the check is left out of the model.
    """
    return None


# -- writes through boolean masks and index tensors --------------------------------------------


@symbolic("aten::index_put")
def index_put(g: Graph, self: Value, indices, values: Value, accumulate: bool = False) -> Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    `x[mask] = v`, `x[i, j] = v`, `x[:, i] = v` (`+=` with accumulate): one ScatterND over the
    indexed dims moved first, the values broadcast to what `x[indices]` would read. The indexed
    dims must be adjacent (torch moves them first otherwise, a form this does not translate).

    Limits: index tensors on adjacent dims only; repeated indices without accumulate write one
    of their values, as torch does, but which one is the backend's choice.
    """
    rank = rank_of(self)
    advanced = _advanced_indices(g, indices)
    dims = [d for d, _ in advanced]
    first = dims[0]
    if dims != list(range(first, first + len(dims))):
        raise ValueError(f"index_put with index tensors on non-adjacent dims {dims} is not supported")
    rest = [d for d in range(rank) if d not in dims]
    perm = dims + rest
    moved = self if perm == list(range(rank)) else g.op("Transpose", self, perm_i=perm)
    coordinates = _stack_broadcast(g, [_non_negative(g, self, d, i) for d, i in advanced])  # (B..., k)
    batch = g.op("Shape", coordinates, end_i=-1)
    leading = [dim_size(g, self, d) for d in range(first)]
    trailing = [dim_size(g, self, d) for d in range(first + len(dims), rank)]
    # the shape torch broadcasts `values` to: x[indices]'s, (leading..., B..., trailing...)
    read_shape = g.op("Concat", int64_vector(g, leading) if leading else g.constant([], torch.int64),
                      batch, int64_vector(g, trailing) if trailing else g.constant([], torch.int64), axis_i=0)
    updates = g.op("Expand", cast_to(g, values, self.dtype), read_shape)
    if first:  # (leading, B, trailing) -> (B, leading, trailing), as `moved` is laid out
        updates = g.op("Transpose", updates, perm_i=_batch_first(first, _batch_rank(g), len(trailing)))
    attributes = {"reduction_s": "add"} if accumulate else {}
    out = g.op("ScatterND", moved, coordinates, updates, **attributes)
    if perm == list(range(rank)):
        return out
    inverse = [perm.index(d) for d in range(rank)]
    return g.op("Transpose", out, perm_i=inverse)


def _non_negative(g: Graph, self: Value, dim: int, index: Value) -> Value:
    """`index` into `dim` of `self` with negative entries counted from the end."""
    size = cast_to(g, dim_size(g, self, dim), torch.int64)
    return g.op("Where", g.op("Less", index, g.constant(0, torch.int64)), g.op("Add", index, size), index)


def _batch_rank(g: Graph) -> int:
    """The rank of the node's index tensors broadcast together (a boolean mask: 1), from torch's metadata."""
    metas = [i.meta["val"] for i in g.ctx.node.args[1] if isinstance(i, torch.fx.Node)]
    return max(1 if m.dtype in (torch.bool, torch.uint8) else m.dim() for m in metas)


def _batch_first(leading: int, batch: int, trailing: int) -> list[int]:
    return [*range(leading, leading + batch), *range(leading), *range(leading + batch, leading + batch + trailing)]


# -- reads and writes through a boolean mask -----------------------------------------------------


@symbolic("aten::masked_select")
def masked_select(g: Graph, self: Value, mask: Value) -> Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor

    The elements of `self` where `mask` holds (both broadcast together), in row-major order: a
    Compress of the flattened tensors. The length is known only at run time.
    """
    broadcast = g.op("Where", mask, self, self)  # self at the broadcast shape
    flat_mask = g.op("Reshape", g.op("Expand", mask, g.op("Shape", broadcast)), g.constant([-1], torch.int64))
    return g.op("Compress", g.op("Reshape", broadcast, g.constant([-1], torch.int64)), flat_mask, axis_i=0)


@symbolic("aten::masked_scatter")
def masked_scatter(g: Graph, self: Value, mask: Value, source: Value) -> Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor

    Where `mask` (broadcast to `self`) holds, the next element of `source` in row-major order:
    the k-th set position reads `source.flatten()[k]` (k from a CumSum of the mask), the others
    keep `self`.
    """
    shape = g.op("Shape", self)
    flat_mask = g.op("Reshape", g.op("Expand", mask, shape), g.constant([-1], torch.int64))
    position = g.op("Sub", g.op("CumSum", cast_to(g, flat_mask, torch.int64), g.constant(0, torch.int64)),
                    g.constant(1, torch.int64))
    position = g.op("Max", position, g.constant(0, torch.int64))  # unset positions before the first set one
    taken = g.op("Gather", g.op("Reshape", cast_to(g, source, self.dtype), g.constant([-1], torch.int64)), position,
                 axis_i=0)
    flat = g.op("Where", flat_mask, taken, g.op("Reshape", self, g.constant([-1], torch.int64)))
    return g.op("Reshape", flat, shape)


# -- unique --------------------------------------------------------------------------------------


# ONNX Unique has no onnxruntime kernel for these; they widen losslessly to a type it has
_UNIQUE_WIDENED = {torch.bool: torch.int64, torch.uint8: torch.int64, torch.int16: torch.int64,
                   torch.int32: torch.int64, torch.bfloat16: torch.float32}


def _unique(g: Graph, self: Value, dtype: torch.dtype, **attributes) -> tuple[Value, Value, Value]:
    """(values, inverse, counts) of ONNX Unique, sorted, of `self` (of `dtype`), in `dtype`."""
    values, _, inverse, counts = g.op("Unique", widened(g, self, _UNIQUE_WIDENED, dtype), sorted_i=1, outputs=4,
                                      **attributes)
    return narrowed(g, values, dtype, _UNIQUE_WIDENED), inverse, counts


def _empty(g: Graph) -> Value:
    """torch's stand-in for an output not asked for: an empty int64 tensor (its own node)."""
    return g.op("Identity", g.constant([], torch.int64))


@symbolic("aten::_unique2")
def unique2(g: Graph, self: Value, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False) -> tuple[Value, Value, Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    ONNX Unique over the flattened tensor, sorted ascending (torch's CPU and CUDA kernels sort
    whatever `sorted` says); the inverse indices take the input's shape. Outputs torch leaves
    empty (inverse or counts not asked for) are empty here too.
    """
    values, inverse, counts = _unique(g, _flat(g, self), self.dtype)
    inverse = g.op("Reshape", inverse, g.op("Shape", self)) if return_inverse else _empty(g)
    return values, inverse, counts if return_counts else _empty(g)


@symbolic("aten::_unique")
def unique(g: Graph, self: Value, sorted: bool = True, return_inverse: bool = False) -> tuple[Value, Value]:
    """_unique(Tensor self, bool sorted=True, bool return_inverse=False) -> (Tensor, Tensor)

    `_unique2` without the counts: sorted whatever `sorted` says, as torch's kernels are.
    """
    values, inverse, _ = unique2(g, self, sorted, return_inverse, False)
    return values, inverse


@symbolic("aten::unique_dim")
def unique_dim(g: Graph, self: Value, dim: int, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False) -> tuple[Value, Value, Value]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    ONNX Unique along `dim`: the distinct slices, sorted; inverse indices per slice.
    """
    values, inverse, counts = _unique(g, self, self.dtype, axis_i=dim)
    return values, inverse if return_inverse else _empty(g), counts if return_counts else _empty(g)


@symbolic("aten::unique_consecutive")
def unique_consecutive(g: Graph, self: Value, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> tuple[Value, Value, Value]:
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)

    Each run of equal neighbours (elements of the flattened tensor, or slices along `dim`)
    kept once, in order: a run starts where an entry differs from the one before (NaN differs
    from everything, as in torch). The inverse is the run number of each entry (a CumSum of the
    starts), the counts the distances between run starts.
    """
    source = _flat(g, self) if dim is None else self
    rank = 1 if dim is None else rank_of(self)
    axis = 0 if dim is None else normalize_dim(dim, rank)
    length = g.op("Shape", source, start_i=axis, end_i=axis + 1)
    starts = _run_starts(g, source, axis, rank, length)
    values = g.op("Compress", source, starts, axis_i=axis)
    inverse = _empty(g)
    if return_inverse:
        run = g.op("CumSum", cast_to(g, starts, torch.int64), g.constant(0, torch.int64))
        inverse = g.op("Sub", run, g.constant(1, torch.int64))
        if dim is None:
            inverse = g.op("Reshape", inverse, g.op("Shape", self))
    counts = _empty(g)
    if return_counts:
        first = g.op("Squeeze", g.op("NonZero", starts), g.constant([0], torch.int64))
        ends = g.op("Concat", g.op("Slice", first, g.constant([1], torch.int64), g.constant([INT64_MAX], torch.int64)),
                    length, axis_i=0)
        counts = g.op("Sub", ends, first)
    return values, inverse, counts


def _flat(g: Graph, self: Value) -> Value:
    return g.op("Reshape", self, g.constant([-1], torch.int64))


def _run_starts(g: Graph, source: Value, axis: int, rank: int, length: Value) -> Value:
    """A bool vector over `axis`: True where the slice differs from the one before (and at 0)."""
    one, axes = g.constant([1], torch.int64), g.constant([axis], torch.int64)
    after = g.op("Slice", source, one, g.constant([INT64_MAX], torch.int64), axes)
    before = g.op("Slice", source, g.constant([0], torch.int64), g.constant([-1], torch.int64), axes)
    differs = g.op("Not", g.op("Equal", after, before))
    others = [d for d in range(rank) if d != axis]
    if others:  # a slice differs where any of its entries does
        differs = cast_to(g, reduce(g, "ReduceMax", cast_to(g, differs, torch.int32), others, False), torch.bool)
    starts = g.op("Concat", g.constant([True], torch.bool), differs, axis_i=0)
    return g.op("Slice", starts, g.constant([0], torch.int64), length, g.constant([0], torch.int64))  # empty input: none


# -- counting and repeating ----------------------------------------------------------------------


@symbolic("aten::bincount")
def bincount(g: Graph, self: Value, weights: Value | None = None, minlength=0) -> Value:
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0) -> Tensor

    The count (or weight sum) of each value 0..max(self) (at least `minlength` bins): a
    ScatterElements with `add` into zeros, exact in every dtype. The length, max(self) + 1, is
    read at run time; an empty input has `minlength` bins.

    Limits: a negative input, which torch refuses, is counted from the last bin (ScatterElements'
    negative indices), not reported.
    """
    dtype = g.ctx.output_dtype
    index = cast_to(g, self, torch.int64)
    largest = reduce(g, "ReduceMax", g.op("Concat", index, g.constant([-1], torch.int64), axis_i=0), [0], True)
    bins = g.op("Max", g.op("Add", largest, g.constant([1], torch.int64)), int64_vector(g, [minlength]))
    updates = (cast_to(g, weights, dtype) if weights is not None
               else g.op("Expand", g.constant(1, dtype), g.op("Shape", index)))
    return g.op("ScatterElements", _fill(g, bins, 0), index, updates, axis_i=0, reduction_s="add")


@symbolic("aten::repeat_interleave.Tensor")
def repeat_interleave(g: Graph, repeats: Value, *, output_size=None) -> Value:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor

    Index i written repeats[i] times, in order; `repeat_interleave(x, r, dim)` reaches here
    (then index_select). Each index's first position (the exclusive CumSum of the repeats)
    gets a mark, a mark per index so that zero repeats stack on one position; the CumSum of
    the marks less one is the output. Its length, sum(repeats), is known only at run time.

    Limits: negative repeats, which torch refuses, are not reported.
    """
    counts = cast_to(g, repeats, torch.int64)
    ends = g.op("CumSum", counts, g.constant(0, torch.int64))
    total = reduce(g, "ReduceSum", counts, [0], True)
    starts = g.op("Sub", ends, counts)
    # one slot past the end: indices whose zero repeats come last mark position `total`
    slots = g.op("ConstantOfShape", g.op("Add", total, g.constant([1], torch.int64)),
                 value_t=to_numpy(torch.tensor([0], dtype=torch.int64)))
    marks = g.op("ScatterElements", slots, starts, g.op("Expand", g.constant(1, torch.int64), g.op("Shape", counts)),
                 axis_i=0, reduction_s="add")
    marks = g.op("Slice", marks, g.constant([0], torch.int64), total, g.constant([0], torch.int64))
    index = g.op("Sub", g.op("CumSum", marks, g.constant(0, torch.int64)), g.constant(1, torch.int64))
    return cast_to(g, index, g.ctx.output_dtype)
