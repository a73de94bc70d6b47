"""Errors of the runtime layer, and the one-line form a report gives any error."""

from __future__ import annotations

import functools
import re
from typing import Any


class BackendUnavailableError(RuntimeError):
    """The requested backend or device cannot run here; the message says why."""


class ModelLoadError(BackendUnavailableError):
    """The backend is there but refuses this model (invalid graph, unsupported op, bad types)."""


class BackendRunError(RuntimeError):
    """The backend loaded the model but failed to run it (onnxruntime's own error, or the
    reference evaluator's); the original error is the cause."""


BACKEND_ERRORS: tuple[type[BaseException], ...] = (BackendUnavailableError, BackendRunError)
"""What the backend raises through this layer: a model it cannot load (ModelLoadError), a device
it cannot use, a run that fails. The analysis catches these around a backend call and nothing
else, so an error of the harness's own code is never blamed on the backend."""


@functools.cache
def onnxruntime_errors() -> tuple[type[BaseException], ...]:
    """The exception types onnxruntime raises from InferenceSession and run: its status
    exceptions (Fail, InvalidArgument, InvalidGraph, RuntimeException, ...), and the
    RuntimeError, ValueError and TypeError its Python layer and pybind11 raise."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    status = tuple(value for value in vars(state).values()
                   if isinstance(value, type) and issubclass(value, Exception))
    return (*status, RuntimeError, ValueError, TypeError)


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
_ORT_PREFIX = re.compile(r"^\s*\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*")
_SCRATCH_FILE = re.compile(r"Load model from \S+ failed:\s*")
_UNREGISTERED = re.compile(
    r"(?P<domain>[\w.\-]*):(?P<op>[\w.\-]+)\((?P<version>-?\d+)\) is not a registered function/op")


def load_failure(error: BaseException, model: Any = None) -> str:
    """onnxruntime's reason for refusing a model, the part a reader needs first: its status
    code and the scratch file it loaded from left out (the status name, NOT_IMPLEMENTED say,
    kept), and an operator it does not know named with its domain (and the nodes that use it,
    from `model`) before anything else."""
    text = _SCRATCH_FILE.sub("", _ORT_PREFIX.sub("", str(error).strip()), count=1)
    found = _UNREGISTERED.search(text)
    if not found:
        return text
    domain, op = found["domain"] or "ai.onnx", found["op"]
    nodes = [n.name or n.output[0] for n in getattr(getattr(model, "graph", None), "node", [])
             if n.op_type == op and (n.domain or "ai.onnx") == domain]
    version = f" (opset {found['version']})" if int(found["version"]) >= 0 else ""
    used = f" (node{'s' if len(nodes) > 1 else ''} {', '.join(repr(n) for n in nodes[:3])})" if nodes else ""
    return (f"{domain}::{op}{used} cannot run: onnxruntime has no kernel or function for operator {op!r} of "
            f"domain {domain!r}{version}; register a custom-op library for it, or export "
            "without it")
