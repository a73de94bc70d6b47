"""A translated `Graph` as an `onnx.ModelProto` that onnxruntime 1.31 accepts.

The export itself never makes this proto from the graph: it builds the `ir.Model`
(exporter.translate.ir_model), runs the passes on it and makes the proto once, at the end.
`to_model` is the same in one call, for a graph built by hand (tests, tools).
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from exporter.translate.graph import Graph
from exporter.translate.ir_model import MAX_IR_VERSION, MIN_IR_VERSION, PRODUCER, build_model, ir_version_for, to_skeleton

__all__ = ["MAX_IR_VERSION", "MIN_IR_VERSION", "PRODUCER", "ir_version_for", "to_model"]


def to_model(
    graph: Graph,
    *,
    graph_name: str,
    producer_version: str,
    metadata: dict[str, str] | None = None,
    weights_inline: bool = True,
) -> onnx.ModelProto:
    """Serialize `graph` with its provenance and opset imports.

    With `weights_inline=False` the result is a skeleton: each initializer of at least
    `EXTERNAL_MIN_BYTES` has its name, dtype and shape but no data, and is marked as held in
    memory (exporter.contract.skeleton); the arrays stay in `graph.initializers`.
    """
    model = build_model(graph, graph_name=graph_name, producer_version=producer_version, metadata=metadata)
    return ir.serde.serialize_model(model) if weights_inline else to_skeleton(model)[0]
