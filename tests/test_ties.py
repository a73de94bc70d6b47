"""Index outputs judged through the values they select: a different index among tied values is a
"tie", not a divergence; a wrong index (values not tied) still fails; values computed from a tied
selection are compared where the selections agree, rows and model outputs alike."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
import torch

import harness
from harness.metrics import ties
from harness.runtime.backends import Backend, BackendSpec, PreparedModel, get_backend
from tests.test_backend_verification import PlantedRep

SCORES = np.array([[3.0, 1.0, 3.0, 2.0, 2.0, 2.0, 0.5, 3.0], [1.0, 1.0, 1.0, 1.0, 0.0, 5.0, 1.0, 1.0]], np.float32)
CLOSE = np.array([[1.0, 1.00001, 0.5]], np.float32)  # 1e-5 apart: inside rtol 1e-4, far outside float32 rounding
BF16 = np.array([[1.0, 1.0078125, 1.015625]], ml_dtypes.bfloat16)  # one bfloat16 step (a tie), then two (none)


@pytest.mark.parametrize("actual, expected, source, axis, keeps, selection, passed, note", [
    ([[0, 2, 7]], [[0, 2, 7]], SCORES[:1], 1, True, False, True, ""),                    # the same indices
    ([[7, 0, 2]], [[0, 2, 7]], SCORES[:1], 1, True, False, True, "tie: 3 of 3"),         # a run of equal 3.0s
    ([[0, 2, 7, 5]], [[0, 2, 7, 3]], SCORES[:1], 1, True, False, True, "tie: 1 of 4"),   # which 2.0 is 4th
    ([[0, 2, 7, 6]], [[0, 2, 7, 3]], SCORES[:1], 1, True, False, False, "not tied"),     # 0.5 picked for a 2.0
    ([[1]], [[0]], CLOSE, 1, True, False, False, "1 of 1 indices select values not tied"),  # close is not tied
    ([[1]], [[0]], BF16, 1, True, False, True, "tie: 1 of 1"),                          # one bfloat16 ulp
    ([[2]], [[0]], BF16, 1, True, False, False, "not tied"),                             # two ulps
    ([3, 2], [2, 3], SCORES[1], None, True, False, True, "tie: 2 of 2"),                 # argmax over all: any 1.0
    ([2, 0], [0, 2], SCORES[0], None, True, True, True, ""),                             # NMS keeps: same boxes
    ([7, 0], [0, 2], SCORES[0], None, True, True, True, "tie: 1 of 2"),                  # another box, same score
    ([2, 6], [0, 2], SCORES[0], None, True, True, False, "not tied"),                    # NMS keeps another box
    ([2], [0, 2], SCORES[0], None, True, True, False, "another number"),
    ([5], [0], SCORES[1:], 1, False, False, False, "not tied"),                          # argmax(dim, keepdim=False)
    ([3], [0], SCORES[1:], 1, False, False, True, "tie: 1 of 1"),
])
def test_indices_are_judged_by_the_values_they_select(actual, expected, source, axis, keeps, selection, passed, note):
    found = ties.compare_selection(np.array(actual), np.array(expected), source, axis=axis, keeps_dim=keeps,
                                   selection=selection, name="indices")
    assert found.passed is passed
    assert note in found.note if note else found.note == ""
    if passed and note:
        assert found.tolerance_ratio <= 1


@pytest.mark.parametrize("actual_indices, actual, expected, passed, kept", [
    ([[2, 0, 7]], [[2.0, 0.0, 7.0]], [[0.0, 2.0, 7.0]], True, 3),     # the same picks in another order
    ([[2, 0, 4]], [[2.0, 0.0, 4.0]], [[0.0, 2.0, 7.0]], True, 2),     # one tied pick only torch made: left out
    ([[2, 0, 7]], [[2.5, 0.0, 7.0]], [[0.0, 2.0, 7.0]], False, 3),    # a value wrong at an agreeing pick
])
def test_values_from_a_selection_are_compared_where_the_selections_agree(actual_indices, actual, expected,
                                                                         passed, kept):
    found = ties.matched_comparison(np.array(actual), np.array(expected), np.array(actual_indices),
                                    np.array([[0, 2, 7]]), atol=1e-5, rtol=1e-4, name="gathered", selected_by="topk")
    assert found.passed is passed and f"{kept} of 3 picks paired" in found.note
    assert ties.matched_comparison(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((3,), int), np.zeros((3,), int),
                                   atol=0, rtol=0) is None  # not laid out by the selection


COLUMNS = np.array([[0, 1], [2, 0], [7, 2]])  # torch's picks down each column (TopK along dim 0)


@pytest.mark.parametrize("actual_indices, actual, passed, kept", [
    ([[2, 1], [0, 0], [7, 2]], [[2.0, 1.5], [0.0, 0.5], [7.0, 2.5]], True, 6),  # same picks, another order per column
    ([[2, 0], [0, 2], [7, 1]], [[2.0, 0.5], [0.0, 2.5], [7.0, 1.5]], True, 6),  # column 1 reordered too
    ([[2, 1], [0, 0], [4, 2]], [[2.0, 1.5], [0.0, 0.5], [4.0, 2.5]], True, 5),  # a pick only one side made
    ([[2, 1], [0, 0], [7, 2]], [[2.0, 1.5], [0.0, 0.5], [7.0, 9.0]], False, 6),  # wrong at an agreeing pick
])
def test_picks_down_columns_are_paired_within_their_column(actual_indices, actual, passed, kept):
    """A selection along dim 0: each column is one row of picks; pairing along the last axis
    would pair picks of different columns."""
    expected = COLUMNS + np.array([0.0, 0.5])  # a value per pick: its index, plus 0.5 in column 1
    found = ties.matched_comparison(np.array(actual), expected, np.array(actual_indices), COLUMNS,
                                    atol=1e-5, rtol=1e-4, name="gathered", selected_by="topk", axis=0)
    assert found.passed is passed and f"{kept} of 6 picks paired" in found.note, found.note
    assert ties.matched_comparison(np.array(actual), expected, np.array(actual_indices), COLUMNS, atol=1e-5,
                                   rtol=1e-4, axis=2) is None  # no such axis in the indices


@pytest.mark.parametrize("axis, actual_indices, actual, passed, kept", [
    (None, [3, 5], [[3.0, 3.5], [5.0, 5.5]], True, 1),   # argmax(dim=1): one pick per row, paired where equal
    (None, [0, 5], [[0.0, 0.5], [5.0, 9.0]], False, 2),  # both agree, one value wrong
    (-1, [0, 5], [[0.0, 0.5], [5.0, 5.5]], True, 2),     # ... as a selection along the indices' last axis
])
def test_a_tied_selection_pairs_its_values_by_how_its_picks_lie(axis, actual_indices, actual, passed, kept):
    from harness.analysis.selections import TiedSelection

    expected = np.array([[0.0, 0.5], [5.0, 5.5]])
    selection = TiedSelection("argmax", np.array(actual_indices), np.array([0, 5]), axis)
    found = selection.matched(np.array(actual), expected, atol=1e-5, rtol=1e-4, name="picked")
    assert found.passed is passed and f"{kept} of 2 picks paired" in found.note, found.note


class TopAlongColumns(torch.nn.Module):
    """Tied scores laid out as columns: TopK along dim 0, the features it picks gathered."""

    def forward(self, scores, features):
        values, indices = torch.topk(scores, 6, dim=0)
        return values * 2, torch.gather(features, 0, indices), torch.argmax(scores, dim=0)


@pytest.mark.parametrize("second", [None, "openvino:precision=f32"])
def test_backends_picking_tied_columns_differently_pass_where_selections_agree(second):
    """onnxruntime (and OpenVINO) pick other members of the tied runs than torch, each in its own
    order: the gathered output is compared where each backend's picks agree with torch's, per
    column, and passes on every backend."""
    backends = ("onnxruntime",) + ((second,) if second else ())
    if second and get_backend(second).unavailable_reason("CPU"):
        pytest.skip(get_backend(second).unavailable_reason("CPU"))
    torch.manual_seed(0)
    args = (torch.from_numpy(SCORES.T.copy()), torch.randn(8, 2))
    verification = harness.verify(TopAlongColumns().eval(), args, backends=backends)
    for result in [verification, *verification.backend_results]:
        rows = {op.fx_node: op for op in result.ops}
        assert any(note.startswith("tie: ") for note in rows["topk"].notes), rows["topk"].notes
        gathered = result.outputs[1]
        assert gathered.passed, gathered.note
        assert "matched through the tied selection of topk" in gathered.note and "of 12 picks paired" in gathered.note
        assert result.passed, [(o.name, o.note) for o in result.outputs]


class TopAndGather(torch.nn.Module):
    """Tied scores: TopK picks, its boxes gathered, and argmax, each as an output."""

    def forward(self, scores, boxes):
        values, indices = torch.topk(scores, 6, dim=1)
        return values * 2, boxes[indices], torch.argmax(scores, dim=1)


def inputs():
    torch.manual_seed(0)
    return torch.from_numpy(SCORES.copy()), torch.randn(8, 4)


class WrongIndex(Backend):
    """A test-only backend: onnxruntime with TopK's first pick in each row replaced by the index
    of the row's smallest score (not tied with anything it picks)."""

    name = "wrong-index"

    def __init__(self) -> None:
        self.inner = get_backend("onnxruntime")
        self.spec = BackendSpec("wrong-index", ())

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        return self.inner.unavailable_reason(device)

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        return WrongIndexRep(self.inner.prepare(model, device, **options), "topk__1")


class WrongIndexRep(PlantedRep):
    def _plant(self, value: np.ndarray) -> np.ndarray:
        value = np.array(value)
        value[:, 0] = np.argmin(SCORES, axis=1)
        return value

    def variant(self, model: onnx.ModelProto) -> PreparedModel:
        return WrongIndexRep(self.inner.variant(model), self.target)


def test_onnxruntime_breaking_ties_another_way_passes_and_says_tie():
    verification = harness.verify(TopAndGather().eval(), inputs())
    rows = {op.fx_node: op for op in verification.ops}
    assert verification.passed, [(o.name, o.note) for o in verification.outputs]
    topk = rows["topk"]
    assert topk.passed and topk.check == "selection"
    assert any(note.startswith("tie: ") for note in topk.notes), topk.notes  # onnxruntime picks other 3.0s and 1.0s
    assert rows["index"].accumulated.passed and "matched through the tied selection of topk" in rows["index"].accumulated.note
    gathered = verification.outputs[1]
    assert gathered.passed and "matched through the tied selection of topk" in gathered.note
    assert "matched through the tied selection" in verification.output_verdicts[1].reason


def test_a_wrong_index_still_fails_at_its_op():
    verification = harness.verify(TopAndGather().eval(), inputs(), backends=("onnxruntime", WrongIndex()))
    wrong = {op.fx_node: op for op in verification.backend_results[0].ops}
    assert verification.passed and verification.backend_results[0].passed is False  # the first backend is clean
    assert wrong["topk"].passed is False and wrong["topk"].blame == "runtime"
    assert any("not tied" in note for note in wrong["topk"].notes)
    assert [fx for fx, op in wrong.items() if op.passed is False] == ["topk"]
    assert not [op for op in verification.ops if op.passed is False]
