"""A nearest grid sample inside a whole model: its per-op row, and the model output it writes,
settle picks on .5 ties as the OpInfo judge does (harness.analysis.nearest_rows), and a real
wrong value still fails.

The module samples with reflection padding (align_corners=False), where onnxruntime and torch
round a reflected coordinate on a tie to different neighbours: x = -1.5 reflects to 0.5 and
5.5 to 3.5 on a 5 px row. A test-only Add inside the op's subgraph (its provenance names the
grid sample) plants a wrong value in the backend's output at one sample."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

import exporter
import harness

HEIGHT, WIDTH, CHANNELS = 3, 5, 2
# source x coordinates of the samples (row y = 1): ties after reflection (0.5, 3.5), a tie (1.5), a whole pixel
X_COORDINATES = (-1.5, 5.5, 1.5, 2.0)
TIED_REFLECTED, WHOLE_PIXEL, TIE = 0, 3, 2
SOURCE = torch.arange(CHANNELS * HEIGHT * WIDTH, dtype=torch.float32).reshape(1, CHANNELS, HEIGHT, WIDTH)


class NearestSample(torch.nn.Module):
    def forward(self, image: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(image, grid, mode="nearest", padding_mode="reflection", align_corners=False)


def _grid() -> torch.Tensor:
    """Grid values whose unnormalised coordinates (align_corners=False) are X_COORDINATES, row 1."""
    xs = torch.tensor(X_COORDINATES, dtype=torch.float64)
    x_grid, y_grid = (2 * xs + 1) / WIDTH - 1, torch.full_like(xs, (2 * 1 + 1) / HEIGHT - 1)
    return torch.stack([x_grid, y_grid], -1).float().reshape(1, 1, len(X_COORDINATES), 2)


def _with_planted_value(model: onnx.ModelProto, sample: int | None, delta: float) -> onnx.ModelProto:
    """The export with `delta` added to channel 0 of the sample's output at `sample` (nothing
    when None), by an Add that belongs to the grid sample's subgraph."""
    planted = onnx.ModelProto()
    planted.CopyFrom(model)
    if sample is None:
        return planted
    sampler = next(node for node in planted.graph.node if node.op_type == "GridSample")
    output = sampler.output[0]
    sampler.output[0] = output + "_sampled"
    offset = np.zeros((1, CHANNELS, 1, len(X_COORDINATES)), np.float32)
    offset[0, 0, 0, sample] = delta
    planted.graph.initializer.append(numpy_helper.from_array(offset, output + "_planted"))
    add = helper.make_node("Add", [output + "_sampled", output + "_planted"], [output], name=output + "_planted_add")
    add.metadata_props.extend(sampler.metadata_props)
    planted.graph.node.append(add)
    return planted


@pytest.fixture(scope="module")
def exported() -> onnx.ModelProto:
    return exporter.export(NearestSample(), (SOURCE, _grid()))


@pytest.mark.parametrize(("sample", "delta", "passes"), [
    (None, 0.0, True),  # onnxruntime's picks differ from torch's and the truth's only on ties
    (WHOLE_PIXEL, 1.0, False),  # the next pixel's value where the coordinate is whole: a wrong pick
    (TIED_REFLECTED, 0.25, False),  # on a tie, but a value neither neighbour holds
    (TIE, 2.0, False),  # on a tie, another pixel's value two columns away: not a neighbour
], ids=["ties-only", "off-tie-wrong-pixel", "tie-not-a-pixel", "tie-not-a-neighbour"])
def test_a_nearest_sample_row_settles_only_its_ties(exported: onnx.ModelProto, sample: int | None, delta: float,
                                                    passes: bool) -> None:
    planted = _with_planted_value(exported, sample, delta)
    verification = harness.verify(NearestSample(), (SOURCE, _grid()), onnx_model=planted)
    row = next(op for op in verification.ops if op.aten == "aten.grid_sampler_2d.default")
    assert row.passed is passes, (row.verdict.to_dict(), row.notes)
    tie_note = next((note for note in row.notes if "on a .5 tie" in note), "")
    assert "settled to the truth's pick" in tie_note and "the backend took the other neighbour" in tie_note, row.notes
    if passes:
        assert row.isolated.max_abs == 0.0 and row.truth.max_abs == 0.0 and row.torch_truth.max_abs == 0.0
    output = verification.outputs[0]  # the model's output is the sample: settled against the outputs' truth alike
    assert output.passed is passes and verification.passed is passes, output.to_dict()
    assert "on a .5 tie" in output.note, output.note


def test_the_backends_picks_differ_on_ties_without_settling(exported: onnx.ModelProto) -> None:
    """The control: onnxruntime's raw output differs from torch's by a whole pixel on the
    reflected ties (what failed the row), and nowhere else."""
    import onnxruntime

    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"image": SOURCE.numpy(), "grid": _grid().numpy()})[0]
    want = NearestSample()(SOURCE, _grid()).numpy()
    differing = np.nonzero((got != want).any(axis=(0, 1, 2)))[0].tolist()
    assert differing and set(differing) <= {0, 1}, differing
