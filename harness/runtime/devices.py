"""Devices: parsing a device string, whether CUDA is usable (one function, used everywhere),
and the device context of a verification (TF32 pinned on both sides, recorded)."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from harness.runtime.errors import BackendUnavailableError


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # "cpu" | "cuda" | "reference"
    index: int = 0

    @classmethod
    def parse(cls, device: str) -> DeviceSpec:
        text = device.strip().lower()
        if text in ("cpu", "reference"):
            return cls(text)
        if text == "cuda" or text.startswith("cuda:"):
            index = int(text.split(":", 1)[1]) if ":" in text else 0
            return cls("cuda", index)
        raise ValueError(f"unknown device {device!r}; use 'CPU', 'CUDA', 'CUDA:<n>' or 'reference'")

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.index}" if self.kind == "cuda" else "cpu"

    @property
    def backend_device(self) -> str:
        """The `prepare()` device string for this spec."""
        return {"cuda": f"CUDA:{self.index}", "reference": "reference"}.get(self.kind, "CPU")


def cuda_unavailable_reason() -> str | None:
    """Why onnxruntime's CUDA provider cannot be used here, or None when it can."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return (
            f"onnxruntime {ort.__version__} has no CUDAExecutionProvider "
            f"(available: {', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
        )
    try:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA GPU is visible (torch.cuda.is_available() is False)"
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return None


_CUDA_LIBRARIES_LOADED = False
_CUDA_PRELOAD_REPORT = ""  # what onnxruntime.preload_dlls said, or the library it failed to load


def load_cuda_libraries() -> None:
    """Load, once per process, the CUDA and cuDNN libraries that onnxruntime-gpu's providers
    need from the nvidia wheels beside torch (onnxruntime.preload_dlls; a no-op where torch has
    loaded them already). A library it cannot load is not an error here: the session's provider
    then fails to start, and `cuda_preload_report()` says what the preload met."""
    global _CUDA_LIBRARIES_LOADED, _CUDA_PRELOAD_REPORT
    if _CUDA_LIBRARIES_LOADED:
        return
    _CUDA_LIBRARIES_LOADED = True
    import contextlib
    import io

    import onnxruntime as ort

    said = io.StringIO()
    with contextlib.redirect_stdout(said):  # it prints what it could not load
        try:
            ort.preload_dlls(cuda=True, cudnn=True, msvc=False)
        except OSError as error:  # a library the loader refused (ctypes.CDLL)
            print(f"{type(error).__name__}: {error}")
    _CUDA_PRELOAD_REPORT = " ".join(said.getvalue().split())


def cuda_preload_report() -> str:
    """What loading onnxruntime-gpu's CUDA libraries met ("" when it loaded them quietly)."""
    return _CUDA_PRELOAD_REPORT


def provider_unavailable_reason(provider: str) -> str | None:
    """Why onnxruntime's execution provider `provider` ("TensorrtExecutionProvider") cannot be
    used here, or None when this build has it (CUDA's also needs a visible GPU)."""
    if provider == "CUDAExecutionProvider":
        return cuda_unavailable_reason()
    import onnxruntime as ort

    available = ort.get_available_providers()
    if provider not in available:
        return (f"onnxruntime {ort.__version__} has no {provider} (available: {', '.join(available)}); "
                "install an onnxruntime build that has it")
    if provider in GPU_PROVIDERS:
        reason = cuda_unavailable_reason()
        return f"{provider} needs a CUDA GPU: {reason}" if reason else None
    return None


GPU_PROVIDERS = ("TensorrtExecutionProvider",)
"""Providers besides CUDA's that run only on an NVIDIA GPU."""


def require_provider(provider: str) -> None:
    """Raise BackendUnavailableError with the reason when `provider` cannot be used here."""
    reason = provider_unavailable_reason(provider)
    if reason:
        raise BackendUnavailableError(f"{provider} was requested but cannot be used: {reason}")


def require_cuda(what: str = "CUDA was requested") -> None:
    """Raise BackendUnavailableError with the reason when CUDA cannot be used here."""
    reason = cuda_unavailable_reason()
    if reason:
        raise BackendUnavailableError(f"{what} but cannot be used: {reason}")


@contextmanager
def device_context(spec: DeviceSpec, *, tf32: bool = False) -> Iterator[dict[str, Any]]:
    """Pin torch's TF32 flags to `tf32` for the duration (onnxruntime gets the same via
    the CUDA provider's `use_tf32`), and yield what the report should record."""
    environment: dict[str, Any] = {"device": spec.torch_device if spec.kind != "reference" else "reference",
                                   "tf32": tf32}
    if spec.kind != "cuda":
        yield environment
        return
    import torch

    require_cuda()
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    environment["gpu"] = torch.cuda.get_device_name(spec.index)
    environment["cuda"] = torch.version.cuda
    try:
        yield environment
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def versions() -> dict[str, Any]:
    """Library versions a report records beside its numbers."""
    import onnx
    import onnxruntime
    import torch

    return {
        "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
    }
