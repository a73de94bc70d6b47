"""Who diverged from the fp64 truth: the noise model and the attribution rule.

For an op with fp64 truth r, torch's fp32 output T and the backend's isolated output B, the
errors are normalised by the truth's scale (max |r|):

    noise     = ulps * u(dtype) * sqrt(K)      u = eps/2 of the output dtype (2**-24 for fp32),
                                               K = the op's reduction length (terms summed per
                                               output element; 1 element-wise), ulps from
                                               data/attribution.json.
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
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

import numpy as np

from harness.metrics.comparison import Comparison

ATTRIBUTION_PATH = "data/attribution.json"


@dataclass(frozen=True)
class NoiseModel:
    """The numbers of the attribution rule, with where they came from (data, not literals)."""

    ulps: float
    dominance: float
    ulps_source: str = ""
    dominance_source: str = ""

    def bound(self, dtype: Any, reduction_length: int) -> float:
        """Normalised error two correct implementations of one op may show in `dtype`."""
        unit = unit_roundoff(dtype)
        return self.ulps * unit * math.sqrt(max(reduction_length, 1)) if unit else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_noise_model() -> NoiseModel:
    data = json.loads(resources.files("harness.metrics").joinpath(ATTRIBUTION_PATH).read_text())
    return NoiseModel(float(data["ulps"]), float(data["dominance"]), data.get("ulps_source", ""),
                      data.get("dominance_source", ""))


def unit_roundoff(dtype: Any) -> float:
    """eps/2 of a floating dtype (torch or numpy); 0 for exact (integer, boolean) dtypes."""
    if type(dtype).__module__ == "torch":  # a torch.dtype: no torch import needed to ask it
        import torch

        return torch.finfo(dtype).eps / 2 if dtype.is_floating_point else 0.0
    dtype = np.dtype(dtype)
    return float(np.finfo(dtype).eps) / 2 if dtype.kind in "fc" else 0.0


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
