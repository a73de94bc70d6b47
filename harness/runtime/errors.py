"""Errors of the runtime layer, and the one-line form a report gives any error."""

from __future__ import annotations


class BackendUnavailableError(RuntimeError):
    """The requested backend or device cannot run here; the message says why."""


class ModelLoadError(BackendUnavailableError):
    """The backend is there but refuses this model (invalid graph, unsupported op, bad types)."""


def first_line(error: BaseException, limit: int = 500) -> str:
    """`Type: first non-empty line of the message`, cut to `limit` characters: how a report
    names an error without its traceback or a backend's multi-line dump."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0].strip() if lines else ''}"[:limit]


MISSING_KERNEL_MARKS = ("NOT_IMPLEMENTED", "Could not find an implementation")
"""How onnxruntime says it has no kernel for a node's operator, version and types."""


def missing_kernel(error: BaseException) -> bool:
    """Whether `error` is onnxruntime refusing a node it has no kernel for (a bfloat16 Gemm on
    the CPU, say), rather than a fault of the model or of the run."""
    text = str(error)
    return any(mark in text for mark in MISSING_KERNEL_MARKS)
