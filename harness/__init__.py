"""roundtrip's harness: prove, op by op, that an ONNX model computes what its module computes.

The pipeline, bottom to top (a module imports only from its own layer or below):

    metrics/        comparison, tolerance tables, calibration, the noise model
    runtime/        onnxruntime sessions and devices, shared weights, provider placement
    onnxgraph/      graph surgery: exposing values, the batched isolation model
    analysis/       FX mapping, torch values, accumulated / isolated / fp64 truth rows
    verify, verify_onnx, records, reproducer, exporters, backend   (the API, this package)
    report/         renderers of run results
    cli/, pytest_plugin/                                            (the front ends)
"""

from __future__ import annotations

from harness import backend
from harness.metrics.comparison import Comparison, compare
from harness.onnx_verification import verify_onnx
from harness.records import OpRecord, Verification
from harness.reproducer import write_reproducer
from harness.verification import verify

__all__ = [
    "Comparison", "OpRecord", "Verification", "backend", "compare", "verify", "verify_onnx",
    "write_reproducer",
]
