"""`F.embedding_bag` / `nn.EmbeddingBag`: the sum, mean or max of each bag's embeddings.

The indices are one flat list cut into bags by `offsets` (a 2-D input reaches here flattened,
its offsets every row). Each position's bag is the number of offsets at or below it, minus 1;
a bags x positions membership matrix (padding positions left out) then sums by MatMul, counts
for the mean, and masks for the max. Every size is read at run time. Empty bags give zeros,
as in torch.
"""

from __future__ import annotations

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import reduce

MODES = {0: "sum", 1: "mean", 2: "max"}


def _arange(g: Graph, length: Value) -> Value:
    """0..length-1 for a 1-element int64 `length`."""
    end = g.op("Squeeze", length, g.constant([0], torch.int64))
    return g.op("Range", g.constant(0, torch.int64), end, g.constant(1, torch.int64))


def _membership(g: Graph, indices: Value, offsets: Value, include_last_offset: bool, padding_idx: int) -> Value:
    """Bool [bags, positions]: position j belongs to bag i (and is not padding)."""
    offsets = g.op("Cast", offsets, to_i=onnx_type(torch.int64))
    positions = _arange(g, g.op("Shape", indices))
    bag_count = g.op("Shape", offsets)
    if include_last_offset:
        bag_count = g.op("Sub", bag_count, g.constant([1], torch.int64))
    # bag of position j: how many offsets are <= j, minus one
    starts_at_or_before = g.op("LessOrEqual", g.op("Unsqueeze", offsets, g.constant([0], torch.int64)),
                               g.op("Unsqueeze", positions, g.constant([1], torch.int64)))
    as_int = g.op("Cast", starts_at_or_before, to_i=onnx_type(torch.int64))
    bag_of = g.op("Sub", reduce(g, "ReduceSum", as_int, [1], False), g.constant(1, torch.int64))
    bags = _arange(g, bag_count)
    member = g.op("Equal", g.op("Unsqueeze", bags, g.constant([1], torch.int64)),
                  g.op("Unsqueeze", bag_of, g.constant([0], torch.int64)))
    if padding_idx is not None and padding_idx >= 0:
        kept = g.op("Not", g.op("Equal", g.op("Cast", indices, to_i=onnx_type(torch.int64)), g.constant(padding_idx, torch.int64)))
        member = g.op("And", member, g.op("Unsqueeze", kept, g.constant([0], torch.int64)))
    return member


def _embedding_bag(g: Graph, weight: Value, indices: Value, offsets: Value, mode: int,
                   per_sample_weights: Value | None, include_last_offset: bool, padding_idx) -> tuple:
    if mode not in MODES:
        raise ValueError(f"embedding_bag mode {mode} is not one of {MODES}")
    dtype = weight.dtype
    rows = g.op("Gather", weight, indices, axis_i=0)  # [positions, dim]
    if per_sample_weights is not None:
        rows = g.op("Mul", rows, g.op("Unsqueeze", per_sample_weights, g.constant([1], torch.int64)))
    member = _membership(g, indices, offsets, include_last_offset, padding_idx)
    weights = g.op("Cast", member, to_i=onnx_type(dtype))
    counts = reduce(g, "ReduceSum", weights, [1], True)  # [bags, 1]
    if MODES[mode] != "max":
        total = g.op("MatMul", weights, rows)
        if MODES[mode] == "sum":
            return total, None, None, None
        return g.op("Div", total, g.op("Max", counts, g.constant(1, dtype))), None, None, None
    masked = g.op("Where", g.op("Unsqueeze", member, g.constant([2], torch.int64)),
                  g.op("Unsqueeze", rows, g.constant([0], torch.int64)), g.constant(float("-inf"), dtype))
    largest = reduce(g, "ReduceMax", masked, [1], False)
    empty = g.op("Equal", counts, g.constant(0, dtype))
    largest = g.op("Where", empty, g.constant(0, dtype), largest)
    return largest, None, None, None


def _checked(mode: int, per_sample_weights) -> None:
    if per_sample_weights is not None and MODES.get(mode) != "sum":
        raise ValueError("embedding_bag: per_sample_weights work only with mode='sum' (as in torch)")


@symbolic("aten::_embedding_bag_forward_only")
def embedding_bag_forward_only(g: Graph, weight: Value, indices: Value, offsets: Value, scale_grad_by_freq=False,
                               mode=0, sparse=False, per_sample_weights=None, include_last_offset=False,
                               padding_idx=-1) -> tuple:
    """_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)

    Limits: only the bags' output (the first result) is exported; the bookkeeping results
    (offset2bag, bag_size, max_indices), which backward passes use, are not.
    """
    _checked(mode, per_sample_weights)
    return _embedding_bag(g, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)


@symbolic("aten::_embedding_bag")
def embedding_bag(g: Graph, weight: Value, indices: Value, offsets: Value, scale_grad_by_freq=False,
                  mode=0, sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=-1) -> tuple:
    """_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)

    Limits: only the bags' output (the first result) is exported; the bookkeeping results
    (offset2bag, bag_size, max_indices), which backward passes use, are not.
    """
    _checked(mode, per_sample_weights)
    return _embedding_bag(g, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)
