"""Nearest-neighbour upsampling as torch's CPU kernel picks its source indices, one Gather per axis.

torch's CPU kernels (ATen native/UpSample.h) pick, for output index i of an axis of input size
`in` and output size `out`, `min(floor(float32(i) * s), in - 1)` in float32, where
s = float32(1 / scale) when a scale factor was given and float32(in) / float32(out) when not.
The 2-d kernel (`nearest_idx`, every dtype and memory format) first takes two shortcuts: `i` when
out == in and `i >> 1` when out == 2 * in, whatever scale was given; the 1-d and 3-d kernels do
not (torch 2.14: [0, 0, 1] for width 3 at scale 1.3 in 1-d, [0, 1, 2] in 2-d). A channels-last
3-d input with more than one channel takes the shortcuts too; ONNX has no memory format, so the
export follows the contiguous kernel.

ONNX Resize (nearest, asymmetric) divides by the scale instead and has no shortcut, so a 2-d
scale factor whose output size lands on in or 2 * in (width 4 at 2.2 gives 8, width 3 at 2.2
gives 6) picks other pixels than torch. Where torch's pick is `i // k` for an integer factor k
(checked on the indices at static sizes; at dynamic ones, an integer scale factor whose float32
reciprocal is not below 1/k, which makes the float32 product floor to i // k below 2**24), the
axis is left to one Resize with scale k, whose `i / k` floors the same on any backend (onnxruntime
runs it about 30x faster than a Gather). Every other axis gathers torch's indices, computed with
the same float32 operations: constants at static sizes, in the graph at dynamic ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.symbolics._helpers import cast_to, int64_vector, rank_of


def source_indices(in_size: int, out_size: int, scale: float | None, shortcuts: bool) -> np.ndarray:
    """torch's nearest source index for each of `out_size` outputs (static sizes); `shortcuts`:
    the 2-d kernel's copy at out == in and halving at out == 2 * in."""
    if shortcuts and out_size == in_size:
        return np.arange(out_size, dtype=np.int64)
    if shortcuts and out_size == 2 * in_size:
        return np.arange(out_size, dtype=np.int64) >> 1
    step = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    picked = np.floor(np.arange(out_size, dtype=np.float32) * step).astype(np.int64)
    return np.minimum(picked, in_size - 1)


def _integer_factor(in_size: Any, out_size: Any, scale: float | None, shortcuts: bool) -> int | None:
    """k when torch's pick on this axis is i // k for an integer k >= 1, else None."""
    if isinstance(in_size, int) and isinstance(out_size, int):
        if in_size < 1 or out_size % in_size:
            return None
        k = out_size // in_size
        picks = source_indices(in_size, out_size, scale, shortcuts)
        return k if np.array_equal(picks, np.arange(out_size) // k) else None
    if scale is None or scale < 1 or not float(scale).is_integer():
        return None
    k = int(scale)
    exact = (shortcuts and k == 2) or Fraction(float(np.float32(1.0 / k))) >= Fraction(1, k)
    return k if exact else None


def _output_size(g: Graph, in_size: Any, scale: float) -> Any:
    """torch's `int(in * scale)` in double, computed in the graph for a run-time `in`."""
    scaled = g.op("Mul", cast_to(g, in_size, torch.float64), g.constant([scale], torch.float64))
    return cast_to(g, g.op("Floor", scaled), torch.int64)


def _graph_indices(g: Graph, in_size: Value, out_size: Value, scale: float | None, shortcuts: bool) -> Value:
    """`source_indices` computed in the graph from 1-element int64 sizes."""
    positions = g.op("Range", g.constant(0, torch.int64), g.op("Squeeze", out_size), g.constant(1, torch.int64))
    if scale is not None and scale > 0:
        step = g.constant([1.0 / scale], torch.float32)
    else:
        step = g.op("Div", cast_to(g, in_size, torch.float32), cast_to(g, out_size, torch.float32))
    picked = cast_to(g, g.op("Floor", g.op("Mul", cast_to(g, positions, torch.float32), step)), torch.int64)
    picked = g.op("Min", picked, g.op("Sub", in_size, g.constant([1], torch.int64)))
    if not shortcuts or scale is None or scale <= 0:
        return picked  # in/out is exactly 1 or 0.5 at the shortcuts' sizes: the formula agrees
    halves = g.op("Div", positions, g.constant([2], torch.int64))
    doubled = g.op("Equal", out_size, g.op("Mul", in_size, g.constant([2], torch.int64)))
    picked = g.op("Where", doubled, halves, picked)
    return g.op("Where", g.op("Equal", out_size, in_size), positions, picked)


def upsample_nearest(g: Graph, input: Value, output_size: Sequence[Any] | None,
                     scales: Sequence[float | None]) -> Value:
    """`input` resized over its trailing spatial axes with torch's nearest pick.

    `output_size` (ints or int64 Values) may be None, and then every scale is given and the
    sizes are torch's `int(in * scale)`; `scales` holds one factor or None per spatial axis.
    """
    rank = rank_of(input)
    spatial = rank - 2
    scales = list(scales) if scales else [None] * spatial
    if len(scales) != spatial or (output_size is not None and len(output_size) != spatial):
        raise ValueError(f"nearest upsampling of a rank-{rank} input needs {spatial} output sizes or scales, "
                         f"got {output_size!r} and {scales!r}")
    if output_size is None and any(s is None for s in scales):
        raise ValueError("nearest upsampling needs an output size or scale factors")
    shortcuts = spatial == 2
    factors, gathered = [1] * spatial, []
    for d, scale in enumerate(scales):
        axis = 2 + d
        in_size: Any = input.shape[axis]
        out_size = output_size[d] if output_size is not None else None
        if out_size is None and isinstance(in_size, int):
            out_size = int(in_size * scale)  # torch's size, in double
        k = _integer_factor(in_size, out_size, scale, shortcuts)
        if k is not None:
            factors[d] = k
            continue
        if not isinstance(in_size, int):
            in_size = g.op("Shape", input, start_i=axis, end_i=axis + 1)
        if out_size is None:
            out_size = _output_size(g, in_size, scale)
        gathered.append((axis, in_size, out_size, scale))
    result = input
    if any(k != 1 for k in factors):
        scaling = g.constant([1.0, 1.0, *map(float, factors)], torch.float32)
        result = g.op("Resize", input, None, scaling, mode_s="nearest", coordinate_transformation_mode_s="asymmetric",
                      nearest_mode_s="floor")
    for axis, in_size, out_size, scale in gathered:
        if isinstance(in_size, int) and isinstance(out_size, int):
            picks = source_indices(in_size, out_size, scale, shortcuts)
            indices = g.constant(picks, torch.int64)
        else:
            sizes = [int64_vector(g, [s]) for s in (in_size, out_size)]
            indices = _graph_indices(g, *sizes, scale, shortcuts)
        result = g.op("Gather", result, indices, axis_i=axis)
    return result if result is not input else g.op("Identity", input)
