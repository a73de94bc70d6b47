"""An ONNX file whose weights are past protobuf's 2 GB limit verifies: nothing builds a proto
holding them (onnx's ReferenceEvaluator gets them as inputs fed the memory-mapped arrays). The
default run exercises that path on a small file by lowering the limit; the nightly test runs
Linear(23300, 23300) (2.17 GB in one initializer) itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import harness
import harness.runtime.shared_weights as shared_weights


def _file(folder, width: int, seed: int = 0):
    generator = np.random.default_rng(seed)
    weight = (generator.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
    bias = generator.standard_normal(width, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "weight", "bias"], ["y"], name="linear", transB=1),
         helper.make_node("Tanh", ["y"], ["out"], name="tanh")], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, width])],
        initializer=[numpy_helper.from_array(weight, "weight"), numpy_helper.from_array(bias, "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.data",
              size_threshold=0)
    x = generator.standard_normal((2, width), dtype=np.float32)
    return path, x, np.tanh(x @ weight.T + bias)


def _verify_past_the_limit(path, x, expected, monkeypatch):
    def refused(self, model):
        raise AssertionError("a model past protobuf's limit was restored into one proto")

    monkeypatch.setattr(shared_weights.SharedWeights, "restore", refused)
    return harness.verify_onnx(str(path), [x], [expected], strict=True)


def test_a_file_past_the_protobuf_limit_verifies_without_one_proto_of_its_weights(tmp_path, monkeypatch):
    path, x, expected = _file(tmp_path, 64)
    monkeypatch.setattr(shared_weights, "PROTOBUF_LIMIT", 4096)  # the 16 KB weight is "past" it
    verification = _verify_past_the_limit(path, x, expected, monkeypatch)
    assert verification.passed, verification.notes
    assert [op.onnx_ops for op in verification.ops] == [["Gemm"], ["Tanh"]]
    assert all(op.isolated is not None and op.passed for op in verification.ops)


def test_a_file_of_any_size_verifies_on_its_mapped_weights_and_its_reproducers_carry_them(tmp_path, monkeypatch):
    """Below the limit too, the reference is fed the mapped arrays (no proto holds the weights
    while verifying); a reproducer written afterwards restores them from the mapped file."""
    path, x, expected = _file(tmp_path, 64)
    verification = _verify_past_the_limit(path, x, expected, monkeypatch)
    assert verification.passed, verification.notes
    assert all(op.isolated is not None and op.passed for op in verification.ops)
    monkeypatch.undo()
    folder = harness.write_reproducer(verification.ops[0], tmp_path / "repro")
    written = {t.name: numpy_helper.to_array(t) for t in onnx.load(f"{folder}/model.onnx").graph.initializer}
    weights = {t.name: numpy_helper.to_array(t, base_dir=str(tmp_path))
               for t in onnx.load(path, load_external_data=True).graph.initializer}
    assert set(written) == {"weight", "bias"}
    assert all(np.array_equal(written[name], weights[name]) for name in written)


def test_under_the_limit_the_reference_gets_the_weights_inline(tmp_path):
    path, x, expected = _file(tmp_path, 64)
    model = onnx.load(path, load_external_data=False)
    shared = shared_weights.SharedWeights.of(model, base_dir=str(tmp_path))
    loaded = shared.stubbed(model)
    inline, feeds = shared.reference_form(loaded, {"x": x})
    assert set(feeds) == {"x"} and {t.name for t in inline.graph.initializer} == {"weight", "bias"}
    as_inputs, feeds = shared.reference_form(loaded, {"x": x}, limit=1024)
    assert set(feeds) == {"x", "weight", "bias"} and not as_inputs.graph.initializer
    assert feeds["weight"] is shared.arrays["weight"]  # the mapped array itself, not a copy
    assert [i.name for i in as_inputs.graph.input] == ["x", "weight", "bias"]


@pytest.mark.nightly
def test_linear_23300_from_a_file_with_external_data(tmp_path, monkeypatch):
    """2.17 GB in one initializer, written by the exporter straight from the module's weights;
    about 5 GB of memory at the peak (bench/bench_memory.py --cases linear23300 --from-file)."""
    import torch

    import exporter

    torch.manual_seed(0)
    module, x = torch.nn.Linear(23300, 23300).eval(), torch.randn(2, 23300)
    with torch.no_grad():
        expected = module(x).numpy()
    path = tmp_path / "model.onnx"
    exporter.export_program(module, (x,)).save(path, external_data=True)
    del module
    verification = _verify_past_the_limit(path, x.numpy(), expected, monkeypatch)
    assert verification.passed, verification.notes
    assert all(op.passed for op in verification.ops)


def test_the_runtime_layer_reads_the_exporter_only_through_the_skeleton_contract():
    """harness/runtime/ may import from the exporter only `exporter.contract.skeleton`, the public
    skeleton format, which itself imports numpy and onnx only."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = {}
    for path in sorted((root / "harness" / "runtime").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name == "exporter" or name.startswith("exporter."):
                    found.setdefault(name, []).append(path.name)
    assert set(found) == {"exporter.contract.skeleton"}, found
    contract = ast.parse((root / "exporter" / "contract" / "skeleton.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(contract) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(contract)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "sys", "numpy", "onnx"}, imported
