"""A nearest grid sample's row judged through the pixels it may pick, as the OpInfo judge judges one.

Nearest `grid_sampler_2d` rounds each source coordinate to a pixel; where a coordinate lies on
a .5 tie, either neighbour is right (harness.metrics.nearest_ties). An op row compares the
backend's isolated value with torch's and both with the fp64 truth: at such a tie, torch, the
truth and the backend may each take another neighbour, and a whole pixel's difference would fail
the row or charge torch with an error that is none. So, where the truth is known, every side's
pick on a tie that is one of the tied neighbours' pixels is settled to the truth's
(`nearest_ties.settle`) before the row is compared, and the row's note says how many picks
differed there. Nothing else is settled: a pixel off a tie, or a value no tied neighbour holds,
keeps its difference and fails as before. Rows of optimised regions are not settled (their
output is not the sample's). A model output that a nearest grid sample writes is settled alike
against the outputs' truth (harness.verification.outputs); a value computed from the sample is
not.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np
import torch

from harness.analysis.rows import OpRecord, worst_comparison
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
from harness.metrics.nearest_ties import PADDING_MODES, NearestPicks, nearest_picks, settle

GRID_SAMPLER = "aten.grid_sampler_2d.default"
NEAREST_MODE = 1  # grid_sampler_2d's interpolation_mode for nearest


def is_nearest_sample(node: torch.fx.Node) -> bool:
    """Whether `node` is a nearest `grid_sampler_2d` of an input and a grid computed in the graph."""
    return (str(node.target) == GRID_SAMPLER and len(node.args) >= 5 and int(node.args[2]) == NEAREST_MODE
            and all(isinstance(arg, torch.fx.Node) for arg in node.args[:2]))


def nearest_picks_of(node: torch.fx.Node, values: Mapping[str, Any]) -> NearestPicks | None:
    """The pixels a nearest `grid_sampler_2d` node may pick, from torch's values of its input and
    grid (those its isolated subgraph and its truth are fed); None for any other node."""
    if not is_nearest_sample(node):
        return None
    source, grid = (values.get(arg.name) for arg in node.args[:2])
    if not isinstance(source, torch.Tensor) or not isinstance(grid, torch.Tensor):
        return None
    return nearest_picks(as_array(source), as_array(grid), padding_mode=PADDING_MODES[int(node.args[3])],
                         align_corners=bool(node.args[4]))


def settle_ties(torch_value: np.ndarray, backend: np.ndarray | None, truth: np.ndarray, picks: NearestPicks
                ) -> tuple[np.ndarray, np.ndarray | None, str]:
    """(torch's value, the backend's) with their picks on .5 ties settled to the truth's
    (`nearest_ties.settle`), and a note naming the ties ('' when no pick differed from the
    truth's); the values as they are when a shape is not the picks'."""
    if not torch_value.shape == truth.shape == picks.candidates.shape[1:]:
        return torch_value, backend, ""
    settled_torch, torch_moved = settle(torch_value, truth, picks)
    settled_backend, backend_moved = (settle(backend, truth, picks) if backend is not None
                                      and backend.shape == truth.shape else (backend, 0))
    if not torch_moved and not backend_moved:
        return torch_value, backend, ""
    return settled_torch, settled_backend, (
        f"nearest grid sample: {int(picks.tied.sum())} position(s) have a source coordinate on a .5 tie, "
        f"where either neighbour's pixel is right; the backend took the other neighbour than the fp64 "
        f"truth at {backend_moved}, torch at {torch_moved}: settled to the truth's pick "
        f"(harness.metrics.nearest_ties), every other pixel compared as it is")


def settle_row_ties(record: OpRecord, node: torch.fx.Node, values: Mapping[str, Any], index: int, name: str,
                    torch_value: np.ndarray, backend: np.ndarray | None, truth: np.ndarray,
                    isolated: MutableMapping[str, Comparison]) -> tuple[np.ndarray, np.ndarray | None]:
    """(torch's value, the backend's) of output `index` (its ONNX value `name`) with their picks
    on .5 ties settled to the truth's (`settle_ties`), the row's isolated comparison
    (`isolated[name]`, backend against torch) made again on the settled values and the note on
    the row; the values as they are for any other op, another output, or another shape."""
    picks = nearest_picks_of(node, values) if index == 0 else None
    if picks is None:
        return torch_value, backend
    settled_torch, settled_backend, note = settle_ties(torch_value, backend, truth, picks)
    if not note:
        return torch_value, backend
    record.notes.append(note)
    previous = isolated.get(name)
    if previous is not None and settled_backend is not None:
        isolated[name] = compare(settled_backend, settled_torch, atol=previous.atol, rtol=previous.rtol, name=name)
        record.isolated = worst_comparison(list(isolated.values()))
    return settled_torch, settled_backend
