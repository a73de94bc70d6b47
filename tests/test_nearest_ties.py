"""Nearest grid sampling judged through the pixels it may pick (harness.metrics.nearest_ties and
op_table.opinfo.judge's settling): a pick of the other neighbour where the source coordinate lies
on a .5 tie passes; a wrong pixel off a tie, near but not on one, a value no tied neighbour holds,
or channels taken from two neighbours still fail, in float32 and bfloat16."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.metrics.nearest_ties import nearest_picks, settle, source_coordinate
from op_table.opinfo.judge import ProgramFacts, judge_output, settle_nearest

FACTS = ProgramFacts(reduction_length=1, roundings=1)
TARGETS = ("aten.grid_sampler_2d.default",)
PADDING = {"zeros": 0, "border": 1, "reflection": 2}
HEIGHT, WIDTH, CHANNELS = 2, 4, 2
SOURCE = torch.arange(1, 1 + CHANNELS * HEIGHT * WIDTH, dtype=torch.float64).reshape(1, CHANNELS, HEIGHT, WIDTH)
Y_ON_ROW_0 = -0.5  # align_corners=False: ((-0.5 + 1) * 2 - 1) / 2 = 0, a whole pixel


def _x_grid(x: float) -> float:
    """The grid value whose unnormalised x coordinate (align_corners=False) is `x`."""
    return (2 * x + 1) / WIDTH - 1


# (name, x coordinate, padding mode, the pixel columns the backend takes per channel, passes)
CASES = [
    ("tie_other_neighbour", 1.5, "zeros", (1, 1), True),     # torch and the truth round 1.5 to 2 (even)
    ("tie_same_neighbour", 1.5, "zeros", (2, 2), True),
    ("tie_off_the_edge_zeros", -0.5, "zeros", (-1, -1), True),  # the neighbour outside the image is 0
    ("tie_after_reflection", 4.5, "reflection", (3, 3), True),  # 4.5 reflects to 2.5: 2 or 3
    ("off_tie_wrong_pixel", 2.0, "zeros", (1, 1), False),
    ("near_but_not_on_tie", 1.5 + 2.0 ** -10, "zeros", (1, 1), False),  # 2 ** -10 is far beyond float32 rounding
    ("tie_not_a_neighbour", 1.5, "zeros", (3, 3), False),
    ("tie_channels_from_two_neighbours", 1.5, "zeros", (1, 2), False),
    ("clamped_by_border_not_a_tie", 5.5, "border", (2, 2), False),
]


def _sample(x: float, padding: str, dtype: torch.dtype):
    """torch's nearest sample at two points (the case's x, and an untied x = 0.0), its fp64 truth,
    and the grid."""
    grid = torch.tensor([[[[_x_grid(x), Y_ON_ROW_0], [_x_grid(0.0), Y_ON_ROW_0]]]], dtype=torch.float64)
    source, grid = SOURCE.to(dtype), grid.to(dtype)
    want = torch.grid_sampler_2d(source, grid, 1, PADDING[padding], False)
    truth = torch.grid_sampler_2d(source.double(), grid.double(), 1, PADDING[padding], False)
    return source, grid, want, truth


def _backend(want: torch.Tensor, columns: tuple[int, ...]) -> np.ndarray:
    """torch's output with the first point's channel c taken from pixel (row 0, columns[c]); 0
    outside the image."""
    got = want.float().numpy().copy()
    for channel, column in enumerate(columns):
        got[0, channel, 0, 0] = SOURCE[0, channel, 0, column].item() if 0 <= column < WIDTH else 0.0
    return got


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("x", "padding", "columns", "passes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_nearest_pick_passes_only_on_a_tie(dtype: torch.dtype, x: float, padding: str, columns: tuple[int, ...],
                                             passes: bool) -> None:
    source, grid, want, truth = _sample(x, padding, dtype)
    picks = nearest_picks(source.float().numpy(), grid.float().numpy(), padding_mode=padding, align_corners=False)
    got, settled_want = settle_nearest(_backend(want, columns), want, truth.numpy(), picks=picks)
    failure = judge_output(got, settled_want, truth.numpy(), targets=TARGETS, facts=FACTS)
    assert (failure == "") == passes, failure


def test_without_settling_the_tie_fails() -> None:
    """The control: the other neighbour's pixel at a tie is a whole pixel off the truth."""
    _, _, want, truth = _sample(1.5, "zeros", torch.bfloat16)
    assert "values differ" in judge_output(_backend(want, (1, 1)), want, truth.numpy(), targets=TARGETS, facts=FACTS)


def test_settle_counts_the_tied_picks_it_changed() -> None:
    source, grid, want, truth = _sample(1.5, "zeros", torch.float32)
    picks = nearest_picks(source.numpy(), grid.numpy(), padding_mode="zeros", align_corners=False)
    assert picks.tied.tolist() == [[[True, False]]]
    settled, changed = settle(_backend(want, (1, 1)), truth.numpy(), picks)
    assert changed == 1 and np.array_equal(settled, truth.numpy())


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", list(PADDING))
def test_picks_off_ties_are_torch_picks(padding: str, align_corners: bool) -> None:
    """Off a tie, every candidate is torch's own pick (its unnormalisation and padding modes), on
    a grid reaching well outside the image; on a tie, torch's pick is one of the candidates."""
    gen = torch.Generator().manual_seed(0)
    source = torch.randn(2, 3, 5, 7, generator=gen, dtype=torch.float64)
    grid = torch.rand(2, 6, 9, 2, generator=gen, dtype=torch.float64) * 6 - 3
    grid[0, 0, 0] = torch.tensor([(2 * 2.5 + 1) / 7 - 1, 0.0])  # x = 2.5 (align_corners=False): a tie
    want = torch.grid_sampler_2d(source, grid, 1, PADDING[padding], align_corners).numpy()
    picks = nearest_picks(source.numpy(), grid.numpy(), padding_mode=padding, align_corners=align_corners)
    untied = ~picks.tied[:, None]
    assert all(np.array_equal(np.where(untied, candidate, 0), np.where(untied, want, 0)) for candidate in picks.candidates)
    takes = [(candidate == want).all(axis=1) for candidate in picks.candidates]
    assert np.logical_or.reduce(takes)[picks.tied].all()
    assert picks.tied.any() == (not align_corners)


def test_source_coordinate_reflects_and_clamps() -> None:
    raw, padded = source_coordinate(np.array([1.5, 2.0, -1.2]), 5, "reflection", True)  # raw 5, 6, -0.4 on [0, 4]
    assert raw.tolist() == pytest.approx([5.0, 6.0, -0.4]) and padded.tolist() == pytest.approx([3.0, 2.0, 0.4])
    _, border = source_coordinate(np.array([1.5, -3.0]), 4, "border", False)
    assert border.tolist() == [3.0, 0.0]
