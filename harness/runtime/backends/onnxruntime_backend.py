"""onnxruntime as a backend: any execution provider, any graph optimisation level.

    onnxruntime                       CPU provider, onnxruntime's default level (all)
    onnxruntime:level=disabled        ... no graph optimisation
    onnxruntime:provider=cuda         CUDA provider (the device's index), CPU for what it lacks
    onnxruntime:provider=tensorrt     TensorRT, then CUDA-less CPU fallback for what it lacks
    onnxruntime:provider=openvino     onnxruntime's OpenVINO execution provider

A provider this onnxruntime build lacks, or a GPU that is not there, is `unavailable_reason()`.
onnxruntime runs every node at its declared precision: `runtime_precisions()` are declared.
"""

from __future__ import annotations

from typing import Any

import onnx

from harness.runtime.backends.base import Backend
from harness.runtime.backends.registry import register_backend
from harness.runtime.backends.spec import BackendOption
from harness.runtime.devices import DeviceSpec, provider_unavailable_reason
from harness.runtime.ort_config import OPTIMIZATION_LEVELS, OrtConfig

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}
_PROVIDER_SPELLINGS = {**{key: key for key in PROVIDERS}, **{value.lower(): key for key, value in PROVIDERS.items()},
                       "trt": "tensorrt"}


@register_backend
class OnnxRuntimeBackend(Backend):
    """onnxruntime with one execution provider and one graph optimisation level."""

    name = "onnxruntime"
    OPTIONS = {
        "provider": BackendOption("provider", "execution provider: cpu, cuda, tensorrt or openvino",
                                  _PROVIDER_SPELLINGS, None),
        "level": BackendOption("level", "graph optimisation level: disabled, basic, extended or all",
                               {level: level for level in OPTIMIZATION_LEVELS}, None),
    }

    def provider_for(self, device: str) -> str:
        """The onnxruntime provider name this spec runs on `device` (the device's when unset)."""
        chosen = self.option("provider")
        if chosen is None:
            chosen = "cuda" if DeviceSpec.parse(device).kind == "cuda" else "cpu"
        return PROVIDERS[chosen]

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "the onnxruntime package is not installed (pip install onnxruntime)"
        return provider_unavailable_reason(self.provider_for(device))

    def ort_config(self, config: OrtConfig | None = None) -> OrtConfig:
        """`config` (onnxruntime's defaults without one) with this spec's level."""
        return (config or OrtConfig()).with_level(self.option("level"))

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> Any:
        from harness.runtime.sessions import prepare

        self.require(device)
        provider = self.provider_for(device)
        target = device if provider != "CUDAExecutionProvider" or DeviceSpec.parse(device).kind == "cuda" else "CUDA"
        options["ort_config"] = self.ort_config(options.get("ort_config"))
        if provider not in ("CPUExecutionProvider", "CUDAExecutionProvider"):
            options["execution_provider"] = provider
        return prepare(model, target, **options)

    def judges_fusions(self) -> bool:
        """When the spec names an optimisation level that fuses (`onnxruntime:level=all`): finding
        onnxruntime's fusions costs one more session, which writes its optimised graph; plain
        `onnxruntime` (its default level) is verified as before, without them."""
        return self.option("level") not in (None, "disabled")

    def settings(self) -> dict[str, Any]:
        import onnxruntime

        return {**super().settings(), "version": onnxruntime.__version__,
                "provider": self.provider_for("CPU") if self.option("provider") else "from the device",
                "graph_optimization_level": self.option("level") or "all (onnxruntime's default)"}
