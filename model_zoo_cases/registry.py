"""The case table: every model the harness verifies, and lookup helpers.

Tiers are levels: `smoke` (one cheap case per 2018 family, every CI run) is part of
`full` (the 2018 zoo, nightly), which is part of `extended` (every other torchvision
classifier, segmentation, video and optical-flow model, nightly). `select(tier="extended")`
returns all those cases. The `detection` tier (torchvision's detectors, nightly) is selected
only by its own name, and so is `quantized` (PT2E-quantized modules: model_zoo_cases.quantized).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
from typing import Any, Iterable

from model_zoo_cases import (
    dcgan,
    detection,
    inputs,
    measurements,
    quantized,
    superresolution,
    torchvision_extended,
    torchvision_zoo,
    word_language_model,
)
from model_zoo_cases.case import TIERS, ModelCase

DETECTION_TIER = "detection"
QUANTIZED_TIER = "quantized"
SEPARATE_TIERS = (DETECTION_TIER, QUANTIZED_TIER)  # each selected only by its own name

_IMAGE_CLASSIFIER_IO: dict[str, Any] = {
    "input_names": ("image",),
    "output_names": ("logits",),
}


def _batch_axes(*names: str) -> dict[str, dict[int, str]]:
    return {name: {0: "batch"} for name in names}


# The sizes the cases promise (ModelCase.axis_ranges), which shape sweeps stay inside: batches of 1
# to 8; image sides of 32 to 512 (a program that needs more, e.g. Inception's 75, narrows it and
# the sweep says so); sequences of 1 to 64 tokens; detector images of 96 to 320 px a side.
BATCH_RANGE = (1, 8)
IMAGE_SIDE_RANGE = (32, 512)
SEQUENCE_RANGE = (1, 64)
DETECTOR_SIDE_RANGE = (96, 320)
_IMAGE_SIDES = {"height": IMAGE_SIDE_RANGE, "width": IMAGE_SIDE_RANGE}


def _image_sweep(name: str) -> dict[str, Any]:
    """A case's sweep over its image input's sides (and batch)."""
    return {"sweep_axes": {name: {2: "height", 3: "width"}}, "axis_ranges": {"batch": BATCH_RANGE, **_IMAGE_SIDES}}


def _judgement(name: str) -> dict[str, Any]:
    """atol, rtol and activation bound for `name`, derived from its measurements."""
    measured = measurements.MEASUREMENTS[name]
    return {
        "atol": measurements.atol_for(measured),
        "rtol": measurements.RTOL,
        "activation_bound": measurements.activation_bound_for(measured),
        "measured": measured,
    }


def _torchvision_case(
    name: str,
    family: str,
    tier: str,
    *,
    size: int = 224,
    calibrate: bool = True,
    rescale_weights: bool = False,
    calibration_batch: int = 4,
    **builder_kwargs: Any,
) -> ModelCase:
    builder = torchvision_zoo.build_resnet if family == "resnet" else torchvision_zoo.build_torchvision
    return ModelCase(
        name=name,
        family=family,
        build_fn=functools.partial(builder, name, **builder_kwargs),
        input_fn=functools.partial(inputs.imagenet_images, size=size),
        tier=tier,
        dynamic_axes=_batch_axes("image", "logits"),
        calibrate=calibrate,
        rescale_weights=rescale_weights,
        calibration_batch=calibration_batch,
        **_image_sweep("image"),
        description=(
            f"torchvision.models.{name}(weights=None"
            + "".join(f", {key}={value!r}" for key, value in builder_kwargs.items())
            + f") on {size}x{size} ImageNet-normalised images"
            + (f", residual branch gain {torchvision_zoo.RESIDUAL_BRANCH_GAIN}" if family == "resnet" else "")
        ),
        **_IMAGE_CLASSIFIER_IO,
        **_judgement(name),
    )


LM_NTOKEN = 1000
LM_NHID = 200
LM_NLAYERS = 2
LM_SEQ_LEN = 20

# torch 2.14.1 / onnxscript 0.7.2, as the harness calls it (dynamic_axes -> Dim.DYNAMIC):
# torch.export decomposes aten.rnn_tanh/rnn_relu into a per-step loop that fixes the sequence
# length, and torch.onnx refuses the dynamic 'sequence' axis. nn.LSTM and nn.GRU export with
# a dynamic sequence and verify at another length (checked in tests/test_zoo_roundtrip.py).
_TORCH_ONNX_SEQUENCE_ISSUE = {  # (why, a regex of the failure's message) per recurrent layer
    "LSTM": (None, None),
    "GRU": (None, None),
    "RNN": (
        "dynamic 'sequence' axis refused: torch.export unrolls nn.RNN into a per-step loop and infers a "
        "static length of 20 for tokens.shape[0] (ValueError: conflicts between user-specified ranges "
        "and inferred ranges)",
        r"conflicts between user-specified ranges and inferred ranges(?s:.*)"
        r"inferred a static shape of 20 for dimension inputs\[0\]\.shape\[0\]",
    ),
}


def _word_lm_case(
    rnn_type: str,
    tier: str,
    *,
    tie_weights: bool = False,
) -> ModelCase:
    lstm = rnn_type == "LSTM"
    name = f"word_language_model_{rnn_type.lower()}" + ("_tied" if tie_weights else "")
    input_names = ("tokens", "h0", "c0") if lstm else ("tokens", "h0")
    output_names = ("logits", "hn", "cn") if lstm else ("logits", "hn")
    dynamic_axes: dict[str, dict[int, str]] = {
        "tokens": {0: "sequence", 1: "batch"},
        "logits": {0: "sequence", 1: "batch"},
    }
    for state in input_names[1:] + output_names[1:]:
        dynamic_axes[state] = {1: "batch"}
    return ModelCase(
        name=name,
        family="word_language_model",
        build_fn=functools.partial(
            word_language_model.RNNModel,
            rnn_type,
            ntoken=LM_NTOKEN,
            ninp=LM_NHID,
            nhid=LM_NHID,
            nlayers=LM_NLAYERS,
            dropout=0.2,
            tie_weights=tie_weights,
        ),
        input_fn=functools.partial(
            inputs.token_batch,
            ntoken=LM_NTOKEN,
            nlayers=LM_NLAYERS,
            nhid=LM_NHID,
            seq_len=LM_SEQ_LEN,
            lstm=lstm,
            nonnegative_hidden=rnn_type == "RNN_RELU",
        ),
        tier=tier,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
        axis_ranges={"batch": BATCH_RANGE, "sequence": SEQUENCE_RANGE},
        calibrate=False,
        # Untied: scale the decoder so logits have unit std. Tied: the decoder
        # is the N(0, 1) embedding, which already gives logits of a few units.
        rescale_weights=not tie_weights,
        torch_onnx_issue=_TORCH_ONNX_SEQUENCE_ISSUE[rnn_type.split("_")[0]][0],
        torch_onnx_fails_with=_TORCH_ONNX_SEQUENCE_ISSUE[rnn_type.split("_")[0]][1],
        description=(
            f"{rnn_type} language model, ntoken={LM_NTOKEN}, nhid={LM_NHID}, nlayers={LM_NLAYERS}, "
            f"seq_len={LM_SEQ_LEN}" + (", tied weights" if tie_weights else "")
        ),
        **_judgement(name),
    )


def _extended_judgement(name: str) -> dict[str, Any]:
    """The measured judgement of an extended case, or the provisional one (see measurements)."""
    measured = measurements.EXTENDED_MEASUREMENTS.get(name)
    if measured is None:
        return {"atol": measurements.UNMEASURED_ATOL, "rtol": measurements.RTOL,
                "activation_bound": measurements.UNMEASURED_ACTIVATION_BOUND, "measured": None}
    return {
        "atol": measurements.atol_for(measured),
        "rtol": measurements.RTOL,
        "activation_bound": measurements.activation_bound_for(measured),
        "measured": measured,
    }


def _extended_case(name: str) -> ModelCase:
    """A torchvision model of the extended tier at its small input size."""
    family = torchvision_extended.family_of(name)
    size = torchvision_extended.input_size(name)
    if family == "video":
        input_fn = functools.partial(inputs.video_clips, frames=size.frames, size=size.size)
        io: dict[str, Any] = {"input_names": ("clip",), "output_names": ("logits",)}
        shape = f"{size.frames}-frame {size.size}x{size.size} Kinetics-normalised clips"
    elif family == "optical_flow":
        input_fn = functools.partial(inputs.frame_pairs, size=size.size)
        io = {"input_names": ("image1", "image2"), "output_names": ("flow",)}
        shape = (f"{size.size}x{size.size} frame pairs in [-1, 1], "
                 f"{torchvision_extended.RAFT_FLOW_UPDATES} flow updates")
    else:
        input_fn = functools.partial(inputs.imagenet_images, size=size.size)
        io = {"input_names": ("image",), "output_names": ("masks" if family == "segmentation" else "logits",)}
        shape = f"{size.size}x{size.size} ImageNet-normalised images"
    return ModelCase(
        name=name,
        family=family,
        build_fn=functools.partial(torchvision_extended.build, name),
        input_fn=input_fn,
        tier="extended",
        dynamic_axes=_batch_axes(*io["input_names"], *io["output_names"]),
        calibrate=True,
        calibration_batch=size.calibration_batch,
        description=f"torchvision.models.get_model({name!r}, weights=None) on {shape}"
        + (f" ({size.reason})" if size.reason else ""),
        **io,
        **_extended_judgement(name),
    )


def _extended_cases(registered: Iterable[str]) -> list[ModelCase]:
    """Every torchvision classifier, segmentation, video and optical-flow model not registered."""
    names = torchvision_extended.classification_names() + [
        name for task in ("segmentation", "video", "optical_flow") for name in torchvision_extended.task_names(task)
    ]
    taken = set(registered)
    return [_extended_case(name) for name in names if name not in taken]


# Detections are compared matched (harness.metrics.detections), each field at these tolerances:
# box corners are pixels (up to the image size), scores and mask probabilities lie in [0, 1].
# Measured at seed 0 on the CPU (docs/coverage.json): a box corner of fasterrcnn_resnet50_fpn
# differs from torch by 1.4e-3 relative (0.0175 px at 191 px) for roundtrip AND the TorchScript
# exporter alike: untrained ResNet-50 features through the exp() of the box decoding. rtol
# 5e-3 keeps every corner within a pixel; scores differ by ~2e-5, far inside atol.
DETECTION_ATOL = 1e-3
DETECTION_RTOL = 5e-3
DETECTION_ACTIVATION_BOUND = 1e5  # box regression is in pixels: activations reach the image size


def _detection_case(detector: detection.Detector) -> ModelCase:
    """A detector of the `detection` tier: one image, height and width dynamic."""
    return ModelCase(
        name=detector.name, family="detection", build_fn=detector.build, input_fn=detector.images,
        tier="detection", input_names=("images",), output_names=(),
        dynamic_axes={"images": {2: "height", 3: "width"}}, calibrate=True, fixed_batch=True,
        axis_ranges={"height": DETECTOR_SIDE_RANGE, "width": DETECTOR_SIDE_RANGE},
        traced_batch=1, other_batch=1, calibration_batch=2, calibration_steps=2,
        atol=DETECTION_ATOL, rtol=DETECTION_RTOL, activation_bound=DETECTION_ACTIVATION_BOUND,
        other_sizes=tuple({"height": height, "width": width} for height, width in detection.OTHER_SIZES),
        sized_input_fn=lambda generator, sizes: detector.images_at(generator, sizes["height"], sizes["width"]),
        description=(f"{detector.name}: one {detector.image_size}x{detector.image_size} image in [0, 1] -> "
                     f"{', '.join(detector.outputs)} (at most {detection.DETECTIONS_PER_IMAGE}); the same ONNX "
                     f"model verified again at " + " and ".join(f"{h}x{w}" for h, w in detection.OTHER_SIZES)
                     + ("" if detector.transform_sizes is None else
                        f" (transform min_size {detector.transform_sizes[0]}, max_size {detector.transform_sizes[1]})")),
    )


def _build_cases() -> list[ModelCase]:
    cases = [
        _torchvision_case("alexnet", "alexnet", "smoke", calibrate=False, rescale_weights=True),
        _torchvision_case("resnet18", "resnet", "smoke"),
        _torchvision_case("resnet34", "resnet", "full"),
        _torchvision_case("resnet50", "resnet", "full"),
        _torchvision_case("resnet101", "resnet", "full"),
        _torchvision_case("resnet152", "resnet", "full"),
        _torchvision_case("resnext50_32x4d", "resnet", "full"),
        _torchvision_case("resnext101_32x8d", "resnet", "full"),
        _torchvision_case("wide_resnet50_2", "resnet", "full"),
        _torchvision_case("wide_resnet101_2", "resnet", "full"),
        _torchvision_case("vgg11", "vgg", "smoke", calibrate=False, rescale_weights=True),
        _torchvision_case("vgg13", "vgg", "full", calibrate=False, rescale_weights=True),
        _torchvision_case("vgg16", "vgg", "full", calibrate=False, rescale_weights=True),
        _torchvision_case("vgg19", "vgg", "full", calibrate=False, rescale_weights=True),
        _torchvision_case("vgg11_bn", "vgg", "full"),
        _torchvision_case("vgg13_bn", "vgg", "full"),
        _torchvision_case("vgg16_bn", "vgg", "full"),
        _torchvision_case("vgg19_bn", "vgg", "full"),
        _torchvision_case("densenet121", "densenet", "smoke"),
        _torchvision_case("densenet161", "densenet", "full"),
        _torchvision_case("densenet169", "densenet", "full"),
        _torchvision_case("densenet201", "densenet", "full"),
        # transform_input stays False (torchvision's default when weights=None):
        # inputs are already ImageNet-normalised.
        _torchvision_case("inception_v3", "inception", "smoke", size=299, aux_logits=False, init_weights=True),
        ModelCase(
            name="dcgan_generator",
            family="dcgan",
            build_fn=dcgan.Generator,
            input_fn=inputs.latents,
            tier="smoke",
            input_names=("latent",),
            output_names=("image",),
            dynamic_axes=_batch_axes("latent", "image"),
            axis_ranges={"batch": BATCH_RANGE},
            calibrate=True,
            description="DCGAN generator: N(0,1) latent (N,100,1,1) -> (N,3,64,64) image",
            **_judgement("dcgan_generator"),
        ),
        ModelCase(
            name="dcgan_discriminator",
            family="dcgan",
            build_fn=dcgan.Discriminator,
            input_fn=inputs.tanh_range_images,
            tier="smoke",
            input_names=("image",),
            output_names=("probability",),
            dynamic_axes=_batch_axes("image", "probability"),
            axis_ranges={"batch": BATCH_RANGE},
            calibrate=True,
            description="DCGAN discriminator: (N,3,64,64) image in [-1,1] -> (N,) probability",
            **_judgement("dcgan_discriminator"),
        ),
        ModelCase(
            name="superresolution",
            family="superresolution",
            build_fn=superresolution.SuperResolutionNet,
            input_fn=inputs.luminance_images,
            tier="smoke",
            input_names=("luminance",),
            output_names=("upscaled",),
            dynamic_axes=_batch_axes("luminance", "upscaled"),
            **_image_sweep("luminance"),
            calibrate=False,
            description="ESPCN x3 super-resolution on (N,1,224,224) luminance in [0,1]",
            **_judgement("superresolution"),
        ),
        _word_lm_case("LSTM", "smoke"),
        _word_lm_case("GRU", "full"),
        _word_lm_case("RNN_TANH", "full"),
        _word_lm_case("RNN_RELU", "full"),
        _word_lm_case("LSTM", "full", tie_weights=True),
    ]
    detectors = [_detection_case(detector) for detector in detection.DETECTORS.values()]
    return cases + _extended_cases(case.name for case in cases) + detectors + _quantized_cases()


# The quantized tier: the size the issue measured (1x3x64x64 images); a quantized module is
# captured at one size, so its batch is fixed.
QUANTIZED_IMAGE_SIZE = 64


def _quantized_case(name: str, family: str, build_fn: Any, input_fn: Any, scheme: str, what: str,
                    **io: Any) -> ModelCase:
    """A PT2E-quantized case: `build_fn`'s seeded, calibrated module quantized with `scheme`."""
    io = io or _IMAGE_CLASSIFIER_IO
    return ModelCase(
        name=f"quantized_{name}", family=family, build_fn=build_fn, input_fn=input_fn, tier=QUANTIZED_TIER,
        dynamic_axes={}, calibrate=True, fixed_batch=True, traced_batch=1, other_batch=1, calibration_batch=2,
        calibration_steps=4, quantization=scheme, atol=measurements.UNMEASURED_ATOL, rtol=measurements.RTOL,
        activation_bound=measurements.UNMEASURED_ACTIVATION_BOUND,
        description=f"{what}, PT2E-quantized ({quantized.SCHEMES[scheme].describe()}), calibrated on 4 seeded batches",
        **io,
    )


def _quantized_cases() -> list[ModelCase]:
    images = functools.partial(inputs.imagenet_images, size=QUANTIZED_IMAGE_SIZE)
    on = f"on {QUANTIZED_IMAGE_SIZE}x{QUANTIZED_IMAGE_SIZE} ImageNet-normalised images"
    return [
        _quantized_case("resnet18", "resnet", functools.partial(torchvision_zoo.build_resnet, "resnet18"), images,
                        "xnnpack", f"torchvision.models.resnet18(weights=None) {on}"),
        _quantized_case("resnet50", "resnet", functools.partial(torchvision_zoo.build_resnet, "resnet50"), images,
                        "xnnpack_per_channel", f"torchvision.models.resnet50(weights=None) {on}"),
        _quantized_case("mobilenet_v2", "mobilenetv2",
                        functools.partial(torchvision_zoo.build_torchvision, "mobilenet_v2"), images,
                        "xnnpack_per_channel", f"torchvision.models.mobilenet_v2(weights=None) {on}"),
        _quantized_case("mobilenet_v3_large", "mobilenetv3",
                        functools.partial(torchvision_zoo.build_torchvision, "mobilenet_v3_large"), images,
                        "xnnpack", f"torchvision.models.mobilenet_v3_large(weights=None) {on}"),
        _quantized_case("vit_small", "vision_transformer", quantized.small_vit,
                        functools.partial(inputs.imagenet_images, size=quantized.VIT_IMAGE_SIZE), "xnnpack_per_channel",
                        f"a two-layer ViT (patch 8, width 64) on {quantized.VIT_IMAGE_SIZE}x{quantized.VIT_IMAGE_SIZE} images"),
        _quantized_case("transformer_encoder", "transformer", quantized.transformer_encoder,
                        quantized.sequence_features, "xnnpack_dynamic",
                        "nn.TransformerEncoder (2 layers, width 64, 4 heads) on (1, 16, 64) features",
                        input_names=("features",), output_names=("encoded",)),
    ]


def _index(cases: Iterable[ModelCase]) -> dict[str, ModelCase]:
    table: dict[str, ModelCase] = {}
    for case in cases:
        if case.name in table:
            raise ValueError(f"duplicate model case name {case.name!r}")
        table[case.name] = case
    return table


CASES: dict[str, ModelCase] = _index(_build_cases())


def get(name: str) -> ModelCase:
    """The case called `name`; a KeyError names the closest matches."""
    try:
        return CASES[name]
    except KeyError:
        close = difflib.get_close_matches(name, CASES, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known cases: {', '.join(CASES)}"
        raise KeyError(f"no model case {name!r}; {hint}") from None


def _in_tier(case: ModelCase, tier: str) -> bool:
    if case.tier in SEPARATE_TIERS or tier in SEPARATE_TIERS:  # a tier of its own, not a level
        return case.tier == tier
    return TIERS.index(case.tier) <= TIERS.index(tier)


def select(tier: str | None = None, pattern: str | None = None) -> list[ModelCase]:
    """Cases in table order, filtered by tier level and name pattern.

    `tier="smoke"` gives the smoke cases, `tier="full"` every case, None no
    filter. `pattern` is an fnmatch pattern or a comma-separated list of them
    ("resnet*,vgg11"); a list item without wildcards must name a case.
    """
    if tier is not None and tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; expected one of {TIERS}")
    chosen = [case for case in CASES.values() if tier is None or _in_tier(case, tier)]
    if pattern is None:
        return chosen
    items = [item.strip() for item in pattern.split(",") if item.strip()]
    for item in items:
        if not any(ch in item for ch in "*?["):
            get(item)  # raises a KeyError with suggestions for a typo
    return [case for case in chosen if any(fnmatch.fnmatchcase(case.name, item) for item in items)]


def families_in(cases: Iterable[ModelCase]) -> set[str]:
    """The families a set of cases covers."""
    return {case.family for case in cases}

