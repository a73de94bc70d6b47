"""Attention: `F.scaled_dot_product_attention` kept whole, as one group of ONNX nodes.

The graph is torch's math definition: scores = q k^T * scale (+ mask), softmax over the keys,
then the weighted sum of the values. A boolean mask keeps the positions where it is True, a
float mask is added to the scores, `is_causal` keeps key j for query i when j <= i (aligned
top-left, as torch does for L != S). Rows whose every score is masked give 0, as torch's
safe softmax does (plain softmax would give NaN): which rows are is read off the mask alone
(a row whose mask is all False, or all -inf), whose shape is usually far smaller than the
scores' (a padding mask is [B, 1, 1, S]), and the zero is chosen on the output ([..., L, Ev])
rather than on the weights ([..., L, S]); from opset 20, where ReduceMax / ReduceMin take bool
tensors, the guard is 2 nodes for a boolean mask and 3 for a float one (4 and 5 before). A NaN
in a float mask makes its row NaN, as in torch. A causal mask never hides a whole row (key 0 is
kept for every query). `enable_gqa` repeats each key/value head
for its group of query heads. Sequence lengths may be dynamic.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, rank_of, reduce, unsqueeze

BOOL_REDUCE_SINCE = 20  # ONNX ReduceMax / ReduceMin take bool tensors from opset 20 on


def _causal_mask(g: Graph, scores: Value, rank: int) -> Value:
    """(L, S) bool, True where key j may be attended from query i (j <= i): the lower triangle
    of a (L, S) block of True, its size read off the scores (..., L, S) of `rank` dims."""
    block = g.op("ConstantOfShape", g.op("Shape", scores, start_i=rank - 2), value_t=np.array([True]))
    return g.op("Trilu", block, g.constant(0, torch.int64), upper_i=0)


def _repeat_heads(g: Graph, value: Value, query_heads: int) -> Value:
    """(..., Hkv, S, E) -> (..., Hq, S, E), each key/value head repeated Hq/Hkv times in a row."""
    rank = rank_of(value)
    kv_heads = value.shape[rank - 3]
    if not isinstance(kv_heads, int) or not isinstance(query_heads, int):
        raise ValueError("enable_gqa needs static head counts")
    if kv_heads == query_heads:
        return value
    group = query_heads // kv_heads
    grouped = unsqueeze(g, value, [rank - 2])  # (..., Hkv, 1, S, E)
    repeats = [1] * (rank + 1)
    repeats[rank - 2] = group
    expanded = g.op("Tile", grouped, g.constant(repeats))  # (..., Hkv, group, S, E)
    leading = g.op("Shape", value, start_i=0, end_i=rank - 3)
    trailing = g.op("Shape", value, start_i=rank - 2, end_i=rank)
    target = g.op("Concat", leading, g.constant([query_heads]), trailing, axis_i=0)
    return g.op("Reshape", expanded, target)


@symbolic("aten::scaled_dot_product_attention")
def scaled_dot_product_attention(g: Graph, query: Value, key: Value, value: Value, attn_mask=None,
                                 dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False) -> Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    Limits: dropout_p must be 0 (inference); enable_gqa needs static head counts.
    """
    if dropout_p:
        raise ValueError("scaled_dot_product_attention with dropout_p > 0 is random and is not exported")
    dtype = query.dtype or torch.float32
    rank = rank_of(query)
    if rank_of(key) != rank:
        raise ValueError("scaled_dot_product_attention needs query and key of the same rank")
    if scale is None:
        head_dim = query.shape[-1]
        if not isinstance(head_dim, int):
            raise ValueError("the head dimension of scaled_dot_product_attention must be static")
        scale = 1.0 / math.sqrt(head_dim)
    if enable_gqa:
        query_heads = query.shape[rank - 3]
        key, value = _repeat_heads(g, key, query_heads), _repeat_heads(g, value, query_heads)
    key_t = g.op("Transpose", key, perm_i=[*range(rank - 2), rank - 1, rank - 2])
    scores = g.op("Mul", g.op("MatMul", query, key_t), g.constant(scale, dtype))
    minus_inf = g.constant(-math.inf, dtype)
    if is_causal:
        scores = g.op("Where", _causal_mask(g, scores, rank), scores, minus_inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = g.op("Where", attn_mask, scores, minus_inf)
        else:
            float_mask = cast_to(g, attn_mask, dtype)
            scores = g.op("Add", scores, float_mask)
    weights = g.op("Softmax", scores, axis_i=-1)
    output = g.op("MatMul", weights, value)
    if attn_mask is None:
        return output
    if attn_mask.dtype == torch.bool:
        return g.op("Where", _rows_with_a_key(g, attn_mask), output, g.constant(0.0, dtype))
    return g.op("Where", _rows_all_hidden(g, float_mask), g.constant(0.0, dtype), output)


def _rows_with_a_key(g: Graph, attn_mask: Value) -> Value:
    """[..., L, 1] bool: True for the queries a boolean mask lets see at least one key, on the
    mask's own (broadcast) shape."""
    last = [rank_of(attn_mask) - 1]
    if g.opset_version >= BOOL_REDUCE_SINCE:
        return reduce(g, "ReduceMax", attn_mask, last, True)
    kept = reduce(g, "ReduceMax", g.op("Cast", attn_mask, to_i=onnx_type(torch.uint8)), last, True)
    return g.op("Cast", kept, to_i=onnx_type(torch.bool))


def _rows_all_hidden(g: Graph, float_mask: Value) -> Value:
    """[..., L, 1] bool: True for the queries whose every key a float mask sets to -inf.

    A NaN in a row is not -inf, so the row is not hidden and its NaN reaches the output, as in
    torch. That is why this reduces the comparison rather than the mask: ReduceMax of the mask
    then Equal -inf would be cheaper, but onnxruntime's ReduceMax skips NaNs (in most positions
    of a row), so a row of NaN and -inf would read as hidden and give 0 where torch gives NaN.
    """
    last = [rank_of(float_mask) - 1]
    hidden = g.op("Equal", float_mask, g.constant(-math.inf, float_mask.dtype))
    if g.opset_version >= BOOL_REDUCE_SINCE:
        return reduce(g, "ReduceMin", hidden, last, True)
    all_hidden = reduce(g, "ReduceMin", g.op("Cast", hidden, to_i=onnx_type(torch.uint8)), last, True)
    return g.op("Cast", all_hidden, to_i=onnx_type(torch.bool))
