"""Searching a sorted sequence: `bucketize` and `searchsorted`.

ONNX has no binary search. The insertion index of x in a sorted sequence s is the number of
entries of s below x (left side) or at most x (right side): every value is compared with every
entry and the comparisons summed, O(values * entries) work and memory, exact in every dtype.
torch places NaN after every number: a NaN value's index is the sequence's length.
"""

from __future__ import annotations

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, reduce, result_type

# comparisons onnxruntime runs for these types (Less/LessOrEqual: 32/64-bit ints and floats)
_COMPARED = (torch.float32, torch.float64, torch.int32, torch.int64)


def _compare_dtype(dtype: torch.dtype) -> torch.dtype:
    """`dtype`, or the type its comparisons run in losslessly."""
    if dtype in _COMPARED:
        return dtype
    return torch.float32 if dtype.is_floating_point else torch.int64


def _insertion_index(g: Graph, sequence: Value, values, right: bool, dtype: torch.dtype,
                     batched: bool) -> Value:
    """Where `values` go in the sorted last axis of `sequence` (1-D, or batched over the
    leading dims of `values`): the count of entries below (or, `right`, at most) each value."""
    compare = _compare_dtype(dtype)
    sequence, values = cast_to(g, sequence, compare), cast_to(g, values, compare)
    entries = g.op("Unsqueeze", sequence, g.constant([-2], torch.int64)) if batched else sequence
    below = g.op("LessOrEqual" if right else "Less", entries,
                 g.op("Unsqueeze", values, g.constant([-1], torch.int64)))  # (..., values, entries)
    # the entries' axis counted from the front: onnxruntime's ReduceSum over a negative axis of an
    # empty input returns the input unchanged ((3, 0) stays (3, 0), not zeros of shape (3,))
    entries_axis = g.ctx.node.meta["val"].dim()
    count = reduce(g, "ReduceSum", cast_to(g, below, torch.int64), [entries_axis], False)
    if compare.is_floating_point:
        length = g.op("Shape", sequence, start_i=-1)
        count = g.op("Where", g.op("IsNaN", values), g.op("Squeeze", length, g.constant([0], torch.int64)), count)
    return cast_to(g, count, g.ctx.output_dtype)


@symbolic("aten::bucketize.Tensor")
def bucketize(g: Graph, self: Value, boundaries: Value, *, out_int32: bool = False, right: bool = False) -> Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor

    The bucket of each value: i with boundaries[i-1] < x <= boundaries[i] (`right`:
    boundaries[i-1] <= x < boundaries[i]), compared in the operands' promoted dtype.
    """
    return _insertion_index(g, boundaries, self, right, result_type(g, 0, 1), batched=False)


@symbolic("aten::bucketize.Scalar")
def bucketize_scalar(g: Graph, self, boundaries: Value, *, out_int32: bool = False, right: bool = False) -> Value:
    """bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    return _insertion_index(g, boundaries, self, right, result_type(g, 1, 0), batched=False)


def _searched(g: Graph, sequence: Value, values, right: bool, side: str | None, sorter: Value | None,
              dtype: torch.dtype) -> Value:
    if side is not None:
        right = side == "right"
    if sorter is not None:  # the sequence in sorted order
        sequence = g.op("GatherElements", sequence, sorter, axis_i=-1)
    batched = g.ctx.node.args[0].meta["val"].dim() > 1
    return _insertion_index(g, sequence, values, right, dtype, batched)


@symbolic("aten::searchsorted.Tensor")
def searchsorted(g: Graph, sorted_sequence: Value, self: Value, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Value | None = None) -> Value:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor

    A 1-D sequence serves every value; an N-d one holds one sequence per leading index of
    `self`. `sorter` gives the sequence's sorted order; `side="right"` is `right=True`.
    """
    return _searched(g, sorted_sequence, self, right, side, sorter, result_type(g, 0, 1))


@symbolic("aten::searchsorted.Scalar")
def searchsorted_scalar(g: Graph, sorted_sequence: Value, self, *, out_int32: bool = False, right: bool = False,
                        side: str | None = None, sorter: Value | None = None) -> Value:
    """searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    return _searched(g, sorted_sequence, self, right, side, sorter, result_type(g, 0, 1))
