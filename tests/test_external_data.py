"""Writing exports straight from the weights, external data, and verifying models from files.

A model past protobuf's 2 GB limit cannot be built in CI; the limit is lowered instead
(`exporter.write.external_data.PROTOBUF_LIMIT`), which exercises the same decision and files.
"""

from __future__ import annotations

import io
import os
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
import torch

import exporter
import harness
from exporter.write import external_data
from exporter.contract.skeleton import ALIGNMENT, IN_MEMORY, is_in_memory
from exporter.write.external_data import data_file_name, write_model
from harness.runtime import SharedWeights, prepare


class _Wide(torch.nn.Module):
    """Two Linear layers with 4 MiB of weights, plus a small one and a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(512, 1024)
        self.second = torch.nn.Linear(1024, 512)
        self.head = torch.nn.Linear(512, 3)
        self.register_buffer("shift", torch.linspace(-1, 1, 3))

    def forward(self, x):
        return self.head(torch.relu(self.second(torch.relu(self.first(x))))) + self.shift


@pytest.fixture(scope="module")
def wide():
    torch.manual_seed(0)
    return _Wide().eval(), (torch.randn(2, 512),)


def _weight_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _torch_output(module, args) -> np.ndarray:
    with torch.no_grad():
        return module(*args).numpy()


def test_single_file_is_written_straight_from_the_weights(wide, tmp_path):
    module, args = wide
    path = tmp_path / "wide.onnx"
    returned = exporter.export(module, args, path)
    assert onnx.load(path) == returned  # the streamed file parses into the model returned
    assert not any(is_in_memory(t) for t in returned.graph.initializer)
    assert [p.name for p in tmp_path.iterdir()] == ["wide.onnx"]
    (actual,) = prepare(str(path), "CPU").run(args[0].numpy())
    np.testing.assert_allclose(actual, _torch_output(module, args), rtol=1e-5, atol=1e-5)

    buffer = io.BytesIO()
    exporter.export(module, args, buffer)
    assert onnx.load_from_string(buffer.getvalue()) == returned


def test_writing_holds_no_copy_of_the_weights(wide, tmp_path):
    """tracemalloc sees every Python and numpy allocation: writing 4 MiB of weights allocates
    a small fraction of that (no bytes object of a weight, no serialised proto)."""
    module, args = wide
    result = exporter.export_program(module, args)
    tracemalloc.start()
    try:
        write_model(tmp_path / "wide.onnx", result.skeleton, result.weights)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < _weight_bytes(module) / 8, f"writing allocated {peak} bytes for {_weight_bytes(module)} of weights"


def test_the_skeleton_holds_no_weight_bytes_and_shares_the_parameters(wide):
    module, args = wide
    result = exporter.export_program(module, args)
    held = [t for t in result.skeleton.graph.initializer if is_in_memory(t)]
    assert {t.name for t in held} == {"first.weight", "second.weight", "first.bias", "second.bias", "head.weight"}
    assert result.skeleton.ByteSize() < _weight_bytes(module) / 50
    assert np.shares_memory(result.weights["first.weight"], module.first.weight.detach().numpy())
    assert result.model == exporter.export(module, args)  # the self-contained model, built on demand


def test_external_data_on_request(wide, tmp_path):
    module, args = wide
    path = tmp_path / "wide.onnx"
    returned = exporter.export(module, args, path, external_data=True)
    data = tmp_path / data_file_name(str(path))
    assert data.exists() and os.path.getsize(path) < 64 * 1024
    external = [t for t in returned.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert {t.name for t in external} == {"first.weight", "second.weight", "first.bias", "second.bias", "head.weight"}
    offsets = {t.name: int({e.key: e.value for e in t.external_data}["offset"]) for t in external}
    assert offsets["first.weight"] % ALIGNMENT == 0 and offsets["second.weight"] % ALIGNMENT == 0
    onnx.checker.check_model(str(path), full_check=True)
    loaded = onnx.load(str(path))  # with its external data
    inline = exporter.export(module, args)
    assert loaded.graph.node == inline.graph.node
    for tensor, expected in zip(loaded.graph.initializer, inline.graph.initializer, strict=True):
        assert tensor.name == expected.name
        np.testing.assert_array_equal(numpy_helper.to_array(tensor), numpy_helper.to_array(expected))
    (actual,) = prepare(str(path), "CPU").run(args[0].numpy())
    np.testing.assert_allclose(actual, _torch_output(module, args), rtol=1e-5, atol=1e-5)


def test_past_the_protobuf_limit_the_weights_go_beside_the_model(wide, tmp_path, monkeypatch):
    module, args = wide
    monkeypatch.setattr(external_data, "PROTOBUF_LIMIT", _weight_bytes(module) // 2)
    path = tmp_path / "big.onnx"
    exporter.export(module, args, path)  # external_data=None: decided by the size
    assert (tmp_path / "big.onnx.data").exists()
    with pytest.raises(exporter.ExportError, match="2 GB limit; pass external_data=True"):
        exporter.export(module, args, tmp_path / "inline.onnx", external_data=False)
    assert not (tmp_path / "inline.onnx").exists()  # nothing half-written
    with pytest.raises(exporter.ExportError, match="needs a file path"):
        exporter.export(module, args, io.BytesIO(), external_data=True)


def test_verify_onnx_memory_maps_external_data_and_checks_the_path(wide, tmp_path, monkeypatch):
    module, args = wide
    path = tmp_path / "wide.onnx"
    exporter.export(module, args, path, external_data=True)
    shared_of = SharedWeights.of
    seen: list[SharedWeights] = []

    def recording(*a, **k):
        seen.append(shared_of(*a, **k))
        return seen[-1]

    monkeypatch.setattr(SharedWeights, "of", recording)
    checked: list = []
    real_check = onnx.checker.check_model
    monkeypatch.setattr(onnx.checker, "check_model", lambda m, *a, **k: (checked.append(m), real_check(m, *a, **k))[1])
    verification = harness.verify_onnx(str(path), [args[0].numpy()], [_torch_output(module, args)], per_op=False)
    assert verification.passed and verification.checker.passed
    assert checked == [str(path)]  # the checker read the file, external data included
    (shared,) = seen
    assert shared.sources["first.weight"] == "file" and isinstance(shared.arrays["first.weight"], np.memmap)


def test_verify_never_serialises_the_weights(wide, monkeypatch):
    """Every session harness.verify creates (production, the instrumented model, the isolation
    batch: loaded apart, as a model whose weights outweigh its values and the joint allowance)
    loads a model of a few KiB: the weights reach onnxruntime as arrays, on the module's own memory."""
    import onnxruntime as ort

    from harness.analysis import fx_rows

    module, args = wide
    monkeypatch.setattr(fx_rows, "JOIN_WEIGHTS_BYTES", 0)  # its few MiB of weights stand for a large model's
    loaded: list[int] = []
    real_session = ort.InferenceSession

    def recording(source, *a, **k):
        loaded.append(len(source) if isinstance(source, bytes) else os.path.getsize(source))
        return real_session(source, *a, **k)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    verification = harness.verify(module, args)
    assert verification.passed and all(op.isolated is not None for op in verification.ops)
    assert len(loaded) == 3 and max(loaded) < _weight_bytes(module) / 50, loaded


def test_a_skeleton_without_its_weights_is_refused_clearly(wide):
    module, args = wide
    skeleton = exporter.export_program(module, args).skeleton
    with pytest.raises(ValueError, match="held in memory by the export that made it"):
        SharedWeights.of(skeleton)
    assert IN_MEMORY in skeleton.SerializeToString().decode("latin-1")
