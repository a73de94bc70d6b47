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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness import backend
    from harness.metrics.comparison import Comparison, compare
    from harness.runtime.model_files import ModelFileError
    from harness.onnx_verification import verify_onnx
    from harness.records import OpRecord, Verification
    from harness.reproducer import write_reproducer
    from harness.verification import verify

# Loaded on first use: the pytest plugin (harness.pytest_plugin) is imported into every pytest
# run of an environment that has this package, and must not import torch or onnxruntime there.
_PUBLIC = {
    "Comparison": "harness.metrics.comparison", "ModelFileError": "harness.runtime.model_files",
    "OpRecord": "harness.records",
    "Verification": "harness.records", "backend": "harness", "compare": "harness.metrics.comparison",
    "verify": "harness.verification", "verify_onnx": "harness.onnx_verification",
    "write_reproducer": "harness.reproducer",
}

__all__ = [
    "Comparison", "ModelFileError", "OpRecord", "Verification", "backend", "compare", "verify", "verify_onnx",
    "write_reproducer",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = importlib.import_module(f"harness.{name}") if module == "harness" else getattr(
        importlib.import_module(module), name)
    globals()[name] = value
    return value
