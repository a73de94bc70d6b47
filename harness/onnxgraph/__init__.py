"""Graph surgery on ONNX models: reading values, exposing them, the batched isolation model.

Imports onnx and harness.metrics only; runs nothing (harness.runtime runs what is built here).
"""

from __future__ import annotations

from harness.onnxgraph.isolation import INPUT_PREFIX, IsolationModel, Subgraph, build
from harness.onnxgraph.values import expose_values, external_inputs, producer_chain, topological

__all__ = ["INPUT_PREFIX", "IsolationModel", "Subgraph", "build", "expose_values", "external_inputs",
           "producer_chain", "topological"]
