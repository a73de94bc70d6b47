"""Table-driven tests for `model_zoo_cases`.

The cases come from the harness plugin's --zoo-tier/--zoo-cases when it is
loaded, else from ROUNDTRIP_TIER ("smoke" by default, "full" for nightly).
Every case in the tier is checked for realistic inputs and bounded activations;
the round trips of both exporters are verified in tests/test_zoo_roundtrip.py.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest
import torch
from torch import nn

import model_zoo_cases
from model_zoo_cases import FAMILIES, ModelCase, calibration, select
from model_zoo_cases import torchvision_extended
from model_zoo_cases.inputs import IMAGENET_MEAN, IMAGENET_STD, KINETICS_MEAN, KINETICS_STD
from model_zoo_cases.word_language_model import RNNModel
from op_table.table import flat_tensors

# Cheap enough to build three times: covers every hand-written model and a
# torchvision net with BatchNorm calibration.
DETERMINISM_CASES = (
    "resnet18", "dcgan_generator", "dcgan_discriminator", "superresolution", "word_language_model_lstm"
)


def _selected_cases(config: pytest.Config) -> list[ModelCase]:
    """The tier/pattern of the harness plugin's --zoo-tier/--zoo-cases, else ROUNDTRIP_TIER."""
    tier = config.getoption("roundtrip_tier", default=None) or os.environ.get("ROUNDTRIP_TIER", "smoke")
    pattern = config.getoption("roundtrip_cases", default=None)
    return select(tier=None if pattern else tier, pattern=pattern)


def _case_param(case: ModelCase) -> object:
    marks = [pytest.mark.full] if case.tier == "full" else []
    return pytest.param(case, marks=marks, id=case.name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cases = _selected_cases(metafunc.config)
    if "case" in metafunc.fixturenames:
        # Same case order for every test, module scope: pytest groups each
        # case's tests together, so the module cache builds it once.
        params = [_case_param(case) for case in cases]
        metafunc.parametrize("case", params, indirect=True, scope="module")
    if "determinism_case" in metafunc.fixturenames:
        chosen = [case for case in cases if case.name in DETERMINISM_CASES]
        metafunc.parametrize("determinism_case", chosen, ids=[case.name for case in chosen])


@pytest.fixture(scope="module")
def case(request: pytest.FixtureRequest) -> Iterator[ModelCase]:
    yield request.param
    model_zoo_cases.clear_module_cache()




def _as_tuple(outputs: object) -> tuple[torch.Tensor, ...]:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)  # type: ignore[arg-type]


def _state_dicts_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --- the table itself ---------------------------------------------------------


def test_names_unique_and_match_keys() -> None:
    names = [case.name for case in model_zoo_cases.CASES.values()]
    assert len(names) == len(set(names))
    assert all(key == case.name for key, case in model_zoo_cases.CASES.items())


def test_smoke_tier_covers_every_family() -> None:
    full_families = {case.family for case in select(tier="full")}
    assert {case.family for case in select(tier="smoke")} == full_families
    quantized_only = {"transformer"}  # a family only the quantized tier has (nn.TransformerEncoder)
    assert {case.family for case in select(tier="extended")} == set(FAMILIES) - {"detection"} - quantized_only
    assert {case.family for case in select(tier="detection")} == {"detection"}  # a tier of its own
    assert len(select(tier="detection")) == 12
    assert quantized_only <= {case.family for case in select(tier="quantized")}


def test_quantized_tier_stands_apart() -> None:
    quantized = select(tier="quantized")
    assert [case.name for case in quantized] == [
        "quantized_resnet18", "quantized_resnet50", "quantized_mobilenet_v2", "quantized_mobilenet_v3_large",
        "quantized_vit_small", "quantized_transformer_encoder"]
    assert all(case.quantization and case.fixed_batch and case.output_tolerance() == (None, None) for case in quantized)
    assert not {case.name for case in quantized} & {case.name for case in select(tier="extended")}


def test_tiers_are_nested() -> None:
    smoke = {case.name for case in select(tier="smoke")}
    full = {case.name for case in select(tier="full")}
    extended = {case.name for case in select(tier="extended")}
    detection = {case.name for case in select(tier="detection")}
    quantized = {case.name for case in select(tier="quantized")}
    assert smoke < full < extended
    assert extended | detection | quantized == set(model_zoo_cases.CASES)
    assert not extended & detection and not extended & quantized and not detection & quantized


def test_select_by_pattern() -> None:
    assert [c.name for c in select(pattern="vgg1?_bn")] == ["vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn"]
    assert [c.name for c in select(pattern="resnet18, alexnet")] == ["alexnet", "resnet18"]
    assert [c.name for c in select(tier="smoke", pattern="resnet*")] == ["resnet18"]
    with pytest.raises(KeyError, match="resnet18"):
        select(pattern="resnet1B")
    with pytest.raises(ValueError, match="tier"):
        select(tier="nightly")


def test_get_unknown_name_suggests_close_names() -> None:
    assert model_zoo_cases.get("resnet50").name == "resnet50"
    with pytest.raises(KeyError, match="densenet121"):
        model_zoo_cases.get("densenet12")


@pytest.mark.parametrize("any_case", model_zoo_cases.CASES.values(), ids=lambda c: c.name)
def test_case_metadata_is_consistent(any_case: ModelCase) -> None:
    case = any_case
    if case.quantization is not None:  # a converted module was captured at one size: nothing is dynamic
        assert case.dynamic_axes == {} and case.fixed_batch
    else:
        assert set(case.dynamic_axes) == set(case.input_names) | set(case.output_names)
    assert all(axes and ("batch" in axes.values() or case.fixed_batch) for axes in case.dynamic_axes.values())
    assert not case.fixed_batch or case.traced_batch == case.other_batch
    assert 0 < case.atol < 1e-2 and 0 < case.rtol <= 1e-2
    assert case.activation_bound > 0
    assert case.allowed_mismatch_fraction == 0.0 or case.mismatch_reason
    report = case.to_dict()
    assert json.loads(json.dumps(report)) == report
    assert not any(callable(value) for value in report.values())


def test_model_case_rejects_bad_metadata() -> None:
    good = model_zoo_cases.get("superresolution")
    fields = {f: getattr(good, f) for f in good.__dataclass_fields__}
    with pytest.raises(ValueError, match="family"):
        ModelCase(**{**fields, "family": "not_a_family"})
    with pytest.raises(ValueError, match="batch"):
        ModelCase(**{**fields, "traced_batch": 1})
    with pytest.raises(ValueError, match="mismatch_reason"):
        ModelCase(**{**fields, "allowed_mismatch_fraction": 0.01})
    with pytest.raises(ValueError, match="torch_onnx_fails_with"):
        ModelCase(**{**fields, "torch_onnx_issue": "refuses the model"})  # an issue names its failure
    with pytest.raises(ValueError, match="torch_onnx_issue"):
        ModelCase(**{**fields, "torch_onnx_fails_with": "refused"})


_ISSUE = {"torch_onnx_issue": "refuses the model", "torch_onnx_fails_with": r"refused: axis \d"}


def _raise(error: BaseException):
    def body() -> None:
        raise error
    return body


@pytest.mark.parametrize(("issue", "exporter", "body", "outcome"), [
    (_ISSUE, "torch.onnx", _raise(ValueError("refused: axis 0")), pytest.xfail.Exception),  # the named failure
    (_ISSUE, "torch.onnx", _raise(ValueError("values differ")), AssertionError),  # another failure fails
    (_ISSUE, "torch.onnx", _raise(AssertionError("outputs differ")), AssertionError),
    (_ISSUE, "torch.onnx", lambda: None, pytest.fail.Exception),  # a pass fails (strict)
    (_ISSUE, "roundtrip", lambda: None, None),  # the issue is torch.onnx's alone
    (_ISSUE, "roundtrip", _raise(ValueError("refused: axis 0")), ValueError),
    ({}, "torch.onnx", _raise(ValueError("refused: axis 0")), ValueError),  # no issue: no expectation
], ids=["named-failure", "other-failure", "assertion", "passes", "ours-passes", "ours-fails", "no-issue"])
def test_a_torch_onnx_issue_expects_the_failure_it_names(issue, exporter, body, outcome) -> None:
    from model_zoo_cases.test_zoo import expected_failure

    good = model_zoo_cases.get("superresolution")
    case = ModelCase(**{**{f: getattr(good, f) for f in good.__dataclass_fields__}, **issue})
    if outcome is None:
        with expected_failure(case, exporter):
            body()
        return
    with pytest.raises(outcome):
        with expected_failure(case, exporter):
            body()


# --- building -------------------------------------------------------------------


def test_build_is_deterministic_for_a_seed(determinism_case: ModelCase) -> None:
    case = determinism_case
    rng_before = torch.random.get_rng_state()
    first, again, other = case.build(0), case.build(0), case.build(1)
    assert torch.equal(torch.random.get_rng_state(), rng_before), "build() must not move the global RNG"
    assert _state_dicts_equal(first, again)
    assert not _state_dicts_equal(first, other)
    assert not first.training and not any(m.training for m in first.modules())


def test_module_cache_returns_the_same_module() -> None:
    case = model_zoo_cases.get("superresolution")
    assert case.module(0) is case.module(0)
    assert case.module(1) is not case.module(0)
    assert _state_dicts_equal(case.module(0), case.build(0))


# --- calibration -----------------------------------------------------------------


class _DropoutSpy(nn.Module):
    """Records whether it ran in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.saw_training: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.saw_training.append(self.training)
        return x


def test_calibrate_batchnorm_uses_cumulative_batch_stats() -> None:
    spy = _DropoutSpy()
    bn = nn.BatchNorm1d(3, momentum=0.3)
    net = nn.Sequential(spy, bn)
    batches = [torch.randn(64, 3, generator=torch.Generator().manual_seed(i)) * 5 + 2 for i in range(3)]
    assert calibration.calibrate_batchnorm(net, lambda step: (batches[step],), steps=3) == 1
    assert bn.momentum == 0.3 and not bn.training and not net.training
    assert spy.saw_training == [False, False, False]
    torch.testing.assert_close(bn.running_mean, torch.stack([b.mean(0) for b in batches]).mean(0))
    torch.testing.assert_close(bn.running_var, torch.stack([b.var(0) for b in batches]).mean(0))
    assert calibration.calibrate_batchnorm(nn.Linear(3, 3), lambda step: (batches[0],), steps=1) == 0


def test_rescale_weights_gives_unit_std_per_layer() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    with torch.no_grad():
        for layer in net[::2]:
            layer.weight.mul_(30.0)
    x = torch.randn(128, 64)
    assert calibration.rescale_weights(net, (x,)) == 3
    with torch.no_grad():
        h = x
        for layer in net:
            h = layer(h)
            if isinstance(layer, nn.Linear):
                assert h.std().item() == pytest.approx(1.0, rel=1e-4)


# --- inputs ---------------------------------------------------------------------


def test_inputs_are_realistic(case: ModelCase) -> None:
    args = case.inputs(0)
    assert len(args) == len(case.input_names)
    for name, arg in zip(case.input_names, args):
        batch_dims = [d for d, axis in case.dynamic_axes[name].items() if axis == "batch"]
        assert [arg.shape[d] for d in batch_dims] == [case.traced_batch]
        assert torch.isfinite(arg.float()).all()
    other = case.inputs(0, case.other_batch)
    for name, arg in zip(case.input_names, other):
        assert [arg.shape[d] for d, axis in case.dynamic_axes[name].items() if axis == "batch"] == [case.other_batch]
    for a, b in zip(args, case.inputs(0)):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(args, case.inputs(1)))

    first = args[0]
    if case.family == "word_language_model":
        model = case.module(0)
        assert isinstance(model, RNNModel)
        assert first.dtype == torch.int64 and first.dim() == 2
        assert 0 <= int(first.min()) and int(first.max()) < model.ntoken
        for state in args[1:]:
            assert state.shape == (model.nlayers, case.traced_batch, model.nhid)
            assert state.dtype == torch.float32 and float(state.abs().max()) < 5.0
    elif case.family == "dcgan" and case.input_names == ("latent",):
        assert first.shape == (case.traced_batch, 100, 1, 1)
        assert abs(float(first.mean())) < 0.3 and 0.7 < float(first.std()) < 1.3
    elif case.family == "dcgan":
        assert first.shape == (case.traced_batch, 3, 64, 64)
        assert -1.0 <= float(first.min()) and float(first.max()) <= 1.0
    elif case.family == "superresolution":
        assert first.shape[1] == 1 and 0.0 <= float(first.min()) and float(first.max()) <= 1.0
    elif case.family == "video":  # Kinetics-normalised clips
        size = torchvision_extended.input_size(case.name)
        assert first.shape == (case.traced_batch, 3, size.frames, size.size, size.size)
        pixels = first * torch.tensor(KINETICS_STD).view(1, 3, 1, 1, 1) + torch.tensor(KINETICS_MEAN).view(1, 3, 1, 1, 1)
        assert float(pixels.min()) >= -1e-5 and float(pixels.max()) <= 1 + 1e-5
    elif case.family == "optical_flow":  # frame pairs in [-1, 1]
        assert all(arg.shape == first.shape and float(arg.abs().max()) <= 1.0 for arg in args)
    else:  # ImageNet classifiers: undo the normalisation, pixels must lie in [0, 1]
        size = 299 if case.family == "inception" else 224
        if case.tier == "extended":
            size = torchvision_extended.input_size(case.name).size
        assert first.shape == (case.traced_batch, 3, size, size)
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        pixels = first * std + mean
        assert float(pixels.min()) >= -1e-5 and float(pixels.max()) <= 1 + 1e-5


# --- activations ------------------------------------------------------------------


def test_activations_are_finite_and_bounded(case: ModelCase) -> None:
    model = case.module(0)
    module_names = {module: name for name, module in model.named_modules()}
    worst: dict[str, float] = {}

    def record(module: nn.Module, inputs: object, output: object) -> None:
        name = module_names[module] or type(module).__name__
        for tensor in flat_tensors(output):
            if tensor.is_floating_point():
                assert torch.isfinite(tensor).all(), f"{case.name}: non-finite activation in {name}"
                worst[name] = max(worst.get(name, 0.0), float(tensor.abs().max()))

    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    handles = [m.register_forward_hook(record) for m in leaves]
    try:
        with torch.no_grad():
            outputs = model(*case.inputs(0))
    finally:
        for handle in handles:
            handle.remove()
    record(model, None, outputs)
    assert len(_as_tuple(outputs)) == len(case.output_names)
    where, peak = max(worst.items(), key=lambda item: item[1])
    assert peak < case.activation_bound, f"{case.name}: max |activation| {peak:.4g} in {where}"
    assert peak > 0.0


# torch.onnx (dynamo) and roundtrip exports of every case are verified through the harness in
# tests/test_zoo_roundtrip.py, at the traced sizes and at `case.other_inputs()`.
