"""Backend plumbing: node placement from onnxruntime profiles, shared weights across sessions,
and the device string contract."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from harness import runtime as backend
from harness.runtime import DeviceSpec, SharedWeights, cpu_placed_nodes, node_placement, parse_profile, prepare


def _model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(64 * 4, dtype=np.float32).reshape(64, 4) / 100, "w")
    bias = numpy_helper.from_array(np.ones(4, np.float32), "b")  # small: stays inline
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Shape", ["a"], ["s"], name="shape"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2])],
        initializer=[weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


X = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)


def test_node_placement_on_the_cpu_provider_lists_every_node():
    import onnxruntime as ort

    rep = prepare(_model(), "CPU", profile=True,
                  graph_optimization_level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    placement = node_placement(rep, X)
    assert placement == {name: "CPUExecutionProvider" for name in ("matmul", "add", "shape", "relu")}
    assert cpu_placed_nodes(placement) == ["add", "matmul", "relu", "shape"]


def test_node_placement_names_the_optimised_graph():
    """With optimisations on, fused nodes carry onnxruntime's names: placement is of what ran."""
    placement = node_placement(prepare(_model(), "CPU", profile=True), X)
    assert placement and set(placement.values()) == {"CPUExecutionProvider"}


def test_node_placement_needs_profiling():
    with pytest.raises(ValueError, match="profile=True"):
        node_placement(prepare(_model(), "CPU"), X)


PROFILE = [  # the shape of onnxruntime's Chrome-trace events (trimmed)
    {"cat": "Session", "name": "model_run", "args": {}},
    {"cat": "Node", "name": "conv_fence_before", "args": {"op_name": "Conv"}},
    {"cat": "Node", "name": "conv_kernel_time", "args": {"op_name": "Conv", "provider": "CUDAExecutionProvider"}},
    {"cat": "Node", "name": "shape_kernel_time", "args": {"op_name": "Shape", "provider": "CPUExecutionProvider"}},
    {"cat": "Node", "name": "gather_kernel_time", "args": {"op_name": "Gather", "provider": "CPUExecutionProvider"}},
    {"cat": "Node", "name": "conv_fence_after", "args": {"op_name": "Conv"}},
]


def test_parse_profile_and_cpu_fallbacks_of_a_cuda_session():
    placement = parse_profile(PROFILE)
    assert placement == {"conv": "CUDAExecutionProvider", "shape": "CPUExecutionProvider",
                         "gather": "CPUExecutionProvider"}
    assert cpu_placed_nodes(placement) == ["gather", "shape"]
    assert parse_profile(json.loads(json.dumps(PROFILE))) == placement


def test_shared_weights_run_identically_without_copying_weights():
    model = _model()
    shared = SharedWeights.of(model)
    assert list(shared.arrays) == ["w"]  # the bias is below the size threshold
    stubbed = shared.stubbed(model)
    assert stubbed.ByteSize() < model.ByteSize() / 4
    assert model.graph.initializer[0].raw_data  # the original is untouched
    for device in ("CPU", "reference"):
        expected = prepare(model, device).run(X)
        actual = prepare(stubbed, device, shared_weights=shared).run(X)
        for a, e in zip(actual, expected):
            np.testing.assert_array_equal(a, e)
    assert shared.restore(stubbed).graph.initializer[0].raw_data == model.graph.initializer[0].raw_data


@pytest.mark.parametrize("text, kind, index, backend_device, torch_device", [
    ("cpu", "cpu", 0, "CPU", "cpu"),
    ("CPU", "cpu", 0, "CPU", "cpu"),
    ("cuda", "cuda", 0, "CUDA:0", "cuda:0"),
    ("CUDA:1", "cuda", 1, "CUDA:1", "cuda:1"),
    ("reference", "reference", 0, "reference", "cpu"),
])
def test_device_spec(text, kind, index, backend_device, torch_device):
    spec = DeviceSpec.parse(text)
    assert (spec.kind, spec.index, spec.backend_device, spec.torch_device) == (kind, index, backend_device, torch_device)


def test_unknown_device_is_refused():
    with pytest.raises(ValueError, match="unknown device"):
        DeviceSpec.parse("tpu")


def test_model_the_backend_refuses_raises_model_load_error():
    model = _model()
    model.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(backend.ModelLoadError, match="could not load the model"):
        prepare(model, "CPU")
    assert issubclass(backend.ModelLoadError, backend.BackendUnavailableError)
