"""Compare the outputs of object detectors, whose number and order of detections depend on data.

A torchvision-style detector returns, per image, a mapping of `boxes` [N, 4] (x1, y1, x2, y2),
`labels` [N], `scores` [N] and, for some models, `masks` [N, 1, H, W], `keypoints` [N, K, 3] and
`keypoints_scores` [N, K]. When scores tie, two correct implementations may return the tied
detections in another order, or (at the `detections_per_img` cut) another one of them; a
positional comparison then reports a divergence that is not one.

The comparison (docs/ARCHITECTURE.md, "Detections"): detections are paired greedily by label
and IoU, highest IoU first, pairs below `iou_threshold` refused; then each field is compared
at the case's tolerance through the pairs (masks and keypoints ride on their box's pair). Every
detection left without a pair, on either side, fails the comparison and is named in its note.
IoU is ill-conditioned for a box a fraction of a pixel wide (one clipped at the image's edge:
0.1 px against 0 px wide have IoU 0), so two boxes of one label whose every corner agrees
within the boxes' own elementwise tolerance, the one their comparison then uses, pair too.

Given torch's outputs replayed in float64 (the truth), a continuous field's absolute tolerance
covers torch's own float32 error: `truth_factor` times the largest |torch - truth| over torch's
detections paired with the truth's. A backend within the verdict rule's factor of torch's own
error (harness.metrics.verdict: one extra rounding) differs from torch by at most the sum of the
two errors, (factor + 1) times torch's, so such a difference is not a divergence of the export;
`truth_factor` is derived from the rule's factor on load (`truth_factor_for`), never written
down twice. Labels and keypoint positions are discrete and never widened this way.

NMS keeps a box unless a better-scored one of its label overlaps it by more than its threshold;
when the truth's IoU of such two boxes sits closer to the threshold than torch's own float32
box error can move it, either side may keep the lower one (`nms_flips`), and the side that drops
it takes the next candidate at the count's cut. Only the truth's numbers settle this. The
threshold is the detector's own (`detector_nms_threshold`, read from the module that made the
detections); detections.json's 0.5, torchvision's default, stands in only where no module says.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
from harness.metrics.verdict import VerdictRule, load_rule

DETECTION_KEYS = ("boxes", "labels", "scores")
"""Every detection output has these; the optional per-detection fields follow their box."""
PER_DETECTION_KEYS = ("masks", "keypoints", "keypoints_scores")
TRUTH_KEYS = ("boxes", "scores", "masks", "keypoints_scores")
"""The continuous fields whose tolerance may cover torch's own float32 error (the fp64 truth)."""
SETTINGS_PATH = "data/detections.json"
NMS_ATTRIBUTES = ("roi_heads.nms_thresh", "nms_thresh")
"""Where a torchvision-style detector keeps the IoU threshold of the NMS its detections come out
of, in the order looked for: an R-CNN's box head (its `rpn.nms_thresh` filters proposals, which
are not the outputs); RetinaNet, FCOS, SSD and SSDlite, or an RoIHeads or RPN module alone."""
FALLBACK_NMS_SOURCE = "detections.json's fallback: the module names no NMS threshold"


@dataclass(frozen=True)
class MatchSettings:
    """The numbers of the matching, with their sources (harness/metrics/data/detections.json)."""

    iou_threshold: float
    max_listed: int
    truth_factor: float  # truth_factor_for(the verdict rule)
    nms_threshold: float = 0.5
    nms_source: str = FALLBACK_NMS_SOURCE  # where `nms_threshold` was read

    @classmethod
    def load(cls, rule: VerdictRule | None = None, detector: Any = None) -> MatchSettings:
        """The shipped numbers, `truth_factor` derived from `rule` (default: the shipped verdict
        rule), the NMS threshold `detector`'s own (`detector_nms_threshold`) where it names one,
        else the shipped fallback."""
        data = json.loads(resources.files("harness.metrics").joinpath(SETTINGS_PATH).read_text())
        nms = detector_nms_threshold(detector) if detector is not None else None
        threshold, source = nms or (float(data["nms_threshold_fallback"]), FALLBACK_NMS_SOURCE)
        return cls(iou_threshold=float(data["iou_threshold"]), max_listed=int(data["max_listed"]),
                   truth_factor=truth_factor_for(rule or load_rule()), nms_threshold=threshold, nms_source=source)


def detector_nms_threshold(module: Any) -> tuple[float, str] | None:
    """(threshold, the attribute it was read from) of the NMS whose survivors are `module`'s
    detections: the first of `NMS_ATTRIBUTES` found on the module, else on its submodules in
    order (a wrapper around a detector); None when no finite number is found."""
    named = module.named_modules() if hasattr(module, "named_modules") else [("", module)]
    for prefix, owner in named:
        for path in NMS_ATTRIBUTES:
            value: Any = owner
            for part in path.split("."):
                value = getattr(value, part, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value), ".".join(p for p in (prefix, path) if p)
    return None


def truth_factor_for(rule: VerdictRule) -> float:
    """How many times torch's own float32 error a detection field may differ from torch: a
    backend the verdict rule passes is within `rule.factor` times torch's error of the truth, so
    it is within `rule.factor + 1` times torch's error of torch (the triangle inequality)."""
    return float(rule.factor) + 1.0


@dataclass
class DetectionMatch:
    """Which backend detection stands for which of torch's: `pairs` of (actual, expected) indices
    in torch's order, the detections of each side left without a pair, and the smallest IoU of a pair."""

    pairs: list[tuple[int, int]] = field(default_factory=list)
    unmatched_actual: list[int] = field(default_factory=list)
    unmatched_expected: list[int] = field(default_factory=list)
    min_iou: float = 1.0
    cut_ties: list[tuple[int, int]] = field(default_factory=list)  # (actual, expected): see `cut_ties`
    corner_pairs: list[tuple[int, int]] = field(default_factory=list)  # of `pairs`, those below the IoU threshold
    nms_flips: list[tuple[int, int, int]] = field(default_factory=list)  # (actual, expected, torch's NMS rival)

    @property
    def complete(self) -> bool:
        return not self.unmatched_actual and not self.unmatched_expected

    @property
    def accepted(self) -> bool:
        """Every detection paired, or the ones left over are ties at the count's cut or NMS flips."""
        explained_a = [a for a, _ in self.cut_ties] + [a for a, _, _ in self.nms_flips]
        explained_e = [e for _, e in self.cut_ties] + [e for _, e, _ in self.nms_flips]
        return self.complete or (sorted(explained_a) == sorted(self.unmatched_actual)
                                 and sorted(explained_e) == sorted(self.unmatched_expected))

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": [list(p) for p in self.pairs], "unmatched_actual": self.unmatched_actual,
                "unmatched_expected": self.unmatched_expected, "min_iou": self.min_iou,
                "cut_ties": [list(p) for p in self.cut_ties], "corner_pairs": [list(p) for p in self.corner_pairs],
                "nms_flips": [list(p) for p in self.nms_flips]}


def box_iou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """IoU of every box in `first` [N, 4] with every box in `second` [M, 4] (x1, y1, x2, y2), in fp64."""
    a, b = np.asarray(first, np.float64).reshape(-1, 4), np.asarray(second, np.float64).reshape(-1, 4)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1), (inter == 0) & (union == 0))
    return iou.astype(np.float64)


def match_detections(
    actual_boxes: Any, actual_labels: Any, expected_boxes: Any, expected_labels: Any, *,
    iou_threshold: float, actual_scores: Any = None, expected_scores: Any = None,
    box_atol: float | None = None, box_rtol: float = 0.0,
) -> DetectionMatch:
    """Pair detections of the same label, highest IoU first (ties: closest score, then torch's
    order), never below `iou_threshold`; each detection is in at most one pair. Given `box_atol`,
    two boxes whose every corner agrees within box_atol + box_rtol * |torch's corner| pair
    whatever their IoU (after every pair by IoU): IoU cannot tell a 0.1 px wide box from a 0 px
    wide one, the boxes' comparison can."""
    a_boxes, e_boxes = as_array(actual_boxes).reshape(-1, 4), as_array(expected_boxes).reshape(-1, 4)
    a_labels, e_labels = as_array(actual_labels).reshape(-1), as_array(expected_labels).reshape(-1)
    if len(a_boxes) != len(a_labels) or len(e_boxes) != len(e_labels):
        raise ValueError(
            f"boxes and labels disagree in count: backend {len(a_boxes)} vs {len(a_labels)}, "
            f"torch {len(e_boxes)} vs {len(e_labels)}"
        )
    iou = box_iou(a_boxes, e_boxes)
    iou[a_labels[:, None] != e_labels[None, :]] = -1.0
    score_gap = np.zeros_like(iou)
    if actual_scores is not None and expected_scores is not None:
        score_gap = np.abs(as_array(actual_scores).reshape(-1, 1).astype(np.float64)
                           - as_array(expected_scores).reshape(1, -1).astype(np.float64))
    by_iou = iou >= iou_threshold
    by_corners = (_corners_agree(a_boxes, e_boxes, box_atol, box_rtol) & (iou >= 0) & ~by_iou
                  if box_atol is not None else np.zeros_like(by_iou))
    a_index, e_index = np.nonzero(by_iou | by_corners)
    order = np.lexsort((a_index, e_index, score_gap[a_index, e_index], -iou[a_index, e_index],
                        by_corners[a_index, e_index]))
    used_a, used_e, pairs, corner_pairs, min_iou = set(), set(), [], [], 1.0
    for k in order:
        a, e = int(a_index[k]), int(e_index[k])
        if a in used_a or e in used_e:
            continue
        used_a.add(a)
        used_e.add(e)
        pairs.append((a, e))
        if by_corners[a, e]:
            corner_pairs.append((a, e))
        else:
            min_iou = min(min_iou, float(iou[a, e]))
    pairs.sort(key=lambda pair: pair[1])
    corner_pairs.sort(key=lambda pair: pair[1])
    return DetectionMatch(
        pairs=pairs, min_iou=min_iou, corner_pairs=corner_pairs,
        unmatched_actual=[i for i in range(len(a_boxes)) if i not in used_a],
        unmatched_expected=[i for i in range(len(e_boxes)) if i not in used_e],
    )


def _corners_agree(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """[N, M]: whether every corner of actual box i is within atol + rtol * |corner| of expected box j's."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    return np.all(np.abs(a[:, None, :] - e[None, :, :]) <= atol + rtol * np.abs(e[None, :, :]), axis=2)


def compare_detections(
    actual: Mapping[str, Any], expected: Mapping[str, Any], *, atol: float, rtol: float,
    names: Mapping[str, str] | None = None, settings: MatchSettings | None = None,
    truth: Mapping[str, Any] | None = None,
) -> tuple[list[Comparison], DetectionMatch]:
    """One Comparison per field of one image's detections, in `expected`'s key order, after
    matching: each compares the paired detections (backend reordered to torch's order); every
    Comparison fails when a detection is left without a pair, and its note names them. With
    `truth` (torch's detections replayed in float64) a continuous field's atol covers torch's own
    float32 error (`truth_tolerances`)."""
    settings = settings or MatchSettings.load()
    _require_detection_keys(actual, expected)
    widened, truth_note, to_truth = (truth_tolerances(expected, truth, atol=atol, rtol=rtol, settings=settings)
                                     if truth else ({}, "", {}))
    match = match_detections(
        actual["boxes"], actual["labels"], expected["boxes"], expected["labels"],
        iou_threshold=settings.iou_threshold, actual_scores=actual["scores"], expected_scores=expected["scores"],
        box_atol=widened.get("boxes", (atol,))[0], box_rtol=rtol,
    )
    score_atol = widened.get("scores", (atol,))[0]
    if truth:
        match.nms_flips = nms_flips(match, actual, expected, truth, to_truth, score_atol=score_atol, rtol=rtol,
                                    nms_threshold=settings.nms_threshold)
    flipped_a, flipped_e = {a for a, _, _ in match.nms_flips}, {e for _, e, _ in match.nms_flips}
    rest = DetectionMatch(pairs=match.pairs, unmatched_actual=[a for a in match.unmatched_actual if a not in flipped_a],
                          unmatched_expected=[e for e in match.unmatched_expected if e not in flipped_e])
    match.cut_ties = cut_ties(rest, actual["scores"], expected["scores"], atol=score_atol, rtol=rtol)
    a_rows = np.asarray([a for a, _ in match.pairs], dtype=np.int64)
    e_rows = np.asarray([e for _, e in match.pairs], dtype=np.int64)
    summary = _summary(match, actual, expected, settings)
    comparisons = []
    for key, value in expected.items():
        name = (names or {}).get(key, key)
        if key not in actual:
            continue
        field_atol, torch_error = widened.get(key, (atol, None))
        comparison = compare(as_array(actual[key])[a_rows], as_array(value)[e_rows], atol=field_atol, rtol=rtol,
                             name=name)
        comparison.shape_actual = list(as_array(actual[key]).shape)
        comparison.shape_expected = list(as_array(value).shape)
        widening = (f"atol {field_atol:.3g} = {settings.truth_factor:g} x torch's own float32 error "
                    f"{torch_error:.3g} against the fp64 replay (the backend's "
                    f"{_truth_error(actual[key], truth[key], match.pairs, to_truth):.3g})"
                    if torch_error is not None else truth_note)
        moves = _keypoint_moves(actual, expected, a_rows, e_rows, comparison, settings) if key == "keypoints" else ""
        comparison.note = "; ".join(part for part in (summary, widening, moves, comparison.note) if part)
        if not match.accepted:
            comparison.shape_match = comparison.shape_expected == comparison.shape_actual
            comparison.passed = False
        comparisons.append(comparison)
    return comparisons, match


def cut_ties(match: DetectionMatch, actual_scores: Any, expected_scores: Any, *, atol: float,
             rtol: float) -> list[tuple[int, int]]:
    """The detections left without a pair that tie at the cut of the detection count, paired
    (backend, torch) by rank; [] unless all of them do. A detector keeps its `detections_per_img`
    best-scored candidates: when the last kept and the first dropped score alike within rounding,
    either side may keep either one. So an unmatched detection is such a tie only when both sides
    return as many detections, each side's unmatched ones are its lowest-scored (none above a
    paired detection of its side, within the scores' tolerance), and their scores, rank by rank,
    agree with the other side's within that tolerance. A detection missing higher up, a count
    that differs, or a score that moved is no tie."""
    unmatched_a, unmatched_e = match.unmatched_actual, match.unmatched_expected
    scores_a = as_array(actual_scores).reshape(-1).astype(np.float64)
    scores_e = as_array(expected_scores).reshape(-1).astype(np.float64)
    if not unmatched_a or len(unmatched_a) != len(unmatched_e) or len(scores_a) != len(scores_e):
        return []
    for scores, unmatched, paired in ((scores_a, unmatched_a, [a for a, _ in match.pairs]),
                                      (scores_e, unmatched_e, [e for _, e in match.pairs])):
        if paired and scores[unmatched].max() > scores[paired].min() + atol + rtol * abs(scores[paired].min()):
            return []
    ranked_a = sorted(unmatched_a, key=lambda i: -scores_a[i])
    ranked_e = sorted(unmatched_e, key=lambda i: -scores_e[i])
    if any(abs(scores_a[a] - scores_e[e]) > atol + rtol * abs(scores_e[e]) for a, e in zip(ranked_a, ranked_e)):
        return []
    return list(zip(ranked_a, ranked_e))


def nms_flips(match: DetectionMatch, actual: Mapping[str, Any], expected: Mapping[str, Any],
              truth: Mapping[str, Any], to_truth: Mapping[int, int], *, score_atol: float, rtol: float,
              nms_threshold: float) -> list[tuple[int, int, int]]:
    """(backend, torch, rival): torch's detections the backend's NMS may rightly have dropped,
    each with the backend's detection that took its place at the count's cut; [] unless each of
    torch's detections left over is such a flip (the rest may still be ties at the cut, `cut_ties`).

    Torch's unmatched detection e is such a flip when a better-scored detection of its label
    (the rival, paired on both sides) overlaps it, in the truth (the fp64 replay, paired with
    every torch detection), within the IoU's reach of the NMS threshold: |IoU_truth - threshold|
    no more than the IoU moves when each of the eight corners moves, one at a time, by torch's
    own float32 box error (max |torch - truth| over the boxes). Then rounding as small as torch's
    own decides which side of the threshold the IoU falls, so dropping e is as right as keeping
    it. The backend's detection that took its place must be one of its lowest-scored (none above
    a paired backend detection) that torch dropped at the cut (scoring no more than torch's
    last kept), with as many detections on each side. A detection the truth does not put near
    the threshold, or a replacement scored above the cut, is no flip."""
    unmatched_e = match.unmatched_expected
    if any(e not in to_truth for e in unmatched_e):
        return []
    scores_a = as_array(actual["scores"]).reshape(-1).astype(np.float64)
    scores_e = as_array(expected["scores"]).reshape(-1).astype(np.float64)
    if not unmatched_e or len(scores_a) != len(scores_e) or len(match.unmatched_actual) < len(unmatched_e):
        return []
    boxes_e, boxes_t = as_array(expected["boxes"]).reshape(-1, 4), as_array(truth["boxes"]).reshape(-1, 4)
    labels_e = as_array(expected["labels"]).reshape(-1)
    box_error = largest_paired_difference(boxes_e, boxes_t, list(to_truth.items())) or 0.0
    kept_on_both = {e for _, e in match.pairs}
    flipped = []
    for e in sorted(unmatched_e, key=lambda i: -scores_e[i]):
        rivals = [p for p in kept_on_both if p in to_truth and labels_e[p] == labels_e[e] and scores_e[p] > scores_e[e]
                  and _within_iou_reach(boxes_t[to_truth[p]], boxes_t[to_truth[e]], box_error, nms_threshold)]
        if not rivals:
            return []
        flipped.append((e, max(rivals, key=lambda p: float(box_iou(boxes_t[to_truth[p]], boxes_t[to_truth[e]])[0, 0]))))
    paired_a = [a for a, _ in match.pairs]
    cut = scores_e.min() + score_atol + rtol * abs(scores_e.min())
    floor = (scores_a[paired_a].min() + score_atol + rtol * abs(scores_a[paired_a].min())) if paired_a else np.inf
    replacements = sorted((a for a in match.unmatched_actual if scores_a[a] <= cut and scores_a[a] <= floor),
                          key=lambda i: -scores_a[i])
    if len(replacements) < len(flipped):
        return []
    return [(a, e, rival) for a, (e, rival) in zip(replacements, flipped)]


def _within_iou_reach(first: np.ndarray, second: np.ndarray, error: float, threshold: float) -> bool:
    """Whether IoU(first, second) is within `threshold`'s reach: its distance to the threshold no
    more than the sum, over the eight corners, of how far moving that corner by +-`error` moves it."""
    corners = np.concatenate([np.asarray(first, np.float64).reshape(4), np.asarray(second, np.float64).reshape(4)])
    iou = float(box_iou(corners[:4], corners[4:])[0, 0])
    reach = 0.0
    for i in range(8):
        moved = [corners.copy(), corners.copy()]
        moved[0][i] += error
        moved[1][i] -= error
        reach += max(abs(float(box_iou(m[:4], m[4:])[0, 0]) - iou) for m in moved)
    return abs(iou - threshold) <= reach


def _keypoint_moves(actual: Mapping[str, Any], expected: Mapping[str, Any], a_rows: np.ndarray, e_rows: np.ndarray,
                    comparison: Comparison, settings: MatchSettings) -> str:
    """The keypoints the backend put elsewhere than torch (outside the comparison's tolerance),
    with how far and both scores: a keypoint is a heatmap's argmax, so one that moved while its
    score agrees marks two near-equal maxima, one whose score moved too a differing heatmap."""
    if comparison.passed or not len(e_rows) or comparison.shape_actual[1:] != comparison.shape_expected[1:]:
        return ""
    ours = as_array(actual["keypoints"])[a_rows][..., :2].astype(np.float64)
    theirs = as_array(expected["keypoints"])[e_rows][..., :2].astype(np.float64)
    distance = np.hypot(*(ours - theirs).transpose(2, 0, 1))
    allowed = comparison.atol + comparison.rtol * np.abs(theirs).max(axis=2)
    moved = np.argwhere(np.abs(ours - theirs).max(axis=2) > allowed)
    if not len(moved):
        return ""
    scores = {side: as_array(fields["keypoints_scores"])[rows] if "keypoints_scores" in fields else None
              for side, fields, rows in (("backend", actual, a_rows), ("torch", expected, e_rows))}
    listed = []
    for pair, keypoint in moved[: settings.max_listed]:
        text = f"torch's #{e_rows[pair]} keypoint {keypoint} moved {distance[pair, keypoint]:.3g} px"
        if scores["torch"] is not None and scores["backend"] is not None:
            text += (f" (score {float(scores['backend'][pair, keypoint]):.5g} against torch's "
                     f"{float(scores['torch'][pair, keypoint]):.5g})")
        listed.append(text)
    more = f" and {len(moved) - settings.max_listed} more" if len(moved) > settings.max_listed else ""
    return f"{len(moved)} keypoint(s) moved: " + ", ".join(listed) + more


def _require_detection_keys(*sides: Mapping[str, Any]) -> None:
    missing = sorted({key for side in sides for key in DETECTION_KEYS if key not in side})
    if missing:
        raise ValueError(f"detections need {list(DETECTION_KEYS)}; {missing} missing from one side")


def truth_tolerances(
    expected: Mapping[str, Any], truth: Mapping[str, Any], *, atol: float, settings: MatchSettings,
    rtol: float = 0.0,
) -> tuple[dict[str, tuple[float, float]], str, dict[int, int]]:
    """{field: (atol, torch's error)} for the continuous fields (`TRUTH_KEYS`) whose torch float32
    error against `truth` (the same detections computed in float64), times `truth_factor`, exceeds
    `atol`; torch's error is the largest |torch - truth| over torch's detections paired with the
    truth's (matched as the backend's are). Nothing is widened, and the note says why, unless
    every detection of torch and of the truth has a pair: a detection the float64 run did not
    make is no measure of rounding. Boxes pair by corners within `atol` and `rtol` too
    (`match_detections`). The third item maps torch's detections to the truth's."""
    _require_detection_keys(truth)
    match = match_detections(
        truth["boxes"], truth["labels"], expected["boxes"], expected["labels"],
        iou_threshold=settings.iou_threshold, actual_scores=truth["scores"], expected_scores=expected["scores"],
        box_atol=atol, box_rtol=rtol,
    )
    if not match.complete:
        return {}, (f"tolerance not widened by the fp64 replay: {len(match.pairs)} of torch's "
                    f"{len(as_array(expected['labels']).reshape(-1))} detections pair with its "
                    f"{len(as_array(truth['labels']).reshape(-1))}"), {}
    t_rows = [t for t, _ in match.pairs]
    e_rows = [e for _, e in match.pairs]
    widened = {}
    for key in TRUTH_KEYS:
        if key not in expected or key not in truth or not match.pairs:
            continue
        error = largest_paired_difference(expected[key], truth[key], list(zip(e_rows, t_rows)))
        if error is None:
            continue
        if settings.truth_factor * error > atol:
            widened[key] = (settings.truth_factor * error, error)
    return widened, "", {e: t for t, e in match.pairs}


def _truth_error(actual: Any, truth: Any, pairs: Sequence[tuple[int, int]], to_truth: Mapping[int, int]) -> float:
    """The largest |backend - truth| over the backend's detections paired, through torch's, with the truth's."""
    rows = [(a, to_truth[e]) for a, e in pairs if e in to_truth]
    if not rows:
        return float("nan")
    error = largest_paired_difference(actual, truth, rows)
    return float("nan") if error is None else error


def largest_paired_difference(ours: Any, theirs: Any, rows: Sequence[tuple[int, int]]) -> float | None:
    """max |ours[i] - theirs[j]| over the paired detections (i, j), in float64 one pair at a
    time, so that no float64 copy of a whole field is made (Mask R-CNN at 800 px: 100 masks of
    600 x 800, 0.38 GB a side in float64); None when the detections' shapes differ."""
    ours, theirs = as_array(ours), as_array(theirs)
    if ours.shape[1:] != theirs.shape[1:]:
        return None
    largest = 0.0
    for i, j in rows:
        difference = float(np.max(np.abs(ours[i].astype(np.float64) - theirs[j]), initial=0.0))
        if math.isnan(difference):
            return difference  # as the whole field's maximum would be
        largest = max(largest, difference)
    return largest


def _summary(match: DetectionMatch, actual: Mapping[str, Any], expected: Mapping[str, Any],
             settings: MatchSettings) -> str:
    count_a, count_e = len(as_array(actual["labels"]).reshape(-1)), len(as_array(expected["labels"]).reshape(-1))
    text = (f"matched: {len(match.pairs)} of torch's {count_e} and the backend's {count_a} detections paired "
            f"by label and IoU >= {settings.iou_threshold:g} (smallest IoU {match.min_iou:.4g})")
    if match.corner_pairs:
        listed = ", ".join(f"backend #{a} with torch's #{e} (IoU {_pair_iou(actual, expected, a, e):.3g})"
                           for a, e in match.corner_pairs[: settings.max_listed])
        more = (f" and {len(match.corner_pairs) - settings.max_listed} more"
                if len(match.corner_pairs) > settings.max_listed else "")
        text += (f", {len(match.corner_pairs)} of them below that IoU but with every corner within the boxes' "
                 f"tolerance (boxes a fraction of a pixel wide, where IoU is ill-conditioned): {listed}{more}")
    for side, indices, fields in (("backend", match.unmatched_actual, actual), ("torch", match.unmatched_expected, expected)):
        if indices:
            listed = ", ".join(_describe(fields, i) for i in indices[: settings.max_listed])
            more = f" and {len(indices) - settings.max_listed} more" if len(indices) > settings.max_listed else ""
            text += f"; {len(indices)} {side} detection(s) unmatched: {listed}{more}"
    for a, e, rival in match.nms_flips:
        iou = float(box_iou(as_array(expected["boxes"]).reshape(-1, 4)[rival], as_array(expected["boxes"]).reshape(-1, 4)[e])[0, 0])
        text += (f"; torch's #{e} overlaps its better-scored #{rival} of the same label by IoU {iou:.4g}, within "
                 f"torch's own float32 box error of NMS's {settings.nms_threshold:g} ({settings.nms_source}) in "
                 f"the fp64 replay: the "
                 f"backend's NMS may drop it, and its #{a} took the place at the count's cut")
    if match.cut_ties and match.accepted:
        text += ("; the unmatched detections tie at the count's cut (the lowest-scored of as many on each side, "
                 "their scores agreeing): either may be kept")
    return text


def _pair_iou(actual: Mapping[str, Any], expected: Mapping[str, Any], a: int, e: int) -> float:
    return float(box_iou(as_array(actual["boxes"]).reshape(-1, 4)[a], as_array(expected["boxes"]).reshape(-1, 4)[e])[0, 0])


def _describe(fields: Mapping[str, Any], index: int) -> str:
    box = ", ".join(f"{v:.1f}" for v in as_array(fields["boxes"]).reshape(-1, 4)[index])
    label = as_array(fields["labels"]).reshape(-1)[index]
    score = float(as_array(fields["scores"]).reshape(-1)[index])
    return f"#{index} label {label} score {score:.5g} box [{box}]"


def detection_layout(outputs: Any) -> list[dict[str, int]] | None:
    """Where each image's detection fields sit among the flattened outputs (`flatten_outputs`
    order): one {key: flat index} per image, or None unless `outputs` is a list of mappings
    that each hold boxes, labels and scores (torchvision's detection output)."""
    if not isinstance(outputs, (list, tuple)) or not outputs:
        return None
    layout, position = [], 0
    for image in outputs:
        if not isinstance(image, Mapping) or not all(k in image for k in DETECTION_KEYS):
            return None
        if any(isinstance(v, (Mapping, list, tuple)) for v in image.values()):
            return None
        layout.append({key: position + i for i, key in enumerate(image)})
        position += len(image)
    return layout


def compare_detection_outputs(
    actual: Sequence[Any], expected: Sequence[Any], layout: Sequence[Mapping[str, int]], *,
    atol: float, rtol: float, names: Sequence[str], truth: Sequence[Any] | None = None,
    settings: MatchSettings | None = None,
) -> list[Comparison]:
    """Matched comparisons of every image's detections, one per flattened output, in the
    flattened order (what `verify` puts in `Verification.outputs` for a detector); `truth`, the
    outputs replayed in float64 and flattened alike, lets torch's own error set a field's atol;
    `settings` (default: the shipped ones, NMS at the fallback threshold) as `MatchSettings.load`
    makes them for the detector."""
    settings = settings or MatchSettings.load()
    by_index: dict[int, Comparison] = {}
    for image in layout:
        fields_a = {key: actual[i] for key, i in image.items()}
        fields_e = {key: expected[i] for key, i in image.items()}
        fields_t = {key: truth[i] for key, i in image.items()} if truth is not None else None
        comparisons, _ = compare_detections(fields_a, fields_e, atol=atol, rtol=rtol, truth=fields_t,
                                            names={key: names[i] for key, i in image.items()}, settings=settings)
        for key, comparison in zip([k for k in image if k in fields_a], comparisons):
            by_index[image[key]] = comparison
    return [by_index[i] for i in sorted(by_index)]


def first_size_divergence(rows: Sequence[Any]) -> Any | None:
    """The first row, in graph order, whose accumulated value has another shape than torch's:
    where the backend's data-dependent sizes (boxes kept, detections) part from torch's. Rows are
    OpRecords (duck-typed here); every later row of another size follows from it."""
    for row in rows:
        accumulated = getattr(row, "accumulated", None)
        if accumulated is not None and not accumulated.shape_match:
            return row
    return None


def mark_matched_rows(rows: Sequence[Any], outputs: Sequence[Comparison]) -> list[str]:
    """Put the matched output comparisons on the per-op rows of the detection outputs (their
    `accumulated`, with `check = "matched"`), and say where data-dependent sizes first diverge.
    `rows` are OpRecords (duck-typed); returns the notes for the verification."""
    by_name = {comparison.name: comparison for comparison in outputs}
    for row in rows:
        comparison = by_name.get(getattr(row, "fx_node", None))
        if comparison is not None:
            row.accumulated = comparison
            row.check = "matched"
    first = first_size_divergence([row for row in rows if getattr(row, "check", "") != "matched"])
    if first is None:
        return []
    later = [row for row in rows if row is not first and row.accumulated is not None
             and not row.accumulated.shape_match and row.check != "matched"]
    return [
        f"data-dependent sizes first diverge at {first.fx_node} ({first.aten}"
        + (f", {first.source}" if getattr(first, "source", "") else "")
        + f"): the backend's {first.accumulated.shape_actual} against torch's {first.accumulated.shape_expected}; "
        f"{len(later)} later op(s) differ in size as a consequence, their accumulated values not comparable"
    ]
