"""The model-zoo cases every roundtrip run verifies (AlexNet ... word_language_model).

`CASES` maps a stable name to a `ModelCase`; `get(name)` looks one up and
`select(tier=..., pattern=...)` picks a set for a run.
"""

from __future__ import annotations

from model_zoo_cases.calibration import calibrate_batchnorm, rescale_weights
from model_zoo_cases.case import FAMILIES, TIERS, ModelCase, clear_module_cache
from model_zoo_cases.measurements import MEASUREMENTS, Measured
from model_zoo_cases.registry import CASES, get, select

__all__ = [
    "CASES",
    "FAMILIES",
    "MEASUREMENTS",
    "Measured",
    "TIERS",
    "ModelCase",
    "calibrate_batchnorm",
    "clear_module_cache",
    "get",
    "rescale_weights",
    "select",
]
