"""Reductions (sum, mean, prod, max, min, amax, amin) and softmax along a dim.

Reductions cast their input to the result dtype first, as torch accumulates in it (sum of
int32 or bool is int64; `dtype=` converts before reducing). The opset-dependent spelling of
the axes (attribute at 17, input from 18 for all but ReduceSum) lives in `_helpers.reduce`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, normalize_dim, rank_of, reduce, register_from_schema


def _axes(self: Value, dim: int | Sequence[int] | None) -> list[int] | None:
    """Normalised axes; None (every axis) for dim=None or [] as torch reads them."""
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return None
    rank = rank_of(self)
    return sorted(normalize_dim(d, rank) for d in dims)


def _reduces_nothing(self: Value, axes: list[int] | None) -> bool:
    """Whether the reduced axes hold no element, as far as the static shape says (torch.export
    assumes a dynamic size is at least 2, so only a static 0 can)."""
    if self.shape is None:
        return False
    reduced = self.shape if axes is None else [self.shape[a] for a in axes]
    return any(isinstance(size, int) and size == 0 for size in reduced)


def _reduce_to_result(g: Graph, op_type: str, self: Value, dim, keepdim: bool) -> Value:
    """Cast to the result dtype, then reduce; a 0-d input has nothing to reduce. The mean of no
    element is NaN in torch and 0 in onnxruntime's ReduceMean: there it is the sum (0) over 0."""
    self = cast_to(g, self, g.ctx.output_dtype)
    if rank_of(self) == 0:
        return self
    axes = _axes(self, dim)
    if op_type == "ReduceMean" and _reduces_nothing(self, axes):
        return g.op("Div", reduce(g, "ReduceSum", self, axes, keepdim), g.constant(0, self.dtype))
    return reduce(g, op_type, self, axes, keepdim)


def _reduction_form(reduce_fn: Any, reduce_op: str, whole: bool) -> Any:
    """The symbolic of one overload of a reduction: over the given axes, or (`whole`) all of them.
    `reduce_fn(g, reduce_op, self, dim, keepdim)` emits it."""
    if whole:
        def reduction(g: Graph, self: Value, *, dtype=None) -> Value:
            return reduce_fn(g, reduce_op, self, None, False)
    else:
        def reduction(g: Graph, self: Value, dim=None, keepdim=False, *, dtype=None) -> Value:
            return reduce_fn(g, reduce_op, self, dim, keepdim)
    return reduction


# sum, mean and prod over some axes or the whole tensor, in the result dtype
for _op, _reduce_op, _overload in (("sum", "ReduceSum", "dim_IntList"), ("mean", "ReduceMean", "dim"),
                                   ("prod", "ReduceProd", "dim_int")):
    for _target, _whole in ((f"aten::{_op}.{_overload}", False), (f"aten::{_op}", True)):
        register_from_schema([_target], _reduction_form(_reduce_to_result, _reduce_op, _whole),
                             name=f"{_op}_{'all' if _whole else 'dim'}", note=f"ONNX {_reduce_op} in the result dtype.")


def _nan_flags(g: Graph, self: Value) -> Value:
    """1 where `self` is NaN, 0 elsewhere (int32, which ReduceMax and ArgMax both take)."""
    return g.op("Cast", g.op("IsNaN", self), to_i=onnx_type(torch.int32))


def _extreme(g: Graph, reduce_op: str, self: Value, axes: list[int] | None, keepdim: bool) -> Value:
    """ReduceMax/ReduceMin that yield NaN where a reduced element is NaN, as torch does
    (onnxruntime's reductions skip NaN unless it comes first)."""
    values = reduce(g, reduce_op, self, axes, keepdim)
    if not self.dtype.is_floating_point:
        return values
    has_nan = reduce(g, "ReduceMax", _nan_flags(g, self), axes, keepdim)
    nan = g.constant(float("nan"), self.dtype)
    return g.op("Where", g.op("Cast", has_nan, to_i=onnx_type(torch.bool)), nan, values)


def _extreme_to_result(g: Graph, reduce_op: str, self: Value, dim, keepdim: bool) -> Value:
    """Max or min over `dim`; bools reduce as uint8 (ReduceMax/Min take bool only from 20)."""
    if rank_of(self) == 0:
        return self
    if self.dtype == torch.bool:
        values = _extreme(g, reduce_op, cast_to(g, self, torch.uint8), _axes(self, dim), keepdim)
        return g.op("Cast", values, to_i=onnx_type(torch.bool))
    return _extreme(g, reduce_op, self, _axes(self, dim), keepdim)


@symbolic("aten::max")
def max_all(g: Graph, self: Value) -> Value:
    """max(Tensor self) -> Tensor"""
    return _extreme_to_result(g, "ReduceMax", self, None, False)


@symbolic("aten::min")
def min_all(g: Graph, self: Value) -> Value:
    """min(Tensor self) -> Tensor"""
    return _extreme_to_result(g, "ReduceMin", self, None, False)


@symbolic("aten::amax")
def amax(g: Graph, self: Value, dim=(), keepdim=False) -> Value:
    """amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _extreme_to_result(g, "ReduceMax", self, dim, keepdim)


@symbolic("aten::amin")
def amin(g: Graph, self: Value, dim=(), keepdim=False) -> Value:
    """amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _extreme_to_result(g, "ReduceMin", self, dim, keepdim)


def _extreme_along(g: Graph, reduce_op: str, arg_op: str, self: Value, dim: int, keepdim: bool) -> tuple[Value, Value]:
    """(values, indices) along `dim`. torch returns the first index of a tie, as ArgMax/ArgMin
    do with select_last_index=0, and the first NaN's index where there is a NaN. Bools
    compare as uint8."""
    if rank_of(self) == 0:
        return self, g.constant(0, torch.int64)
    axis = normalize_dim(dim, rank_of(self))
    if self.dtype == torch.bool:
        self = cast_to(g, self, torch.uint8)
    values = _extreme(g, reduce_op, self, [axis], keepdim)
    indices = g.op(arg_op, self, axis_i=axis, keepdims_i=int(keepdim), select_last_index_i=0)
    if g.ctx.output_dtype == torch.bool:
        values = g.op("Cast", values, to_i=onnx_type(torch.bool))
    if not self.dtype.is_floating_point:
        return values, indices
    flags = _nan_flags(g, self)
    first_nan = g.op("ArgMax", flags, axis_i=axis, keepdims_i=int(keepdim), select_last_index_i=0)
    has_nan = g.op("Cast", reduce(g, "ReduceMax", flags, [axis], keepdim), to_i=onnx_type(torch.bool))
    return values, g.op("Where", has_nan, first_nan, indices)


@symbolic("aten::max.dim")
def max_dim(g: Graph, self: Value, dim: int, keepdim=False) -> tuple[Value, Value]:
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _extreme_along(g, "ReduceMax", "ArgMax", self, dim, keepdim)


@symbolic("aten::min.dim")
def min_dim(g: Graph, self: Value, dim: int, keepdim=False) -> tuple[Value, Value]:
    """min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _extreme_along(g, "ReduceMin", "ArgMin", self, dim, keepdim)


# -- softmax ----------------------------------------------------------------------------------------


def _softmax(g: Graph, onnx_op: str, self: Value, dim: int) -> Value:
    """`onnx_op` along any dim (opset >= 13 normalises over the single axis), result dtype."""
    self = cast_to(g, self, g.ctx.output_dtype)
    if rank_of(self) == 0:
        return _softmax_scalar(g, onnx_op, self)
    return g.op(onnx_op, self, axis_i=normalize_dim(dim, rank_of(self)))


def _softmax_scalar(g: Graph, onnx_op: str, self: Value) -> Value:
    """A 0-d input is its own single class: softmax is 1, log_softmax 0."""
    return g.op("Add", g.op("Mul", self, g.constant(0, self.dtype)), g.constant(int(onnx_op == "Softmax"), self.dtype))


@symbolic("aten::softmax.int")
def softmax(g: Graph, self: Value, dim: int, dtype=None) -> Value:
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(g, "Softmax", self, dim)


@symbolic("aten::_softmax")
def softmax_kernel(g: Graph, self: Value, dim: int, half_to_float: bool) -> Value:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor

    half_to_float computes and returns float32 (the result dtype says so).
    """
    return _softmax(g, "Softmax", self, dim)


@symbolic("aten::log_softmax.int")
def log_softmax(g: Graph, self: Value, dim: int, dtype=None) -> Value:
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(g, "LogSoftmax", self, dim)


@symbolic("aten::_log_softmax")
def log_softmax_kernel(g: Graph, self: Value, dim: int, half_to_float: bool) -> Value:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor

    half_to_float computes and returns float32 (the result dtype says so).
    """
    return _softmax(g, "LogSoftmax", self, dim)


# -- any / all ----------------------------------------------------------------------------------------


def _any_all(g: Graph, reduce_op: str, self: Value, dim, keepdim: bool) -> Value:
    """Truth values (`x != 0`, NaN true) reduced as uint8 (ReduceMax/Min take bool only from
    opset 20): any is their max, all their min. An empty reduction gives ONNX's identity
    (0 for max, 255 for min): False for any, True for all, as torch says."""
    truth = cast_to(g, self, torch.bool)
    if rank_of(self) == 0:
        return cast_to(g, truth, g.ctx.output_dtype)
    flags = g.op("Cast", truth, to_i=onnx_type(torch.uint8))
    reduced = reduce(g, reduce_op, flags, _axes(self, dim), keepdim)
    return g.op("Cast", g.op("Cast", reduced, to_i=onnx_type(torch.bool)), to_i=onnx_type(g.ctx.output_dtype))


# any (ReduceMax of the flags) and all (ReduceMin), over one axis, several, or the whole tensor
for _op, _reduce_op in (("any", "ReduceMax"), ("all", "ReduceMin")):
    for _overload, _suffix in (("dim", "dim"), ("dims", "dims"), ("", "all")):
        register_from_schema([f"aten::{_op}" + (f".{_overload}" if _overload else "")],
                             _reduction_form(_any_all, _reduce_op, not _overload), name=f"{_op}_{_suffix}",
                             note=f"ONNX {_reduce_op} of the input's flags as uint8.")


# -- scans --------------------------------------------------------------------------------------------


@symbolic("aten::cumsum")
def cumsum(g: Graph, self: Value, dim: int, *, dtype=None) -> Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    ONNX CumSum in the result dtype (bool and integer inputs sum as int64, as in torch).
    """
    self = cast_to(g, self, g.ctx.output_dtype)
    if rank_of(self) == 0:
        return self
    axis = g.constant(normalize_dim(dim, rank_of(self)), torch.int64)
    return g.op("CumSum", self, axis)
