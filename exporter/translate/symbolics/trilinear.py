"""`_trilinear`, the product-and-sum behind `nn.Bilinear` / `F.bilinear`, as one ONNX Einsum.

torch's kernel lines the three operands up on a common set of dims (each unsqueezed at its
`expand` dims), multiplies them and sums `sumdim` away. In Einsum terms each dim is a letter:
an operand's subscript names the dims it has (those it is not expanded at), the output's the
dims not summed. Einsum contracts without materialising the broadcast product, which the
written-out form would (batch * out * in1 * in2 elements for a Bilinear layer).
"""

from __future__ import annotations

import string

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import promote, rank_of


@symbolic("aten::_trilinear")
def trilinear(g: Graph, i1: Value, i2: Value, i3: Value, expand1, expand2, expand3, sumdim,
              unroll_dim: int = 1) -> Value:
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor

    `unroll_dim` only chooses how torch's kernel loops; the result does not depend on it.
    """
    total = rank_of(i1) + len(expand1)
    if total > len(string.ascii_lowercase):
        raise ValueError(f"_trilinear over {total} dims: Einsum's subscripts name at most 26")
    letters = string.ascii_lowercase[:total]
    operands = promote(g, i1, i2, i3)
    subscripts = [''.join(letters[d] for d in range(total) if d not in set(expand)) for expand in (expand1, expand2, expand3)]
    present = set(''.join(subscripts))
    kept = [d for d in range(total) if d not in set(sumdim)]
    orphans = [d for d in kept if letters[d] not in present]
    if orphans:  # torch's kernel gives such a dim size 0 (nn.Bilinear never builds one)
        raise ValueError(f"_trilinear keeps dims {orphans} that every operand is expanded at; not translated")
    output = ''.join(letters[d] for d in kept)
    return g.op("Einsum", *operands, equation_s=f"{','.join(subscripts)}->{output}")
