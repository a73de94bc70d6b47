"""onnx's ReferenceEvaluator as a backend in its own right: slow, straightforward numpy
kernels, every node at its declared precision (bfloat16 through ml_dtypes). No options."""

from __future__ import annotations

from typing import Any

import onnx

from harness.runtime.backends.base import Backend
from harness.runtime.backends.registry import register_backend


@register_backend
class ReferenceBackend(Backend):
    """onnx.reference.ReferenceEvaluator."""

    name = "onnx.reference"
    OPTIONS = {}

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        if device.strip().lower() not in ("cpu", "reference"):
            return f"onnx's ReferenceEvaluator runs on the CPU only, not {device}"
        return None

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> Any:
        from harness.runtime.sessions import prepare

        self.require(device)
        kept = {k: v for k, v in options.items() if k in ("shared_weights", "serialized")}
        return prepare(model, "reference", **kept)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "version": onnx.__version__}
