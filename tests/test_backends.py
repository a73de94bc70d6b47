"""The backend interface: specs and the registry, every backend on a small conv net (outputs,
isolated runs, intermediate values in groups, runtime precisions and fusions), named skips."""

from __future__ import annotations

import re

import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.backend import prepare
from harness.runtime.backends import (
    DECLARED, RUNTIME_MODEL, BackendSpec, BackendSpecError, backend_names, get_backend, is_lower,
)
from harness.runtime.errors import BackendUnavailableError


def conv_net() -> onnx.ModelProto:
    """Conv -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, seeded weights."""
    rng = np.random.default_rng(0)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["conv1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "w2", "b2"], ["conv2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flat"),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["out"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "conv_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 5])],
        [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8),
         weight("w3", 5, 8), weight("b3", 5)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


MODEL = conv_net()
INPUT = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
NODES = [node.name for node in MODEL.graph.node]


def available(spec: str):
    backend = get_backend(spec)
    reason = backend.unavailable_reason("CPU")
    if reason:
        pytest.skip(f"{spec}: {reason}")
    return backend


@pytest.mark.parametrize("text, canonical", [
    ("onnxruntime", "onnxruntime"),
    ("ONNXRuntime:level=ALL", "onnxruntime:level=all"),
    ("onnxruntime:provider=CUDAExecutionProvider", "onnxruntime:provider=cuda"),
    ("onnxruntime:provider=trt,level=basic", "onnxruntime:level=basic,provider=tensorrt"),
    ("openvino:precision=bf16,mode=accuracy", "openvino:mode=accuracy,precision=bf16"),
    ("openvino:precision=FP32", "openvino:precision=f32"),
    ("onnx.reference", "onnx.reference"),
])
def test_spec_parses_to_its_canonical_spelling(text, canonical):
    spec = BackendSpec.parse(text)
    assert str(spec) == canonical
    assert BackendSpec.parse(str(spec)) == spec


@pytest.mark.parametrize("text, message", [
    ("tvm", "unknown backend 'tvm'; choose one of onnx.reference, onnxruntime, openvino"),
    ("openvino:precision=int4", "precision='int4' is not valid; choose one of bf16, f16, f32"),
    ("onnxruntime:lvl=all", "unknown option 'lvl'; valid options: provider (execution provider"),
    ("onnxruntime:level=max", "choose one of all, basic, disabled, extended"),
    ("openvino:precision", "option 'precision' is not key=value"),
    ("openvino:mode=accuracy,mode=performance", "option 'mode' given twice"),
    ("onnx.reference:level=all", "unknown option 'level'; valid options: none"),
    ("", "give a name such as 'onnxruntime'"),
])
def test_spec_errors_name_the_problem_and_the_valid_choices(text, message):
    with pytest.raises(BackendSpecError, match=None) as caught:
        BackendSpec.parse(text)
    assert message in str(caught.value)


def test_registry_holds_the_built_in_backends():
    assert {"onnxruntime", "openvino", "onnx.reference"} <= set(backend_names())


SPECS = ["onnxruntime", "onnxruntime:level=disabled", "onnxruntime:level=all", "onnx.reference",
         "openvino:precision=f32", "openvino:precision=bf16,mode=accuracy"]


@pytest.mark.parametrize("spec", SPECS)
def test_every_backend_runs_isolated_models_and_exposes_values_in_groups(spec):
    rep = available(spec).prepare(MODEL, "CPU")
    expected = prepare(MODEL, "CPU").run(INPUT)[0]
    atol = 0.1 if "bf16" in spec else 1e-4  # bfloat16 keeps 8 significand bits
    np.testing.assert_allclose(rep.run(INPUT)[0], expected, atol=atol, rtol=atol)
    np.testing.assert_allclose(rep.run({"x": INPUT})[0], expected, atol=atol, rtol=atol)

    groups = list(rep.values({"x": INPUT}, ["relu1", "conv2", "pool", "flat", "relu1"], group_size=2))
    assert [sorted(g) for g in groups] == [["conv2", "relu1"], ["flat", "pool"]]
    assert groups[1]["flat"].shape == (2, 8)

    single = onnx.helper.make_model(onnx.helper.make_graph(
        [helper.make_node("Relu", ["a"], ["b"], name="only")], "one",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)],
        ir_version=9)
    out = rep.run_isolated(single, {"a": np.array([-1, 0, 2, -3], np.float32)})
    np.testing.assert_array_equal(out["b"], [0, 0, 2, 0])
    precisions = rep.runtime_precisions()
    assert set(precisions) <= set(NODES) and "conv1" in precisions


@pytest.mark.parametrize("spec", SPECS)
def test_every_backend_takes_a_0d_input(spec):
    """A scalar input (the quantized regions feed torch's run-time scale as one) stays 0-d."""
    scaled = helper.make_model(helper.make_graph(
        [helper.make_node("Mul", ["a", "s"], ["b"], name="scale")], "scalar",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])]), opset_imports=[helper.make_opsetid("", 17)],
        ir_version=9)
    out = available(spec).prepare(scaled, "CPU").run({"a": np.array([1, -2, 3], np.float32), "s": np.array(0.5, np.float32)})
    np.testing.assert_array_equal(out[0], [0.5, -1.0, 1.5])


def test_onnxruntime_runs_the_declared_precision():
    precisions = available("onnxruntime").prepare(MODEL).runtime_precisions()
    assert {p.precision for p in precisions.values()} == {"float32"}
    assert {p.source for p in precisions.values()} == {DECLARED}
    assert precisions["conv1"].describe() == "runtime precision float32 (declared)"


def test_onnxruntime_fusions_follow_the_optimisation_level():
    fused = available("onnxruntime:level=all").prepare(MODEL).runtime_fusions()
    covered = [set(f.onnx_nodes) for f in fused]
    assert {"conv1", "relu1"} in covered and {"conv2", "relu2"} in covered  # Conv+Relu fused
    assert all(f.precision == "float32" for f in fused)
    assert available("onnxruntime:level=disabled").prepare(MODEL).runtime_fusions() == []


@pytest.mark.parametrize("precision, expected", [("f32", "float32"), ("bf16", "bfloat16")])
def test_openvino_names_the_precision_each_node_ran_at(precision, expected):
    rep = available(f"openvino:precision={precision}").prepare(MODEL)
    assert rep.hints()["precision"] == expected
    precisions = rep.runtime_precisions()
    for node in ("conv1", "conv2", "fc"):
        assert precisions[node].precision == expected and precisions[node].source == RUNTIME_MODEL
    fused = {frozenset(f.onnx_nodes): f for f in rep.runtime_fusions()}
    assert fused[frozenset({"conv1", "relu1"})].precision == expected


def test_openvino_outputs_outlive_the_request_and_the_compiled_model():
    """The outputs are arrays over OpenVINO's output tensors (not copies): each keeps its tensor's
    memory alive once the model that made it is gone and the memory is handed out again."""
    import gc

    backend = available("openvino:precision=f32")
    exposed = helper.make_model(MODEL.graph, opset_imports=list(MODEL.opset_import), ir_version=MODEL.ir_version)
    exposed.graph.output.extend([onnx.ValueInfoProto(name=name) for name in ("relu1", "conv2")])
    expected = backend.prepare(exposed).run(INPUT)
    copies = [np.array(value, copy=True) for value in expected]
    rep = backend.prepare(exposed)
    outputs = rep.run(INPUT)
    del rep
    gc.collect()
    for _ in range(3):  # the freed memory in use again
        backend.prepare(exposed).run(INPUT + 1.0)
    assert [value.shape for value in outputs] == [(2, 5), (2, 8, 8, 8), (2, 8, 8, 8)]
    for value, copy in zip(outputs, copies):
        np.testing.assert_array_equal(value, copy)


def test_openvino_records_its_settings():
    settings = available("openvino:precision=f32,mode=accuracy").settings()
    assert settings["backend"] == "openvino:mode=accuracy,precision=f32"
    assert settings["config"] == {"INFERENCE_PRECISION_HINT": "f32", "EXECUTION_MODE_HINT": "ACCURACY"}
    assert settings["version"]


@pytest.mark.parametrize("spec, device, reason", [
    ("onnxruntime:provider=tensorrt", "CPU", "TensorrtExecutionProvider"),
    ("openvino", "CUDA", "CPU plugin only"),
    ("onnx.reference", "CUDA:0", "CPU only"),
])
def test_a_missing_provider_or_device_is_a_named_skip(spec, device, reason):
    backend = get_backend(spec)
    if spec.endswith("tensorrt") and backend.unavailable_reason(device) is None:
        pytest.skip("this onnxruntime has TensorRT")
    assert reason in backend.unavailable_reason(device)
    requested = "CUDA" if device.upper().startswith("CUDA") else device
    with pytest.raises(BackendUnavailableError, match=re.escape(f"{requested} was requested but cannot be used: backend {spec}:")):
        backend.prepare(MODEL, device)


def test_a_missing_package_is_a_named_skip(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    assert "openvino package is not installed" in get_backend("openvino").unavailable_reason()


@pytest.mark.parametrize("ran, declared, lower", [
    ("bf16", "float32", True), ("f16", "float32", True), ("float32", "float32", False),
    ("float32", "bfloat16", False), ("i8", "float32", False),
])
def test_lower_precision(ran, declared, lower):
    assert is_lower(ran, declared) is lower
