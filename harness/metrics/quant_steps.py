"""Errors of quantized tensors in quantization steps (units of the tensor's scale).

For a tensor quantized as q = clamp(round_half_to_even(x / scale) + zero_point, qmin, qmax), a
difference of one step is one representable value apart. `quant_steps(actual, expected, ...)`
places both tensors on that grid: integer arrays are quantized values already; floating
arrays are positions x / scale + zero_point (a dequantized value lands on a whole step; a
float reference before rounding lands between steps, and is rounded half to even and clamped
as the quantizer would). It counts

* the largest distance in steps, and the elements off by one step or more;
* how many of those sit at a rounding tie (the unrounded reference exactly half way between
  two steps: a rounding-mode difference, half-to-even against half-away-from-zero, not an
  arithmetic one);
* how many sit at saturation (the reference beyond [qmin, qmax], or the actual at a bound the
  reference is not at).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TIE_TOLERANCE = 1e-6
"""How close (in steps) a position's fractional part must be to 0.5 to count as a tie, and an
actual position to a whole step to count as on the grid (float rounding of scale products)."""


@dataclass(frozen=True)
class RegionKernel:
    """How the runtime computed a quantized region's output, read from the load that ran it:
    `kernel`, the runtime node or layer that wrote it ('com.microsoft::QLinearConv',
    'ai.onnx::QuantizeLinear', 'openvino integer layer (Convolution, uint8)', 'bias quantized to
    int32 (...)'); `requantizes`, whether that kernel requantizes an integer accumulator (one
    step allowed); `below_float32`, kernels on the way that compute below float32
    ('com.microsoft::MatMulNBits on int8 activations, blocks of 32 (accuracy_level 4)'), named
    but allowed nothing."""

    kernel: str
    requantizes: bool = False
    below_float32: tuple[str, ...] = ()

    def describe(self) -> str:
        """The kernel as a row's reason names it: '<kernel> with <what computes below float32>'."""
        return self.kernel + (f" with {', '.join(self.below_float32)}" if self.below_float32 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "requantizes": self.requantizes, "below_float32": list(self.below_float32)}


@dataclass(frozen=True)
class QuantSteps:
    """One quantized tensor's error in steps of its scale (see the module docstring)."""

    scale: float
    zero_point: int
    qmin: int
    qmax: int
    max_steps: float
    off_by_one_or_more: int
    elements: int
    at_ties: int = 0
    at_saturation: int = 0
    kernel: RegionKernel | None = None  # on a region's row: how the runtime computed it

    @property
    def off_fraction(self) -> float:
        """The fraction of elements off by one step or more."""
        return self.off_by_one_or_more / self.elements if self.elements else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "zero_point": self.zero_point, "qmin": self.qmin, "qmax": self.qmax,
                "max_steps": self.max_steps, "off_by_one_or_more": self.off_by_one_or_more,
                "elements": self.elements, "at_ties": self.at_ties, "at_saturation": self.at_saturation,
                **({"kernel": self.kernel.to_dict()} if self.kernel is not None else {})}


def _positions(values: Any, scale: float, zero_point: int) -> tuple[np.ndarray, bool]:
    """Grid positions (float64) of `values`, and whether they were quantized integers."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        return array.astype(np.float64), True
    return array.astype(np.float64) / scale + zero_point, False


def quant_steps(actual: Any, expected: Any, *, scale: float, zero_point: int = 0, qmin: int = -128,
                qmax: int = 127, tie_margin: float | np.ndarray = TIE_TOLERANCE) -> QuantSteps:
    """`actual` against `expected` in steps of `scale` (either may be quantized integers or
    floats: dequantized values, or for `expected` the float reference before rounding).
    `tie_margin` (in steps; a number, or an array shaped like the tensors) widens the band
    around k + 1/2 that counts as a tie, for a reference known only to within float noise."""
    if not scale > 0 or not np.isfinite(scale):
        raise ValueError(f"scale={scale!r}: a quantization scale is a positive finite number")
    if qmin >= qmax:
        raise ValueError(f"qmin={qmin}, qmax={qmax}: the quantized range is empty")
    actual_at, _ = _positions(actual, scale, zero_point)
    expected_at, expected_quantized = _positions(expected, scale, zero_point)
    if actual_at.shape != expected_at.shape:
        raise ValueError(f"shapes differ: actual {actual_at.shape}, expected {expected_at.shape}")
    snapped = np.rint(actual_at)  # a dequantized value sits on a step up to float rounding
    actual_at = np.where(np.abs(actual_at - snapped) <= TIE_TOLERANCE, snapped, actual_at)
    expected_q = np.clip(np.rint(expected_at), qmin, qmax)  # numpy's rint rounds half to even
    distance = np.abs(actual_at - expected_q)
    finite = np.isfinite(distance)
    off = (distance >= 1.0 - TIE_TOLERANCE) | ~finite
    ties = np.zeros_like(off) if expected_quantized else (
        np.abs(np.abs(expected_at - np.floor(expected_at)) - 0.5) <= np.maximum(tie_margin, TIE_TOLERANCE))
    beyond = (expected_at < qmin - 0.5) | (expected_at > qmax + 0.5)
    at_bound = ((actual_at <= qmin) | (actual_at >= qmax)) & (expected_q != actual_at)
    return QuantSteps(
        scale=float(scale), zero_point=int(zero_point), qmin=int(qmin), qmax=int(qmax),
        max_steps=float(distance.max()) if distance.size and finite.all() else (float("inf") if distance.size else 0.0),
        off_by_one_or_more=int(off.sum()), elements=int(distance.size),
        at_ties=int((off & ties).sum()), at_saturation=int((off & (beyond | at_bound)).sum()),
    )
