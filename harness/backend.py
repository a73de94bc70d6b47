"""`harness.backend`: the seed's backend usage, `prepare(model, device).run(inputs)`, on onnxruntime.

The public face of harness.runtime: `prepare`, `BackendRep`, the errors, device parsing,
CUDA availability, shared weights and node placement.
"""

from __future__ import annotations

from harness.runtime import (
    BackendRep, BackendUnavailableError, DeviceSpec, ModelLoadError, SharedWeights, cpu_placed_nodes,
    cuda_unavailable_reason, node_placement, parse_profile, prepare, real_inputs, session_options,
)

__all__ = [
    "BackendRep", "BackendUnavailableError", "DeviceSpec", "ModelLoadError", "SharedWeights", "cpu_placed_nodes",
    "cuda_unavailable_reason", "node_placement", "parse_profile", "prepare", "real_inputs", "session_options",
]
