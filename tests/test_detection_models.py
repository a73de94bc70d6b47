"""torchvision's detectors exported by roundtrip (capture rules + detection symbolics) and
verified with matched outputs: traced on a square image, then the same ONNX model at two
non-square sizes whose internal sizes (the transform keeps the aspect ratio, min_size !=
max_size) differ from the traced one, so the padded batch, the feature maps and the anchors
must all follow the image's size.

One small detector runs in every CI run (small images and few proposals); the whole
`detection` tier runs nightly (`-m nightly`). The export is most of a case's cost, so each is
exported once: the other sizes verify the same ONNX model against the module run eagerly.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import model_zoo_cases
from exporter.contract.keys import BAKED_SIZES_KEY
from exporter.errors import ExportWarning
from harness.exporters import ExportedForVerification, export_for_verification
from harness.verification import verify_exported
from model_zoo_cases import detection

# The CI detector: the smallest of the tier at a smaller image (its FPN still has two levels).
CI_DETECTOR = detection.Detector("fasterrcnn_mobilenet_v3_large_320_fpn", image_size=128, transform_sizes=(128, 192),
                                 kind="rcnn")
# Traced at 128x128 (128x128 inside). 112x128: min_size binds (128 / 112 < 192 / 128), 128x146
# inside, padded to 128x160; 176x80: max_size binds (192 / 176 < 128 / 80), 192x87 padded to 192x96.
CI_SIZES = ((112, 128), (176, 80))
AXES = {"images": {2: "height", 3: "width"}}


@functools.lru_cache(maxsize=1)
def _ci_model() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = CI_DETECTOR.build().eval()
    generator = torch.Generator().manual_seed(1)
    model_zoo_cases.calibrate_batchnorm(module, lambda step: CI_DETECTOR.images(generator, 1), 2)
    return module


def _verify_sizes(module: torch.nn.Module, images: torch.Tensor, others: list[torch.Tensor], *, atol: float,
                  rtol: float, per_op: bool = True):
    """Export once at `images`, verify there (per op, against the captured program's values) and
    at each of `others` (outputs only, the same ONNX model against the module run eagerly). A
    size-dependent initializer (exporter.optimize.baked_sizes) fails the export."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "initializer.* hold values that depend on a dynamic axis", ExportWarning)
        exported = export_for_verification("roundtrip", module, (images,), dynamic_axes=AXES, input_names=["images"])
    common = dict(module=module, output_atol=atol, output_rtol=rtol, strict=True)
    traced = verify_exported(exported, (images,), per_op=per_op, **common)
    same_model = ExportedForVerification(exported.model, None, "roundtrip", weights=exported.weights)
    return traced, [verify_exported(same_model, (other,), per_op=False, **common) for other in others]


def _failures(verification) -> list:
    return [c.to_dict() for c in verification.outputs if not c.passed] + verification.notes


def test_small_detector_verifies_at_two_non_square_sizes_with_one_model() -> None:
    generator = torch.Generator().manual_seed(0)
    images = CI_DETECTOR.images(generator, 1)[0]
    others = [CI_DETECTOR.images_at(generator, height, width)[0] for height, width in CI_SIZES]
    traced, resized = _verify_sizes(_ci_model(), images, others, atol=1e-3, rtol=1e-3)
    assert traced.passed and all(r.passed for r in resized), _failures(traced) + sum(map(_failures, resized), [])
    assert BAKED_SIZES_KEY not in {p.key for p in traced.onnx_model.metadata_props}
    ops = {node.op_type for node in traced.onnx_model.graph.node}
    assert {"NonMaxSuppression", "RoiAlign", "TopK", "Resize"} <= ops
    assert [c.shape_expected for c in traced.outputs] == [[10, 4], [10], [10]]  # detections were returned
    resized_outputs = [c for r in resized for c in r.outputs]
    assert all(c.note.startswith("matched: 10 of torch's 10") for c in traced.outputs + resized_outputs)
    matched_rows = [row for row in traced.ops if row.check == "matched"]
    assert sorted(row.fx_node for row in matched_rows) == sorted(c.name for c in traced.outputs)
    # torch's own float32 error was measured (the module run in float64), on a copy of the module:
    # its anchors stay float32, so a later export captures the same graph
    assert "output_truth_s" in traced.timings and all("output_truth_s" in r.timings for r in resized)
    assert not [note for note in traced.notes + sum((r.notes for r in resized), []) if "fp64 truth" in note]
    assert {anchors.dtype for anchors in _ci_model().rpn.anchor_generator.cell_anchors} == {torch.float32}


# Detectors whose verification depends on rounding, with why (docs/EXCEPTIONS.md), and the one
# failure that explains: which of two near-equal maxima wins changes with onnxruntime's thread
# count, so such a case may pass; when it fails, every failure must be that one, else it is a
# regression like any other.
ROUNDING_DEPENDENT = {
    "keypointrcnn_resnet50_fpn": "untrained heatmaps hold near-equal maxima 2-7 px apart (gaps from 1e-3, below "
    "their float32 error of ~3e-3): a keypoint may land on the other one; the failing comparison names it",
}


def _only_moved_keypoints(verification) -> bool:
    """Whether the verification fails only because keypoints moved to another near-equal maximum:
    its one failing output is `keypoints`, whose note names the moves (harness.metrics.detections),
    and the keypoints' scores agree (a moved score would be a differing heatmap, not a tie)."""
    failing = [c for c in verification.outputs if not c.passed]
    return (verification.checker.passed and len(failing) == 1 and failing[0].name == "keypoints"
            and "keypoint(s) moved" in (failing[0].note or "")
            and not any(op.passed is False and op.check != "matched" for op in verification.ops))


@pytest.mark.nightly
@pytest.mark.parametrize("case", model_zoo_cases.select(tier="detection"), ids=lambda case: case.name)
def test_detection_tier(case) -> None:
    module = case.module(0)
    others = [case.inputs_at(sizes, 1)[0] for sizes in case.other_sizes]
    traced, resized = _verify_sizes(module, case.inputs(0)[0], others, atol=case.atol, rtol=case.rtol)
    model_zoo_cases.clear_module_cache()
    failed = [v for v in (traced, *resized) if not v.passed]
    if failed and case.name in ROUNDING_DEPENDENT and all(_only_moved_keypoints(v) for v in failed):
        pytest.xfail(f"{ROUNDING_DEPENDENT[case.name]}: " + "; ".join(
            next(c.note for c in v.outputs if not c.passed) for v in failed)[:500])
    assert not failed, _failures(traced) + sum(map(_failures, resized), [])


def _verification(*outputs, op_failures=(), checker=True):
    """A stand-in record: outputs as (name, passed, note), failing rows as (check,)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        checker=SimpleNamespace(passed=checker),
        outputs=[SimpleNamespace(name=name, passed=passed, note=note) for name, passed, note in outputs],
        ops=[SimpleNamespace(passed=False, check=check) for check in op_failures])


@pytest.mark.parametrize(("verification", "expected"), [
    (_verification(("boxes", True, ""), ("keypoints", False, "1 keypoint(s) moved: torch's #3 keypoint 7 moved "
                                                               "4.19 px (score 4.427 against torch's 4.426)"),
                   ("keypoints_scores", True, ""), op_failures=("matched",)), True),
    (_verification(("keypoints", False, "max_abs 3.1")), False),  # keypoints wrong, none named as moved
    (_verification(("keypoints", False, "1 keypoint(s) moved: ..."), ("keypoints_scores", False, "")), False),
    (_verification(("keypoints", False, "1 keypoint(s) moved: ..."), op_failures=("value",)), False),
    (_verification(("keypoints", False, "1 keypoint(s) moved: ..."), checker=False), False),
])
def test_the_keypoint_xfail_takes_only_moved_keypoints(verification, expected) -> None:
    """The nightly tier's Keypoint R-CNN expectation covers its cause alone, not any failure."""
    assert _only_moved_keypoints(verification) is expected
