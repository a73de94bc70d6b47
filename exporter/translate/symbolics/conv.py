"""Convolution, transposed convolution, and the padding ops torch puts in front of them.

torch's weight layouts are ONNX's: `Conv` takes [C_out, C_in/groups, k...] and `ConvTranspose`
[C_in, C_out/groups, k...], grouped or not, so weights pass through untouched. Unbatched inputs
([C, *spatial], which torch accepts) get a batch axis around the ONNX op. `padding_mode`
"reflect"/"replicate"/"circular" reach us as reflection_pad*/replication_pad*/_pad_circular
nodes before a zero-padded convolution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import dim_size, expand_list, rank_of, register_from_schema, squeeze

INT64_MAX = 2**63 - 1


def _spatial_rank(weight: Value) -> int:
    return rank_of(weight) - 2


def add_batch_axis(g: Graph, x: Value, spatial: int) -> tuple[Value, bool]:
    """`x` with a leading batch axis when it is unbatched ([C, *spatial]); and whether it was."""
    if rank_of(x) == spatial + 2:
        return x, False
    batched = g.op("Unsqueeze", x, g.constant([0]))
    batched.dtype, batched.shape = x.dtype, (1, *x.shape)
    return batched, True


def drop_batch_axis(g: Graph, y: Value, added: bool) -> Value:
    return g.op("Squeeze", y, g.constant([0])) if added else y


def _kernel_shape(weight: Value) -> list[int] | None:
    kernel = weight.shape[2:] if weight.shape is not None else None
    return list(kernel) if kernel and all(isinstance(k, int) for k in kernel) else None


def _conv(
    g: Graph, x: Value, weight: Value, bias: Value | None, *, stride, pads: Sequence[int],
    dilation, groups: int,
) -> Value:
    """ONNX Conv with explicit [begin..., end...] pads on a possibly unbatched input."""
    spatial = _spatial_rank(weight)
    x, added = add_batch_axis(g, x, spatial)
    y = g.op(
        "Conv", x, weight, bias,
        kernel_shape_i=_kernel_shape(weight),
        strides_i=expand_list(stride, spatial),
        pads_i=list(pads),
        dilations_i=expand_list(dilation, spatial),
        group_i=groups,
    )
    return drop_batch_axis(g, y, added)


def _conv_transpose(
    g: Graph, x: Value, weight: Value, bias: Value | None, *, stride, padding, output_padding,
    dilation, groups: int,
) -> Value:
    """ConvTranspose; where an output_padding reaches its axis's stride (torch allows up to
    max(stride, dilation) - 1, ONNX less than the stride), the full ConvTranspose is cropped by
    the padding and extended by the output_padding with one Pad, then the bias is added."""
    spatial = _spatial_rank(weight)
    x, added = add_batch_axis(g, x, spatial)
    pads, strides = expand_list(padding, spatial), expand_list(stride, spatial)
    extra = expand_list(output_padding, spatial)
    attributes = dict(kernel_shape_i=_kernel_shape(weight), strides_i=strides,
                      dilations_i=expand_list(dilation, spatial), group_i=groups)
    if all(o < s for o, s in zip(extra, strides)):
        y = g.op("ConvTranspose", x, weight, bias, pads_i=pads + pads, output_padding_i=extra, **attributes)
        return drop_batch_axis(g, y, added)
    full = g.op("ConvTranspose", x, weight, **attributes)
    # full size (in-1)*s + d*(k-1) + 1; torch's is that - 2p + output_padding: crop p at the
    # start, p - output_padding at the end (a negative crop pads zeros, which the bias then lifts)
    y = g.op("Pad", full, g.constant([0, 0, *(-p for p in pads), 0, 0, *(o - p for p, o in zip(pads, extra))]))
    if bias is not None:
        y = g.op("Add", y, g.op("Unsqueeze", bias, g.constant(list(range(1, spatial + 1)))))
    return drop_batch_axis(g, y, added)


def same_padding(kernel: Sequence[int], dilation: Sequence[int]) -> tuple[list[int], list[int]]:
    """torch's padding="same": total d*(k-1) per axis, the odd unit on the end side."""
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    begins = [t // 2 for t in total]
    return begins, [t - b for t, b in zip(total, begins)]


@symbolic("aten::conv1d", "aten::conv2d", "aten::conv3d")
def conv(g: Graph, input: Value, weight: Value, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    pads = expand_list(padding, _spatial_rank(weight))
    return _conv(g, input, weight, bias, stride=stride, pads=pads + pads, dilation=dilation, groups=groups)


@symbolic("aten::conv1d.padding", "aten::conv2d.padding", "aten::conv3d.padding")
def conv_padding_mode(g: Graph, input: Value, weight: Value, bias=None, stride=1, padding="valid", dilation=1, groups=1):
    """conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, str padding="valid", SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    spatial = _spatial_rank(weight)
    if padding == "valid":
        pads = [0] * (2 * spatial)
    elif padding == "same":
        kernel = _kernel_shape(weight)
        if kernel is None:
            raise ValueError("padding='same' needs the kernel size known at export time")
        begins, ends = same_padding(kernel, expand_list(dilation, spatial))
        pads = begins + ends
    else:
        raise ValueError(f"padding={padding!r}: torch accepts only 'same' and 'valid'")
    return _conv(g, input, weight, bias, stride=stride, pads=pads, dilation=dilation, groups=groups)


@symbolic("aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input")
def conv_transpose(g: Graph, input: Value, weight: Value, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor"""
    return _conv_transpose(
        g, input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
        dilation=dilation, groups=groups,
    )


@symbolic("aten::convolution")
def convolution(g: Graph, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    if transposed:
        return _conv_transpose(
            g, input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
            dilation=dilation, groups=groups,
        )
    pads = expand_list(padding, _spatial_rank(weight))
    return _conv(g, input, weight, bias, stride=stride, pads=pads + pads, dilation=dilation, groups=groups)


# -- padding ops ------------------------------------------------------------------------------
# torch lists pads from the last axis backwards: [last_begin, last_end, prev_begin, prev_end, ...].


def torch_pad_pairs(pad: Sequence[int]) -> list[tuple[int, int, int]]:
    """(negative axis, begin, end) for each padded axis, first axis first."""
    pairs = [(-1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]
    return sorted(pairs)


def _pad_all_axes(g: Graph, x: Value, pad: Sequence[int], mode: str) -> Value:
    """Pad (opset 17 form): pads for every axis, so the rank must be known."""
    rank = rank_of(x)
    begins, ends = [0] * rank, [0] * rank
    for axis, begin, end in torch_pad_pairs(pad):
        begins[rank + axis], ends[rank + axis] = begin, end
    return g.op("Pad", x, g.constant(begins + ends), mode_s=mode)


def _pad_some_axes(g: Graph, x: Value, pad: Sequence[int], mode: str) -> Value:
    """Pad (opset 18 form): the `axes` input names the padded axes, counted from the back."""
    pairs = torch_pad_pairs(pad)
    pads = [b for _, b, _ in pairs] + [e for _, _, e in pairs]
    return g.op("Pad", x, g.constant(pads), None, g.constant([a for a, _, _ in pairs]), mode_s=mode)


def _padding(pad_axes: Any, mode: str) -> Any:
    def pad(g: Graph, self: Value, padding) -> Value:
        return pad_axes(g, self, padding, mode)

    return pad


def _crops_away(x: Value, axis: int, begin: int, end: int) -> bool:
    """Whether negative pads may leave `axis` with no element before padding: the size is
    symbolic, or known and no larger than the crop. onnxruntime's edge Pad refuses such an axis."""
    if begin >= 0 and end >= 0:
        return False
    size = x.shape[axis] if x.shape is not None else None
    return not isinstance(size, int) or size + min(begin, 0) + min(end, 0) <= 0


def _replicate_by_gather(g: Graph, x: Value, axis: int, begin: int, end: int) -> Value:
    """One axis of replication_pad as a Gather: output j reads input clamp(j - begin, 0, size - 1),
    torch's rule for pads of any sign, also where negative pads crop the axis to nothing (torch
    then replicates the border the crop reaches)."""
    size = dim_size(g, x, axis)
    if isinstance(size, int):
        indices = g.constant(np.clip(np.arange(-begin, size + end), 0, size - 1), torch.int64)
    else:  # a symbolic size: the same clamp computed at run time
        limit = squeeze(g, g.op("Add", size, g.constant([end], torch.int64)), [0])
        positions = g.op("Range", g.constant(-begin, torch.int64), limit, g.constant(1, torch.int64))
        last = g.op("Sub", size, g.constant([1], torch.int64))
        indices = g.op("Min", g.op("Max", positions, g.constant(0, torch.int64)), last)
    out = g.op("Gather", x, indices, axis_i=axis)
    shape = list(x.shape)
    shape[axis] = size + begin + end if isinstance(size, int) else None
    out.dtype, out.shape = x.dtype, tuple(shape)
    return out


def _replicate(pad_axes: Any) -> Any:
    """replication_pad: ONNX Pad (mode 'edge') on the axes it can pad, a Gather of clamped
    indices on those whose negative pads may crop them to nothing."""
    def pad(g: Graph, self: Value, padding) -> Value:
        rank, rest = rank_of(self), [int(p) for p in padding]
        for axis, begin, end in torch_pad_pairs(padding):
            if _crops_away(self, rank + axis, begin, end):
                self = _replicate_by_gather(g, self, axis, begin, end)
                first = 2 * (-1 - axis)  # torch lists the last axis's pair first
                rest[first:first + 2] = [0, 0]
        return pad_axes(g, self, rest, "edge") if any(rest) else self

    return pad


# reflection_pad*d and replication_pad*d: ONNX Pad's mode, every axis's pads below opset 18, then
# only the padded axes'.
for _since, _pad_axes in ((None, _pad_all_axes), (18, _pad_some_axes)):
    _suffix = "" if _since is None else f"_{_since}"
    _axes_note = ", the padded axes named by `axes`" if _since else ""
    register_from_schema([f"aten::reflection_pad{rank}d" for rank in (1, 2, 3)], _padding(_pad_axes, "reflect"),
                         name=f"reflection_pad{_suffix}", since=_since, note=f"ONNX Pad, mode 'reflect'{_axes_note}.")
    register_from_schema([f"aten::replication_pad{rank}d" for rank in (1, 2, 3)], _replicate(_pad_axes),
                         name=f"replication_pad{_suffix}", since=_since,
                         note=f"ONNX Pad, mode 'edge'{_axes_note}; a Gather of clamped indices on an axis whose "
                              "negative pads may crop it to nothing (a symbolic size, or one no larger than the "
                              "crop), which Pad refuses and torch replicates.")


def _slice(g: Graph, x: Value, axis: int, start: int, end: int) -> Value:
    return g.op("Slice", x, g.constant([start]), g.constant([end]), g.constant([axis]))


def _circular_by_slices(g: Graph, x: Value, pad: Sequence[int]) -> Value:
    """Wrap-around padding from Slice and Concat: crop negative pads, then wrap each axis."""
    pairs = torch_pad_pairs(pad)
    for axis, begin, end in pairs:
        if begin < 0 or end < 0:
            x = _slice(g, x, axis, max(-begin, 0), end if end < 0 else INT64_MAX)
    for axis, begin, end in pairs:
        pieces = []
        if begin > 0:
            pieces.append(_slice(g, x, axis, -begin, INT64_MAX))
        pieces.append(x)
        if end > 0:
            pieces.append(_slice(g, x, axis, 0, end))
        if len(pieces) > 1:
            x = g.op("Concat", *pieces, axis_i=axis)
    return x


@symbolic("aten::_pad_circular")
def pad_circular(g: Graph, self: Value, pad):
    """_pad_circular(Tensor self, SymInt[] pad) -> Tensor"""
    return _circular_by_slices(g, self, pad)


@symbolic("aten::_pad_circular", since=19)
def pad_circular_19(g: Graph, self: Value, pad):
    """_pad_circular(Tensor self, SymInt[] pad) -> Tensor"""
    if any(p < 0 for p in pad):  # Pad's wrap mode does not crop; torch crops first
        return _circular_by_slices(g, self, pad)
    return _pad_some_axes(g, self, pad, "wrap")

