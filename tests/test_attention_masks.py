"""scaled_dot_product_attention's masks against torch, and what they cost: the fully-masked-row
guard, and the causal mask (`is_causal=True`) as one Trilu.

torch's safe softmax gives 0 for a query whose every key is masked (all False, or all -inf),
and NaN for a row where a float mask holds a NaN (even among -infs). The exported guard reads
which rows are hidden off the mask alone; each mask below is run through torch and onnxruntime
at opsets on both sides of 20 (where ReduceMax / ReduceMin start taking bool tensors), in
float32, float16 and bfloat16 (computed in bfloat16 inside the graph, fed and read in float32).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
import torch.nn.functional as F

import exporter

INF, NAN = math.inf, math.nan
B, H, L, S, E = 2, 2, 4, 5, 8
OPSETS = (17, 18, 20, 26)
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}  # atol = rtol


def _bool_rows() -> torch.Tensor:
    """[L, S]: row 0 sees every key, row 1 none, row 2 one, row 3 none."""
    return torch.tensor([[True] * S, [False] * S, [False, False, True, False, False], [False] * S])


def _padding() -> torch.Tensor:
    """[B, 1, 1, S]: batch 0 sees the first three keys, batch 1 none."""
    return torch.tensor([[True, True, True, False, False], [False] * S]).view(B, 1, 1, S)


def _float_rows() -> torch.Tensor:
    """[L, S]: a finite row, an all -inf row, a partly -inf row, a row of finfo.min (not hidden)."""
    return torch.tensor([[0.5, -1.0, 0.0, 2.0, -0.25], [-INF] * S, [-INF, 0.0, -INF, 1.0, -INF],
                         [torch.finfo(torch.float16).min] * S])


def _nan_rows() -> torch.Tensor:
    """[L, S]: NaN among -infs, NaN last among -infs, NaN in a partly masked row, all -inf."""
    return torch.tensor([[NAN] + [-INF] * 4, [-INF] * 4 + [NAN], [0.0, NAN, -INF, 1.0, -INF], [-INF] * S])


def _float_padding() -> torch.Tensor:
    """[B, 1, 1, S]: batch 0 partly -inf, batch 1 all -inf."""
    return torch.tensor([[0.0, 0.0, -INF, 0.0, -INF], [-INF] * S]).view(B, 1, 1, S)


MASKS: dict[str, Callable[[], torch.Tensor]] = {
    "bool_rows": _bool_rows, "bool_padding": _padding, "bool_all_visible": lambda: torch.ones(L, S, dtype=torch.bool),
    "float_rows": _float_rows, "float_nan": _nan_rows, "float_padding": _float_padding,
}


class Attention(torch.nn.Module):
    """sdpa in `dtype`, its float32 inputs and output cast at the edges."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, q, k, v, mask):
        mask = mask if mask.dtype == torch.bool else mask.to(self.dtype)
        out = F.scaled_dot_product_attention(q.to(self.dtype), k.to(self.dtype), v.to(self.dtype), attn_mask=mask)
        return out.float()


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(shape, generator=gen) for shape in [(B, H, L, E), (B, H, S, E), (B, H, S, E)])


def _export(module: torch.nn.Module, args: tuple, opset: int) -> onnx.ModelProto:
    return exporter.export(module, args, opset_version=opset, optimize=False)


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_guard_matches_torch(mask_name: str, opset: int, dtype: torch.dtype) -> None:
    module, args = Attention(dtype), (*_inputs(), MASKS[mask_name]())
    expected = module(*args).numpy()
    model = _export(module, args, opset)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)})
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))  # NaN rows where torch has them
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=True)


def test_masks_cover_the_cases_the_guard_decides() -> None:
    """The table holds hidden rows, NaN rows and visible rows: a guard that never fires, or
    always fires, fails it."""
    module, args = Attention(torch.float32), _inputs()
    rows = {name: module(*args, MASKS[name]())[0, 0] for name in ("bool_rows", "float_rows", "float_nan")}
    assert not rows["bool_rows"][1].any() and rows["bool_rows"][0].abs().sum() > 0
    assert not rows["float_rows"][1].any() and rows["float_rows"][3].abs().sum() > 0
    assert rows["float_nan"][0].isnan().all() and rows["float_nan"][1].isnan().all()
    assert not rows["float_nan"][3].any()


# The whole graph of one sdpa with a mask (optimize=False): the attention itself is Transpose,
# MatMul, Mul, the mask applied (Where or Add), Softmax, MatMul; the rest is the guard.
ATTENTION = Counter({"Transpose": 1, "MatMul": 2, "Mul": 1, "Softmax": 1})
GUARD_NODES = {
    ("bool", 18): Counter({"Where": 2, "Cast": 2, "ReduceMax": 1}),
    ("bool", 20): Counter({"Where": 2, "ReduceMax": 1}),
    ("float", 18): Counter({"Add": 1, "Equal": 1, "Cast": 2, "ReduceMin": 1, "Where": 1}),
    ("float", 20): Counter({"Add": 1, "Equal": 1, "ReduceMin": 1, "Where": 1}),
}


@pytest.mark.parametrize(("kind", "opset"), list(GUARD_NODES))
def test_guard_node_count(kind: str, opset: int) -> None:
    mask = _bool_rows() if kind == "bool" else _float_rows()
    model = _export(Attention(torch.float32), (*_inputs(), mask), opset)
    ops = Counter(node.op_type for node in model.graph.node if node.op_type != "Constant")
    assert ops == ATTENTION + GUARD_NODES[kind, opset]


class Causal(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_causal_mask_is_one_trilu_at_every_length() -> None:
    """Aligned top-left as torch aligns it, for more queries than keys and fewer, with the
    lengths dynamic: the exported model is run at other lengths than it was traced at."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(shape, generator=gen) for shape in [(B, H, L, E), (B, H, S, E), (B, H, S, E)])
    axes = {"q": {2: "queries"}, "k": {2: "keys"}, "v": {2: "keys"}}
    model = exporter.export(Causal(), (q, k, v), input_names=["q", "k", "v"], dynamic_axes=axes, optimize=False)
    ops = Counter(node.op_type for node in model.graph.node if node.op_type != "Constant")
    assert ops == ATTENTION + Counter({"Shape": 1, "ConstantOfShape": 1, "Trilu": 1, "Where": 1})
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for queries, keys in [(L, S), (7, 3), (2, 6), (1, 1)]:
        q, k, v = (torch.randn(shape, generator=gen) for shape in [(B, H, queries, E), (B, H, keys, E), (B, H, keys, E)])
        (actual,) = session.run(None, {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()})
        np.testing.assert_allclose(actual, Causal()(q, k, v).numpy(), atol=1e-5, rtol=1e-5)
