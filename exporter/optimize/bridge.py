"""The one place a proto enters the exporter: a model given as skeleton and weights, as an
onnx_ir model, without copying weights.

An export never comes here: it builds its `ir.Model` from the translation
(exporter.translate.ir_model), the passes rewrite it, and its proto is made once, at the end
(`ExportResult`). `to_ir` serves the public functions that take a user's proto: `optimize(skeleton,
weights)` and `legalize_dtypes(model)`. The skeleton's initializers of 1 KiB or more may carry no
data, marked as held in memory (exporter.contract.skeleton); each gets its array from `weights`
as an `ir.Tensor` (a view, no copy). exporter.translate.ir_model.to_skeleton is the way back.
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
