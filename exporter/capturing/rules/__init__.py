"""Capture-time rules: scoped replacements of library functions that torch.export cannot trace
with data-dependent (unbacked) sizes as written.

torchvision's detection post-processing branches on sizes that depend on the data: how many
boxes passed the score threshold, how many NMS kept. torch.export represents those sizes as
unbacked symbols (`u0`, `u1`) and refuses a Python `if` on them (`GuardOnDataDependentSymNode`).
A rule replaces one library function, only while `exporter.capture` traces and only on the
capturing thread, by a version that settles the guard: it names the guard (`settles`) and says
why the replacement computes what the original computes for every size (`soundness`).

Rules never edit the library and never ask users to: `applied()` installs them around a capture
and restores the originals afterwards; another thread calling the same function meanwhile gets
the original (see `patching`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from exporter.capturing.rules.patching import CaptureRule, RULES, capturing, rule

__all__ = ["CaptureRule", "RULES", "applied", "capturing", "rule", "describe"]


@contextmanager
def applied() -> Iterator[list[CaptureRule]]:
    """Install every registered rule whose library is importable, for the current thread, and
    restore the originals on exit. Yields the rules that were installed."""
    _load_builtin_rules()
    with ExitStack() as stack:
        installed = [r for r in RULES if stack.enter_context(r.installed())]
        stack.enter_context(capturing())
        yield installed


def describe() -> list[dict[str, str]]:
    """One dict per registered rule: target, settles, soundness (the documentation's table)."""
    _load_builtin_rules()
    return [{"target": r.target, "settles": r.settles, "soundness": r.soundness} for r in RULES]


def _load_builtin_rules() -> None:
    from exporter.capturing.rules import torchvision_detection  # noqa: F401  (registers on import)
