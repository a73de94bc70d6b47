"""CUDA: onnxruntime's CUDA provider against torch on CUDA, TF32 pinned, CPU fallbacks listed,
and the per-op noise floor. Tests marked `cuda` skip with the reason where there is no GPU;
the ones that are not marked check what a GPU-less machine must do (refuse, with the reason)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

import harness
from harness.runtime import BackendUnavailableError, cuda_unavailable_reason, prepare

REASON = cuda_unavailable_reason()
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"needs CUDA: {REASON}")

# TF32 rounds a matmul's inputs to 10 mantissa bits (unit roundoff 2^-11 ~ 5e-4): a 1024-term
# linear layer then lands ~2.5e-4 (normalised) from its fp64 truth, where fp32 lands ~3.5e-7
# (both measured on CPU, TF32 simulated by rounding the inputs). The floor between them, ~30x
# from each, tells which one a side computed in.
TF32_FLOOR = 1e-5


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


def _small():
    torch.manual_seed(0)
    return Small().eval(), (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)


# --- on a machine without CUDA: refuse, with the reason -----------------------------------------


@pytest.mark.skipif(REASON is None, reason="CUDA is available here")
def test_verify_on_cuda_without_cuda_raises_with_the_reason():
    with pytest.raises(BackendUnavailableError) as raised:
        harness.verify(*_small(), device="cuda")
    message = str(raised.value)
    assert message.startswith("CUDA was requested but cannot be used: ") and REASON in message


@pytest.mark.skipif(REASON is None, reason="CUDA is available here")
def test_verify_onnx_and_prepare_on_cuda_without_cuda_raise():
    model = onnx.helper.make_model(
        onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
                               [onnx.helper.make_tensor_value_info("x", 1, [2])],
                               [onnx.helper.make_tensor_value_info("y", 1, [2])]),
        opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=10)
    with pytest.raises(BackendUnavailableError, match="CUDA was requested"):
        harness.verify_onnx(model, [np.ones(2, np.float32)], device="cuda")
    with pytest.raises(BackendUnavailableError, match="CUDA was requested"):
        prepare(model, "CUDA:0")


def test_unavailable_reason_matches_what_is_installed_and_visible():
    """The reason is None exactly when onnxruntime has the CUDA provider and torch sees a GPU,
    and otherwise names the missing piece (checked here independently of the harness)."""
    import onnxruntime

    has_provider = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    has_gpu = torch.cuda.is_available()
    assert (REASON is None) == (has_provider and has_gpu), REASON
    if not has_provider:
        assert "has no CUDAExecutionProvider" in REASON and "install onnxruntime-gpu" in REASON
    elif not has_gpu:
        assert REASON == "no CUDA GPU is visible (torch.cuda.is_available() is False)"


def test_noise_floor_code_path_on_cpu_values():
    """The CPU-vs-device replay, run against CPU values: two identical CPU runs, zero floor."""
    from harness.analysis import fx_rows as per_op
    from harness.runtime import DeviceSpec
    from harness.analysis.fx_mapping import map_model
    from harness.metrics.tolerances import load
    from harness.analysis.torch_values import record_values
    from harness.runtime import model_runner

    import exporter

    model, args = _small()
    result = exporter.export_program(model, args)
    values = record_values(result.program, args)
    groups = map_model(result.model, result.program)
    analysis = per_op.FxAnalysis(
        onnx_model=result.model, source_model=result.model, program=result.program, groups=groups,
        values=values, feeds={"x": args[0].numpy()}, device="cuda", table=load(),
        run=model_runner(DeviceSpec.parse("cpu"), False, None),
    )
    records = {fx: per_op._record(group, analysis) for fx, group in groups.items()}
    per_op._noise_floor(records, analysis)
    floors = [r.noise_floor for r in records.values() if r.noise_floor is not None]
    assert len(floors) >= 4 and all(f.max_abs == 0 and f.passed for f in floors)


# --- on a GPU ---------------------------------------------------------------------------------


@pytest.mark.cuda
@needs_gpu
def test_verify_on_cuda_pins_tf32_off_and_records_it():
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    verification = harness.verify(*_small(), device="cuda")
    assert verification.device == "cuda:0" and verification.environment["tf32"] is False
    assert verification.environment["gpu"] and verification.environment["cuda"]
    assert verification.passed, [c.to_dict() for c in verification.outputs]
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == flags  # restored


@pytest.mark.cuda
@needs_gpu
def test_cuda_rows_carry_the_noise_floor_and_truth():
    from harness.metrics.noise import attribute, load_noise_model

    verification = harness.verify(*_small(), device="cuda")
    conv = next(op for op in verification.ops if op.aten == "aten.conv2d.default")
    assert conv.isolated is not None and conv.noise_floor is not None and conv.truth is not None
    assert conv.noise_floor.shape_match and conv.noise_bound > 0
    # the attribution is the rule applied to the row's own numbers, and fp32 (TF32 off) keeps
    # both sides of a 27-term convolution far inside TF32_FLOOR of the truth
    assert conv.attribution == attribute(conv.truth, conv.torch_truth, conv.noise_bound, load_noise_model())
    assert conv.truth.normalized < TF32_FLOOR and conv.torch_truth.normalized < TF32_FLOOR, conv.to_dict()
    assert isinstance(verification.cpu_placed_nodes, list)
    assert "noise_floor_s" in verification.timings


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("tf32", [False, True], ids=["tf32 off", "tf32 on"])
def test_tf32_is_applied_to_torch_and_onnxruntime_alike(tf32):
    torch.manual_seed(0)
    model = torch.nn.Linear(1024, 64).eval()
    x = torch.randn(32, 1024, generator=torch.Generator().manual_seed(2))
    verification = harness.verify(model, (x,), device="cuda", tf32=tf32, output_atol=1e-2, output_rtol=1e-2)
    assert verification.environment["tf32"] is tf32
    linear = next(op for op in verification.ops if op.aten == "aten.linear.default")
    for side, comparison in (("torch", linear.torch_truth), ("onnxruntime", linear.truth)):
        assert (comparison.normalized > TF32_FLOOR) is tf32, (side, comparison.normalized)


@pytest.mark.cuda
@needs_gpu
def test_cuda_session_places_conv_on_cuda():
    from harness.runtime import node_placement

    import exporter

    model, args = _small()
    onnx_model = exporter.export(model, args)
    placement = node_placement(prepare(onnx_model, "CUDA", profile=True), args[0].numpy())
    assert any(p == "CUDAExecutionProvider" for p in placement.values()), placement


class _SessionCreated(Exception):
    """Raised by the recording InferenceSession once it has seen the providers it was given."""


# (device, execution_provider) -> the provider names onnxruntime is asked for, in order
PROVIDER_LISTS = [
    ("CPU", None, ["CPUExecutionProvider"]),
    ("CPU", "OpenVINOExecutionProvider", ["OpenVINOExecutionProvider", "CPUExecutionProvider"]),
    ("CUDA:0", None, ["CUDAExecutionProvider", "CPUExecutionProvider"]),
    ("CUDA:1", "TensorrtExecutionProvider",
     ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]),
]


@pytest.mark.parametrize("device, execution_provider, expected", PROVIDER_LISTS)
def test_sessions_ask_onnxruntime_for_well_formed_provider_lists(monkeypatch, device, execution_provider, expected):
    """What a CUDA or TensorRT session asks onnxruntime for, checked without a GPU: every entry
    is a (name, options) pair, in the order given, and the CUDA libraries are loaded first for
    the GPU providers only. (A provider list onnxruntime refuses makes it fall back to the CPU,
    which the harness then reports as a CUDA provider that failed to initialise.)"""
    import onnxruntime as ort

    import harness.runtime.sessions as sessions

    seen: dict[str, object] = {}

    def record(source, sess_options=None, providers=None, **kwargs):
        seen["providers"] = providers
        raise _SessionCreated

    monkeypatch.setattr(ort, "InferenceSession", record)
    monkeypatch.setattr(sessions, "require_cuda", lambda *args, **kwargs: None)
    monkeypatch.setattr(sessions, "require_provider", lambda *args, **kwargs: None)
    monkeypatch.setattr(sessions, "load_cuda_libraries", lambda: seen.setdefault("loaded", True))
    model, _ = _small_onnx()
    with pytest.raises(_SessionCreated):
        prepare(model, device, execution_provider=execution_provider)
    providers = seen["providers"]
    assert all(isinstance(name, str) and isinstance(options, dict) for name, options in providers), providers
    assert [name for name, _ in providers] == expected
    gpu = expected[0] in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
    assert seen.get("loaded", False) is gpu
    if device.startswith("CUDA"):
        cuda_options = dict(providers)["CUDAExecutionProvider"]
        assert str(cuda_options["device_id"]) == device.split(":")[1]


def _small_onnx():
    """A one-node model (Relu) and its input."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    return model, np.arange(4, dtype=np.float32)


@pytest.mark.parametrize("raised, escapes", [
    (None, False),
    (OSError("libcudnn.so.9: cannot open shared object file"), False),  # the loader refused a library
    (TypeError("preload_dlls() got an unexpected keyword argument"), True),  # a bug of ours: never hidden
])
def test_loading_the_cuda_libraries_reports_what_the_loader_refused_and_hides_no_bug(monkeypatch, raised, escapes):
    import onnxruntime as ort

    import harness.runtime.devices as devices

    def preload(**kwargs):
        print("could not load libcublasLt.so.13")
        if raised is not None:
            raise raised

    monkeypatch.setattr(ort, "preload_dlls", preload)
    monkeypatch.setattr(devices, "_CUDA_LIBRARIES_LOADED", False)
    monkeypatch.setattr(devices, "_CUDA_PRELOAD_REPORT", "")
    if escapes:
        with pytest.raises(type(raised)):
            devices.load_cuda_libraries()
        return
    devices.load_cuda_libraries()
    report = devices.cuda_preload_report()
    assert "could not load libcublasLt.so.13" in report
    assert ("libcudnn.so.9" in report) is (raised is not None)
    devices.load_cuda_libraries()  # once per process: a second call changes nothing
    assert devices.cuda_preload_report() == report
