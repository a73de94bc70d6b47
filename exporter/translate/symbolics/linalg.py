"""addbmm and baddbmm (MatMul, scaled sums), the determinant and slogdet, as_strided, view_copy.

(dot, mv, addr, einsum and the vector norms reach the registry decomposed into mm/bmm/mul/sum
by torch.export, which the existing symbolics translate.)
"""

from __future__ import annotations

import numpy as np
import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import output_used, promote, reduce, static_ints
from exporter.translate.symbolics.shape import view


@symbolic("aten::addbmm")
def addbmm(g: Graph, self: Value, batch1: Value, batch2: Value, *, beta=1, alpha=1) -> Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    beta * self + alpha * sum_b(batch1[b] @ batch2[b]); beta=0 ignores self (NaN included).
    """
    self, batch1, batch2 = promote(g, self, batch1, batch2)
    return _scaled_sum(g, self, reduce(g, "ReduceSum", g.op("MatMul", batch1, batch2), [0], False), beta, alpha)


@symbolic("aten::baddbmm")
def baddbmm(g: Graph, self: Value, batch1: Value, batch2: Value, *, beta=1, alpha=1) -> Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    beta * self + alpha * (batch1 @ batch2); beta=0 ignores self (NaN included), decided in the
    graph when beta is read from a tensor at run time (`beta=t.item()`), which torch's
    decomposition cannot do (it branches on beta == 0 in Python).
    """
    self, batch1, batch2 = promote(g, self, batch1, batch2)
    return _scaled_sum(g, self, g.op("MatMul", batch1, batch2), beta, alpha)


def _scaled_sum(g: Graph, self: Value, products: Value, beta, alpha) -> Value:
    """beta * self + alpha * products, self ignored where beta is 0 (a number or a 0-d Value)."""
    if isinstance(alpha, Value) or alpha != 1:
        products = g.op("Mul", products, promote(g, alpha)[0])
    ignored = g.op("Expand", products, g.op("Shape", self))  # self's shape only (Expand broadcasts both ways)
    if not isinstance(beta, Value):
        if beta == 0:
            return ignored
        return g.op("Add", self if beta == 1 else g.op("Mul", self, promote(g, beta)[0]), products)
    beta = promote(g, beta)[0]
    kept = g.op("Add", g.op("Mul", self, beta), products)
    return g.op("Where", g.op("Equal", beta, g.constant(0, beta.dtype)), ignored, kept)



@symbolic("aten::_linalg_det")
def linalg_det(g: Graph, A: Value) -> tuple[Value, None, None]:
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)

    `torch.det` and `torch.linalg.det` reach here; ONNX Det over the last two axes.

    Limits: the LU factors and pivots (the 2nd and 3rd results, for backward) are not exported;
    onnxruntime runs Det in float32 only (a float64 model exports but does not load).
    """
    return g.op("Det", A), None, None


@symbolic("aten::_linalg_slogdet")
def linalg_slogdet(g: Graph, A: Value) -> tuple[Value, Value, None, None]:
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)

    `torch.logdet` and `torch.linalg.slogdet` reach here: the sign and log|det| of ONNX's Det.

    Limits: the LU factors and pivots (the 3rd and 4th results, for backward) are not exported;
    log|det| is the log of a determinant computed in the input's dtype, so it overflows to inf
    (or underflows to -inf) where the determinant does, where torch's sum of the LU diagonal's
    logs does not; onnxruntime runs Det in float32 only.
    """
    if output_used(g, 2) or output_used(g, 3):
        raise ValueError("_linalg_slogdet's LU factors and pivots are read; ONNX's Det gives the determinant only")
    determinant = g.op("Det", A)
    return g.op("Sign", determinant), g.op("Log", g.op("Abs", determinant)), None, None


@symbolic("aten::as_strided")
def as_strided(g: Graph, self: Value, size, stride, storage_offset=None) -> Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    A Gather of the input's elements in row-major order at offset + sum_k i_k * stride_k: what
    torch reads from memory when the input is contiguous from its storage's start, as the
    capture's metadata says it is.

    Limits: an input that is not contiguous from its storage's start (a transposed or sliced
    view) is refused, since its memory is not its row-major order; the sizes, strides and offset
    must be known at export.
    """
    source = g.ctx.node.args[0].meta.get("val")
    if source is not None and (not source.is_contiguous() or source.storage_offset() != 0):
        raise ValueError(
            "as_strided of a tensor that is not contiguous from its storage's start (a transposed or sliced "
            f"view, strides {tuple(source.stride())}, offset {source.storage_offset()}): its memory is not the "
            "row-major order the graph sees; call .contiguous() before as_strided, or index it instead")
    sizes = static_ints(size, "as_strided sizes")
    strides = static_ints(stride, "as_strided strides")
    offset = static_ints([storage_offset or 0], "as_strided storage_offset")[0]
    index = np.full(sizes, offset, dtype=np.int64)
    for axis, (length, step) in enumerate(zip(sizes, strides)):
        shape = [1] * len(sizes)
        shape[axis] = length
        index = index + (np.arange(length, dtype=np.int64) * step).reshape(shape)
    flat = g.op("Reshape", self, g.constant([-1], torch.int64))
    return g.op("Gather", flat, g.constant(index), axis_i=0)


@symbolic("aten::view_copy")
def view_copy(g: Graph, self: Value, size) -> Value:
    """view_copy(Tensor self, SymInt[] size) -> Tensor"""
    return view(g, self, size)
