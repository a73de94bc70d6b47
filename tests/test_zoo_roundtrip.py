"""Every selected zoo case through both exporters: checker, backend vs torch, two batch sizes.

The tier comes from `--roundtrip-tier` (`--zoo-tier` here; smoke by default: one small case per
family) and `--roundtrip-cases` (`--zoo-cases`); the device from `--roundtrip-device`
(`--device`). Per-op analysis is covered elsewhere (and by the shipped model_zoo_cases.test_zoo);
here the question is whether each model survives the round trip within its case tolerance.
On the CPU our export's traced size is also run on OpenVINO, held to float32 and at the
machine's default precision (`OPENVINO`): outputs only, judged against the same torch values
and fp64 truth; where openvino is not installed those backends are named skips.
"""

from __future__ import annotations

import pytest

import harness
import model_zoo_cases
from model_zoo_cases.test_zoo import expected_failure

OPENVINO = ("openvino:precision=f32", "openvino")
"""The further backends of the traced size on the CPU: OpenVINO at float32 and at its default."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "zoo_case" in metafunc.fixturenames:
        tier = metafunc.config.getoption("roundtrip_tier")
        pattern = metafunc.config.getoption("roundtrip_cases")
        cases = model_zoo_cases.select(tier=None if pattern else tier, pattern=pattern)
        metafunc.parametrize("zoo_case", cases, ids=[c.name for c in cases])


def _input_axes(case: model_zoo_cases.ModelCase) -> dict[str, dict[int, str]]:
    return {name: axes for name, axes in case.dynamic_axes.items() if name in case.input_names}


def _verify(case, device: str, exporter: str):
    module = case.module(0)
    common = dict(
        device=device, dynamic_axes=_input_axes(case), input_names=list(case.input_names),
        output_atol=case.atol, output_rtol=case.rtol, allowed_mismatch=case.allowed_mismatch_fraction,
        model_name=case.name, per_op=False,
    )
    backends = ("onnxruntime", *OPENVINO) if device == "cpu" and exporter == "roundtrip" else ("onnxruntime",)
    traced = harness.verify(module, case.inputs(0), exporter=exporter, backends=backends, **common)
    other = harness.verify(module, case.other_inputs(1), onnx_model=traced.onnx_model, **common)
    return traced, other


def _assert_passed(verification) -> None:
    assert verification.checker.passed, verification.checker.message
    failing = [c.to_dict() for c in verification.outputs if not c.passed]
    assert verification.passed and not failing, failing or verification.notes
    for result in verification.backend_results:  # a further backend passes, or is a named skip
        failing = [c.to_dict() for c in result.outputs if not c.passed]
        assert result.passed or (result.skipped and result.passed is None), (result.backend, failing or result.notes)


def test_roundtrip_export(zoo_case, roundtrip_device, roundtrip):
    traced, other = _verify(zoo_case, roundtrip_device, "roundtrip")
    roundtrip.record(traced, other=other, name=zoo_case.name, family=zoo_case.family,
                     sizes=[f"batch {zoo_case.traced_batch}", f"batch {zoo_case.other_batch}"])
    _assert_passed(traced)
    _assert_passed(other)
    assert other.outputs[0].shape_actual[_batch_axis(zoo_case)] == zoo_case.other_batch


def test_torch_onnx_export(zoo_case, roundtrip_device):
    with expected_failure(zoo_case, "torch.onnx"):  # a named issue: that failure, or the test fails
        traced, other = _verify(zoo_case, roundtrip_device, "torch.onnx")
        _assert_passed(traced)
        _assert_passed(other)


def _batch_axis(case) -> int:
    first_output = case.output_names[0]
    axes = case.dynamic_axes.get(first_output, {0: "batch"})
    return next(axis for axis, name in axes.items() if "batch" in name)
