"""The matched comparison of detections (harness.metrics.detections) on planted cases: tied
detections in another order pass, a moved box fails, a missing or extra detection fails and
is named, masks and keypoints ride on their boxes' pairs."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torchvision

from harness.metrics.comparison import compare
from harness.metrics.detections import (
    SETTINGS_PATH,
    MatchSettings,
    box_iou,
    compare_detection_outputs,
    compare_detections,
    detection_layout,
    detector_nms_threshold,
    first_size_divergence,
    mark_matched_rows,
    match_detections,
    truth_factor_for,
)
from harness.metrics.verdict import load_rule

ATOL, RTOL = 1e-3, 1e-3


def _detections(count: int = 5, seed: int = 0, masks: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 100, (count, 2)).astype(np.float32)
    boxes = np.concatenate([corner, corner + rng.uniform(10, 50, (count, 2)).astype(np.float32)], 1)
    fields = {"boxes": boxes, "labels": rng.integers(1, 4, count), "scores": np.sort(rng.uniform(0.1, 0.9, count))[::-1].astype(np.float32)}
    if masks:
        fields["masks"] = rng.uniform(0, 1, (count, 1, 8, 8)).astype(np.float32)
    return fields


def _permuted(fields: dict[str, np.ndarray], order: list[int]) -> dict[str, np.ndarray]:
    return {key: value[order] for key, value in fields.items()}


def test_swapped_pair_of_tied_detections_passes() -> None:
    expected = _detections(masks=True)
    expected["scores"][1] = expected["scores"][2]  # a tie: either order is torch's order too
    actual = _permuted(expected, [0, 2, 1, 3, 4])
    positional = compare(actual["boxes"], expected["boxes"], atol=ATOL, rtol=RTOL)
    assert not positional.passed  # what a positional comparison would have said
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert match.complete and match.pairs == [(0, 0), (2, 1), (1, 2), (3, 3), (4, 4)]
    assert [c.name for c in comparisons] == ["boxes", "labels", "scores", "masks"]
    assert all(c.passed and c.max_abs == 0.0 for c in comparisons), [c.note for c in comparisons]
    assert "matched: 5 of torch's 5" in comparisons[0].note


@pytest.mark.parametrize(("shift", "unmatched"), [(3.0, False), (200.0, True)], ids=["within-iou", "beyond-iou"])
def test_shifted_box_fails(shift: float, unmatched: bool) -> None:
    expected = _detections()
    actual = {key: value.copy() for key, value in expected.items()}
    actual["boxes"][3] += np.float32(shift)
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    boxes = comparisons[0]
    assert not boxes.passed
    if unmatched:  # too far to be the same object: one detection unmatched on each side
        assert match.unmatched_actual == [3] and match.unmatched_expected == [3]
        assert "1 backend detection(s) unmatched: #3" in boxes.note and "1 torch detection(s) unmatched: #3" in boxes.note
        assert all(not c.passed for c in comparisons)
    else:  # paired by IoU, then off by `shift` pixels
        assert match.complete and boxes.max_abs == pytest.approx(shift, rel=1e-4)
        assert comparisons[1].passed and comparisons[2].passed


def test_missing_detection_fails_and_is_named() -> None:
    expected = _detections(6)
    actual = _permuted(expected, [0, 1, 2, 4, 5])
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert match.unmatched_expected == [3] and not match.unmatched_actual
    assert all(not c.passed for c in comparisons)
    assert comparisons[0].shape_actual == [5, 4] and comparisons[0].shape_expected == [6, 4]
    assert "1 torch detection(s) unmatched: #3 label" in comparisons[0].note


def test_labels_must_agree_for_a_pair() -> None:
    expected = _detections(3)
    actual = {key: value.copy() for key, value in expected.items()}
    actual["labels"][1] = expected["labels"][1] + 10
    _, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert match.unmatched_actual == [1] and match.unmatched_expected == [1]


def test_masks_are_compared_through_the_pairs() -> None:
    expected = _detections(masks=True)
    actual = _permuted(expected, [4, 3, 2, 1, 0])
    actual["masks"] = actual["masks"].copy()
    actual["masks"][0, 0, 2, 2] += 0.5  # backend's detection 0 is torch's detection 4
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert match.complete
    masks = comparisons[-1]
    assert not masks.passed and masks.max_abs == pytest.approx(0.5)
    assert all(c.passed for c in comparisons[:-1])


def test_pairs_prefer_the_highest_iou_then_the_closest_score() -> None:
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [1, 0, 11, 10]], np.float32)
    labels = np.array([1, 1, 1])
    match = match_detections(boxes[[2, 0, 1]], labels, boxes, labels, iou_threshold=0.5,
                             actual_scores=np.array([0.5, 0.9, 0.3]), expected_scores=np.array([0.9, 0.3, 0.5]))
    assert match.pairs == [(1, 0), (2, 1), (0, 2)]


def test_box_iou() -> None:
    iou = box_iou(np.array([[0, 0, 10, 10]]), np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 0, 0]]))
    assert iou.tolist() == [[1.0, pytest.approx(1 / 3), 0.0, 0.0]]


def test_settings_come_from_data() -> None:
    settings = MatchSettings.load()
    assert 0 < settings.iou_threshold < 1 and settings.max_listed >= 1


def test_layout_of_torchvision_outputs() -> None:
    one = _detections(2, masks=True)
    assert detection_layout([one, _detections(3)]) == [
        {"boxes": 0, "labels": 1, "scores": 2, "masks": 3}, {"boxes": 4, "labels": 5, "scores": 6}]
    assert detection_layout([np.zeros(3)]) is None
    assert detection_layout({"boxes": 1}) is None
    assert detection_layout([{"boxes": 1, "labels": 2}]) is None


def test_outputs_of_two_images_keep_the_flattened_order() -> None:
    first, second = _detections(3, seed=1), _detections(4, seed=2)
    expected = [*first.values(), *second.values()]
    actual = [*_permuted(first, [2, 1, 0]).values(), *second.values()]
    layout = detection_layout([first, second])
    names = [f"out{i}" for i in range(6)]
    comparisons = compare_detection_outputs(actual, expected, layout, atol=ATOL, rtol=RTOL, names=names)
    assert [c.name for c in comparisons] == names and all(c.passed for c in comparisons)


def _row(name: str, shape_actual: list[int], shape_expected: list[int]) -> SimpleNamespace:
    accumulated = compare(np.zeros(shape_actual, np.float32), np.zeros(shape_expected, np.float32), atol=ATOL, rtol=RTOL)
    return SimpleNamespace(fx_node=name, aten="aten.x", source="model.py:1", accumulated=accumulated, check="values")


def test_first_op_where_sizes_diverge_is_named() -> None:
    rows = [_row("conv", [2, 3], [2, 3]), _row("nms", [8], [9]), _row("index", [8, 4], [9, 4]), _row("boxes", [8, 4], [9, 4])]
    assert first_size_divergence(rows).fx_node == "nms"
    boxes = compare(np.zeros((8, 4)), np.zeros((9, 4)), atol=ATOL, rtol=RTOL, name="boxes")
    notes = mark_matched_rows(rows, [boxes])
    assert rows[3].check == "matched" and rows[3].accumulated is boxes
    assert notes == ["data-dependent sizes first diverge at nms (aten.x, model.py:1): the backend's [8] against "
                     "torch's [9]; 1 later op(s) differ in size as a consequence, their accumulated values not comparable"]
    assert mark_matched_rows(rows[:1], []) == []


# -- torch's own float32 error, from the fp64 replay, sets a continuous field's atol -------------


def _with_mask_errors(backend_error: float, torch_error: float, seed: int = 0):
    """(backend, torch, truth) detections whose masks sit `backend_error` and `torch_error` from
    the truth at one pixel, on opposite sides (the worst case: the differences add up)."""
    truth = _detections(masks=True, seed=seed)
    truth["masks"] = truth["masks"].astype(np.float64)
    expected = {key: value.copy() for key, value in truth.items()}
    expected["masks"] = (truth["masks"] + np.float64(0)).astype(np.float32)
    expected["masks"][1, 0, 3, 3] = truth["masks"][1, 0, 3, 3] + torch_error
    actual = {key: value.copy() for key, value in expected.items()}
    actual["masks"][1, 0, 3, 3] = truth["masks"][1, 0, 3, 3] - backend_error
    return actual, expected, truth


@pytest.mark.parametrize(("backend_error", "torch_error", "passes"), [
    (4e-3, 4e-3, True),  # as accurate as torch: 8e-3 apart, within 3 x torch's own error
    (3e-3, 5e-3, True),  # closer to the truth than torch
    (5.8e-3, 4e-3, True),  # 1.45x torch's error, within the verdict rule's factor 2 (Faster R-CNN's scores at 800 px)
    (8.5e-3, 4e-3, False),  # over twice torch's own error: 12.5e-3 apart, over 3 x 4e-3
    (1.2e-2, 4e-3, False),  # three times torch's own error: a divergence
    (4e-3, 1e-5, False),  # torch is exact here: nothing covers the backend's 4e-3
], ids=["as-accurate", "more-accurate", "within-the-rule", "over-the-rule", "worse", "torch-exact"])
def test_torch_float32_error_sets_the_mask_tolerance(backend_error: float, torch_error: float, passes: bool) -> None:
    actual, expected, truth = _with_mask_errors(backend_error, torch_error)
    assert not compare_detections(actual, expected, atol=ATOL, rtol=0.0)[0][-1].passed  # the plain tolerance fails
    comparisons, _ = compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth)
    masks = comparisons[-1]
    assert masks.passed is passes, masks.note
    if torch_error * MatchSettings.load().truth_factor > ATOL:
        assert masks.atol == pytest.approx(MatchSettings.load().truth_factor * torch_error, rel=1e-3)
        assert "x torch's own float32 error" in masks.note
        assert f"(the backend's {backend_error:.3g})" in masks.note
    else:
        assert masks.atol == ATOL
    assert all(c.passed for c in comparisons[:-1])


@pytest.mark.parametrize(("factor", "backend_error", "passes"), [
    (2, 5.8e-3, True),  # the shipped rule: 1.45x torch's 4e-3, 9.8e-3 apart within 3 x 4e-3
    (2, 8.5e-3, False),  # 2.1x torch's error: over the rule's factor
    (1, 5.8e-3, False),  # a rule that allows no extra rounding: 9.8e-3 apart over 2 x 4e-3
    (1, 3.9e-3, True),
    (4, 1.5e-2, True),  # a rule four times as loose: 1.9e-2 apart within 5 x 4e-3
    (4, 1.7e-2, False),
], ids=["shipped-within", "shipped-over", "factor1-over", "factor1-within", "factor4-within", "factor4-over"])
def test_the_truth_widening_follows_the_verdict_rules_factor(factor: float, backend_error: float, passes: bool) -> None:
    """The detections' widening is the verdict rule's factor + 1 (triangle inequality), whatever
    that factor is: a backend passes exactly when it is within the rule's factor of torch's error."""
    rule = dataclasses.replace(load_rule(), factor=factor)
    settings = MatchSettings.load(rule)
    assert settings.truth_factor == truth_factor_for(rule) == factor + 1
    actual, expected, truth = _with_mask_errors(backend_error, 4e-3)
    masks = compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth, settings=settings)[0][-1]
    assert masks.passed is passes and (backend_error <= factor * 4e-3) is passes, masks.note
    assert masks.atol == pytest.approx((factor + 1) * 4e-3, rel=1e-3)
    assert f"atol {masks.atol:.3g} = {factor + 1:g} x torch's own float32 error" in masks.note


def test_the_shipped_truth_factor_is_derived_from_verdict_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """detections.json writes no factor of its own; changing the rule's factor (verdict.json)
    changes the detections' widening with it."""
    data = json.loads(resources.files("harness.metrics").joinpath(SETTINGS_PATH).read_text())
    assert "truth_factor" not in data
    assert MatchSettings.load().truth_factor == load_rule().factor + 1
    looser = dataclasses.replace(load_rule(), factor=5.0)
    monkeypatch.setattr("harness.metrics.detections.load_rule", lambda: looser)
    assert MatchSettings.load().truth_factor == 6.0
    actual, expected, truth = _with_mask_errors(1.8e-2, 4e-3)  # 4.5x torch's error: only a factor-5 rule passes
    assert compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth)[0][-1].passed


def test_truth_with_other_detections_widens_nothing() -> None:
    actual, expected, truth = _with_mask_errors(4e-3, 4e-3)
    truth = {key: value[[0, 1, 2, 3]] for key, value in truth.items()}  # the fp64 run made one detection fewer
    masks = compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth)[0][-1]
    assert not masks.passed and masks.atol == ATOL
    assert "not widened by the fp64 replay: 4 of torch's 5 detections pair with its 4" in masks.note


def test_discrete_fields_are_never_widened() -> None:
    actual, expected, truth = _with_mask_errors(0.0, 0.0)
    expected["keypoints"] = np.zeros((5, 3, 3), np.float32)
    actual["keypoints"] = expected["keypoints"].copy()
    actual["keypoints"][2, 1, 0] = 1.0  # a keypoint one pixel away
    truth["keypoints"] = expected["keypoints"] + 1.0  # torch's positions far from the fp64 run's
    comparisons, _ = compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth)
    keypoints = comparisons[-1]
    assert keypoints.name == "keypoints" and not keypoints.passed and keypoints.atol == ATOL


def test_moved_keypoints_are_named_with_their_scores() -> None:
    expected = _detections(3)
    expected["keypoints"] = np.tile(np.array([[10.0, 20.0, 1.0]], np.float32), (3, 4, 1))
    expected["keypoints_scores"] = np.full((3, 4), 2.5, np.float32)
    actual = _permuted(expected, [1, 0, 2])
    actual["keypoints"] = actual["keypoints"].copy()
    actual["keypoints"][0, 2, :2] += np.float32([3.0, 4.0])  # backend #0 is torch's #1
    keypoints = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)[0][3]
    assert keypoints.name == "keypoints" and not keypoints.passed
    assert "1 keypoint(s) moved: torch's #1 keypoint 2 moved 5 px (score 2.5 against torch's 2.5)" in keypoints.note
    assert "moved" not in compare_detections(expected, expected, atol=ATOL, rtol=RTOL)[0][3].note


# -- ties at the cut of the detection count ------------------------------------------------------


def _other_at_the_cut(score_shift: float = 0.0, position: int = 4) -> tuple[dict, dict]:
    """torch's five detections, and the backend's with detection `position` replaced by another
    candidate (another box and label) scoring `score_shift` from it."""
    expected = _detections(5, seed=3)
    actual = {key: value.copy() for key, value in expected.items()}
    actual["boxes"][position] = np.float32([300, 300, 340, 350])
    actual["labels"][position] = expected["labels"][position] + 1
    actual["scores"][position] = expected["scores"][position] + np.float32(score_shift)
    return actual, expected


@pytest.mark.parametrize(("shift", "position", "passes"), [
    (2e-4, 4, True),  # the last kept ties with torch's last kept: either may be kept
    (-2e-4, 4, True),
    (5e-2, 4, False),  # the backend's last detection scores otherwise: not a tie
    (0.0, 1, False),  # a detection missing higher up, not at the cut
], ids=["tie-above", "tie-below", "score-moved", "not-at-the-cut"])
def test_another_candidate_at_the_cut(shift: float, position: int, passes: bool) -> None:
    actual, expected = _other_at_the_cut(shift, position)
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert match.unmatched_actual == [position] and match.unmatched_expected == [position]
    assert all(c.passed is passes for c in comparisons), [c.note for c in comparisons]
    assert match.accepted is passes and (match.cut_ties == [(position, position)]) is passes
    assert ("tie at the count's cut" in comparisons[0].note) is passes
    assert "1 backend detection(s) unmatched" in comparisons[0].note  # named either way


def test_a_cut_tie_needs_as_many_detections_on_each_side() -> None:
    actual, expected = _other_at_the_cut(2e-4)
    extra = {key: np.concatenate([value, value[:1] * 0 + value[-1:]]) for key, value in expected.items()}
    extra["boxes"][-1] = np.float32([500, 500, 540, 550])
    _, match = compare_detections(actual, extra, atol=ATOL, rtol=RTOL)
    assert not match.cut_ties and not match.accepted


_RNG = np.random.default_rng(0)
_MASKS = _RNG.random((4, 1, 6, 5), dtype=np.float32)
_TRUTH = _MASKS.astype(np.float64)[[2, 0, 3, 1]] + _RNG.normal(0, 1e-6, (4, 1, 6, 5))
_WITH_NAN = _TRUTH.copy()
_WITH_NAN[3, 0, 2, 2] = np.nan


@pytest.mark.parametrize("ours, theirs, rows", [
    (_MASKS, _TRUTH, [(0, 1), (1, 3), (2, 0), (3, 2)]),  # every mask, paired out of order
    (_MASKS, _TRUTH, [(2, 0)]),  # one pair
    (_MASKS[:, 0, 0, 0], _TRUTH[:, 0, 0, 0], [(0, 1), (3, 2)]),  # one value per detection (scores)
    (_MASKS, _WITH_NAN, [(0, 1), (1, 3), (2, 0)]),  # a NaN in a paired truth: NaN, as the whole field's max
    (_MASKS, _TRUTH, []),  # no pairs
    (_MASKS, _TRUTH[:, :, :5], [(0, 1)]),  # shapes differ: no measure
], ids=["all-pairs", "one-pair", "one-value-each", "nan", "no-pairs", "shapes-differ"])
def test_the_paired_difference_is_the_whole_fields_maximum_without_its_float64_copy(ours, theirs, rows) -> None:
    from harness.metrics.detections import largest_paired_difference

    got = largest_paired_difference(ours, theirs, rows)
    if ours.shape[1:] != theirs.shape[1:]:
        assert got is None
        return
    whole = ours[[i for i, _ in rows]].astype(np.float64) - theirs[[j for _, j in rows]]
    expected = float(np.max(np.abs(whole), initial=0.0))
    assert got == expected or (np.isnan(got) and np.isnan(expected)), (got, expected)
    assert rows == [] or np.isnan(expected) or expected > 0


# -- boxes a fraction of a pixel wide (clipped at the image's edge) pair by their corners ----------

_EDGE = np.float32([799.9, 103.2, 800.0, 126.1])  # torch's box: clipped to 0.1 px at the edge x = 800


@pytest.mark.parametrize(("backend_box", "label_shift", "atol", "rtol", "pairs"), [
    ([800.0, 103.3, 800.0, 126.1], 0, 1e-4, 1e-3, True),  # 0 px wide, every corner within 0.8 px: IoU 0, one box
    ([799.9, 103.2, 800.0, 126.1], 0, 1e-4, 1e-3, True),  # identical
    ([800.0, 103.3, 800.0, 126.1], 0, 1e-3, 0.0, False),  # 0.1 px apart, beyond a 1e-3 px tolerance
    ([800.0, 150.0, 800.0, 170.0], 0, 1e-4, 1e-3, False),  # as thin, elsewhere on the edge
    ([790.0, 103.2, 790.1, 126.1], 0, 1e-4, 1e-3, False),  # as thin, 10 px away
    ([800.0, 103.3, 800.0, 126.1], 1, 1e-4, 1e-3, False),  # the same place, another label
], ids=["clipped-0px", "identical", "beyond-tolerance", "elsewhere-on-edge", "10px-away", "other-label"])
def test_thin_boxes_pair_by_corners_within_the_boxes_tolerance(backend_box, label_shift, atol, rtol, pairs) -> None:
    expected = _detections(3, seed=4)
    expected["boxes"][1] = _EDGE
    actual = {key: value.copy() for key, value in expected.items()}
    actual["boxes"][1] = np.float32(backend_box)
    actual["labels"][1] += label_shift
    comparisons, match = compare_detections(actual, expected, atol=atol, rtol=rtol)
    assert match.complete is pairs and all(c.passed is pairs for c in comparisons), [c.note for c in comparisons]
    assert match.pairs == ([(0, 0), (1, 1), (2, 2)] if pairs else [(0, 0), (2, 2)])
    below = bool(box_iou(actual["boxes"][1], _EDGE)[0, 0] < MatchSettings.load().iou_threshold)
    assert match.corner_pairs == ([(1, 1)] if pairs and below else [])
    assert ("backend #1 with torch's #1 (IoU 0)" in comparisons[0].note) is (pairs and below)
    assert match.min_iou == 1.0  # the IoU pairs' smallest: a corner pair's IoU is reported with it


def test_an_iou_pair_is_preferred_to_a_corner_pair() -> None:
    boxes = np.float32([[800.0, 10.0, 800.0, 30.0], [799.9, 10.0, 800.0, 30.0]])
    labels = np.array([1, 1])
    match = match_detections(boxes[[1]], labels[:1], boxes, labels, iou_threshold=0.5, box_atol=1e-4, box_rtol=1e-3)
    assert match.pairs == [(0, 1)] and not match.corner_pairs and match.unmatched_expected == [0]


def test_thin_boxes_pair_the_truth_too() -> None:
    actual, expected, truth = _with_mask_errors(4e-3, 4e-3)
    for side, x in ((actual, 800.0), (expected, 799.9), (truth, 800.0)):
        side["boxes"][2] = np.float32([x, 50.0, 800.0, 70.0])
    truth["boxes"] = truth["boxes"].astype(np.float64)
    masks = compare_detections(actual, expected, atol=ATOL, rtol=RTOL, truth=truth)[0][-1]
    assert masks.passed and "x torch's own float32 error" in masks.note, masks.note
    assert "not widened" in compare_detections(actual, expected, atol=ATOL, rtol=0.0, truth=truth)[0][-1].note


# -- a detection NMS keeps on one side and drops on the other, its overlap at NMS's threshold ------


def _nms_flip(overlap_shift: float, torch_error: float, replacement_score: float = 0.45, rival_label: int = 1,
              rival_score: float = 0.8) -> tuple[dict, dict, dict]:
    """torch's five detections: #1 (label 1) and #3 (label 1, score 0.6) overlap, #3 shifted
    `overlap_shift` px to the right of #1 (3.378 px: IoU 0.495); the backend drops #3 and keeps
    a sixth candidate scored `replacement_score` instead; the truth is torch's boxes
    `torch_error` px away."""
    expected = {
        "boxes": np.float32([[100, 100, 150, 150], [0, 0, 10, 10], [200, 200, 260, 240],
                             [overlap_shift, 0, overlap_shift + 10, 10], [300, 0, 330, 40]]),
        "labels": np.array([2, rival_label, 3, 1, 3]),
        "scores": np.float32([0.9, rival_score, 0.7, 0.6, 0.5]),
    }
    truth = {key: value.astype(np.float64) if value.dtype.kind == "f" else value.copy() for key, value in expected.items()}
    truth["boxes"][:, 0] += torch_error
    keep = [0, 1, 2, 4]
    actual = {key: value[keep] for key, value in expected.items()}
    actual["boxes"] = np.concatenate([actual["boxes"], np.float32([[400, 400, 430, 450]])])
    actual["labels"] = np.concatenate([actual["labels"], [4]])
    actual["scores"] = np.concatenate([actual["scores"], np.float32([replacement_score])])
    return actual, expected, truth


@pytest.mark.parametrize(("kwargs", "flips"), [
    ({"overlap_shift": 3.378, "torch_error": 0.05}, True),  # IoU 0.495, 0.05 px of torch's own error moves it 0.006
    ({"overlap_shift": 3.378, "torch_error": 0.0}, False),  # torch exact: no rounding reaches the threshold
    ({"overlap_shift": 4.3, "torch_error": 0.05}, False),  # IoU 0.40: well below NMS's threshold
    ({"overlap_shift": 3.378, "torch_error": 0.05, "replacement_score": 0.55}, False),  # scored above torch's cut
    ({"overlap_shift": 3.378, "torch_error": 0.05, "rival_label": 2}, False),  # the overlap is with another label
    ({"overlap_shift": 3.378, "torch_error": 0.05, "rival_score": 0.55}, False),  # the rival scores below it
], ids=["at-threshold", "torch-exact", "far-below", "replacement-above-cut", "other-label", "rival-below"])
def test_a_detection_at_nms_threshold_may_be_dropped(kwargs: dict, flips: bool) -> None:
    actual, expected, truth = _nms_flip(**kwargs)
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL, truth=truth)
    assert match.unmatched_actual == [4] and match.unmatched_expected == [3]
    assert match.accepted is flips and (match.nms_flips == [(4, 3, 1)]) is flips
    assert all(c.passed is flips for c in comparisons), [c.note for c in comparisons]
    assert ("torch's #3 overlaps its better-scored #1 of the same label by IoU 0.495" in comparisons[0].note) is flips
    assert "1 torch detection(s) unmatched: #3" in comparisons[0].note  # named either way


def test_an_nms_flip_needs_the_truth() -> None:
    actual, expected, _ = _nms_flip(3.378, 0.05)
    _, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL)
    assert not match.nms_flips and not match.accepted



# -- the NMS threshold is the detector's own --------------------------------------------------------


class _Head(torch.nn.Module):
    def __init__(self, nms_thresh: float) -> None:
        super().__init__()
        self.nms_thresh = nms_thresh


class _RCNNLike(torch.nn.Module):
    """A stand-in with torchvision's R-CNN layout: the RPN's NMS (proposals) and the box head's."""

    def __init__(self, box_nms: float, rpn_nms: float = 0.7) -> None:
        super().__init__()
        self.rpn, self.roi_heads = _Head(rpn_nms), _Head(box_nms)


# IoU of torch's #3 with its rival #1 for each overlap shift (10 px boxes): 3.378 px 0.495, 4.3 px 0.399, 5.38 px 0.300
@pytest.mark.parametrize(("detector", "overlap_shift", "flips", "source"), [
    (_RCNNLike(0.3), 5.38, True, "roi_heads.nms_thresh"),  # IoU 0.300: at the detector's threshold
    (_RCNNLike(0.3), 4.3, False, "roi_heads.nms_thresh"),  # IoU 0.40: 0.1 from 0.3, far beyond rounding
    (_RCNNLike(0.3), 3.378, False, "roi_heads.nms_thresh"),  # IoU 0.495: at 0.5, which is not this detector's
    (_RCNNLike(0.5), 3.378, True, "roi_heads.nms_thresh"),
    (_RCNNLike(0.5), 5.38, False, "roi_heads.nms_thresh"),
    (torch.nn.Sequential(_Head(0.3)), 5.38, True, "0.nms_thresh"),  # RetinaNet, FCOS, SSD inside a wrapper
    (torch.nn.Linear(1, 1), 3.378, True, "fallback"),  # no NMS named: detections.json's 0.5
    (torch.nn.Linear(1, 1), 5.38, False, "fallback"),
], ids=["rcnn0.3-iou0.30", "rcnn0.3-iou0.40", "rcnn0.3-iou0.495", "rcnn0.5-iou0.495", "rcnn0.5-iou0.30",
        "wrapped-dense0.3-iou0.30", "fallback-iou0.495", "fallback-iou0.30"])
def test_an_nms_flip_is_judged_at_the_detectors_own_threshold(detector: torch.nn.Module, overlap_shift: float,
                                                               flips: bool, source: str) -> None:
    actual, expected, truth = _nms_flip(overlap_shift, 0.05)
    settings = MatchSettings.load(detector=detector)
    assert source in settings.nms_source
    comparisons, match = compare_detections(actual, expected, atol=ATOL, rtol=RTOL, truth=truth, settings=settings)
    assert match.accepted is flips and all(c.passed is flips for c in comparisons), [c.note for c in comparisons]
    named = f"of NMS's {settings.nms_threshold:g} ({settings.nms_source})"
    assert (named in comparisons[0].note) is flips, comparisons[0].note


@pytest.mark.parametrize(("name", "options", "found"), [
    ("fasterrcnn_mobilenet_v3_large_320_fpn", {"box_nms_thresh": 0.3}, (0.3, "roi_heads.nms_thresh")),
    ("retinanet_resnet50_fpn", {"nms_thresh": 0.3}, (0.3, "nms_thresh")),
    ("fcos_resnet50_fpn", {"nms_thresh": 0.35}, (0.35, "nms_thresh")),
    ("ssdlite320_mobilenet_v3_large", {"nms_thresh": 0.4}, (0.4, "nms_thresh")),
])
def test_torchvisions_detectors_name_their_output_nms_threshold(name: str, options: dict, found: tuple) -> None:
    """Read from torchvision's own modules (untrained, as the detection tier builds them), not
    from its defaults: an R-CNN's box head, not its RPN's 0.7; the RPN alone names its own."""
    detector = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=11, **options)
    assert detector_nms_threshold(detector) == found
    assert detector_nms_threshold(torch.nn.Sequential(detector)) == (found[0], "0." + found[1])
    if hasattr(detector, "rpn"):
        assert detector_nms_threshold(detector.rpn) == (detector.rpn.nms_thresh, "nms_thresh") != found
    assert detector_nms_threshold(torch.nn.Linear(1, 1)) is None


class _TinyDetector(torch.nn.Module):
    """Detections straight from its input, and an NMS threshold it names as RetinaNet does."""

    nms_thresh = 0.3

    def forward(self, boxes: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        return [{"boxes": boxes * 2, "labels": torch.ones(boxes.shape[0], dtype=torch.int64),
                 "scores": boxes[:, 0].sigmoid()}]


def test_verify_judges_detections_at_the_modules_nms_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify() hands the module to the detections' judge, which reads its NMS threshold."""
    import harness
    from harness.verification import outputs

    seen = []
    original = outputs.compare_detection_outputs

    def spy(*args, **kwargs):
        seen.append(kwargs["settings"])
        return original(*args, **kwargs)

    monkeypatch.setattr(outputs, "compare_detection_outputs", spy)
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 20.0, 30.0]])
    verification = harness.verify(_TinyDetector(), (boxes,), per_op=False)
    assert verification.passed and seen, [c.to_dict() for c in verification.outputs]
    assert (seen[0].nms_threshold, seen[0].nms_source) == (0.3, "nms_thresh")
