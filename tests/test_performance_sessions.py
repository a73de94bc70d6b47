"""How a verification uses the machine: its onnxruntime sessions are sized to torch's threads,
never spin, do not prepack, run one at a time and are released before torch computes again,
and use the weight arrays in place."""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import onnxruntime as ort
import pytest
import torch

import harness
import harness.analysis.fx_rows as fx_rows
import harness.verification as verification_module
from harness.runtime import (
    OrtConfig, SharedWeights, cuda_unavailable_reason, harness_session_options, prepare, session_record,
)
from harness.runtime.sessions import in_place_safe


@pytest.fixture
def sessions(monkeypatch):
    """Every onnxruntime session created: a weak reference, its options, the model's bytes."""
    created: list[tuple[weakref.ref, ort.SessionOptions, int]] = []
    real = ort.InferenceSession

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, source, sess_options=None, *args, **kwargs):
            size = len(source) if isinstance(source, bytes) else os.path.getsize(source)
            super().__init__(source, sess_options, *args, **kwargs)
            created.append((weakref.ref(self), sess_options, size))

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    return created


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 6 * 6, 4)).eval(), (torch.randn(2, 3, 8, 8),)


def test_sessions_are_sized_to_torch_and_do_not_spin_but_keep_onnxruntimes_defaults(sessions):
    """Every session runs as users deploy (prepacking on, all graph optimisations), with only
    what cannot change a result added: idle threads sleep, as many threads as torch uses."""
    module, args = _model()
    verification = harness.verify(module, args)
    assert verification.passed and len(sessions) == 2  # production; instrumented and isolation as one model
    for _, options, _ in sessions:
        assert options.intra_op_num_threads == torch.get_num_threads()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
        assert not options.enable_cpu_mem_arena  # an output kept would hold its session's whole arena
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry("session.disable_prepacking")  # onnxruntime's default: on
        assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert verification.environment["onnxruntime_session"] == session_record()
    assert verification.environment["onnxruntime_session"]["source"] == "onnxruntime defaults"


def test_no_session_is_alive_while_torch_computes(sessions, monkeypatch):
    """torch's fp32 values, and the fp64 truth, run with every session already released."""
    alive_during: dict[str, int] = {}

    def watch(name, fn):
        def watched(*args, **kwargs):
            gc.collect()
            alive_during[name] = sum(ref() is not None for ref, _, _ in sessions)
            return fn(*args, **kwargs)
        return watched

    monkeypatch.setattr(verification_module, "record_values", watch("torch values", verification_module.record_values))
    monkeypatch.setattr(fx_rows._TruthPass, "measure", watch("fp64 truth", fx_rows._TruthPass.measure))
    monkeypatch.setattr(fx_rows, "_isolated", watch("isolation", fx_rows._isolated))
    module, args = _model()
    assert harness.verify(module, args).passed
    assert alive_during == {"torch values": 0, "isolation": 0, "fp64 truth": 0}


def test_sessions_use_the_arrays_in_place():
    """A session given shared weights runs on the arrays themselves: changing an array after
    the session is created changes its result (a copy would not see it)."""
    module, args = _model()
    import exporter

    result = exporter.export_program(module, args)
    weights = {name: array.copy() for name, array in result.weights.items()}
    shared = SharedWeights.of(result.skeleton, weights)
    # prepacking off: with it on, onnxruntime runs the Linear on its packed copy of the weight
    no_prepacking = OrtConfig(config_entries={"session.disable_prepacking": "1"})
    rep = prepare(result.skeleton, "CPU", shared_weights=shared, **harness_session_options(no_prepacking))
    before = rep.run(args[0].numpy())[0]
    with torch.no_grad():
        np.testing.assert_allclose(before, module(*args).numpy(), rtol=1e-5, atol=1e-5)
    weights_name = next(name for name in shared.arrays if name.endswith("3.weight"))
    shared.arrays[weights_name][...] = 0  # the Linear's weight, which no optimiser rewrites
    after = rep.run(args[0].numpy())[0]
    np.testing.assert_allclose(after, np.broadcast_to(weights[weights_name.replace("weight", "bias")], after.shape))


def test_prepare_keeps_onnxruntime_defaults_for_users():
    """Only the harness's own sessions change the thread and prepacking settings."""
    module, args = _model()
    import exporter

    rep = prepare(exporter.export(module, args), "CPU")
    options = rep.session.get_session_options()
    for key in ("session.intra_op.allow_spinning", "session.disable_prepacking"):
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry(key)  # not set: onnxruntime's default


CUDA_REASON = cuda_unavailable_reason()


@pytest.mark.cuda
@pytest.mark.skipif(CUDA_REASON is not None, reason=f"needs CUDA: {CUDA_REASON}")
def test_cuda_sessions_get_the_weights_as_arrays_too(sessions):
    """A CUDA verification's sessions load the skeleton (a few KiB); the weights reach the
    device from the module's arrays, not from a serialised model."""
    module, args = _model()
    model = torch.nn.Sequential(module, torch.nn.Linear(4, 4096)).eval()  # 80 KiB of weights
    verification = harness.verify(model, args, device="cuda")
    assert verification.passed and verification.environment["providers"][0] == "CUDAExecutionProvider"
    assert len(sessions) == 2  # production; instrumented and isolation as one model
    for _, options, size in sessions:
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        assert size < 20 * 1024, size


class LayerScaleBlock(torch.nn.Module):
    """ConvNeXt's block in small: NHWC linear between two permutes, then a (C, 1, 1) layer
    scale. onnxruntime's transpose optimiser moves the Transpose across the Mul and rewrites
    the scale under its own name."""

    def __init__(self, channels: int = 384) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(channels, channels)
        self.scale = torch.nn.Parameter(torch.rand(channels, 1, 1) + 0.5)

    def forward(self, x):
        return self.scale * self.linear(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2) + x


def test_a_constant_the_transpose_optimiser_rewrites_is_not_shared_in_place():
    module = LayerScaleBlock().eval()
    x = torch.randn(2, 384, 2, 2)
    result = harness.verify(module, (x,), per_op=False)
    assert result.passed, result.notes
    exported = harness.exporters.export_for_verification("roundtrip", module, (x,))
    shared = SharedWeights.of(exported.model, exported.weights)
    safe = in_place_safe(exported.model, shared.used_by(exported.model))
    assert any("linear" in name for name in safe) and not any("scale" in name for name in safe), safe
