"""The hard activations, which torch.export keeps whole, as the ONNX ops of the same definition.

`torch.export.export` returns training IR, in which `hardswish` and `hardsigmoid` (and their
in-place forms, as in torchvision's MobileNetV3) survive as composite ops. Translated here, they
stay in the captured program, so a graph holding them needs no `run_decompositions` (which
traces the whole graph again, as long as the capture itself); `hardswish_` reaches `hardswish`
through exporter.functionalize's functional twins. ONNX defines HardSwish as torch does,
x * relu6(x + 3) / 6, and HardSigmoid with alpha 1/6 and beta 1/2 as relu6(x + 3) / 6 (both
since opset 14, below the exporter's lowest). The other composite ops of training IR are
rewritten by exporter.functionalize into the ops torch's decomposition makes of them.
"""

from __future__ import annotations

from exporter.graph import Graph, Value
from exporter.registry import symbolic

HARD_SLOPE = 1.0 / 6.0  # torch.nn.Hardsigmoid/Hardswish: relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1)
HARD_OFFSET = 0.5


@symbolic("aten::hardswish")
def hardswish(g: Graph, self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor"""
    return g.op("HardSwish", self)


@symbolic("aten::hardsigmoid")
def hardsigmoid(g: Graph, self: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor"""
    return g.op("HardSigmoid", self, alpha_f=HARD_SLOPE, beta_f=HARD_OFFSET)
