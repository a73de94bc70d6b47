"""How a capture rule replaces a library function for the capturing thread only.

A rule's `installed()` swaps the module attribute for a dispatcher (reference counted, so
nested or repeated captures install it once) and restores the original when the last user
leaves. The dispatcher calls the rule's replacement only on a thread inside `capturing()`;
every other thread, and the capturing thread outside a capture, gets the original function.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

_STATE = threading.local()
_INSTALL_LOCK = threading.Lock()


@contextmanager
def capturing() -> Iterator[None]:
    """Mark the current thread as capturing: installed rules apply to its calls."""
    depth = getattr(_STATE, "depth", 0)
    _STATE.depth = depth + 1
    try:
        yield
    finally:
        _STATE.depth = depth


def is_capturing() -> bool:
    """Whether the current thread is inside `capturing()`."""
    return getattr(_STATE, "depth", 0) > 0


@dataclass
class CaptureRule:
    """Replace `module.attribute` (the `target`, "module:attribute" or "module:Class.method") by
    `replacement` during capture.

    `settles` names the guard torch.export could not decide without the rule (as torch prints
    it, with the library line); `soundness` says why the replacement computes what the original
    computes for every size the guard's symbol can take.
    """

    target: str
    replacement: Callable[..., Any]
    settles: str
    soundness: str
    _users: int = field(default=0, repr=False)
    _original: Any = field(default=None, repr=False)

    @property
    def module_name(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def attribute(self) -> str:
        return self.target.split(":", 1)[1]

    def original(self) -> Callable[..., Any]:
        """The library's own function (also while the rule is installed)."""
        if self._original is not None:
            return self._original
        owner, name = _owner(importlib.import_module(self.module_name), self.attribute)
        return getattr(owner, name)

    @contextmanager
    def installed(self) -> Iterator[bool]:
        """Install the dispatcher for the block; yields False (and installs nothing) when the
        target's module cannot be imported, e.g. torchvision is not installed."""
        try:
            module = importlib.import_module(self.module_name)
        except ImportError:
            yield False
            return
        owner, name = _owner(module, self.attribute)
        with _INSTALL_LOCK:
            if self._users == 0:
                self._original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
                setattr(owner, name, self._dispatcher(self._original))
            self._users += 1
        try:
            yield True
        finally:
            with _INSTALL_LOCK:
                self._users -= 1
                if self._users == 0:
                    setattr(owner, name, self._original)
                    self._original = None

    def _dispatcher(self, original: Callable[..., Any]) -> Callable[..., Any]:
        replacement = self.replacement

        @functools.wraps(original)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            if is_capturing():
                return replacement(*args, **kwargs)
            return original(*args, **kwargs)

        dispatch.__roundtrip_capture_rule__ = self  # type: ignore[attr-defined]
        return dispatch


def _owner(module: Any, attribute: str) -> tuple[Any, str]:
    """The object holding `attribute` ("name" on the module, or "Class.method") and the last name."""
    *path, name = attribute.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    return owner, name


RULES: list[CaptureRule] = []


def rule(target: str, *, settles: str, soundness: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the capture-time replacement of `target`."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        RULES.append(CaptureRule(target, fn, settles=settles, soundness=soundness))
        return fn

    return register


def original_of(target: str) -> Callable[..., Any]:
    """The library's own function behind the rule for `target` (for a rule that wraps it)."""
    for registered in RULES:
        if registered.target == target:
            return registered.original()
    raise KeyError(f"no capture rule for {target!r}")
