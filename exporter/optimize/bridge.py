"""Between the exporter's skeleton-and-weights form and onnx_ir's model, without copying weights.

The exporter keeps an exported model as a skeleton (initializers of 1 KiB or more carry no
data and are marked as held in memory) plus the arrays (exporter.write.external_data). The
optimisation passes work on an `onnx_ir.Model`: `to_ir` gives every in-memory initializer its
array as an `ir.Tensor` (a view, no copy), and `from_ir` takes the arrays out again and writes a
skeleton whose large initializers are stubs once more.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
import onnx_ir as ir

from exporter.contract.skeleton import EXTERNAL_MIN_BYTES, IN_MEMORY, is_in_memory


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


def from_ir(model: ir.Model) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The skeleton and the weights of an onnx_ir model: every initializer's array by name (no
    copy for those given as arrays); in the skeleton those of `EXTERNAL_MIN_BYTES` or more are
    in-memory stubs and smaller ones stay inline, as `exporter.write.serialize.to_model` writes them."""
    weights: dict[str, np.ndarray] = {}
    stubbed: dict[str, ir.TensorProtocol] = {}
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None:
            continue
        weights[name] = tensor.numpy()
        if tensor.nbytes >= EXTERNAL_MIN_BYTES:
            stubbed[name] = tensor
            value.const_value = ir.ExternalTensor(IN_MEMORY, offset=None, length=None, dtype=tensor.dtype,
                                                  shape=tensor.shape, name=name)
    try:
        skeleton = ir.serde.serialize_model(model)
    finally:  # the ir model stays usable (tests inspect it)
        for name, tensor in stubbed.items():
            model.graph.initializers[name].const_value = tensor
    return skeleton, weights
