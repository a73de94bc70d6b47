"""A model given as skeleton and weights, as an onnx_ir model, without copying weights.

The export itself builds its `ir.Model` from the translation (exporter.translate.ir_model) and
never comes here. `to_ir` is for a model that arrives as a proto: a skeleton (initializers of
1 KiB or more carry no data and are marked as held in memory) plus the arrays, as
`exporter.optimize.optimize` takes it; every in-memory initializer gets its array as an
`ir.Tensor` (a view, no copy). exporter.translate.ir_model.to_skeleton is the way back.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
import onnx_ir as ir

from exporter.contract.skeleton import is_in_memory


def to_ir(skeleton: onnx.ModelProto, weights: Mapping[str, np.ndarray]) -> ir.Model:
    """`skeleton` as an onnx_ir model whose in-memory initializers hold `weights`' arrays."""
    stubs = {t.name for t in skeleton.graph.initializer if is_in_memory(t)}
    missing = sorted(stubs - set(weights))
    if missing:
        raise ValueError(f"initializers {missing[:5]} are held in memory but have no array in `weights`; "
                         "pass the ExportResult's weights with its skeleton")
    own = onnx.ModelProto()
    own.CopyFrom(skeleton)  # onnx_ir's tensors wrap the protos: renames must not reach the caller's
    model = ir.serde.deserialize_model(own)
    for name, value in model.graph.initializers.items():
        if name in stubs:
            value.const_value = ir.Tensor(weights[name], name=name)
    return model
