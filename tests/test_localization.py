"""Localization: alter ONE node of an exported model; `worst_op` must name the FX node it came from.

Every alteration is a real bug class: a wrong attribute (Conv strides/pads, Gemm transB/alpha,
BatchNormalization epsilon), a wrong op type (Relu->Sigmoid, Add->Sub), a weight element off by
0.1% (an initializer only that node reads). Isolated errors feed each op torch's own inputs, so
the altered op stands out and the ops after it do not, though their accumulated errors carry
the damage. Also here: NaN/Inf outputs, shape mismatches, and per-op rows for torch.onnx models.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

import exporter
import harness
from harness.analysis.fx_mapping import FX_NODE_KEY, fx_node_name
from harness.report.document import compact_verification
from harness.report.failure import failure_message


def _randomize_batch_norms(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)
    return model.eval()


class ConvNet(torch.nn.Module):
    """conv -> bn -> relu -> conv -> relu -> flatten -> linear -> relu -> linear (square)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


class ResidualBlock(torch.nn.Module):
    """A ResNet basic block: conv-bn-relu-conv-bn, + identity, relu."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + x)


class HardSwishNet(torch.nn.Module):
    """conv -> bn -> hardswish -> conv -> hardsigmoid: a folded BatchNorm and fused activations
    (written out as torch's decomposition writes them: F.hardswish itself exports as HardSwish)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(self.conv1(x))
        x = x * torch.clamp(torch.clamp(x + 3, min=0), max=6) / 6  # hardswish
        return torch.clamp(torch.clamp(self.conv2(x) + 3, min=0), max=6) / 6  # hardsigmoid


def _case(name: str):
    torch.manual_seed(0)
    if name == "convnet":
        model, args = ConvNet(), (torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1)),)
    elif name == "hardswish":
        model, args = HardSwishNet(), (torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1)),)
    else:
        model, args = ResidualBlock(), (torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(1)),)
    return _randomize_batch_norms(model, 2), args


@pytest.fixture(scope="module")
def exported() -> dict[str, tuple[torch.nn.Module, tuple, onnx.ModelProto]]:
    """The one-node-per-op graphs (optimize=False): one ONNX node altered is one FX node's."""
    cases = {}
    for name in ("convnet", "block"):
        model, args = _case(name)
        cases[name] = (model, args, exporter.export(model, args, optimize=False))
    return cases


@pytest.fixture(scope="module")
def optimized() -> dict[str, tuple[torch.nn.Module, tuple, onnx.ModelProto]]:
    """The optimised graphs (the default): BatchNorm folded into its Conv, fused activations."""
    cases = {}
    for name in ("convnet", "hardswish"):
        model, args = _case(name)
        cases[name] = (model, args, exporter.export(model, args))
    return cases


# --- alterations: each edits one node in place and returns it ----------------------------------

Alteration = Callable[[onnx.ModelProto], onnx.NodeProto]


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def _set_attribute(op_type: str, index: int, name: str, value) -> Alteration:
    def alter(model: onnx.ModelProto) -> onnx.NodeProto:
        node = _nodes(model, op_type)[index]
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute(name, value)])
        return node
    return alter


def _retype(op_type: str, index: int, new_type: str) -> Alteration:
    def alter(model: onnx.ModelProto) -> onnx.NodeProto:
        node = _nodes(model, op_type)[index]
        node.op_type = new_type
        return node
    return alter


def _nudge_weight(op_type: str, index: int, relative: float = 1e-3) -> Alteration:
    """Scale the largest-magnitude element of the node's weight (input 1) by 1 + relative."""
    def alter(model: onnx.ModelProto) -> onnx.NodeProto:
        node = _nodes(model, op_type)[index]
        readers = [n for n in model.graph.node if node.input[1] in n.input]
        assert readers == [node], "the weight must be read by this node only"
        tensor = next(t for t in model.graph.initializer if t.name == node.input[1])
        array = numpy_helper.to_array(tensor).copy()
        flat = array.reshape(-1)
        flat[np.argmax(np.abs(flat))] *= 1 + relative
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        return node
    return alter


ALTERATIONS = [
    ("convnet", "conv strides", _set_attribute("Conv", 1, "strides", [2, 2])),
    ("convnet", "conv pads", _set_attribute("Conv", 0, "pads", [0, 0, 2, 2])),
    ("convnet", "gemm transB", _set_attribute("Gemm", 1, "transB", 0)),
    ("convnet", "gemm alpha", _set_attribute("Gemm", 0, "alpha", 1.01)),
    ("convnet", "batchnorm epsilon", _set_attribute("BatchNormalization", 0, "epsilon", 0.1)),
    ("convnet", "relu -> sigmoid", _retype("Relu", 1, "Sigmoid")),
    ("convnet", "conv weight +0.1%", _nudge_weight("Conv", 1)),
    ("convnet", "gemm weight +0.1%", _nudge_weight("Gemm", 0)),
    ("block", "add -> sub", _retype("Add", 0, "Sub")),
    ("block", "relu -> sigmoid", _retype("Relu", 0, "Sigmoid")),
    ("block", "conv weight +0.1%", _nudge_weight("Conv", 0)),
    ("block", "second conv pads", _set_attribute("Conv", 1, "pads", [1, 1, 0, 0])),
]


@pytest.mark.parametrize("case, alteration", [(a[0], a[2]) for a in ALTERATIONS], ids=[f"{a[0]}: {a[1]}" for a in ALTERATIONS])
def test_worst_op_names_the_altered_node(exported, case, alteration):
    model, args, original = exported[case]
    altered = onnx.ModelProto()
    altered.CopyFrom(original)
    node = alteration(altered)
    culprit = fx_node_name(node)
    assert culprit

    verification = harness.verify(model, args, onnx_model=altered)

    worst = verification.worst_op
    assert worst is not None and worst.fx_node == culprit, _table(verification)
    assert worst.passed is False and worst.isolated is not None
    assert node.name in worst.onnx_nodes and node.op_type in worst.onnx_ops
    assert worst.scope and worst.source  # where to look in the user's code
    others = [op for op in verification.ops if op.fx_node != culprit and op.isolated is not None]
    assert all(op.passed for op in others), _table(verification)


# alterations of optimised nodes: the FX nodes each stands for (its region, graph order)
OPTIMIZED_ALTERATIONS = [
    ("convnet", "folded batchnorm: weight +0.1%", _nudge_weight("Conv", 0), ["conv2d", "batch_norm"]),
    ("convnet", "folded batchnorm: pads", _set_attribute("Conv", 0, "pads", [0, 0, 2, 2]), ["conv2d", "batch_norm"]),
    ("hardswish", "folded batchnorm: weight +0.1%", _nudge_weight("Conv", 0), ["conv2d", "batch_norm"]),
    ("hardswish", "fused hardswish -> relu", _retype("HardSwish", 0, "Relu"), ["add", "clamp", "clamp", "mul", "div"]),
    ("hardswish", "fused hardsigmoid: alpha", _set_attribute("HardSigmoid", 0, "alpha", 0.2),
     ["add", "clamp", "clamp", "div"]),
]


@pytest.mark.parametrize("case, alteration, atens", [(a[0], a[2], a[3]) for a in OPTIMIZED_ALTERATIONS],
                         ids=[f"{a[0]}: {a[1]}" for a in OPTIMIZED_ALTERATIONS])
def test_worst_op_names_the_altered_region(optimized, case, alteration, atens):
    model, args, original = optimized[case]
    altered = onnx.ModelProto()
    altered.CopyFrom(original)
    node = alteration(altered)
    culprit = fx_node_name(node)

    verification = harness.verify(model, args, onnx_model=altered)

    worst = verification.worst_op
    assert worst is not None and worst.fx_node == culprit, _table(verification)
    assert worst.passed is False and worst.isolated is not None and node.name in worst.onnx_nodes
    assert [m.aten.split(".")[1].removeprefix("_native_") .removesuffix("_legit_no_training") for m in worst.region] \
        == atens, worst.region
    assert worst.region[-1].fx_node == culprit and all(m.scope and m.source for m in worst.region)
    others = [op for op in verification.ops if op.fx_node != culprit and op.isolated is not None]
    assert all(op.passed for op in others), _table(verification)
    message = failure_message(verification)
    assert f"{culprit} (region: {' + '.join(m.fx_node for m in worst.region)})" in message, message


def test_optimized_models_pass_every_op_and_absorbed_members_get_no_row(optimized):
    for model, args, original in optimized.values():
        verification = harness.verify(model, args, onnx_model=original)
        assert verification.passed
        assert all(op.passed for op in verification.ops if op.isolated is not None), _table(verification)
        regions = [op for op in verification.ops if op.region]
        assert regions and all(op.onnx_nodes for op in verification.ops if op.isolated is not None)
        absorbed = {m.fx_node for op in regions for m in op.region[:-1]}
        assert absorbed and not absorbed & {op.fx_node for op in verification.ops}
        reported = [op for op in compact_verification(verification.to_dict())["ops"] if op.get("region")]
        assert [(op["fx_node"], [m["fx_node"] for m in op["region"]]) for op in reported] == \
            [(op.fx_node, [m.fx_node for m in op.region]) for op in regions]  # the report keeps the regions


def test_unaltered_models_pass_every_op(exported):
    for model, args, original in exported.values():
        verification = harness.verify(model, args, onnx_model=original)
        assert verification.passed
        assert all(op.passed for op in verification.ops if op.isolated is not None), _table(verification)
        assert all(op.attribution == "both-noise" for op in verification.ops if op.truth is not None), \
            _table(verification)


def _table(verification) -> str:
    rows = [
        f"{op.fx_node:40} {'+'.join(op.onnx_ops):20} isolated={_ratio(op.isolated)} "
        f"accumulated={_ratio(op.accumulated)} passed={op.passed} {op.not_isolable}"
        for op in verification.ops
    ]
    return "\n" + "\n".join(rows)


def _ratio(comparison) -> str:
    return "-" if comparison is None else f"{comparison.tolerance_ratio:.3g}x"


# --- the reproducer of the worst op ----------------------------------------------------------


def test_reproducer_of_the_worst_op_reruns_and_fails(exported, tmp_path):
    model, args, original = exported["convnet"]
    altered = onnx.ModelProto()
    altered.CopyFrom(original)
    culprit = fx_node_name(_retype("Relu", 1, "Sigmoid")(altered))
    verification = harness.verify(model, args, onnx_model=altered)

    folder = harness.write_reproducer(verification, tmp_path)

    assert os.path.basename(folder) == culprit
    assert sorted(os.listdir(folder)) == ["README.md", "expected.npz", "inputs.npz", "model.onnx", "run.py"]
    small = onnx.load(os.path.join(folder, "model.onnx"))
    onnx.checker.check_model(small, full_check=True)
    assert [n.op_type for n in small.graph.node] == ["Sigmoid"]
    inputs = dict(np.load(os.path.join(folder, "inputs.npz")))
    expected = dict(np.load(os.path.join(folder, "expected.npz")))
    assert set(inputs) == {i.name for i in small.graph.input} and set(expected) == {culprit}
    readme = open(os.path.join(folder, "README.md")).read()
    assert "python run.py" in readme and "seed" in readme and culprit in readme
    import subprocess
    import sys

    run = subprocess.run([sys.executable, os.path.join(folder, "run.py")], capture_output=True, text=True)
    assert run.returncode == 1 and "MISMATCH" in run.stdout, run.stdout + run.stderr
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # no staging left behind

    # written again over the old one: replaced whole
    assert harness.write_reproducer(verification.worst_op, tmp_path) == folder


def test_reproducer_of_a_passing_op_reruns_clean(exported, tmp_path):
    model, args, original = exported["block"]
    verification = harness.verify(model, args, onnx_model=original)
    conv = next(op for op in verification.ops if op.onnx_ops == ["Conv"])
    folder = harness.write_reproducer(conv, tmp_path)
    import subprocess
    import sys

    run = subprocess.run([sys.executable, os.path.join(folder, "run.py")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    small = onnx.load(os.path.join(folder, "model.onnx"))
    assert {t.name for t in small.graph.initializer} == {"conv1.weight"}


# --- NaN / Inf, shape mismatch, torch.onnx ------------------------------------------------------


class NonFinite(torch.nn.Module):
    """sqrt of a negative number and divisions by zero: NaN and inf on both sides when the export
    is right. Outputs [0/0, nan/1, 2/0, 1/2] = [nan, nan, inf, 0.5]."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x) / y


NONFINITE_ARGS = (torch.tensor([0.0, -1.0, 4.0, 1.0]), torch.tensor([0.0, 1.0, 0.0, 2.0]))


def test_nan_and_inf_on_both_sides_pass():
    verification = harness.verify(NonFinite(), NONFINITE_ARGS)
    (output,) = verification.outputs
    assert output.nonfinite_expected == 3 and output.nonfinite_mismatch == 0
    assert verification.passed, output.to_dict()
    sqrt = next(op for op in verification.ops if op.aten.startswith("aten.sqrt"))
    assert sqrt.isolated is not None and sqrt.isolated.passed and sqrt.isolated.nonfinite_expected == 1
    assert all(op.passed for op in verification.ops if op.isolated is not None)


def test_nan_on_one_side_fails_and_is_localized():
    model = NonFinite()
    altered = exporter.export(model, NONFINITE_ARGS)
    sqrt = next(n for n in altered.graph.node if n.op_type == "Sqrt")
    sqrt.op_type = "Abs"  # 1 where torch has NaN
    verification = harness.verify(model, NONFINITE_ARGS, onnx_model=altered)
    (output,) = verification.outputs
    assert not verification.passed and output.nonfinite_mismatch == 1
    assert verification.worst_op.fx_node == fx_node_name(sqrt)
    assert math.isinf(verification.worst_op.isolated.tolerance_ratio)
    assert verification.worst_op.isolated.nonfinite_mismatch == 1


class Flatten(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.reshape(x.shape[0], -1)) * 2.0


def test_shape_mismatch_is_reported_not_raised():
    model, args = Flatten(), (torch.randn(2, 3, 4),)
    altered = exporter.export(model, args)
    reshape = next(n for n in altered.graph.node if n.op_type == "Reshape")
    shape_input = reshape.input[1]
    producer = next((n for n in altered.graph.node if shape_input in n.output), None)
    new_shape = numpy_helper.from_array(np.array([4, -1], np.int64), shape_input)
    if producer is not None and producer.op_type == "Constant":
        producer.ClearField("attribute")
        producer.attribute.append(helper.make_attribute("value", new_shape))
    else:
        initializer = next(t for t in altered.graph.initializer if t.name == shape_input)
        initializer.CopyFrom(new_shape)

    verification = harness.verify(model, args, onnx_model=altered)

    (output,) = verification.outputs
    assert not verification.passed and not output.shape_match and "shape" in output.note
    worst = verification.worst_op
    assert worst.fx_node == fx_node_name(reshape)
    assert not worst.isolated.shape_match and worst.isolated.shape_actual == [4, 6]
    json_ready = verification.to_dict()
    assert json_ready["worst_op"] == worst.fx_node


def test_torch_onnx_model_is_verified_per_op():
    model, args = _case("convnet")
    verification = harness.verify(model, args, exporter="torch.onnx")
    assert verification.passed and verification.op_reference == "torch"
    rows = {op.fx_node: op for op in verification.ops}
    conv = rows["conv2d"]
    assert conv.onnx_ops[-1] == "Conv" and conv.isolated is not None and conv.isolated.passed
    assert conv.truth is not None and conv.attribution == "both-noise"
    assert "Conv2d[conv1]" in conv.scope and conv.source
    # a multi-output op (batch norm) is mapped through its getitem-named value
    assert rows["_native_batch_norm_legit_no_training"].isolated is not None
    # every op of the convnet (conv, bn, relu x3, view, linear x2) is isolated and passes
    assert len(verification.ops) == 9, _table(verification)
    assert all(op.isolated is not None and op.passed for op in verification.ops), _table(verification)


def test_torch_onnx_alteration_is_localized():
    model, args = _case("convnet")
    from harness.exporters import torch_onnx_export

    altered = torch_onnx_export(model, args).model_proto
    node = _retype("Relu", 0, "Sigmoid")(altered)
    verification = harness.verify(model, args, exporter="torch.onnx", onnx_model=altered)
    assert verification.worst_op.fx_node == fx_node_name(node) == "relu"


def test_fx_node_name_reads_each_exporters_metadata(exported):
    _, _, model = exported["convnet"]
    for node in model.graph.node:
        written = {p.key: p.value for p in node.metadata_props}
        assert fx_node_name(node) == written[FX_NODE_KEY], node.name
    theirs = helper.make_node("Relu", ["x"], ["relu_1"])
    entry = theirs.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.fx_node", "%relu_1 : [num_users=1] = call_function[target=torch.ops.aten.relu.default]"
    assert fx_node_name(theirs) == "relu_1"
    assert fx_node_name(helper.make_node("Relu", ["x"], ["y"])) is None
