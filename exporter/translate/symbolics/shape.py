"""Shape ops (view, permute, expand, squeeze, cat, split, unfold, pad), tensor factories, a
tensor's sizes as SymInts (`sym_size`) and the runtime checks on them. The arithmetic on sizes
is exporter/translate/symbolics/sizes.py.

SymInts reach the symbolics as 0-d int64 Values (or Python ints when torch.export specialised
them); `int64_vector` turns a mixed size list into one 1-D int64 Value.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch
import torch.fx

from exporter.translate.dtypes import to_numpy
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import (
    INT64_MAX,
    cast_to,
    dim_size,
    emits_no_nodes,
    int64_vector,
    normalize_dim,
    promote,
    rank_of,
    scalar_of,
    squeeze,
    unsqueeze,
)

# -- reshaping ------------------------------------------------------------------------------------


@symbolic("aten::view", "aten::_unsafe_view")
def view(g: Graph, self: Value, size) -> Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)

    `reshape`, `flatten` and `view_as` reach here too: torch.export rewrites them to view.
    A 0 in torch's size is always a size of 0, never ONNX's "copy the input's dim", also when
    it only appears at run time (a dynamic axis of size 0), so Reshape gets allowzero=1.
    """
    return g.op("Reshape", self, int64_vector(g, list(size)), allowzero_i=1)


@symbolic("aten::permute")
def permute(g: Graph, self: Value, dims) -> Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    rank = rank_of(self)
    perm = [normalize_dim(d, rank) for d in dims]
    return self if perm == sorted(perm) else g.op("Transpose", self, perm_i=perm)


@symbolic("aten::transpose.int")
def transpose(g: Graph, self: Value, dim0: int, dim1: int) -> Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = rank_of(self)
    perm = list(range(rank))
    if rank:
        a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
        perm[a], perm[b] = perm[b], perm[a]
    return permute(g, self, perm)


@symbolic("aten::t")
def t(g: Graph, self: Value) -> Value:
    """t(Tensor(a) self) -> Tensor(a)

    0-d and 1-D tensors are returned as they are, as torch does.
    """
    return self if rank_of(self) < 2 else g.op("Transpose", self, perm_i=[1, 0])


@symbolic("aten::expand")
def expand(g: Graph, self: Value, size, *, implicit=False) -> Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    ONNX Expand broadcasts both ways, so torch's -1 ("keep this size") is a 1 in the target
    shape; new leading dims are simply longer target shapes.
    """
    target = [1 if isinstance(s, int) and s == -1 else s for s in size]
    return g.op("Expand", self, int64_vector(g, target))


@symbolic("aten::repeat")
def repeat(g: Graph, self: Value, repeats) -> Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor

    ONNX Tile; torch's extra leading repeats first give the input leading dims of size 1.
    """
    extra = len(repeats) - rank_of(self)
    if extra > 0:
        self = unsqueeze(g, self, list(range(extra)))
    if all(isinstance(r, int) and r == 1 for r in repeats):
        return g.op("Identity", self)
    return g.op("Tile", self, int64_vector(g, list(repeats)))


def _squeeze(g: Graph, self: Value, dims) -> Value:
    """Squeeze the dims of size 1 among `dims`; torch leaves the others. A dim of static size 1
    is squeezed here; a dim known only at run time (a dynamic axis, perhaps 1 only at some
    sizes) is squeezed where the run gives it size 1, as torch does: the output's shape is
    then the input's without those dims (Compress of the shape), so the output's rank follows
    the run, as torch's does."""
    rank = rank_of(self)
    if rank == 0:
        return self
    axes = sorted({normalize_dim(d, rank) for d in dims})
    dynamic = [a for a in axes if not isinstance(self.shape[a], int)]
    static = [a for a in axes if self.shape[a] == 1]
    if not dynamic:
        return squeeze(g, self, static) if static else self
    if len(axes) == rank:  # every dim: ONNX's Squeeze without axes drops the 1s of the run
        return g.op("Squeeze", self)
    shape = g.op("Shape", self)
    asked = g.constant([a in axes for a in range(rank)], torch.bool)
    dropped = g.op("And", asked, g.op("Equal", shape, g.constant([1] * rank, torch.int64)))
    return g.op("Reshape", self, g.op("Compress", shape, g.op("Not", dropped), axis_i=0), allowzero_i=1)


@symbolic("aten::squeeze")
def squeeze_all(g: Graph, self: Value) -> Value:
    """squeeze(Tensor(a) self) -> Tensor(a)"""
    return _squeeze(g, self, range(rank_of(self)))


@symbolic("aten::squeeze.dim")
def squeeze_dim(g: Graph, self: Value, dim: int) -> Value:
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"""
    return _squeeze(g, self, [dim])


@symbolic("aten::squeeze.dims")
def squeeze_dims(g: Graph, self: Value, dim) -> Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    return _squeeze(g, self, dim)


@symbolic("aten::unsqueeze")
def unsqueeze_dim(g: Graph, self: Value, dim: int) -> Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return unsqueeze(g, self, [normalize_dim(dim, rank_of(self) + 1)])


# -- joining and splitting --------------------------------------------------------------------------


@symbolic("aten::cat")
def cat(g: Graph, tensors, dim=0) -> Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor

    Operands are promoted to the result dtype; torch's legacy empty 1-D operands are dropped.
    """
    rank = len(g.ctx.output_meta.shape)
    kept = [t for t in tensors if rank == 1 or t.shape != (0,)]
    kept = promote(g, *kept)
    if len(kept) == 1:
        return kept[0]
    return g.op("Concat", *kept, axis_i=normalize_dim(dim, rank))


@symbolic("aten::split_with_sizes")
def split_with_sizes(g: Graph, self: Value, split_sizes, dim=0) -> list[Value]:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, rank_of(self))
    if len(split_sizes) == 1:
        return [self]
    parts = g.op("Split", self, int64_vector(g, list(split_sizes)), axis_i=axis, outputs=len(split_sizes))
    return list(parts)


@symbolic("aten::split.Tensor")
def split(g: Graph, self: Value, split_size: int, dim=0) -> list[Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]

    Chunks of `split_size` and a smaller last one; `chunk` reaches here as split.Tensor.
    torch.export fixes the chunk count; the sizes may be dynamic (`chunk(2)` of a `2 * batch`
    axis), and are then computed from the input's shape at run time.
    """
    axis = normalize_dim(dim, rank_of(self))
    count = len(g.ctx.output_meta)
    length = dim_size(g, self, axis)
    if isinstance(length, int) and isinstance(split_size, int):
        return split_with_sizes(g, self, [split_size] * (count - 1) + [length - split_size * (count - 1)], axis)
    if count == 1:
        return [self]
    size = int64_vector(g, [split_size])
    taken = g.op("Mul", size, g.constant([count - 1], torch.int64))
    last = g.op("Sub", int64_vector(g, [length]), taken)
    sizes = int64_vector(g, [split_size] * (count - 1) + [last])
    return list(g.op("Split", self, sizes, axis_i=axis, outputs=count))


@symbolic("aten::unfold")
def unfold(g: Graph, self: Value, dimension: int, size: int, step: int) -> Value:
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)

    Windows of `size` every `step` along `dimension` as one Gather of an (n, size) index
    grid, then the window axis moves last. Works for dynamic sizes (Range).
    """
    rank = rank_of(self)
    if rank == 0:  # torch's one window of the value itself (size is then 0 or 1)
        return unsqueeze(g, self, [0]) if size == 1 else g.op("Reshape", self, g.constant([0], torch.int64))
    axis = normalize_dim(dimension, rank)
    length = dim_size(g, self, axis)
    offsets = np.arange(size, dtype=np.int64)
    if isinstance(length, int):
        starts = np.arange(0, length - size + 1, step, dtype=np.int64)
        indices = g.constant(starts[:, None] + offsets[None, :])
    else:
        stop = g.op("Sub", length, g.constant([size - 1], torch.int64))
        starts = g.op("Range", g.constant(0), squeeze(g, stop, [0]), g.constant(step))
        indices = g.op("Add", unsqueeze(g, starts, [1]), g.constant(offsets[None, :]))
    windows = g.op("Gather", self, indices, axis_i=axis)
    if axis == max(rank - 1, 0):
        return windows
    perm = [*range(axis + 1), *range(axis + 2, rank + 1), axis + 1]
    return g.op("Transpose", windows, perm_i=perm)


@symbolic("aten::constant_pad_nd")
def constant_pad_nd(g: Graph, self: Value, pad, value=0) -> Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor

    `pad` lists (begin, end) pairs from the last dim backwards. Positive amounts are a Pad with
    `value`, negative ones crop with a Slice. An amount computed from dynamic sizes (a U-Net's
    pad to a multiple, `(8 - h % 8) % 8`) is computed in the graph: its positive part pads, its
    negative part crops, whichever it is at run time.
    """
    rank = rank_of(self)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if any(isinstance(a, Value) for a in (*begins, *ends)):
        return _pad_run_time_amounts(g, self, begins, ends, value)
    out = self
    growth = [max(b, 0) for b in begins] + [max(e, 0) for e in ends]
    if any(growth):
        out = g.op("Pad", out, g.constant(growth, torch.int64), scalar_of(g, value, self.dtype), mode_s="constant")
    cropped = [a for a in range(rank) if begins[a] < 0 or ends[a] < 0]
    if cropped:
        starts = [-min(begins[a], 0) for a in cropped]
        stops = [ends[a] if ends[a] < 0 else INT64_MAX for a in cropped]
        out = g.op("Slice", out, g.constant(starts), g.constant(stops), g.constant(cropped))
    return out


def _pad_run_time_amounts(g: Graph, self: Value, begins: list, ends: list, value) -> Value:
    """constant_pad_nd with amounts known only at run time (0-d int64 Values among ints): Pad
    by max(amount, 0), then Slice off -min(amount, 0) on the axes whose amount is a Value."""
    zero = g.constant(0, torch.int64)

    def part(amount, op_type: str):
        if isinstance(amount, Value):
            return g.op(op_type, scalar_of(g, amount, torch.int64), zero)
        return max(amount, 0) if op_type == "Max" else min(amount, 0)

    growth = int64_vector(g, [part(a, "Max") for a in (*begins, *ends)])
    out = g.op("Pad", self, growth, scalar_of(g, value, self.dtype), mode_s="constant")
    axes = [a for a in range(len(begins)) if isinstance(begins[a], Value) or isinstance(ends[a], Value)
            or begins[a] < 0 or ends[a] < 0]
    starts = int64_vector(g, [g.op("Neg", part(begins[a], "Min")) if isinstance(begins[a], Value)
                              else -min(begins[a], 0) for a in axes])
    stops = []
    for a in axes:
        if isinstance(ends[a], Value):
            end = scalar_of(g, ends[a], torch.int64)
            stops.append(g.op("Where", g.op("Less", end, zero), end, g.constant(INT64_MAX, torch.int64)))
        else:
            stops.append(ends[a] if ends[a] < 0 else INT64_MAX)
    return g.op("Slice", out, starts, int64_vector(g, stops), g.constant(axes, torch.int64))


# -- factories ----------------------------------------------------------------------------------------


def _fill(g: Graph, shape: Value, fill_value) -> Value:
    """A tensor of `shape` holding `fill_value`: a Python number (ConstantOfShape) or a 0-d
    Value, a fill read from a tensor at run time (`torch.full(size, t)` with a 0-d `t`),
    which is cast to the result's dtype and expanded."""
    dtype = g.ctx.output_dtype
    if isinstance(fill_value, Value):
        return g.op("Expand", scalar_of(g, fill_value, dtype), shape)
    value = to_numpy(torch.tensor([fill_value], dtype=dtype))  # bfloat16 too (ml_dtypes)
    return g.op("ConstantOfShape", shape, value_t=value)


@symbolic("aten::full")
def full(g: Graph, size, fill_value, **options) -> Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    `zeros`, `ones`, `new_zeros`, ... reach here as full.
    """
    return _fill(g, int64_vector(g, list(size)), fill_value)


@symbolic("aten::full_like")
def full_like(g: Graph, self: Value, fill_value, **options) -> Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    `zeros_like`, `ones_like`, ... reach here as full_like.
    """
    return _fill(g, g.op("Shape", self), fill_value)


@symbolic("aten::scalar_tensor")
def scalar_tensor(g: Graph, s, **options) -> Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return scalar_of(g, s, g.ctx.output_dtype)


@symbolic("aten::arange.start_step")
def arange(g: Graph, start, end, step=1, **options) -> Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    A constant when the bounds are static. Otherwise torch's own arithmetic: integer bounds of
    an integer result count in int64 (a Range); any other form counts `ceil((end - start) /
    step)` elements in float64 (the size torch.export records; a float32 Range could count one
    more or one fewer). A floating result is `start + i * step` in float64, then cast. An
    integer result is `trunc(start) + i * trunc(step)` in int64, then cast: torch's kernel
    converts the bounds to the result's integer type before it steps, so
    arange(2, 8.5, 1.5, dtype=int64) is [2, 3, 4, 5, 6], not the casts of 2, 3.5, 5, 6.5, 8.
    """
    dtype = g.ctx.output_dtype
    bounds = (start, end, step)
    if not any(isinstance(v, Value) for v in bounds):
        return g.constant(torch.arange(start, end, step, dtype=dtype))
    if not dtype.is_floating_point and all(_is_integral(v) for v in bounds):
        return cast_to(g, g.op("Range", *(scalar_of(g, v, torch.int64) for v in bounds)), dtype)
    first, last, stride = (scalar_of(g, v, torch.float64) for v in bounds)
    count = g.op("Ceil", g.op("Div", g.op("Sub", last, first), stride))
    if dtype.is_floating_point:
        index = g.op("Range", g.constant(0.0, torch.float64), count, g.constant(1.0, torch.float64))
        return cast_to(g, g.op("Add", first, g.op("Mul", index, stride)), dtype)
    index = g.op("Range", g.constant(0, torch.int64), cast_to(g, count, torch.int64), g.constant(1, torch.int64))
    first, stride = _truncated(g, start), _truncated(g, step)
    return cast_to(g, g.op("Add", first, g.op("Mul", index, stride)), dtype)


def _truncated(g: Graph, value) -> Value:
    """A bound as torch's integer arange takes it: truncated toward zero, a 0-d int64
    (ONNX's Cast of a float to an integer truncates toward zero too)."""
    if isinstance(value, Value):
        return scalar_of(g, value, torch.int64)
    return g.constant(math.trunc(value), torch.int64)


def _is_integral(value) -> bool:
    """A Python int or an integer Value (a SymInt), not a float or SymFloat."""
    if isinstance(value, Value):
        return value.dtype is not None and not value.dtype.is_floating_point
    return isinstance(value, int)


# -- sizes as SymInts and runtime checks ----------------------------------------------------------


@symbolic("aten::sym_size.int")
def sym_size(g: Graph, self: Value, dim: int) -> Value:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    return squeeze(g, dim_size(g, self, dim), [0])


_CHECKED_EXPRESSION = re.compile(r"expression (?P<expression>.+?)(?: on node '[^']*')?$")


@symbolic("aten::_assert_scalar")
@emits_no_nodes
def assert_scalar(g: Graph, self, assert_msg: str) -> None:
    """_assert_scalar(Scalar self, str assert_msg) -> ()

    A runtime check of the program: a guard on dynamic sizes that torch.export could not prove
    for every size (the capture retries such axes as Dim.DYNAMIC, which turns their guards into
    these checks). ONNX has no assertion: an op chosen to fail when the check is false would
    fail only on runtimes that treat its invalid input as an error (ONNX leaves several such
    cases undefined), and would sit on an output's path. So the check is not emitted; it is
    recorded (`Graph.dropped_checks`), and the conversion puts it in the model's metadata
    (`roundtrip.dropped_checks`) and warns, naming the expression and the user's line. A
    check the conversion can decide (a constant) is dropped silently when true and refused
    when false.
    """
    if isinstance(self, bool) or (isinstance(self, Value) and self.const is not None):
        holds = bool(self if isinstance(self, bool) else self.const)
        if not holds:
            raise ValueError(f"the program's runtime check fails for the exported shapes: {assert_msg}")
        return None
    match = _CHECKED_EXPRESSION.search(" ".join(str(assert_msg).split()))
    g.dropped_checks.append({
        "expression": match["expression"] if match else str(assert_msg),
        "fx_node": g.ctx.node.name,
        "source": _check_source(g),
    })
    return None


def _check_source(g: Graph) -> str:
    """The user's line of a check: the assert's own provenance, else that of the node whose
    value it checks (the comparison torch.export traced from the user's code)."""
    from exporter.contract.keys import SOURCE_KEY
    from exporter.translate.provenance import source_of

    if g.provenance.get(SOURCE_KEY):
        return g.provenance[SOURCE_KEY]
    checked = g.ctx.node.args[0] if g.ctx.node.args else None
    return source_of(checked) if isinstance(checked, torch.fx.Node) else ""


@symbolic("aten::_assert_tensor_metadata", takes_complex=True)  # a check: no node, any dtype
@emits_no_nodes
def assert_tensor_metadata(g: Graph, a: Value, size=None, stride=None, dtype=None, **options) -> None:
    """_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None, ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()

    A check torch.export proved while tracing: nothing to emit.
    """
    return None
