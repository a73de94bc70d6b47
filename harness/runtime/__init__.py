"""Running ONNX models: the backends (onnxruntime, OpenVINO, onnx.reference) behind one
interface, onnxruntime sessions and devices, shared weights, provider placement.

Imports harness.metrics only (for arrays); everything above it runs models through this layer.
"""

from __future__ import annotations

from harness.runtime.backends import (
    Backend, BackendSpec, BackendSpecError, PreparedModel, RuntimeFusion, RuntimePrecision, backend_names, get_backend,
)
from harness.runtime.devices import (
    DeviceSpec, cuda_unavailable_reason, device_context, provider_unavailable_reason, require_cuda, versions,
)
from harness.runtime.errors import BACKEND_ERRORS, BackendRunError, BackendUnavailableError, ModelLoadError, first_line
from harness.runtime.model_files import ModelFileError
from harness.runtime.ort_config import OPTIMIZATION_LEVELS, OrtConfig, OrtConfigError
from harness.runtime.placement import cpu_placed_nodes, node_placement, parse_profile
from harness.runtime.runner import BackendRunner, ModelRunner, ProductionRun, model_runner, run_production
from harness.runtime.sessions import (
    BackendRep, harness_session_options, prepare, real_inputs, session_options, session_record,
)
from harness.runtime.shared_weights import SharedWeights

__all__ = [
    "BACKEND_ERRORS", "OPTIMIZATION_LEVELS", "Backend", "BackendRep", "BackendSpec", "BackendSpecError",
    "PreparedModel", "RuntimeFusion", "RuntimePrecision", "backend_names", "get_backend", "provider_unavailable_reason", "BackendRunError", "BackendUnavailableError",
    "BackendRunner", "DeviceSpec", "ModelFileError", "ModelLoadError", "ModelRunner", "OrtConfig", "OrtConfigError",
    "ProductionRun", "SharedWeights", "cpu_placed_nodes", "cuda_unavailable_reason", "device_context",
    "first_line", "harness_session_options", "model_runner", "node_placement", "parse_profile", "prepare",
    "real_inputs", "require_cuda", "run_production", "session_options", "session_record", "versions",
]
