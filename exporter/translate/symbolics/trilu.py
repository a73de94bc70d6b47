"""`tril` / `triu` as one ONNX Trilu (opset 14 on, below every opset the exporter writes).

Both keep the entries on one side of a diagonal of the last two dims and zero the rest, over
any leading (batch) dims: `tril` keeps column j of row i where j - i <= diagonal, `triu` where
j - i >= diagonal, which is Trilu's `upper=0` / `upper=1` with `k` = diagonal. A diagonal past
either corner is allowed (everything or nothing is kept), as in torch. The diagonal may be
symbolic (`x.tril(total - new)` with dynamic sizes): `k` is then computed in the graph.

The in-place forms (`tril_`) never reach here: capture rewrites them into these functional ones
(exporter.capturing.functionalize) or torch's decomposition functionalizes them.
"""

from __future__ import annotations

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import narrowed, scalar_of, widened

# onnxruntime 1.31's CPU Trilu kernel takes float, double, float16, int32, int64 and bool
# (found by loading a lone Trilu node per type); these torch dtypes widen losslessly to one
# of them. bfloat16 is left to exporter.optimize.legalize_dtypes, which casts nodes without a bfloat16
# kernel through float32. torch has no tril/triu for uint16/32/64, and complex tensors are real
# pairs in the graph that these symbolics do not read (exporter.translate.translator refuses them).
_WIDENED = {torch.uint8: torch.int32, torch.int8: torch.int32, torch.int16: torch.int32}


def _trilu(g: Graph, self: Value, diagonal, upper: bool) -> Value:
    """Trilu of `self` (rank >= 2, as torch checks) about `diagonal` (an int, or a SymInt's Value)."""
    out = g.op("Trilu", widened(g, self, _WIDENED), scalar_of(g, diagonal, torch.int64), upper_i=int(upper))
    return narrowed(g, out, self.dtype, _WIDENED)


@symbolic("aten::tril")
def tril(g: Graph, self: Value, diagonal=0) -> Value:
    """tril(Tensor self, SymInt diagonal=0) -> Tensor"""
    return _trilu(g, self, diagonal, upper=False)


@symbolic("aten::triu")
def triu(g: Graph, self: Value, diagonal=0) -> Value:
    """triu(Tensor self, SymInt diagonal=0) -> Tensor"""
    return _trilu(g, self, diagonal, upper=True)
