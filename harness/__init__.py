"""roundtrip's harness: backends, verification, comparison, tolerances, reports, CLI, pytest plugin.

`harness.verify`, `harness.verify_onnx` and `harness.write_reproducer` are the functions,
imported eagerly: the modules of the same names would otherwise shadow them as package
attributes once imported.
"""

from __future__ import annotations

from harness import backend
from harness.compare import Comparison, compare
from harness.records import OpRecord, Verification
from harness.reproducer import write_reproducer
from harness.verify import verify
from harness.verify_onnx import verify_onnx

__all__ = [
    "Comparison", "OpRecord", "Verification", "backend", "compare", "verify", "verify_onnx",
    "write_reproducer",
]
