"""`harness.backend`: the seed's backend usage, `prepare(model, device).run(inputs)`, on onnxruntime.

The public face of harness.runtime: `prepare`, `BackendRep`, the errors, device parsing,
CUDA availability, shared weights and node placement; and the other backends behind the same
interface (`get_backend("openvino:precision=f32").prepare(model).run(inputs)`).
"""

from __future__ import annotations

from harness.runtime import (
    Backend, BackendSpec, BackendSpecError, PreparedModel, RuntimeFusion, RuntimePrecision, backend_names, get_backend,
    BackendRep, BackendUnavailableError, DeviceSpec, ModelLoadError, SharedWeights, cpu_placed_nodes,
    cuda_unavailable_reason, node_placement, parse_profile, prepare, real_inputs, session_options,
)

__all__ = [
    "Backend", "BackendSpec", "BackendSpecError", "PreparedModel", "RuntimeFusion", "RuntimePrecision", "backend_names",
    "get_backend", "BackendRep", "BackendUnavailableError", "DeviceSpec", "ModelLoadError", "SharedWeights", "cpu_placed_nodes",
    "cuda_unavailable_reason", "node_placement", "parse_profile", "prepare", "real_inputs", "session_options",
]
