"""Pooling (max, average, adaptive) and pixel (un)shuffle, exactly as torch computes them.

Output sizes follow torch's formula, computed here in Python: with ceil_mode torch drops a last
window that would start in the right padding, which ONNX's ceil_mode did not always do, so the
ONNX ops always run in floor mode with the end pads that give torch's output size. Average
pooling divides by what torch divides by (count_include_pad, windows clipped at the padded
edge, divisor_override): when that differs from ONNX's divisor, the window sums are divided by
torch's divisors explicitly. Max-pool indices are returned in torch's layout: flattened over
each (N, C) plane, where ONNX flattens over the whole tensor.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import (
    cast_to, dim_size, expand_list, output_used, rank_of, reduce, squeeze, static_ints, unsqueeze,
)
from exporter.translate.symbolics.conv import add_batch_axis, drop_batch_axis


def _spatial_of(g: Graph) -> int:
    """The number of pooled axes, from the overload's name (max_pool2d -> 2)."""
    match = re.search(r"(\d)d", g.ctx.target)
    if match is None:
        raise ValueError(f"cannot tell the pooled rank of {g.ctx.target}")
    return int(match.group(1))


def _static_spatial(x: Value, spatial: int) -> list[int | None]:
    shape = x.shape[-spatial:] if x.shape is not None else [None] * spatial
    return [s if isinstance(s, int) else None for s in shape]


@dataclass(frozen=True)
class _Axis:
    """One pooled axis: torch's window geometry and the ONNX pads that reproduce it."""

    size: int | None
    kernel: int
    stride: int
    pad: int
    dilation: int
    ceil_mode: bool

    @property
    def span(self) -> int:
        return self.dilation * (self.kernel - 1) + 1

    @property
    def out(self) -> int:
        """torch's output size (pooling_output_shape in ATen)."""
        assert self.size is not None
        rounding = self.stride - 1 if self.ceil_mode else 0
        out = (self.size + 2 * self.pad - self.span + rounding) // self.stride + 1
        if self.ceil_mode and (out - 1) * self.stride >= self.size + self.pad:
            out -= 1  # the last window would start in the right padding
        return out

    @property
    def pad_end(self) -> int:
        """End padding under which ONNX's floor-mode output size is torch's."""
        if not self.ceil_mode:
            return self.pad
        if self.size is None:
            raise ValueError(
                "ceil_mode=True needs the pooled sizes known at export time (ONNX's ceil_mode keeps "
                "windows torch drops); export with static spatial sizes"
            )
        return max(0, (self.out - 1) * self.stride + self.span - self.size - self.pad)

    def divisors(self, count_include_pad: bool) -> np.ndarray:
        """What torch divides each window's sum by along this axis (avg_pool's pool_size)."""
        assert self.size is not None
        counts = []
        for index in range(self.out):
            start = index * self.stride - self.pad
            end = min(start + self.kernel, self.size + self.pad)
            if not count_include_pad:
                start, end = max(start, 0), min(end, self.size)
            counts.append(end - start)
        return np.asarray(counts, dtype=np.float64)


def _axes(x: Value, spatial: int, kernel_size, stride, padding, dilation, ceil_mode: bool) -> list[_Axis]:
    kernel = static_ints(expand_list(kernel_size, spatial), "kernel_size")
    strides = static_ints(expand_list(stride, spatial), "stride") if stride else kernel
    pads = static_ints(expand_list(padding, spatial), "padding")
    dilations = static_ints(expand_list(dilation, spatial), "dilation")
    sizes = _static_spatial(x, spatial)
    return [_Axis(*fields, bool(ceil_mode)) for fields in zip(sizes, kernel, strides, pads, dilations)]


def _plane_size(g: Graph, x: Value, spatial: int) -> Value:
    """The number of elements in one (N, C) plane of `x`, as a 1-element int64 constant."""
    sizes = _static_spatial(x, spatial)
    if any(s is None for s in sizes):
        raise ValueError("max-pool indices need the pooled sizes known at export time")
    return g.constant([math.prod(sizes)])


# -- max pooling ------------------------------------------------------------------------------


def _lowest(dtype: torch.dtype | None) -> float | int:
    dtype = dtype or torch.float32
    return -math.inf if dtype.is_floating_point else torch.iinfo(dtype).min


def _unpad_indices(g: Graph, indices: Value, axes: Sequence[_Axis], padded: Sequence[int]) -> Value:
    """Indices into a padded plane -> indices into the unpadded plane, both row-major."""
    local = g.op("Mod", indices, g.constant([math.prod(padded)]))
    result = None
    for position, axis in enumerate(axes):
        inner_padded = math.prod(padded[position + 1:])
        inner = math.prod(a.size for a in axes[position + 1:])
        coord = g.op("Mod", g.op("Div", local, g.constant([inner_padded])), g.constant([padded[position]]))
        term = g.op("Mul", g.op("Sub", coord, g.constant([axis.pad])), g.constant([inner]))
        result = term if result is None else g.op("Add", result, term)
    return result


def _max_pool(g: Graph, x: Value, spatial: int, kernel_size, stride, padding, dilation, ceil_mode, indices: bool):
    x, added = add_batch_axis(g, x, spatial)
    axes = _axes(x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    begins, ends = [a.pad for a in axes], [a.pad_end for a in axes]
    common = dict(
        kernel_shape_i=[a.kernel for a in axes], strides_i=[a.stride for a in axes],
        dilations_i=[a.dilation for a in axes], outputs=2 if indices else 1,
    )
    if all(b < a.kernel and e < a.kernel for a, b, e in zip(axes, begins, ends)):
        result = g.op("MaxPool", x, pads_i=begins + ends, **common)
        if indices:  # ONNX counts over the whole tensor, torch within each (N, C) plane
            result = (result[0], g.op("Mod", result[1], _plane_size(g, x, spatial)))
    else:  # onnxruntime wants pads smaller than the kernel: pad explicitly with the lowest value
        if any(a.size is None for a in axes):
            raise ValueError("max pooling with padding >= kernel_size needs static pooled sizes")
        lowest = g.constant(torch.tensor(_lowest(x.dtype), dtype=x.dtype or torch.float32))
        padded_x = g.op("Pad", x, g.constant([0, 0] + begins + [0, 0] + ends), lowest)
        result = g.op("MaxPool", padded_x, pads_i=[0] * (2 * spatial), **common)
        if indices:
            padded = [a.size + b + e for a, b, e in zip(axes, begins, ends)]
            result = (result[0], _unpad_indices(g, result[1], axes, padded))
    if indices:
        return drop_batch_axis(g, result[0], added), drop_batch_axis(g, result[1], added)
    return drop_batch_axis(g, result, added)


@symbolic("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d")
def max_pool(g: Graph, self: Value, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor"""
    return _max_pool(g, self, _spatial_of(g), kernel_size, stride, padding, dilation, ceil_mode, indices=False)


@symbolic("aten::max_pool1d_with_indices", "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices")
def max_pool_with_indices(g: Graph, self: Value, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    spatial = _spatial_of(g)
    if not output_used(g, 1):
        return _max_pool(g, self, spatial, kernel_size, stride, padding, dilation, ceil_mode, indices=False), None
    return _max_pool(g, self, spatial, kernel_size, stride, padding, dilation, ceil_mode, indices=True)


# -- average pooling --------------------------------------------------------------------------


def _avg_pool(g: Graph, x: Value, spatial: int, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, added = add_batch_axis(g, x, spatial)
    axes = _axes(x, spatial, kernel_size, stride, padding, 1, ceil_mode)
    begins, ends = [a.pad for a in axes], [a.pad_end for a in axes]
    common = dict(kernel_shape_i=[a.kernel for a in axes], strides_i=[a.stride for a in axes], pads_i=begins + ends)
    overhang = any(e > a.pad for a, e in zip(axes, ends))  # windows reaching past torch's padding
    if divisor_override is None and not (count_include_pad and overhang):
        y = g.op("AveragePool", x, count_include_pad_i=int(bool(count_include_pad)), **common)
        return drop_batch_axis(g, y, added)
    dtype = x.dtype or torch.float32
    window = math.prod(a.kernel for a in axes)
    means = g.op("AveragePool", x, count_include_pad_i=1, **common)  # pads count as zeros
    sums = g.op("Mul", means, g.constant(torch.tensor(float(window), dtype=dtype)))
    if divisor_override is not None:
        divisor = g.constant(torch.tensor(float(divisor_override), dtype=dtype))
    else:
        grid = axes[0].divisors(bool(count_include_pad))
        for axis in axes[1:]:
            grid = np.multiply.outer(grid, axis.divisors(bool(count_include_pad)))
        divisor = g.constant(torch.tensor(grid, dtype=dtype))
    return drop_batch_axis(g, g.op("Div", sums, divisor), added)


@symbolic("aten::avg_pool1d")
def avg_pool1d(g: Graph, self: Value, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    """avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, bool ceil_mode=False, bool count_include_pad=True) -> Tensor"""
    return _avg_pool(g, self, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@symbolic("aten::avg_pool2d", "aten::avg_pool3d")
def avg_pool(g: Graph, self: Value, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    spatial = _spatial_of(g)
    return _avg_pool(g, self, spatial, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# -- adaptive pooling -------------------------------------------------------------------------


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive windows: [floor(i*L/out), ceil((i+1)*L/out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_out(g: Graph, output_size, spatial: int) -> list[int]:
    """The output size as ints; one computed at run time is refused, naming the op and sizes."""
    out = expand_list(output_size, spatial)
    if any(not isinstance(o, int) for o in out):
        raise ValueError(
            f"{g.ctx.target} to an output size computed at run time ({out}): ONNX's pooling ops take their "
            "window counts as attributes, so the output size must be known at export; pass fixed ints as "
            "output_size (the input's sizes may stay dynamic)")
    return [int(o) for o in out]


def _adaptive_sizes(x: Value, spatial: int, output_size, what: str) -> tuple[list[int], list[int]]:
    out = static_ints(expand_list(output_size, spatial), f"{what} output_size")
    sizes = _static_spatial(x, spatial)
    if any(s is None for s in sizes):
        raise ValueError(f"{what} to {out} needs the pooled input sizes known at export time")
    return [int(s) for s in sizes], out


def _average_along(g: Graph, x: Value, axis: int, rank: int, size: int, out: int, dtype: torch.dtype) -> Value:
    """Adaptive average over one axis as a MatMul with torch's window weights."""
    weights = np.zeros((size, out), dtype=np.float64)
    for index, (start, end) in enumerate(_adaptive_windows(size, out)):
        weights[start:end, index] = 1.0 / (end - start)
    matrix = g.constant(torch.tensor(weights, dtype=dtype))
    if axis == rank - 1:
        return g.op("MatMul", x, matrix)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return g.op("Transpose", g.op("MatMul", g.op("Transpose", x, perm_i=perm), matrix), perm_i=perm)


def _adaptive_avg_pool(g: Graph, x: Value, spatial: int, output_size) -> Value:
    x, added = add_batch_axis(g, x, spatial)
    out = _adaptive_out(g, output_size, spatial)
    if all(o == 1 for o in out):
        return drop_batch_axis(g, g.op("GlobalAveragePool", x), added)
    sizes = _static_spatial(x, spatial)  # None: known only at run time
    rank, source = rank_of(x), x
    kernel = [s // o if s is not None and s % o == 0 else 1 for s, o in zip(sizes, out)]
    dtype = x.dtype or torch.float32
    if any(k > 1 for k in kernel):  # the evenly dividing axes: plain AveragePool
        x = g.op("AveragePool", x, kernel_shape_i=kernel, strides_i=kernel)
    for position, (size, o) in enumerate(zip(sizes, out)):
        axis = rank - spatial + position
        if size is None:
            x = _run_time_average_along(g, x, source, axis, rank, o, dtype)
        elif size % o:
            x = _average_along(g, x, axis, rank, size, o, dtype)
    return drop_batch_axis(g, x, added)


@symbolic(
    "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d",
    "aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d",
)
def adaptive_avg_pool(g: Graph, self: Value, output_size):
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive_avg_pool(g, self, _spatial_of(g), output_size)


def _adaptive_max_by_gather(g: Graph, x: Value, sizes: list[int], out: list[int], indices: bool):
    """Gather every window (padded to the largest with repeats of its first element), ArgMax.

    Exact for any sizes; ties resolve to the first maximum in row-major order, as in torch.
    """
    grids = [_adaptive_windows(s, o) for s, o in zip(sizes, out)]
    longest = math.prod(max(e - b for b, e in grid) for grid in grids)
    strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    table = []
    for window in np.ndindex(*out):
        ranges = [range(*grids[axis][i]) for axis, i in enumerate(window)]
        members = [sum(c * s for c, s in zip(coords, strides)) for coords in itertools.product(*ranges)]
        table.append(members + [members[0]] * (longest - len(members)))
    table_array = np.asarray(table, dtype=np.int64)
    flat = g.op("Reshape", x, g.constant([0, 0, -1]))
    gathered = g.op("Gather", flat, g.constant(table_array), axis_i=2)  # [N, C, windows, longest]
    best = g.op("ArgMax", gathered, axis_i=3, keepdims_i=1)
    out_shape = g.constant([0, 0, *out])
    values = g.op("Reshape", g.op("GatherElements", gathered, best, axis_i=3), out_shape)
    if not indices:
        return values, None
    offsets = g.constant(np.arange(len(table), dtype=np.int64).reshape(-1, 1) * longest)
    where = g.op("Gather", g.constant(table_array.reshape(-1)), g.op("Add", best, offsets), axis_i=0)
    return values, g.op("Reshape", where, out_shape)


def _adaptive_max_pool(g: Graph, x: Value, spatial: int, output_size, indices: bool):
    x, added = add_batch_axis(g, x, spatial)
    out = _adaptive_out(g, output_size, spatial)
    if any(s is None for s in _static_spatial(x, spatial)):
        values, where = _run_time_adaptive_max(g, x, spatial, out, indices)
        return drop_batch_axis(g, values, added), (drop_batch_axis(g, where, added) if indices else None)
    sizes, out = _adaptive_sizes(x, spatial, output_size, "adaptive_max_pool")
    if all(s % o == 0 for s, o in zip(sizes, out)):
        kernel = [s // o for s, o in zip(sizes, out)]
        pooled = g.op("MaxPool", x, kernel_shape_i=kernel, strides_i=kernel, outputs=2 if indices else 1)
        values, where = (pooled[0], g.op("Mod", pooled[1], _plane_size(g, x, spatial))) if indices else (pooled, None)
    else:
        values, where = _adaptive_max_by_gather(g, x, sizes, out, indices)
    return drop_batch_axis(g, values, added), (drop_batch_axis(g, where, added) if indices else None)


# -- adaptive pooling over sizes known only at run time -----------------------------------------
# torch's windows over a length L into `out` cells are [floor(i*L/out), ceil((i+1)*L/out)): with
# L a run-time size they are computed in the graph as an [L, out] membership mask, which serves
# every L (dividing evenly or not; L < out overlaps windows, as torch does).


def _run_time_windows(g: Graph, source: Value, axis: int, out: int) -> tuple[Value, Value]:
    """([L, out] bool mask of the positions in each window, [out] window lengths), for the
    pooled input's run-time length L along `axis`."""
    length = dim_size(g, source, axis)
    length = g.constant(length, torch.int64) if isinstance(length, int) else squeeze(g, length, [0])
    cells = g.constant(np.arange(out, dtype=np.int64))
    divisor = g.constant(out, torch.int64)
    starts = g.op("Div", g.op("Mul", cells, length), divisor)
    ends = g.op("Div", g.op("Add", g.op("Mul", g.op("Add", cells, g.constant(1, torch.int64)), length),
                            g.constant(out - 1, torch.int64)), divisor)
    positions = unsqueeze(g, g.op("Range", g.constant(0, torch.int64), length, g.constant(1, torch.int64)), [1])
    inside = g.op("And", g.op("GreaterOrEqual", positions, starts), g.op("Less", positions, ends))
    return inside, g.op("Sub", ends, starts)


def _run_time_average_along(g: Graph, x: Value, source: Value, axis: int, rank: int, out: int,
                            dtype: torch.dtype) -> Value:
    """Adaptive average over one run-time-sized axis of `source` (x is `source` pooled along
    other axes): a MatMul with the windows' weights."""
    inside, lengths = _run_time_windows(g, source, axis, out)
    weights = g.op("Div", cast_to(g, inside, dtype), cast_to(g, lengths, dtype))
    return _matmul_along(g, x, weights, axis, rank)


def _matmul_along(g: Graph, x: Value, matrix: Value, axis: int, rank: int) -> Value:
    """x's `axis` (length L) contracted with an [L, out] matrix, the result's axis in its place."""
    if axis == rank - 1:
        return g.op("MatMul", x, matrix)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return g.op("Transpose", g.op("MatMul", g.op("Transpose", x, perm_i=perm), matrix), perm_i=perm)


def _run_time_max_along(g: Graph, x: Value, source: Value, axis: int, rank: int, out: int, with_index: bool):
    """Adaptive maximum over one run-time-sized axis: x spread over the windows ([.., L, out,
    ..], the positions outside each window at the dtype's lowest value), reduced over L. The
    index is each window's first maximum (ArgMax), as torch's scan keeps the first."""
    inside, _ = _run_time_windows(g, source, axis, out)
    trailing = rank - axis - 1
    if trailing:
        inside = unsqueeze(g, inside, list(range(2, 2 + trailing)))
    dtype = source.dtype or torch.float32
    floor = -math.inf if dtype.is_floating_point else torch.iinfo(dtype).min
    spread = g.op("Where", inside, unsqueeze(g, x, [axis + 1]), g.constant(floor, dtype))
    values = reduce(g, "ReduceMax", spread, [axis], keepdims=False)
    index = g.op("ArgMax", spread, axis_i=axis, keepdims_i=0) if with_index else None
    return values, index


def _run_time_adaptive_max(g: Graph, x: Value, spatial: int, out: list[int], with_indices: bool):
    """Adaptive max pooling with run-time spatial sizes, one axis at a time from the last (the
    maximum of a window is the maximum of its rows' maxima). The flat index torch returns
    (h * W + w) is the first maximum in row-major order: each later axis's index is gathered
    at the row an earlier axis chose."""
    rank = rank_of(x)
    values, chosen = x, []  # chosen: (axis, index tensor shaped like `values`)
    for position in reversed(range(spatial)):
        axis = rank - spatial + position
        values, index = _run_time_max_along(g, values, x, axis, rank, out[position], with_indices)
        if with_indices:
            chosen = [(a, g.op("GatherElements", t, index, axis_i=axis)) for a, t in chosen] + [(axis, index)]
    if not with_indices:
        return values, None
    flat, stride = None, None
    for axis, index in sorted(chosen, reverse=True):  # last axis first: stride 1
        term = index if stride is None else g.op("Mul", index, stride)
        flat = term if flat is None else g.op("Add", flat, term)
        length = dim_size(g, x, axis)
        length = g.constant(length, torch.int64) if isinstance(length, int) else squeeze(g, length, [0])
        stride = length if stride is None else g.op("Mul", stride, length)
    return values, flat


@symbolic("aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d")
def adaptive_max_pool(g: Graph, self: Value, output_size):
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    return _adaptive_max_pool(g, self, _spatial_of(g), output_size, indices=output_used(g, 1))


# -- pixel shuffle ----------------------------------------------------------------------------


def _leading_product(g: Graph, x: Value) -> Value:
    """[prod(x.shape[:-2])], the axes folded into one ahead of the spatial ones. Written out,
    not as Reshape's -1: a zero-size spatial axis leaves -1 undefined."""
    return reduce(g, "ReduceProd", g.op("Shape", x, end_i=rank_of(x) - 2), [0], keepdims=True)


def _restore_leading(g: Graph, y: Value, like: Value, channels: Value) -> Value:
    """Reshape [B*C, c, h, w] back to like's leading axes: [*lead, channels, h, w]."""
    lead = g.op("Shape", like, end_i=rank_of(like) - 3)
    tail = g.op("Shape", y, start_i=2)
    return g.op("Reshape", y, g.op("Concat", lead, channels, tail, axis_i=0), allowzero_i=1)


def _scaled_channels(g: Graph, x: Value, op: str, factor: int) -> Value:
    """[x.shape[-3] op factor]: the channel count after a pixel (un)shuffle."""
    return g.op(op, g.op("Shape", x, start_i=-3, end_i=-2), g.constant([factor]))


@symbolic("aten::pixel_shuffle")
def pixel_shuffle(g: Graph, self: Value, upscale_factor: int):
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor"""
    if rank_of(self) == 4:  # torch's channel order c*r*r + i*r + j is DepthToSpace's CRD mode
        return g.op("DepthToSpace", self, blocksize_i=upscale_factor, mode_s="CRD")
    r2 = upscale_factor * upscale_factor
    groups = g.op("Reshape", self, g.op("Concat", g.op("Div", _leading_product(g, self), g.constant([r2])),
                                        g.constant([r2]), g.op("Shape", self, start_i=-2), axis_i=0), allowzero_i=1)
    shuffled = g.op("DepthToSpace", groups, blocksize_i=upscale_factor, mode_s="CRD")
    return _restore_leading(g, shuffled, self, _scaled_channels(g, self, "Div", r2))


@symbolic("aten::pixel_unshuffle")
def pixel_unshuffle(g: Graph, self: Value, downscale_factor: int):
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor"""
    # SpaceToDepth orders channels (i*r + j)*C + c, torch c*r*r + i*r + j: unshuffle each
    # channel on its own ([B*C, 1, H, W]), where the two orders agree.
    planes_shape = g.op("Concat", _leading_product(g, self), g.constant([1]), g.op("Shape", self, start_i=-2), axis_i=0)
    planes = g.op("Reshape", self, planes_shape, allowzero_i=1)
    unshuffled = g.op("SpaceToDepth", planes, blocksize_i=downscale_factor)
    return _restore_leading(g, unshuffled, self, _scaled_channels(g, self, "Mul", downscale_factor * downscale_factor))
