"""argmax/argmin, sort and flip.

torch treats NaN as larger (argmax, sort) and smaller (argmin) than every number and picks the
first of equal values; ONNX ArgMax/ArgMin pick the first too but skip NaN, so a slice holding
a NaN answers with its first NaN's index. Sorting is TopK over the whole axis (its length read
at run time), whose ties keep the lower index first.
"""

from __future__ import annotations

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import INT64_MAX, narrowed, normalize_dim, rank_of, reduce, widened

# ONNX ArgMax/ArgMin/TopK have no bool kernel; onnxruntime's TopK none for small integers
_WIDENED = {torch.bool: torch.int32, torch.uint8: torch.int32, torch.int8: torch.int32, torch.int16: torch.int32}


def _arg_extreme(g: Graph, onnx_op: str, self: Value, dim, keepdim: bool) -> Value:
    rank = rank_of(self)
    if dim is None:
        flat = g.op("Reshape", self, g.constant([-1], torch.int64))
        found = _arg_along(g, onnx_op, flat, 0, self.dtype, keepdims=False)
        if keepdim and rank > 0:
            return g.op("Reshape", found, g.constant([1] * rank, torch.int64))
        return found
    if rank == 0:
        return g.constant(0, torch.int64)
    return _arg_along(g, onnx_op, self, normalize_dim(dim, rank), self.dtype, keepdims=keepdim)


def _arg_along(g: Graph, onnx_op: str, self: Value, axis: int, dtype, keepdims: bool) -> Value:
    found = g.op(onnx_op, widened(g, self, _WIDENED), axis_i=axis, keepdims_i=int(keepdims))
    if dtype is None or not dtype.is_floating_point:
        return found
    nan = g.op("Cast", g.op("IsNaN", self), to_i=onnx_type(torch.int32))
    first_nan = g.op("ArgMax", nan, axis_i=axis, keepdims_i=int(keepdims))
    has_nan = g.op("Cast", reduce(g, "ReduceMax", nan, [axis], keepdims), to_i=onnx_type(torch.bool))
    return g.op("Where", has_nan, first_nan, found)


@symbolic("aten::argmax")
def argmax(g: Graph, self: Value, dim=None, keepdim=False) -> Value:
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg_extreme(g, "ArgMax", self, dim, keepdim)


@symbolic("aten::argmin")
def argmin(g: Graph, self: Value, dim=None, keepdim=False) -> Value:
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg_extreme(g, "ArgMin", self, dim, keepdim)


def _sort(g: Graph, self: Value, dim: int, descending: bool) -> tuple[Value, Value]:
    if rank_of(self) == 0:
        return g.op("Identity", self), g.constant(0, torch.int64)
    axis = normalize_dim(dim, rank_of(self))
    length = g.op("Shape", self, start_i=axis, end_i=axis + 1)
    values, indices = g.op("TopK", widened(g, self, _WIDENED), length, axis_i=axis, largest_i=int(descending), sorted_i=1, outputs=2)
    return narrowed(g, values, self.dtype, _WIDENED), indices


@symbolic("aten::sort")
def sort(g: Graph, self: Value, dim=-1, descending=False) -> tuple[Value, Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    Limits: NaN is ordered as onnxruntime's TopK orders it, not last as in torch.
    """
    return _sort(g, self, dim, descending)


@symbolic("aten::sort.stable")
def sort_stable(g: Graph, self: Value, *, stable=None, dim=-1, descending=False) -> tuple[Value, Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    TopK keeps equal values in index order, so the sort is stable either way.

    Limits: NaN is ordered as onnxruntime's TopK orders it, not last as in torch.
    """
    return _sort(g, self, dim, descending)


@symbolic("aten::flip")
def flip(g: Graph, self: Value, dims) -> Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    rank = rank_of(self)
    axes = sorted({normalize_dim(d, rank) for d in dims})
    if not axes:
        return g.op("Identity", self)
    count = len(axes)
    return g.op(
        "Slice", self, g.constant([-1] * count, torch.int64), g.constant([-INT64_MAX - 1] * count, torch.int64),
        g.constant(axes, torch.int64), g.constant([-1] * count, torch.int64),
    )
