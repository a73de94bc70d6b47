"""Nearest grid sampling judged through the pixels it may pick, so that a .5 tie is not a divergence.

Nearest `grid_sample` rounds each unnormalised source coordinate to a pixel. Where a coordinate
lies on a .5 tie (a bfloat16 grid puts many there exactly), either neighbour is right: torch
rounds half to even in float32, the fp64 truth rounds the exact coordinate, a backend computing
in another order lands a rounding on either side of .5. As tied indices are judged through the
values they select (harness.metrics.ties), such a pick is judged by where it comes from: at a
position whose coordinate lies on a tie, a value that is one of the tied neighbours' pixels (the
same neighbour in every channel) is settled to the reference's pick (`settle`), and the values are
then judged as any others. Nothing else is settled: a pixel off a tie, a value no tied neighbour
holds, or channels taken from different neighbours keep their difference and fail as before.

The coordinates are computed in float64 from the grid as its dtype holds it, with torch's
unnormalisation and padding (border clamps, reflection reflects then clamps); a tie is a
coordinate within `TIE_ULPS` float32 roundings of .5, the error of a float32 computation of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TIE_ULPS = 8.0
"""How near .5 a coordinate is on a tie, in float32 unit roundoffs of its magnitude: the few
roundings of a float32 unnormalisation and reflection, far below the grid's own spacing."""

_FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24
PADDING_MODES = ("zeros", "border", "reflection")  # torch's grid_sampler padding_mode 0, 1, 2


@dataclass(frozen=True)
class NearestPicks:
    """The pixels a nearest grid sample may take: `candidates` [K, N, C, H_out, W_out] (the
    neighbours' values, K = 4 combinations of the x and y neighbours, equal where not tied) and
    `tied` [N, H_out, W_out], where a coordinate lies on a .5 tie."""

    candidates: np.ndarray
    tied: np.ndarray


def _reflect(coordinate: np.ndarray, twice_low: float, twice_high: float) -> np.ndarray:
    """torch's reflection of a coordinate into [twice_low / 2, twice_high / 2]."""
    if twice_low == twice_high:
        return np.zeros_like(coordinate)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = np.abs(coordinate - low)
    extra, flips = np.fmod(distance, span), np.floor(distance / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def source_coordinate(grid: np.ndarray, size: int, padding_mode: str, align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """The unnormalised coordinate of `grid` values (in [-1, 1]) on an axis of `size` pixels, and
    that coordinate after the padding mode: (raw, padded), in float64."""
    grid = grid.astype(np.float64)
    raw = (grid + 1) / 2 * (size - 1) if align_corners else ((grid + 1) * size - 1) / 2
    if padding_mode == "zeros":
        return raw, raw
    padded = raw
    if padding_mode == "reflection":
        padded = _reflect(raw, 0, 2 * (size - 1)) if align_corners else _reflect(raw, -1, 2 * size - 1)
    return raw, np.clip(padded, 0, size - 1)


def _neighbours(raw: np.ndarray, padded: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lower and upper index a nearest pick may take (both the rounded index off a tie), and
    where the coordinate is on a tie."""
    finite = np.isfinite(padded)
    padded = np.where(finite, padded, 0.0)
    lower = np.floor(padded)
    window = TIE_ULPS * _FLOAT32_UNIT_ROUNDOFF * np.maximum(np.abs(np.where(finite, raw, 0.0)), size)
    tied = finite & (np.abs(padded - lower - 0.5) <= window)
    rounded = np.rint(padded)  # half to even, as torch's nearbyint
    return (np.where(tied, lower, rounded).astype(np.int64), np.where(tied, lower + 1, rounded).astype(np.int64),
            tied)


def nearest_picks(source: np.ndarray, grid: np.ndarray, *, padding_mode: str, align_corners: bool) -> NearestPicks:
    """The pixels nearest `grid_sampler_2d` may pick from `source` [N, C, H, W] at `grid`
    [N, H_out, W_out, 2] (x, y), and where a pick is tied; a neighbour outside the image is 0
    (the zeros padding mode)."""
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"padding_mode {padding_mode!r} is not one of {PADDING_MODES}")
    source = np.asarray(source).astype(np.float64)
    _, _, height, width = source.shape
    x_low, x_high, x_tied = _neighbours(*source_coordinate(grid[..., 0], width, padding_mode, align_corners), width)
    y_low, y_high, y_tied = _neighbours(*source_coordinate(grid[..., 1], height, padding_mode, align_corners), height)
    batch = np.arange(source.shape[0]).reshape(-1, 1, 1)
    candidates = []
    for ys in (y_low, y_high):
        for xs in (x_low, x_high):
            inside = (ys >= 0) & (ys < height) & (xs >= 0) & (xs < width)
            picked = source[batch, :, np.clip(ys, 0, height - 1), np.clip(xs, 0, width - 1)]  # [N, Ho, Wo, C]
            candidates.append(np.moveaxis(np.where(inside[..., None], picked, 0.0), -1, 1))
    return NearestPicks(np.stack(candidates), x_tied | y_tied)


def _takes(values: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """[K, N, H_out, W_out]: whether `values` [N, C, H_out, W_out] hold candidate k's pixel in
    every channel (NaN matching NaN)."""
    values = values.astype(np.float64)
    same = (candidates == values) | (np.isnan(candidates) & np.isnan(values))
    return same.all(axis=2)


def settle(values: np.ndarray, reference: np.ndarray, picks: NearestPicks) -> tuple[np.ndarray, int]:
    """`values` with each tied position where both they and `reference` took one of the tied
    neighbours' pixels replaced by the reference's, and how many positions differed there."""
    values, reference = np.asarray(values), np.asarray(reference)
    settled = picks.tied & _takes(values, picks.candidates).any(axis=0) & _takes(reference, picks.candidates).any(axis=0)
    differing = settled & ~((values == reference) | (np.isnan(values) & np.isnan(reference))).all(axis=1)
    return np.where(settled[:, None], reference.astype(values.dtype), values), int(differing.sum())
