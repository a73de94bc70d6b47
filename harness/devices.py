"""Device set-up for a verification: CUDA availability and the TF32 setting, pinned and recorded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from harness.backend import BackendUnavailableError, DeviceSpec, cuda_unavailable_reason


@contextmanager
def device_context(spec: DeviceSpec, *, tf32: bool = False) -> Iterator[dict[str, Any]]:
    """Pin torch's TF32 flags to `tf32` for the duration (onnxruntime gets the same via
    the CUDA provider's `use_tf32`), and yield what the report should record."""
    environment: dict[str, Any] = {"device": spec.torch_device if spec.kind != "reference" else "reference",
                                   "tf32": tf32}
    if spec.kind != "cuda":
        yield environment
        return
    reason = cuda_unavailable_reason()
    if reason:
        raise BackendUnavailableError(f"CUDA was requested but cannot be used: {reason}")
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    environment["gpu"] = torch.cuda.get_device_name(spec.index)
    environment["cuda"] = torch.version.cuda
    try:
        yield environment
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
