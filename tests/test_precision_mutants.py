"""Detection power in low precision: the verdict rule must still catch small planted faults.

A model with a Conv, a LayerNorm, a MultiheadAttention and a Linear runs in float16 (and
bfloat16). Each mutant scales ONE element of one node's weight (or the attention's scale
constant) by a few percent in the ONNX model; the verification must fail on that node and name it
the worst op, while the unaltered model passes with the shipped defaults. A planted overflow (a
weight element the backend multiplies past float16's range) is named as the first non-finite op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import exporter
import harness
from harness.analysis.fx_mapping import fx_node_name

RELATIVE = 0.05  # "a few percent"


class Block(torch.nn.Module):
    """conv -> layer norm -> multi-head self-attention -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.LayerNorm(16)
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.conv(x).flatten(2))
        y, _ = self.attn(y, y, y, need_weights=False)
        return self.fc(y)


def _case(dtype: torch.dtype) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = Block().eval()
    with torch.no_grad():  # a LayerNorm as trained: weights off 1, so one element stands out
        model.norm.weight.copy_(1 + 0.2 * torch.randn(16))
        model.norm.bias.copy_(0.1 * torch.randn(16))
    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(1))
    return model.to(dtype), (x.to(dtype),)


@pytest.fixture(scope="module")
def exported() -> dict[torch.dtype, tuple[torch.nn.Module, tuple, onnx.ModelProto]]:
    cases = {}
    for dtype in (torch.float16, torch.bfloat16):
        model, args = _case(dtype)
        cases[dtype] = (model, args, exporter.export(model, args))
    return cases


# --- mutants: each scales one element of one node's constant input and returns the node ----------

Mutant = Callable[[onnx.ModelProto], onnx.NodeProto]


def _scope(node: onnx.NodeProto) -> str:
    return next((p.value for p in node.metadata_props if p.key == "roundtrip.scope"), "")


def _scale_element(op_type: str, scope_part: str, input_index: int, relative: float = RELATIVE) -> Mutant:
    """Scale the largest-magnitude element of input `input_index` of the first `op_type` node
    under `scope_part` (an initializer or a Constant only that node reads) by 1 + relative."""
    def alter(model: onnx.ModelProto) -> onnx.NodeProto:
        node = next(n for n in model.graph.node if n.op_type == op_type and scope_part in _scope(n))
        reader, name = node, node.input[input_index]
        producer = next((n for n in model.graph.node if name in n.output), None)
        while producer is not None and producer.op_type == "Cast":  # bfloat16 legalisation's Cast up to float32
            reader, name = producer, producer.input[0]
            producer = next((n for n in model.graph.node if name in n.output), None)
        assert [n for n in model.graph.node if name in n.input] == [reader], f"{name} must be read by this node only"
        tensor = next((t for t in model.graph.initializer if t.name == name), None)
        if tensor is None:  # a Constant node's value
            assert producer is not None and producer.op_type == "Constant", f"{name} is neither a weight nor a Constant"
            tensor = next(a.t for a in producer.attribute if a.name == "value")
        _edit_largest(tensor, lambda value: value * (1 + relative))
        return node
    return alter


def _edit_largest(tensor: onnx.TensorProto, change: Callable[[np.ndarray], np.ndarray]) -> None:
    """Replace the largest-magnitude element of `tensor` by `change` of it, in place."""
    values = numpy_helper.to_array(tensor).copy()
    index = np.unravel_index(np.argmax(np.abs(values)), values.shape)
    values[index] = change(values[index])
    tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))


MUTANTS = [
    ("conv weight", _scale_element("Conv", "Conv2d[conv]", 1)),
    ("layer norm scale", _scale_element("LayerNormalization", "LayerNorm[norm]", 1)),
    ("attention in-projection (MatMul) weight", _scale_element("MatMul", "MultiheadAttention[attn]", 1)),
    ("attention out-projection (Gemm) weight", _scale_element("Gemm", "MultiheadAttention[attn]", 1)),
    ("attention softmax scale", _scale_element("Mul", "MultiheadAttention[attn]", 1)),
    ("linear (MatMul) weight", _scale_element("MatMul", "Linear[fc]", 1)),
]
DTYPES = [pytest.param(torch.float16, id="float16"), pytest.param(torch.bfloat16, id="bfloat16")]


def _altered(original: onnx.ModelProto, mutant: Mutant) -> tuple[onnx.ModelProto, onnx.NodeProto]:
    altered = onnx.ModelProto()
    altered.CopyFrom(original)
    return altered, mutant(altered)


def _table(verification) -> str:
    return "\n" + "\n".join(
        f"{op.fx_node:32} {'+'.join(op.onnx_ops):24} passed={op.passed} score={op.error_ratio:.3g} "
        f"{op.verdict.reason if op.verdict else ''}" for op in verification.ops)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_unaltered_model_passes_with_the_defaults(exported, dtype):
    model, args, original = exported[dtype]
    verification = harness.verify(model, args, onnx_model=original)
    assert verification.passed, _table(verification)
    judged = [op for op in verification.ops if op.verdict is not None]
    assert judged and all(op.passed for op in judged), _table(verification)
    assert any(op.verdict.rule == "truth" and op.dtype == str(dtype).removeprefix("torch.") for op in judged)


def _mutant_cases() -> list[Any]:
    """Every (dtype, mutant) pair: in bfloat16, 5% on one weight element moves its op's output by
    1.9 (the Linear) to 3.4 (the Conv) rounding units, above one rounding's allowance of 1.5."""
    return [pytest.param(dtype.values[0], mutant, id=f"{name}-{dtype.id}") for dtype in DTYPES for name, mutant in MUTANTS]


@pytest.mark.parametrize(("dtype", "mutant"), _mutant_cases())
def test_a_few_percent_on_one_weight_element_is_caught_at_its_node(exported, dtype, mutant):
    model, args, original = exported[dtype]
    altered, node = _altered(original, mutant)
    culprit = fx_node_name(node)

    verification = harness.verify(model, args, onnx_model=altered)

    worst = verification.worst_op
    assert worst is not None and worst.fx_node == culprit, _table(verification)
    assert worst.passed is False and worst.verdict.rule == "truth" and worst.verdict.decided_by == "rule"
    assert worst.verdict.e_backend > worst.verdict.allowed >= worst.verdict.e_torch
    assert worst.attribution in ("backend", "both"), _table(verification)
    others = [op for op in verification.ops if op.fx_node != culprit and op.verdict is not None]
    assert all(op.passed for op in others), _table(verification)


def _plant_overflow(model: onnx.ModelProto) -> onnx.NodeProto:
    """Set the conv's largest weight element to 6e4: its outputs leave float16's range (65504)
    in the backend, while torch's (unaltered) values stay finite."""
    node = next(n for n in model.graph.node if n.op_type == "Conv")
    _edit_largest(next(t for t in model.graph.initializer if t.name == node.input[1]), lambda value: 6e4)
    return node


def test_a_planted_overflow_is_named_as_the_first_non_finite_op(exported):
    model, args, original = exported[torch.float16]
    altered, node = _altered(original, _plant_overflow)

    verification = harness.verify(model, args, onnx_model=altered)

    assert not verification.passed
    first = verification.first_nonfinite
    assert first is not None and first["fx_node"] == fx_node_name(node) and first["against"] == "truth"
    assert first["scope"] == "Block/Conv2d[conv]" and first["source"]
    assert verification.worst_op.fx_node == fx_node_name(node) and verification.worst_op.failure == "non-finite"
    assert verification.to_dict()["first_nonfinite"]["fx_node"] == fx_node_name(node)


class Amplifier(torch.nn.Module):
    """x * 3e4 stays inside float16; the linear after it sums past 65504 (overflow in torch too)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x * 3e4))


def test_values_whose_truth_overflows_the_dtype_are_flagged_with_scope_and_source():
    torch.manual_seed(0)
    model = Amplifier().eval()
    with torch.no_grad():
        model.fc.weight.fill_(0.5)
    model = model.half()
    x = torch.ones(2, 8, dtype=torch.float16)

    verification = harness.verify(model, (x,))

    flagged = {flag["fx_node"]: flag for flag in verification.overflows}
    assert "linear" in flagged and "mul" not in flagged, verification.overflows
    flag = flagged["linear"]
    assert flag["dtype"] == "float16" and flag["truth_max"] > 65504 and flag["limit"] == 65504
    assert flag["scope"] == "Amplifier/Linear[fc]" and "test_precision_mutants.py" in flag["source"]
    linear = next(op for op in verification.ops if op.fx_node == "linear")
    assert any(note.startswith("overflows float16") for note in linear.notes)
