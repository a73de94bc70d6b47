"""The zoo's `quantized` tier, nightly: every case exported by roundtrip and by torch.onnx (the
same converted module) and verified per op at onnxruntime's `disabled` and `all` graph
optimisation levels with no false alarm, and planted faults (a wrong scale, a zero point off by
one, a per-channel axis swapped, a dequantize replaced by a Cast) localised to their node and
reported in quantization steps, each kind on at least three models. CI runs the same checks on
one small quantized conv net (test_quantized.py).

    PYTHONPATH=$PWD python -m pytest -m nightly tests/test_quantized_tier.py -q
"""

from __future__ import annotations

import functools

import pytest

import exporter
import harness
import model_zoo_cases
from harness.analysis.quant_rows import QUANT_STEPS_RULE
from model_zoo_cases import quantized
from tests.quantized_faults import FAULTS

pytestmark = [pytest.mark.nightly,
              pytest.mark.skipif(bool(quantized.available()), reason=quantized.available() or "torchao is here")]

LEVELS = ("disabled", "all")
EXPORTERS = ("roundtrip", "torch.onnx")
CASES = [case.name for case in model_zoo_cases.select(tier="quantized")]

# Which faults each model has a node for: a wrong scale and a zero point need an activation
# QuantizeLinear with constant parameters (a dynamically quantized model computes them), the
# axis swap a per-channel weight with as many output as input channels.
FAULTED = {
    "quantized_resnet18": ("wrong_scale", "zero_point_off_by_one", "dequantize_as_cast"),
    "quantized_resnet50": ("wrong_scale", "zero_point_off_by_one", "axis_swapped", "dequantize_as_cast"),
    "quantized_mobilenet_v2": ("wrong_scale", "zero_point_off_by_one", "dequantize_as_cast"),
    "quantized_vit_small": ("wrong_scale", "zero_point_off_by_one", "axis_swapped", "dequantize_as_cast"),
    "quantized_transformer_encoder": ("axis_swapped", "dequantize_as_cast"),
}
MODELS_PER_FAULT = 3


def test_every_fault_kind_is_planted_on_three_models():
    for fault in FAULTS:
        assert sum(fault in faults for faults in FAULTED.values()) >= MODELS_PER_FAULT, fault
    assert set(FAULTED) <= set(CASES)


@functools.lru_cache(maxsize=1)
def _subject(name: str):
    case = model_zoo_cases.get(name)
    module, args = case.module(0), case.inputs(0)
    return module, args, exporter.export(module, args)


@pytest.mark.parametrize("exporter_name", EXPORTERS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", CASES)
def test_healthy_case_passes_in_steps(name, level, exporter_name):
    module, args, model = _subject(name)
    options = {"onnx_model": model} if exporter_name == "roundtrip" else {"exporter": exporter_name}
    verification = harness.verify(module, args, session_options={"graph_optimization_level": level}, **options)
    assert verification.passed, ([(op.fx_node, op.verdict.reason if op.verdict else "") for op in verification.ops
                                  if op.passed is False][:5], verification.notes[-3:],
                                 [v.reason for v in verification.output_verdicts if not v.passed])
    rows = [op for op in verification.ops if op.quant_steps is not None and op.aten.startswith(
        "quantized_decomposed.quantize")]
    assert rows and all(op.verdict.rule == QUANT_STEPS_RULE for op in rows)
    for op in rows:
        requantized = any("requantized by the runtime" in note for note in op.notes)
        assert op.quant_steps.max_steps <= (2 if requantized else 1), op.notes


@pytest.mark.parametrize("name, fault", [(name, fault) for name, faults in FAULTED.items() for fault in faults])
def test_planted_fault_is_localised(name, fault):
    module, args, model = _subject(name)
    faulty, planted = FAULTS[fault](model)
    verification = harness.verify(module, args, onnx_model=faulty, session_options={"graph_optimization_level": "all"})
    assert not verification.passed
    assert verification.worst_op.fx_node == planted
    assert next(op for op in verification.ops if op.passed is False).fx_node == planted
    row = next(op for op in verification.ops if op.fx_node == planted)
    assert row.quant_steps is not None and row.quant_steps.max_steps >= 1
    assert row.verdict.rule == QUANT_STEPS_RULE and not row.verdict.passed
