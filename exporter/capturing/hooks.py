"""Capture hooks: context managers entered around torch.export capture, registered by the
symbolic families whose ops need help to reach the registry whole."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

CaptureHook = Callable[[Any, frozenset], AbstractContextManager]
CAPTURE_HOOKS: list[CaptureHook] = []


def capture_hook(fn: CaptureHook) -> CaptureHook:
    """Register `fn(model, kept_targets)`, a context manager entered around torch.export capture.

    For symbolic families whose ops need help to reach the registry whole: e.g. the recurrent
    layers, whose decompositions unroll the sequence and would fix a dynamic sequence length.
    """
    CAPTURE_HOOKS.append(fn)
    return fn
