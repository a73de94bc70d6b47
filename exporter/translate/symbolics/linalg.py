"""addbmm (MatMul plus a reduction), the determinant, and view_copy.

(dot, mv, addr, baddbmm, einsum and the vector norms reach the registry decomposed into
mm/bmm/mul/sum by torch.export, which the existing symbolics translate.)
"""

from __future__ import annotations

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import promote, reduce
from exporter.translate.symbolics.shape import view


@symbolic("aten::addbmm")
def addbmm(g: Graph, self: Value, batch1: Value, batch2: Value, *, beta=1, alpha=1) -> Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    beta * self + alpha * sum_b(batch1[b] @ batch2[b]); beta=0 ignores self (NaN included).
    """
    self, batch1, batch2 = promote(g, self, batch1, batch2)
    products = reduce(g, "ReduceSum", g.op("MatMul", batch1, batch2), [0], False)
    if alpha != 1:
        products = g.op("Mul", products, promote(g, alpha)[0])
    if beta == 0:  # self's shape only (Expand broadcasts both ways)
        return g.op("Expand", products, g.op("Shape", self))
    scaled = self if beta == 1 else g.op("Mul", self, promote(g, beta)[0])
    return g.op("Add", scaled, products)



@symbolic("aten::_linalg_det")
def linalg_det(g: Graph, A: Value) -> tuple[Value, None, None]:
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)

    `torch.det` and `torch.linalg.det` reach here; ONNX Det over the last two axes.

    Limits: the LU factors and pivots (the 2nd and 3rd results, for backward) are not exported;
    onnxruntime runs Det in float32 only (a float64 model exports but does not load).
    """
    return g.op("Det", A), None, None


@symbolic("aten::view_copy")
def view_copy(g: Graph, self: Value, size) -> Value:
    """view_copy(Tensor self, SymInt[] size) -> Tensor"""
    return view(g, self, size)
