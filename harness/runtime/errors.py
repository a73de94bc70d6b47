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
