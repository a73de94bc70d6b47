"""Composite ATen ops that torch.export keeps whole, translated without torch's decomposition.

`torch.export.export` returns training IR, in which a few composite ops survive: activations
(`hardswish`, `hardsigmoid`, `silu`), the `*_like` and `new_*` factories, `contiguous`,
`reshape`, the `to` overloads and the short `arange` overloads. Translating them here keeps
them in the captured program, so a graph holding them needs no `run_decompositions` (which
traces the whole graph again, as long as the capture itself); their in-place forms
(`hardswish_`, `silu_`) reach these through exporter.functionalize's functional twins.

Each translation computes what torch computes: the activations as the ONNX ops of the same
definition (HardSwish is x * relu6(x + 3) / 6, HardSigmoid with alpha 1/6 and beta 1/2 is
relu6(x + 3) / 6), the factories as ConstantOfShape in the result dtype torch inferred.
"""

from __future__ import annotations

from exporter.graph import Graph, Value
from exporter.registry import symbolic
from exporter.symbolics._helpers import cast_to, int64_vector
from exporter.symbolics.shape import _fill, arange, view

HARD_SLOPE = 1.0 / 6.0  # torch.nn.Hardsigmoid/Hardswish: relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1)
HARD_OFFSET = 0.5

# -- activations ----------------------------------------------------------------------------------


@symbolic("aten::hardswish")
def hardswish(g: Graph, self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor"""
    return g.op("HardSwish", self)


@symbolic("aten::hardsigmoid")
def hardsigmoid(g: Graph, self: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor"""
    return g.op("HardSigmoid", self, alpha_f=HARD_SLOPE, beta_f=HARD_OFFSET)


@symbolic("aten::silu")
def silu(g: Graph, self: Value) -> Value:
    """silu(Tensor self) -> Tensor

    x * sigmoid(x), the form onnxruntime fuses (ONNX's Swish needs opset 24).
    """
    return g.op("Mul", self, g.op("Sigmoid", self))


# -- factories ------------------------------------------------------------------------------------


@symbolic("aten::zeros_like", "aten::empty_like")
def zeros_like(g: Graph, self: Value, **options) -> Value:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    `empty_like` too: torch promises no values for it, only the shape and dtype.
    """
    return _fill(g, g.op("Shape", self), 0)


@symbolic("aten::ones_like")
def ones_like(g: Graph, self: Value, **options) -> Value:
    """ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _fill(g, g.op("Shape", self), 1)


@symbolic("aten::new_zeros", "aten::new_empty")
def new_zeros(g: Graph, self: Value, size, **options) -> Value:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    `new_empty` too (no values promised). The dtype is self's unless given: torch inferred it.
    """
    return _fill(g, int64_vector(g, list(size)), 0)


@symbolic("aten::new_ones")
def new_ones(g: Graph, self: Value, size, **options) -> Value:
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(g, int64_vector(g, list(size)), 1)


@symbolic("aten::new_full")
def new_full(g: Graph, self: Value, size, fill_value, **options) -> Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(g, int64_vector(g, list(size)), fill_value)


@symbolic("aten::arange")
def arange_end(g: Graph, end, **options) -> Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return arange(g, 0, end, 1)


@symbolic("aten::arange.start")
def arange_start(g: Graph, start, end, **options) -> Value:
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return arange(g, start, end, 1)


# -- layout, copies and casts -----------------------------------------------------------------------


@symbolic("aten::contiguous")
def contiguous(g: Graph, self: Value, memory_format=None) -> Value:
    """contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)

    Memory layout has no meaning in ONNX: the values are self's.
    """
    return self


@symbolic("aten::reshape")
def reshape(g: Graph, self: Value, shape) -> Value:
    """reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)

    A view where the strides allow one, a copy otherwise; the values are the same either way.
    """
    return view(g, self, shape)


@symbolic("aten::to.dtype", "aten::to.device", "aten::to.dtype_layout", "aten::to.other")
def to(g: Graph, self: Value, *args, **options) -> Value:
    """to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)

    Every overload: a Cast to the result dtype torch inferred, none where it is self's. The
    device is not part of an ONNX graph (as for `_to_copy`, which the decomposition makes of
    these): a model moved between devices computes the same values on one.
    """
    return cast_to(g, self, g.ctx.output_dtype)
