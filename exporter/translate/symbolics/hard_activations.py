"""The hard activations, which torch.export keeps whole, as the ONNX ops of the same definition.

`torch.export.export` returns training IR, in which `hardswish` and `hardsigmoid` (and their
in-place forms, as in torchvision's MobileNetV3) survive as composite ops. Translated here, they
stay in the captured program, so a graph holding them needs no `run_decompositions` (which
traces the whole graph again, as long as the capture itself); `hardswish_` reaches `hardswish`
through exporter.capturing.functionalize's functional twins. ONNX defines HardSwish as torch does,
x * relu6(x + 3) / 6, and HardSigmoid with alpha 1/6 and beta 1/2 as relu6(x + 3) / 6 (both
since opset 14, below the exporter's lowest). The other composite ops of training IR are
rewritten by exporter.capturing.functionalize into the ops torch's decomposition makes of them.
"""

from __future__ import annotations

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic

HARD_SLOPE = 1.0 / 6.0  # torch.nn.Hardsigmoid/Hardswish: relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1)
HARD_OFFSET = 0.5


# The dtypes onnxruntime's CPU kernels of HardSwish and HardSigmoid take (its float64 kernels are
# missing); others get the elementwise definition, relu6(x + 3) / 6, in their own dtype.
FUSED_DTYPES = (torch.float32, torch.float16)


@symbolic("aten::hardswish")
def hardswish(g: Graph, self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor"""
    if g.ctx.output_dtype in FUSED_DTYPES:
        return g.op("HardSwish", self)
    return g.op("Mul", self, _relu6_over_6(g, self))


@symbolic("aten::hardsigmoid")
def hardsigmoid(g: Graph, self: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor"""
    if g.ctx.output_dtype in FUSED_DTYPES:
        return g.op("HardSigmoid", self, alpha_f=HARD_SLOPE, beta_f=HARD_OFFSET)
    return _relu6_over_6(g, self)


def _relu6_over_6(g: Graph, x: Value) -> Value:
    dtype = g.ctx.output_dtype
    shifted = g.op("Add", x, g.constant(3, dtype))
    return g.op("Div", g.op("Clip", shifted, g.constant(0, dtype), g.constant(6, dtype)), g.constant(6, dtype))
