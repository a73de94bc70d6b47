"""Who diverged from the fp64 truth: the noise model and the attribution rule.

For an op with fp64 truth r, torch's fp32 output T and the backend's isolated output B, the
errors are normalised by the truth's scale (max |r|):

    noise     = ulps(dtype) * max(u(dtype), u(acc) * sqrt(K)) * R
                                               u = eps/2 (2**-24 for fp32), K = the op's
                                               reduction length (terms summed per output
                                               element; 1 element-wise), acc the dtype the
                                               sums are accumulated in (float32 for float16
                                               and bfloat16, else the dtype itself: fp32 gives
                                               ulps * u * sqrt(K)); ulps per dtype from
                                               data/attribution.json; R the roundings the row
                                               stands for (1; an optimised region's members).
    e_b = |B - r| / scale,   e_t = |T - r| / scale     (max over elements)

    "both-noise"  e_b <= noise and e_t <= noise: both are fp32 renderings of the same result
    "backend"     e_b > noise and (e_t <= noise or e_b > dominance * e_t)
    "torch"       e_t > noise and (e_b <= noise or e_t > dominance * e_b)
    "both"        both above the noise bound and within `dominance` of each other

A shape or NaN/Inf disagreement with the truth is an infinite error. Integer and boolean
outputs have a noise bound of 0: any difference is a divergence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from harness.metrics.comparison import Comparison

ATTRIBUTION_PATH = "data/attribution.json"


@dataclass(frozen=True)
class NoiseModel:
    """The numbers of the attribution rule, with where they came from (data, not literals)."""

    ulps: float  # every dtype without a row of its own in `ulps_by_dtype`
    dominance: float
    ulps_source: str = ""
    dominance_source: str = ""
    ulps_by_dtype: Mapping[str, float] = field(default_factory=dict)

    def ulps_for(self, dtype: Any) -> float:
        """The noise bound's rounding units in `dtype`."""
        return float(self.ulps_by_dtype.get(dtype_key(dtype), self.ulps))

    def bound(self, dtype: Any, reduction_length: int, roundings: int = 1) -> float:
        """Normalised error two correct implementations of one op may show in `dtype`; a row
        that stands for `roundings` ops (an optimised region) is that many roundings in torch,
        whose worst cases add."""
        return self.ulps_for(dtype) * rounding_unit(dtype, reduction_length) * max(roundings, 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_noise_model() -> NoiseModel:
    data = json.loads(resources.files("harness.metrics").joinpath(ATTRIBUTION_PATH).read_text())
    return NoiseModel(float(data["ulps"]), float(data["dominance"]), data.get("ulps_source", ""),
                      data.get("dominance_source", ""),
                      {key: float(value) for key, value in data.get("ulps_by_dtype", {}).items()})


# eps/2 of the floating dtypes by name: numpy has no bfloat16, torch is not imported for a name
_UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53,
                  "complex64": 2.0**-24, "complex128": 2.0**-53}
# where float16 and bfloat16 results are accumulated: float32 in torch (CPU and CUDA), in
# onnxruntime's MLAS kernels and in cuDNN/cuBLAS by default; the other dtypes in themselves
ACCUMULATES_IN = {"float16": "float32", "bfloat16": "float32"}


def dtype_key(dtype: Any) -> str:
    """'float16', 'bfloat16', 'int64', ...: the name of a torch or numpy dtype (or a name)."""
    if isinstance(dtype, str) or type(dtype).__module__ == "torch":
        return str(dtype).removeprefix("torch.")
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def unit_roundoff(dtype: Any) -> float:
    """eps/2 of a floating dtype (torch, numpy or its name); 0 for exact (integer, boolean) dtypes."""
    key = dtype_key(dtype)
    if key in _UNIT_ROUNDOFF:
        return _UNIT_ROUNDOFF[key]
    try:
        kind = np.dtype(key).kind
    except TypeError:
        return 0.0
    return float(np.finfo(np.dtype(key)).eps) / 2 if kind in "fc" else 0.0


def rounding_unit(dtype: Any, reduction_length: int) -> float:
    """The normalised rounding error of one result in `dtype` summing K terms:
    max(u(dtype), u(accumulation dtype) * sqrt(K)). The final rounding to the dtype is one
    unit roundoff at the value's magnitude; the K roundings of the accumulation add like a
    random walk in the precision it is done in. float32 and float64 give u * sqrt(K)."""
    unit = unit_roundoff(dtype)
    if not unit:
        return 0.0
    accumulation = unit_roundoff(ACCUMULATES_IN.get(dtype_key(dtype), dtype_key(dtype)))
    return max(unit, accumulation * math.sqrt(max(reduction_length, 1)))


def attribute(backend: Comparison | None, torch_side: Comparison | None, noise: float,
              model: NoiseModel) -> str:
    """'backend', 'torch', 'both' or 'both-noise' (see the module docstring); '' if unknown."""
    if backend is None or torch_side is None:
        return ""
    e_b, e_t = truth_error(backend), truth_error(torch_side)
    backend_off, torch_off = e_b > noise, e_t > noise
    if not backend_off and not torch_off:
        return "both-noise"
    if backend_off and (not torch_off or e_b > model.dominance * e_t):
        return "backend"
    if torch_off and (not backend_off or e_t > model.dominance * e_b):
        return "torch"
    return "both"


def truth_error(comparison: Comparison) -> float:
    """Normalised error against the truth; infinite for shape or NaN/Inf disagreement."""
    if not comparison.shape_match or comparison.nonfinite_mismatch:
        return math.inf
    return comparison.normalized
