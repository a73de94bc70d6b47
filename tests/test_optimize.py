"""The optimisation stage (exporter.optimize): each pass on a tiny graph, before and after.

Per pass: the op types it removes and adds, the model's outputs unchanged (onnxruntime, before
against after), a second run changing nothing, and the provenance of what it made: a fused node
names every FX node it replaced (`roundtrip.region`), its `roundtrip.fx_node` the last.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import exporter
from exporter.write.external_data import with_weights
from exporter.optimize import PASSES, optimize
from exporter.write.printer import format_model
from exporter.contract.keys import FX_NODE_KEY, REGION_KEY
from harness.runtime import prepare


class ConvBatchNorm(nn.Module):
    def __init__(self, transposed: bool = False, bias: bool = True) -> None:
        super().__init__()
        conv = nn.ConvTranspose2d if transposed else nn.Conv2d
        self.conv, self.bn = conv(3, 4, 3, bias=bias), nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class LinearBatchNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(6, 5), nn.BatchNorm1d(5)

    def forward(self, x):
        return self.bn(self.fc(x))


class Activations(nn.Module):
    """hardswish(x) + hardsigmoid(x) * 2 written out as torch's decomposition writes them (the
    exporter translates F.hardswish and F.hardsigmoid whole), for the fusions to find."""

    def forward(self, x):
        hardsigmoid = torch.clamp(torch.clamp(x + 3, min=0), max=6) / 6
        return x * torch.clamp(torch.clamp(x + 3, min=0), max=6) / 6 + hardsigmoid * 2


class LinearGelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)

    def forward(self, x):
        return F.gelu(self.fc(x))


class NoOps:
    """Not a module: a hand-made ONNX graph of ops that change nothing (the exporter itself
    emits none of these for `x.to(x.dtype)`, `x.reshape(x.shape)` or `x.expand(x.shape)`)."""

    def graph(self) -> onnx.ModelProto:
        from onnx import TensorProto, helper

        def node(op, inputs, out, fx, **attrs):
            made = helper.make_node(op, inputs, [out], name=out, **attrs)
            for key, value in (("roundtrip.fx_node", fx), ("roundtrip.aten", f"aten.{fx}.default")):
                entry = made.metadata_props.add()
                entry.key, entry.value = key, value
            return made

        shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
        nodes = [node("Cast", ["x"], "to", "to", to=TensorProto.FLOAT),
                 node("Expand", ["to", "shape"], "expand", "expand"),
                 node("Reshape", ["expand", "shape"], "view", "view"),
                 node("Identity", ["view"], "clone", "clone"),
                 node("Relu", ["clone"], "relu", "relu")]
        graph = helper.make_graph(nodes, "noops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor_value_info("relu", TensorProto.FLOAT, [2, 3])], [shape])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
        return onnx.shape_inference.infer_shapes(model)


class TransposedWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 6))

    def forward(self, x):
        return x @ self.w.t()


class Reshapes(nn.Module):
    def forward(self, x):
        return torch.relu(x.reshape(3, 2).reshape(6).unsqueeze(0).unsqueeze(0))


def _randomized(module: nn.Module) -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    for bn in (m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)):
        bn.running_mean.copy_(torch.randn(bn.num_features, generator=generator) * 0.1)
        bn.running_var.copy_(torch.rand(bn.num_features, generator=generator) + 0.5)
        bn.weight.data.copy_(torch.rand(bn.num_features, generator=generator) + 0.5)
        bn.bias.data.copy_(torch.randn(bn.num_features, generator=generator) * 0.1)
    return module.eval()


# pass, module, input shape, changes the pass must make (op type: +added / -removed)
CASES = [
    ("fold_batchnorm", lambda: ConvBatchNorm(), (2, 3, 6, 6), {"-BatchNormalization": 1}),
    ("fold_batchnorm", lambda: ConvBatchNorm(bias=False), (2, 3, 6, 6), {"-BatchNormalization": 1}),
    ("fold_batchnorm", lambda: ConvBatchNorm(transposed=True), (2, 3, 6, 6), {"-BatchNormalization": 1}),
    ("fold_batchnorm", LinearBatchNorm, (4, 6), {"-BatchNormalization": 1}),
    ("merge_clips", Activations, (2, 8), {"-Clip": 2, "-Constant": 4}),
    ("fuse_activations", Activations, (2, 8),
     {"+HardSwish": 1, "+HardSigmoid": 1, "-Clip": 2, "-Div": 2, "-Add": 2, "-Mul": 1, "-Constant": 4}),
    ("fuse_activations", LinearGelu, (3, 5, 8), {"-Mul": 1, "+Div": 1}),  # opset 18: the form onnxruntime fuses
    ("no_op_rewrites", lambda: NoOps(), (2, 3), {"-Cast": 1, "-Expand": 1, "-Reshape": 1, "+Identity": 3}),
    ("remove_identities", lambda: NoOps(), (2, 3), {"-Identity": 4}),
    ("fold_constants", TransposedWeight, (3, 6), {"-Transpose": 1}),
    ("simplify_shapes", Reshapes, (6,), {"-Reshape": 1, "-Unsqueeze": 1, "-Constant": 3}),
    ("constants_to_initializers", Activations, (2, 8), {"-Constant": 1}),
]


def _export(module: nn.Module | NoOps, shape: tuple[int, ...]):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    if isinstance(module, NoOps):
        return SimpleNamespace(skeleton=module.graph(), weights={}), x
    return exporter.export_program(_randomized(module), (x,), optimize=False, do_constant_folding=False), x


def _run(skeleton: onnx.ModelProto, weights, x: torch.Tensor) -> list[np.ndarray]:
    return prepare(with_weights(skeleton, weights), "CPU").run(x.numpy())


def _through(name: str, skeleton, weights):
    """The model after the passes before `name`, and the pass itself."""
    index = [p.name for p in PASSES].index(name)
    before = optimize(skeleton, weights, PASSES[:index])
    return before, PASSES[index]


@pytest.mark.parametrize("name, make, shape, expected", CASES,
                         ids=[f"{c[0]}-{c[1].__name__ if hasattr(c[1], '__name__') else i}" for i, c in enumerate(CASES)])
def test_pass_changes_what_it_names_and_keeps_the_numbers(name, make, shape, expected):
    result, x = _export(make(), shape)
    before, step = _through(name, result.skeleton, result.weights)
    after = optimize(before.skeleton, before.weights, (step,))
    ops = {k: v for k, v in after.changes.get(name, {}).items() if k[0] in "+-"}
    assert ops == expected, after.changes
    np.testing.assert_allclose(_run(after.skeleton, after.weights, x)[0], _run(before.skeleton, before.weights, x)[0],
                               rtol=1e-5, atol=1e-6)
    again = optimize(after.skeleton, after.weights, (step,))
    assert again.changes == {}  # idempotent
    onnx.checker.check_model(with_weights(after.skeleton, after.weights), full_check=True)


def _meta(node: onnx.NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props}


def test_folded_batchnorm_names_its_conv_and_batchnorm_in_graph_order():
    result = exporter.export_program(_randomized(ConvBatchNorm()), (torch.randn(2, 3, 6, 6),))
    (conv,) = result.skeleton.graph.node
    meta = _meta(conv)
    region = json.loads(meta[REGION_KEY])
    assert [m["aten"] for m in region] == ["aten.conv2d.default", "aten._native_batch_norm_legit_no_training.default"]
    assert meta[FX_NODE_KEY] == region[-1]["fx_node"] and conv.name == conv.output[0] == region[-1]["fx_node"]
    assert region[0]["scope"].endswith("Conv2d[conv]") and region[1]["scope"].endswith("BatchNorm2d[bn]")
    assert all(m["source"].startswith("tests/test_optimize.py:") for m in region)


def test_fused_hardswish_lists_every_fx_node_of_its_decomposition():
    result = exporter.export_program(Activations(), (torch.randn(2, 8),))
    ops = [n.op_type for n in result.skeleton.graph.node]
    assert sorted(ops) == ["Add", "HardSigmoid", "HardSwish", "Mul"]
    hardswish = next(n for n in result.skeleton.graph.node if n.op_type == "HardSwish")
    region = json.loads(_meta(hardswish)[REGION_KEY])
    assert [m["aten"].split(".")[1] for m in region] == ["add", "clamp", "clamp", "mul", "div"]
    assert _meta(hardswish)[FX_NODE_KEY] == region[-1]["fx_node"] == hardswish.output[0]


def test_optimize_false_keeps_one_node_per_op_and_both_compute_the_same():
    module, x = _randomized(ConvBatchNorm()), torch.randn(2, 3, 6, 6)
    plain = exporter.export_program(module, (x,), optimize=False)
    optimized = exporter.export_program(module, (x,))
    assert [n.op_type for n in plain.skeleton.graph.node] == ["Conv", "BatchNormalization"]
    assert not any(REGION_KEY in _meta(n) for n in plain.skeleton.graph.node)
    np.testing.assert_allclose(_run(optimized.skeleton, optimized.weights, x)[0],
                               _run(plain.skeleton, plain.weights, x)[0], rtol=1e-5, atol=1e-5)


def test_whole_stage_is_idempotent():
    result = exporter.export_program(Activations(), (torch.randn(2, 8),))
    assert optimize(result.skeleton, result.weights).changes == {}


def test_verbose_listing_prints_regions():
    result = exporter.export_program(_randomized(ConvBatchNorm()), (torch.randn(2, 3, 6, 6),))
    text = format_model(result.model)
    assert "region: conv2d (aten.conv2d.default" in text and "_native_batch_norm_legit_no_training" in text


def test_harness_exports_either_form_and_rejoins_a_given_model_in_its_own_form():
    from harness.exporters import export_for_verification

    module, x = _randomized(ConvBatchNorm()), torch.randn(2, 3, 6, 6)
    plain = export_for_verification("roundtrip", module, (x,), optimize=False)
    optimized = export_for_verification("roundtrip", module, (x,))
    assert [n.op_type for n in plain.model.graph.node] == ["Conv", "BatchNormalization"]
    assert [n.op_type for n in optimized.model.graph.node] == ["Conv"]
    # a skeleton handed back is re-exported in the form it records, so its stubs get its own weights
    given = export_for_verification("roundtrip", module, (x,), onnx_model=plain.model)
    np.testing.assert_array_equal(given.weights["conv.weight"], plain.weights["conv.weight"])
    given = export_for_verification("roundtrip", module, (x,), onnx_model=optimized.model, optimize=False)
    np.testing.assert_array_equal(given.weights["conv.weight"], optimized.weights["conv.weight"])


def test_cli_no_optimize_reaches_the_worker_export():
    import importlib

    cli_main = importlib.import_module("harness.cli.main")
    worker = importlib.import_module("harness.cli.worker")
    assert cli_main._parser().parse_args(["run", "--no-optimize"]).no_optimize is True
    assert cli_main._parser().parse_args(["run"]).no_optimize is False
    built = SimpleNamespace(module=_randomized(ConvBatchNorm()), args=(torch.randn(2, 3, 6, 6),), options={})
    for optimize, ops in ((False, ["Conv", "BatchNormalization"]), (True, ["Conv"])):
        exported = worker._export(built, {"exporter": "roundtrip", "optimize": optimize})
        assert [n.op_type for n in exported.model.graph.node] == ops
