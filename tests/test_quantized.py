"""PT2E-quantized modules: export as QuantizeLinear/DequantizeLinear, and verification in
quantization steps (harness.analysis.quant_rows), on one small quantized conv net (seconds).

The whole `quantized` tier (resnet18, resnet50, MobileNets, a ViT, a transformer encoder) is
verified nightly by test_quantized_tier.py; planted faults are localised on three of its models.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import exporter
import harness
from model_zoo_cases import quantized
from tests.quantized_faults import FAULTS, fx_node

pytestmark = pytest.mark.skipif(bool(quantized.available()), reason=quantized.available() or "torchao is here")


class SmallConvNet(torch.nn.Module):
    """conv-relu, a residual conv-relu with a square 8->8 weight (for the axis fault), mean, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.body = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.body(y)) + y
        return self.head(y.mean((2, 3)))


def _quantized(scheme: str) -> tuple[torch.fx.GraphModule, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    args = (torch.randn(1, 3, 12, 12, generator=generator),)
    batches = [(torch.randn(1, 3, 12, 12, generator=generator),) for _ in range(4)]
    return quantized.quantize(SmallConvNet(), args, batches, scheme), args


@pytest.fixture(scope="module")
def per_tensor():
    return _quantized("xnnpack")


@pytest.fixture(scope="module")
def per_channel():
    return _quantized("xnnpack_per_channel")


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def _run(model: onnx.ModelProto, args, level: str) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: args[0].numpy()})[0]


def test_converted_module_exports_as_qdq_with_provenance(per_tensor):
    module, args = per_tensor
    training = {name: m.training for name, m in module.named_modules()}
    model = exporter.export(module, args, optimize=False)
    assert {name: m.training for name, m in module.named_modules()} == training  # .eval() was not called
    counts = quantized.counts(module)
    assert len(_nodes(model, "QuantizeLinear")) == counts["quantize_per_tensor"]
    assert len(_nodes(model, "DequantizeLinear")) == counts["dequantize_per_tensor"]
    fx = {n.name: n for n in module.graph.nodes}
    for node in _nodes(model, "QuantizeLinear") + _nodes(model, "DequantizeLinear"):
        assert fx_node(node).startswith(("quantize_per_tensor", "dequantize_per_tensor"))
        assert {p.key for p in node.metadata_props} >= {"roundtrip.fx_node", "roundtrip.aten", "roundtrip.scope"}
    weights = {t.name: t for t in model.graph.initializer}
    weight_inputs = [n.input[0] for n in _nodes(model, "DequantizeLinear") if n.input[0] in weights]
    assert len(weight_inputs) == 3 and all(weights[w].data_type == onnx.TensorProto.INT8 for w in weight_inputs)
    del fx


def test_scales_zero_points_and_dtypes_follow_the_fx_graph(per_tensor):
    module, args = per_tensor
    result = exporter.export_program(module, args, optimize=False)
    by_name = {n.name: n for n in result.program.graph.nodes}
    values = {}
    for node in result.model.graph.node:
        if node.op_type == "Constant":
            values[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    for tensor in result.model.graph.initializer:
        values[tensor.name] = onnx.numpy_helper.to_array(tensor)
    for node in _nodes(result.model, "QuantizeLinear"):
        fx = by_name[fx_node(node)]
        scale, zero_point, dtype = fx.args[1], fx.args[2], fx.args[5]
        assert values[node.input[1]] == np.float32(scale)
        assert values[node.input[2]] == zero_point and values[node.input[2]].dtype == np.int8
        assert dtype == torch.int8


def test_per_channel_weights_keep_their_axis(per_channel):
    module, args = per_channel
    model = exporter.export(module, args)
    per_channel_nodes = [n for n in _nodes(model, "DequantizeLinear") if any(a.name == "axis" for a in n.attribute)]
    assert len(per_channel_nodes) == 3
    scales = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in per_channel_nodes:
        assert next(a.i for a in node.attribute if a.name == "axis") == 0
        assert scales[node.input[1]].ndim == 1


@pytest.mark.parametrize("level", ["disabled", "all"])
def test_onnxruntime_matches_torch_within_one_output_step(per_tensor, level):
    module, args = per_tensor
    model = exporter.export(module, args)
    expected = module(*args).detach().numpy()
    output_dq = next(n for n in module.graph.nodes if n.op == "output").args[0][0]
    scale = output_dq.args[1]
    assert np.abs(_run(model, args, level) - expected).max() <= scale * 1.0001


def test_optimiser_keeps_every_pair(per_tensor):
    module, args = per_tensor
    plain, optimised = exporter.export(module, args, optimize=False), exporter.export(module, args)
    assert len(_nodes(optimised, "QuantizeLinear")) == len(_nodes(plain, "QuantizeLinear"))
    readers = {name for n in optimised.graph.node if n.op_type == "DequantizeLinear" for name in n.input[:1]}
    for node in _nodes(optimised, "QuantizeLinear"):
        assert node.output[0] in readers, f"{node.name}'s output is read by no DequantizeLinear"
    # weights stay int8 behind their DequantizeLinear: nothing folded them into float initializers
    assert not any(t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 4 for t in optimised.graph.initializer)


@pytest.mark.parametrize("level", ["disabled", "all"])
def test_healthy_model_passes_in_steps(per_tensor, level):
    module, args = per_tensor
    verification = harness.verify(module, args, session_options={"graph_optimization_level": level})
    assert verification.passed, [op.fx_node for op in verification.ops if op.passed is False]
    quantize_rows = [op for op in verification.ops if op.aten == "quantized_decomposed.quantize_per_tensor.default"]
    dequantize_rows = [op for op in verification.ops if op.aten == "quantized_decomposed.dequantize_per_tensor.default"]
    assert quantize_rows and all(op.quant_steps is not None for op in quantize_rows + dequantize_rows)
    assert all(op.quant_steps.max_steps == 0 for op in dequantize_rows)
    for op in quantize_rows:
        steps = op.quant_steps
        assert steps.max_steps <= 1 and op.verdict.rule == "quant-steps"
        assert any(note.startswith("quantized region") for note in op.notes)
    assert "quant_steps_s" in verification.timings


@pytest.mark.parametrize("fault", ["wrong_scale", "zero_point_off_by_one", "dequantize_as_cast", "axis_swapped"])
def test_planted_fault_is_localised_in_steps(per_tensor, per_channel, fault):
    module, args = per_channel if fault == "axis_swapped" else per_tensor
    model, planted = FAULTS[fault](exporter.export(module, args))
    verification = harness.verify(module, args, onnx_model=model, session_options={"graph_optimization_level": "all"})
    assert not verification.passed
    assert verification.worst_op.fx_node == planted
    failing = [op for op in verification.ops if op.passed is False]
    assert failing[0].fx_node == planted  # the first failing row in graph order is the planted node
    row = next(op for op in verification.ops if op.fx_node == planted)
    assert row.quant_steps is not None and row.quant_steps.max_steps >= 1
    assert row.quant_steps.off_by_one_or_more > row.quant_steps.at_ties


@pytest.mark.parametrize("fault", [None, "wrong_scale", "zero_point_off_by_one"])
def test_outputs_only_asks_the_rows_where_a_dequantized_output_is_outside_the_float_rule(per_tensor, fault):
    """per_op=False (the CLI's second input size): a healthy model is judged by its outputs alone;
    a dequantized output outside the float rule is judged by the quantized rows, computed for it
    and named in a note, so the planted node fails and is the worst op."""
    module, args = per_tensor
    model, planted = FAULTS[fault](exporter.export(module, args)) if fault else (exporter.export(module, args), None)
    verification = harness.verify(module, args, onnx_model=model, per_op=False)
    if fault is None:
        assert verification.passed and not verification.ops
        assert all(verdict.decided_by == "rule" for verdict in verification.output_verdicts)
        return
    assert not verification.passed and verification.worst_op.fx_node == planted
    assert [verdict.decided_by for verdict in verification.output_verdicts] == ["quant-steps"]
    assert any(note.startswith("per-op rows computed although only the outputs") for note in verification.notes)


class TrainingModeNet(torch.nn.Module):
    """conv-relu, then a batch norm no convolution absorbs, then dropout: both run in training
    mode when the module is captured with .train()."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.norm = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.5)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(torch.relu(self.conv(x)))
        return self.head(self.drop(y.mean((2, 3))))


def test_module_captured_in_training_mode_is_refused_until_moved_to_eval():
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    torch.manual_seed(0)
    args = (torch.randn(2, 3, 10, 10, generator=torch.Generator().manual_seed(1)),)
    captured = torch.export.export(TrainingModeNet().train(), args, strict=False).module()
    prepared = prepare_pt2e(captured, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    prepared(*args)
    converted = convert_pt2e(prepared)
    with pytest.raises(exporter.ExportError) as refused:
        exporter.export(converted, args)
    message = str(refused.value)
    training = [n.name for n in converted.graph.nodes if str(n.target) in
                ("aten.batch_norm.default", "aten.dropout.default")]
    assert training and all(name in message for name in training)
    assert "training mode" in message and "move_exported_model_to_eval(model)" in message

    move_exported_model_to_eval(converted)  # rewrites the graph: batch norm on running stats, no dropout
    model = exporter.export(converted, args)
    expected = converted(*args).detach().numpy()
    np.testing.assert_array_equal(converted(*args).detach().numpy(), expected)  # deterministic now
    output_scale = next(n for n in converted.graph.nodes if n.op == "output").args[0][0].args[1]
    assert np.abs(_run(model, args, "disabled") - expected).max() <= output_scale * 1.0001


@pytest.fixture(scope="module")
def int4_weights():
    return _quantized("xnnpack_int4_weights")


def _initializer_types(model: onnx.ModelProto) -> dict[str, int]:
    return {t.name: t.data_type for t in model.graph.initializer}


@pytest.mark.parametrize("opset, weight_type", [(18, onnx.TensorProto.INT8), (21, onnx.TensorProto.INT4),
                                                (26, onnx.TensorProto.INT4)])
def test_four_bit_weights_are_int4_from_opset_21(int4_weights, opset, weight_type):
    module, args = int4_weights
    model = exporter.export(module, args, opset_version=opset)
    types = _initializer_types(model)
    weight_readers = [n for n in _nodes(model, "DequantizeLinear") if n.input[0] in types]
    assert len(weight_readers) == 3
    for node in weight_readers:  # the weight and its zero point in the same type (DequantizeLinear's constraint)
        assert types[node.input[0]] == weight_type and types[node.input[2]] == weight_type
        values = onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == node.input[0]))
        assert values.astype(np.int8).min() >= -8 and values.astype(np.int8).max() <= 7
    expected = module(*args).detach().numpy()
    output_scale = next(n for n in module.graph.nodes if n.op == "output").args[0][0].args[1]
    for level in ("disabled", "all"):  # onnxruntime runs INT4 DequantizeLinear, fused or not
        assert np.abs(_run(model, args, level) - expected).max() <= output_scale * 1.0001


def test_four_bit_weights_verify_in_steps_at_opset_21(int4_weights):
    module, args = int4_weights
    verification = harness.verify(module, args, opset_version=21, session_options={"graph_optimization_level": "all"})
    assert verification.passed, [op.fx_node for op in verification.ops if op.passed is False]
    weight_rows = [op for op in verification.ops if op.aten == "quantized_decomposed.dequantize_per_channel.default"]
    assert len(weight_rows) == 3 and all(op.quant_steps is not None and op.quant_steps.max_steps == 0
                                         for op in weight_rows)


def test_openvino_int8_layers_are_judged_as_requantized(per_tensor):
    """OpenVINO runs each Q/DQ region as one int8/uint8 layer: the rows read that from its
    runtime graph and allow the requantization's step, and the planted scale is still found."""
    from harness.runtime.backends import get_backend

    reason = get_backend("openvino").unavailable_reason("CPU")
    if reason:
        pytest.skip(reason)
    module, args = per_tensor
    verification = harness.verify(module, args, backends=("openvino:precision=f32",))
    assert verification.passed and verification.backend == "openvino:precision=f32"
    notes = [note for op in verification.ops for note in op.notes if note.startswith("quantized region")]
    assert sum("openvino integer layer" in note for note in notes) >= 3
    model, planted = FAULTS["wrong_scale"](exporter.export(module, args))
    faulty = harness.verify(module, args, onnx_model=model, backends=("openvino:precision=f32",))
    assert not faulty.passed and faulty.worst_op.fx_node == planted
