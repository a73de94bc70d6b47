"""Capture rules (exporter/capturing/rules): each is documented, installed only around a capture
and only for the capturing thread, settles the guard it names, and computes what torchvision's
own function computes."""

from __future__ import annotations

import sys
import threading
import types

import pytest
import torch
import torchvision
from torchvision.models.detection import roi_heads

import exporter
from exporter.capturing import rules as capture_rules
from exporter.capturing.rules import torchvision_detection as rules
from exporter.capturing.rules.patching import CaptureRule, capturing, is_capturing


def _boxes(gen: torch.Generator, count: int, side: float = 64.0) -> torch.Tensor:
    corner = torch.rand(count, 2, generator=gen) * side * 0.6
    return torch.cat([corner, corner + torch.rand(count, 2, generator=gen) * side * 0.4 + 1], 1)


@pytest.mark.parametrize("described", capture_rules.describe(), ids=lambda d: d["target"])
def test_every_rule_says_what_it_settles_and_why_it_is_sound(described: dict[str, str]) -> None:
    assert len(described["settles"]) > 30 and len(described["soundness"]) > 60
    module_name, attribute = described["target"].split(":")
    owner = sys.modules.get(module_name) or __import__(module_name, fromlist=["_"])
    for part in attribute.split("."):
        owner = getattr(owner, part)  # the target exists in the installed torchvision


@pytest.fixture
def fake_module():
    module = types.ModuleType("roundtrip_fake_library")
    module.answer = lambda: "original"
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_a_rule_applies_only_inside_a_capture_and_only_on_its_thread(fake_module) -> None:
    rule = CaptureRule("roundtrip_fake_library:answer", lambda: "replacement", settles="s", soundness="s")
    original = fake_module.answer
    seen_elsewhere: list[str] = []
    with rule.installed() as installed:
        assert installed and fake_module.answer is not original
        assert fake_module.answer() == "original"  # installed, but this thread is not capturing
        with capturing():
            assert is_capturing() and fake_module.answer() == "replacement"
            other = threading.Thread(target=lambda: seen_elsewhere.append(fake_module.answer()))
            other.start()
            other.join()
        assert not is_capturing()
        with rule.installed():  # nested: installed once, removed by the outermost
            pass
        assert fake_module.answer is not original
    assert seen_elsewhere == ["original"]
    assert fake_module.answer is original and rule.original() is original


def test_a_rule_for_a_missing_library_installs_nothing() -> None:
    rule = CaptureRule("roundtrip_no_such_library:f", lambda: None, settles="s", soundness="s")
    with rule.installed() as installed:
        assert installed is False


def test_applied_restores_torchvision() -> None:
    before = torchvision.ops.boxes.batched_nms, torchvision.ops.poolers._multiscale_roi_align
    with capture_rules.applied() as installed:
        assert {r.target for r in installed} == {d["target"] for d in capture_rules.describe()}
        assert torchvision.ops.boxes.batched_nms is not before[0]
    assert (torchvision.ops.boxes.batched_nms, torchvision.ops.poolers._multiscale_roi_align) == before


class FilteredNms(torch.nn.Module):
    """batched_nms of the boxes above a score: torchvision's post-processing in small."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        kept = torch.where(scores > 0.3)[0]
        return torchvision.ops.boxes.batched_nms(boxes[kept], scores[kept], classes[kept], 0.5)


def _nms_inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    return _boxes(gen, 20), torch.rand(20, generator=gen), torch.randint(0, 3, (20,), generator=gen)


def test_batched_nms_rule_settles_the_guard_torch_export_stops_at() -> None:
    with pytest.raises(Exception, match=r"Eq\(4\*u0, 0\)"):  # without the rule: torch.export alone
        torch.export.export(FilteredNms(), _nms_inputs(), strict=False)
    program = exporter.capture(FilteredNms(), _nms_inputs())
    targets = {str(n.target) for n in program.graph.nodes}
    assert "torchvision.nms.default" in targets


def test_batched_nms_rule_keeps_what_torchvision_keeps() -> None:
    boxes, scores, classes = _nms_inputs()
    expected = torchvision.ops.boxes._batched_nms_vanilla(boxes, scores, classes, 0.5)
    assert torch.equal(rules.batched_nms(boxes, scores, classes, 0.5), expected)
    assert rules.batched_nms(boxes[:0], scores[:0], classes[:0], 0.5).shape == (0,)


def test_multiscale_roi_align_rule_equals_torchvision() -> None:
    gen = torch.Generator().manual_seed(1)
    pool = torchvision.ops.MultiScaleRoIAlign(["p2", "p3", "p4"], output_size=4, sampling_ratio=2)
    features = {"p2": torch.randn(1, 2, 128, 128, generator=gen), "p3": torch.randn(1, 2, 64, 64, generator=gen),
                "p4": torch.randn(1, 2, 32, 32, generator=gen)}
    boxes = [_boxes(gen, 15, side=512.0)]  # 1 to 200 pixels: the LevelMapper spreads them over p2..p4
    expected = pool(features, boxes, [(512, 512)])
    with capture_rules.applied():
        got = pool(features, boxes, [(512, 512)])
    levels = pool.map_levels(boxes)
    assert len(set(levels.tolist())) > 1  # the boxes reach several levels
    assert torch.equal(got, expected)


def test_paste_masks_rule_equals_torchvision() -> None:
    gen = torch.Generator().manual_seed(2)
    masks = torch.rand(6, 1, 14, 14, generator=gen)
    boxes = torch.tensor([[3.2, 5.1, 60.7, 40.2], [-5.0, -3.0, 20.0, 10.0], [100.0, 90.0, 130.0, 128.0],
                          [10.0, 10.0, 10.4, 11.0], [0.0, 0.0, 95.9, 127.9], [50.0, 60.0, 52.0, 61.0]])
    expected = roi_heads.paste_masks_in_image(masks, boxes, (128, 140))
    torch.testing.assert_close(rules.paste_masks_in_image(masks, boxes, (128, 140)), expected, atol=2e-6, rtol=0)


def test_resize_keypoints_rule_equals_torchvision() -> None:
    from torchvision.models.detection import transform

    keypoints = torch.rand(5, 17, 3, generator=torch.Generator().manual_seed(4)) * 200
    expected = transform.resize_keypoints(keypoints, [160, 224], [192, 269])
    assert torch.equal(rules.resize_keypoints(keypoints, [160, 224], [192, 269]), expected)


def test_anchor_generator_rule_equals_torchvision() -> None:
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.image_list import ImageList

    generator = AnchorGenerator(((16,), (32,)), ((0.5, 1.0, 2.0),) * 2)
    images = ImageList(torch.zeros(2, 3, 64, 48), [(64, 48), (60, 40)])
    features = [torch.zeros(2, 4, 16, 12), torch.zeros(2, 4, 8, 6)]
    expected = generator(images, features)
    got = rules.anchor_generator_forward(generator, images, features)
    assert len(got) == len(expected) and all(torch.equal(a, b) for a, b in zip(got, expected))


# (height, width): square, min_size binding, max_size binding, a size the scale rounds down, tiny
TRANSFORM_SIZES = [(192, 192), (160, 224), (288, 128), (97, 333), (31, 17)]


@pytest.mark.parametrize("height, width", TRANSFORM_SIZES)
def test_resize_rule_equals_torchvision(height: int, width: int) -> None:
    from torchvision.models.detection import transform

    image = torch.rand(3, height, width, generator=torch.Generator().manual_seed(height * width))
    expected, _ = transform._resize_image_and_masks(image, 160, 256)
    got, target = rules.resize_image_and_masks(image, 160, 256)
    assert target is None and got.shape == expected.shape and torch.equal(got, expected)


@pytest.mark.parametrize("height, width", TRANSFORM_SIZES)
def test_batch_images_rule_equals_torchvision(height: int, width: int) -> None:
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    transform = GeneralizedRCNNTransform(160, 256, [0.0] * 3, [1.0] * 3)
    images = [torch.rand(3, height, width), torch.rand(3, width, height + 5)]
    for batch in (images[:1], images):
        expected = transform.batch_images(batch, size_divisible=32)
        got = rules.batch_images(transform, batch, size_divisible=32)
        assert got.shape == expected.shape and torch.equal(got, expected)


def test_the_transform_rules_keep_a_non_square_image_symbolic_in_the_capture() -> None:
    """Captured on a square image, the resize and the padding follow the image's own sizes: the
    exported transform matches torchvision's at non-square sizes with one ONNX model."""
    import onnxruntime
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    class Transform(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transform = GeneralizedRCNNTransform(160, 256, [0.5] * 3, [0.25] * 3)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.transform(list(images))[0].tensors

    module = Transform().eval()
    model = exporter.export(module, (torch.rand(1, 3, 192, 192),), input_names=["images"],
                            dynamic_axes={"images": {2: "height", 3: "width"}}, strict_dynamic=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for height, width in TRANSFORM_SIZES[:3]:
        images = torch.rand(1, 3, height, width)
        (got,) = session.run(None, {"images": images.numpy()})
        expected = module(images)
        assert got.shape == tuple(expected.shape)
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-4, rtol=0)


def test_keypoint_rule_equals_torchvision_inside_roi_heads() -> None:
    gen = torch.Generator().manual_seed(3)
    maps = torch.randn(5, 17, 56, 56, generator=gen)
    rois = torch.tensor([[3.2, 5.1, 60.7, 40.2], [0.0, 0.0, 20.0, 10.0], [100.0, 90.0, 130.0, 128.0],
                         [10.0, 10.0, 10.4, 11.0], [0.0, 0.0, 127.9, 127.9]])
    expected_xy, expected_scores = roi_heads.heatmaps_to_keypoints(maps, rois)
    token = rules._IMAGE_BOUND.set((128, 140))  # what the RoIHeads.forward rule sets: the image bound
    try:
        xy, scores = rules.heatmaps_to_keypoints(maps, rois)
    finally:
        rules._IMAGE_BOUND.reset(token)
    assert torch.equal(xy, expected_xy)
    torch.testing.assert_close(scores, expected_scores, atol=1e-5, rtol=1e-5)


def test_keypoint_rule_outside_roi_heads_is_torchvision_itself() -> None:
    maps, rois = torch.randn(2, 3, 56, 56), torch.tensor([[0.0, 0.0, 9.0, 9.0], [2.0, 3.0, 30.0, 20.0]])
    got, expected = rules.heatmaps_to_keypoints(maps, rois), roi_heads.heatmaps_to_keypoints(maps, rois)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
