"""Per-op analysis: join the ONNX model to the FX graph, take torch's values, and measure each op
accumulated, isolated and against its fp64 truth.

Imports the exporter (provenance, naming), harness.onnxgraph, harness.runtime and harness.metrics.
Functions here return rows (OpRecord) and notes in an OpAnalysis; they never write into a
Verification, which the API layer above assembles.
"""

from __future__ import annotations

from harness.analysis.rows import OpAnalysis, OpArtifacts, OpRecord

__all__ = ["OpAnalysis", "OpArtifacts", "OpRecord"]
