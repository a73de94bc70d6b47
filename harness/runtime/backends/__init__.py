"""Backends behind one interface: onnxruntime (any provider, any optimisation level), OpenVINO's
runtime and onnx's ReferenceEvaluator, each a `Backend` found by name through the registry
(`get_backend("openvino:precision=f32")`), preparing models into `PreparedModel`s.

A backend that cannot run here says why (`unavailable_reason()`), for a named skip. See
docs/BACKENDS.md for each backend's precision defaults and how to pin them.
"""

from __future__ import annotations

from harness.runtime.backends.base import DEFAULT_GROUP_SIZE, Backend, PreparedModel, declared_precisions
from harness.runtime.backends.precision import (
    DECLARED, HINT, RUNTIME_MODEL, RuntimeFusion, RuntimeGraph, RuntimePrecision, canonical_precision, is_lower,
)
from harness.runtime.backends.registry import backend_class, backend_names, register_backend
from harness.runtime.backends.spec import BackendOption, BackendSpec, BackendSpecError, get_backend

DEFAULT_BACKEND = "onnxruntime"
"""The backend a verification runs on when none is named (the CLI's and the plugin's default)."""

__all__ = [
    "DECLARED", "DEFAULT_BACKEND", "DEFAULT_GROUP_SIZE", "HINT", "RUNTIME_MODEL", "Backend", "BackendOption",
    "BackendSpec", "BackendSpecError", "PreparedModel", "RuntimeFusion", "RuntimeGraph", "RuntimePrecision", "backend_class",
    "backend_names", "canonical_precision", "declared_precisions", "get_backend", "is_lower", "register_backend",
]
