"""Ops whose values (or output sizes) depend on the data: `.item()`, boolean-mask writes and
reads (`index_put`, `masked_select`, `masked_scatter`), `unique`, and the data checks that
come with them.

torch.export captures a data-dependent size as an unbacked symbol (`u0`); here it becomes a
size computed at run time (NonZero's count, Unique's length), never a constant. The harness
compares such outputs when torch and the backend agree on the size, which they do when the
symbolic computes what torch computes.
"""

from __future__ import annotations

import torch

from exporter.graph import Graph, Value
from exporter.registry import symbolic
from exporter.symbolics._helpers import cast_to, dim_size, emits_no_nodes, int64_vector, rank_of
from exporter.symbolics.indexing import _advanced_indices, _stack_broadcast


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


@symbolic("aten::_unique2")
def unique2(g: Graph, self: Value, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False) -> tuple[Value, Value, Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    ONNX Unique over the flattened tensor, sorted ascending (torch's CPU and CUDA kernels sort
    whatever `sorted` says); the inverse indices take the input's shape. Outputs torch leaves
    empty (inverse or counts not asked for) are empty here too.

    Limits: always sorted; unique_consecutive is not translated.
    """
    flat = g.op("Reshape", self, g.constant([-1], torch.int64))
    values, _, inverse, counts = g.op("Unique", flat, sorted_i=1, outputs=4)
    empty = g.constant([], torch.int64)
    inverse = g.op("Reshape", inverse, g.op("Shape", self)) if return_inverse else empty
    return values, inverse, counts if return_counts else g.op("Identity", empty)


@symbolic("aten::unique_dim")
def unique_dim(g: Graph, self: Value, dim: int, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False) -> tuple[Value, Value, Value]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    ONNX Unique along `dim`: the distinct slices, sorted; inverse indices per slice.
    """
    values, _, inverse, counts = g.op("Unique", self, axis_i=dim, sorted_i=1, outputs=4)
    empty = g.constant([], torch.int64)
    return values, inverse if return_inverse else empty, counts if return_counts else g.op("Identity", empty)
