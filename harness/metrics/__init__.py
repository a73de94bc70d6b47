"""Numbers about tensors: comparison metrics, tolerance tables and their calibration, the noise model, the verdict.

The lowest layer of the harness: imports numpy (torch only lazily, for a dtype) and nothing else of
the harness, so every other layer can use it.
"""

from __future__ import annotations

from harness.metrics.arrays import as_array, contiguous, flatten_outputs
from harness.metrics.comparison import Comparison, compare, dtype_name
from harness.metrics.tolerances import Tolerance, ToleranceTable
from harness.metrics.verdict import Verdict

__all__ = ["Comparison", "Tolerance", "ToleranceTable", "Verdict", "as_array", "compare", "contiguous", "dtype_name",
           "flatten_outputs"]
