"""roundtrip's harness: backends, verification, comparison, tolerances, reports, CLI, pytest plugin.

`harness.verify` and `harness.verify_onnx` are the functions, imported eagerly: the modules of
the same names would otherwise shadow them as package attributes once imported.
"""

from __future__ import annotations

from harness import backend
from harness.compare import Comparison, compare
from harness.records import OpRecord, Verification
from harness.verify import verify

__all__ = ["Comparison", "OpRecord", "Verification", "backend", "compare", "verify"]
