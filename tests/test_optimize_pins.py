"""What the optimisation stage makes of a few small models, pinned: the op histogram of each
optimised graph, so that work on the stage's speed cannot change the graph unnoticed; and the
FX values a removed no-op merges into another value keep a name to be found by."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import exporter
from exporter.optimize import PASSES, optimize
from exporter.contract.keys import ALIASED_VALUES_KEY
from test_optimize import Activations, ConvBatchNorm, LinearGelu, NoOps, Reshapes, _run


class ResidualBlock(nn.Module):
    """resnet's basic block with a flatten and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)) + x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class SqueezeExcite(nn.Module):
    """mobilenet_v3's inverted residual: hardswish, squeeze-excitation with hardsigmoid."""

    def __init__(self) -> None:
        super().__init__()
        self.expand, self.bn = nn.Conv2d(4, 8, 1, bias=False), nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.squeeze, self.excite = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)

    def forward(self, x):
        y = self.depthwise(F.hardswish(self.bn(self.expand(x))))
        scale = F.hardsigmoid(self.excite(F.relu(self.squeeze(F.adaptive_avg_pool2d(y, 1)))))
        return y * scale


def _encoder() -> nn.Module:
    return nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=True).eval()


# name, module, input shape, the optimised graph's op histogram, its initializer count
MODELS = [
    ("conv_batchnorm", ConvBatchNorm, (2, 3, 6, 6), {"Conv": 1}, 2),
    ("activations", Activations, (2, 8), {"Add": 1, "HardSigmoid": 1, "HardSwish": 1, "Mul": 1}, 1),
    ("reshapes", Reshapes, (6,), {"Relu": 1, "Reshape": 1, "Unsqueeze": 1}, 2),
    ("residual_block", ResidualBlock, (2, 4, 6, 6),
     {"Add": 1, "Conv": 2, "Gemm": 1, "GlobalAveragePool": 1, "Relu": 2, "Reshape": 1}, 6),
    ("squeeze_excite", SqueezeExcite, (2, 4, 6, 6),
     {"Conv": 4, "GlobalAveragePool": 1, "HardSigmoid": 1, "HardSwish": 1, "Mul": 1, "Relu": 1}, 8),
    ("linear_gelu", LinearGelu, (3, 5, 8), {"Add": 2, "Div": 1, "Erf": 1, "MatMul": 1, "Mul": 2}, 5),
    ("transformer_encoder", _encoder, (2, 5, 16),
     {"Add": 5, "Gather": 3, "Gemm": 1, "LayerNormalization": 2, "MatMul": 5, "Mul": 1, "Relu": 1, "Reshape": 9,
      "Softmax": 1, "Squeeze": 1, "Transpose": 8, "Unsqueeze": 1}, 20),
]


@pytest.mark.parametrize("name, make, shape, ops, initializers", MODELS, ids=[m[0] for m in MODELS])
def test_optimised_graph_is_pinned(name, make, shape, ops, initializers):
    torch.manual_seed(0)
    result = exporter.export_program(make(), (torch.randn(*shape),))
    assert dict(Counter(n.op_type for n in result.skeleton.graph.node)) == ops
    assert len(result.skeleton.graph.initializer) == initializers


def test_removed_no_ops_name_the_value_that_carries_theirs():
    graph = NoOps().graph()  # x -> Cast -> Expand -> Reshape -> Identity -> Relu, each a no-op
    optimized = optimize(graph, {}, PASSES)
    assert [n.op_type for n in optimized.skeleton.graph.node] == ["Relu"]
    assert optimized.aliased_values == {"to": "x", "expand": "x", "view": "x", "clone": "x"}
    metadata = {p.key: p.value for p in optimized.skeleton.metadata_props}
    assert json.loads(metadata[ALIASED_VALUES_KEY]) == optimized.aliased_values
    assert optimize(optimized.skeleton, {}, PASSES).aliased_values == optimized.aliased_values  # kept


def test_a_graph_output_that_takes_over_its_producers_value_keeps_both_rows():
    from harness.analysis.fx_mapping import map_model
    from test_fft_complex import Spectrum

    result = exporter.export_program(Spectrum(), (torch.randn(3, 16),))
    assert "Identity" not in [n.op_type for n in result.skeleton.graph.node]
    groups = map_model(result.model, result.program)
    assert groups["_fft_r2c"].outputs == {0: "view_as_real"} and groups["_fft_r2c"].mapped_by == "metadata"
    assert groups["view_as_real"].outputs == {0: "view_as_real"}


def test_erf_gelu_becomes_onnx_gelu_from_opset_20():
    from onnx import TensorProto, helper

    def const(name, value):
        return helper.make_tensor(name, TensorProto.FLOAT, [], [value])

    nodes = [helper.make_node("Mul", ["x", "rsqrt2"], ["scaled"]), helper.make_node("Erf", ["scaled"], ["erf"]),
             helper.make_node("Mul", ["x", "half"], ["halved"]), helper.make_node("Add", ["erf", "one"], ["erf1"]),
             helper.make_node("Mul", ["halved", "erf1"], ["gelu"])]
    for node in nodes:
        entry = node.metadata_props.add()
        entry.key, entry.value = "roundtrip.fx_node", "gelu"
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("gelu", TensorProto.FLOAT, [2, 3])],
                              [const("rsqrt2", 0.5 ** 0.5), const("half", 0.5), const("one", 1.0)])
    for opset, ops in ((20, ["Gelu"]), (18, ["Div", "Erf", "Add", "Mul", "Mul"])):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        optimized = optimize(model, {}, PASSES)
        assert [n.op_type for n in optimized.skeleton.graph.node] == ops
        assert all({p.key: p.value for p in n.metadata_props}["roundtrip.fx_node"] == "gelu"
                   for n in optimized.skeleton.graph.node)
        x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
        expected = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(_run(optimized.skeleton, {}, torch.from_numpy(x))[0], expected, rtol=1e-6, atol=1e-6)


class Twice(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2 + torch.relu(x)  # the second relu is computed once with the first


def test_a_shared_sub_expression_computed_once_keeps_both_rows():
    import harness

    x = torch.randn(2, 3)
    result = exporter.export_program(Twice(), (x,))
    assert [n.op_type for n in result.skeleton.graph.node].count("Relu") == 1
    metadata = {p.key: p.value for p in result.skeleton.metadata_props}
    assert json.loads(metadata[ALIASED_VALUES_KEY]) == {"relu_1": "relu"}
    verified = harness.verify(Twice(), (x,), strict=True)
    rows = {op.fx_node: op for op in verified.ops}
    assert rows["relu"].passed and rows["relu_1"].passed and rows["relu_1"].truth is not None
