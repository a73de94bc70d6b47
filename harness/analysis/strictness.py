"""Strict mode: whether an error of the harness's own code is raised or recorded.

The analysis catches only what the backend (or torch, replaying an op) raises, and reports it
as a finding about the backend. Anything else that goes wrong is a bug of the harness: in strict
mode it is raised; otherwise the row records it as a harness error (never as the backend's
fault), so that one bad op does not cost the whole report. The test suite runs strict: set
ROUNDTRIP_STRICT=1 in the environment, or pass `strict=True` to `harness.verify`.

Code around such a step wraps it in `with harness_errors(what, strict, notes):`, catching the
backend's own errors (its `findings`) first; the context manager does the rest.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

STRICT_ENV = "ROUNDTRIP_STRICT"
_TRUE = ("1", "true", "yes", "on")


def is_strict(strict: bool | None = None) -> bool:
    """`strict` when given, else whether the ROUNDTRIP_STRICT environment variable is set to
    1/true/yes/on."""
    if strict is not None:
        return strict
    return os.environ.get(STRICT_ENV, "").strip().lower() in _TRUE


def harness_error(error: Exception, what: str, strict: bool | None = None) -> str:
    """Raise `error` in strict mode; otherwise log it and return the note a row records:
    `harness error while <what>: <Type>: <message>`."""
    if is_strict(strict):
        raise error
    logger.warning("harness error while %s", what, exc_info=error)
    return f"harness error while {what}: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:400]


@dataclass
class Caught:
    """What `harness_errors` caught: the note recorded for a harness error, None when none."""

    note: str | None = None

    def __bool__(self) -> bool:
        return self.note is not None


@contextmanager
def harness_errors(what: str, strict: bool | None = None, notes: list[str] | None = None, *,
                   findings: tuple[type[BaseException], ...] = ()) -> Iterator[Caught]:
    """Around harness code that may fail (`what`: "computing the fp64 truth of relu_3"): an
    exception escaping the block is raised in strict mode; otherwise it becomes the `Caught`
    note (`harness_error`), appended to `notes` when given, and execution continues after the
    block. `findings`: exceptions that are findings about the model or the backend (a float64
    call torch cannot make), passed through unchanged for the caller to report.
    """
    caught = Caught()
    try:
        yield caught
    except findings:
        raise
    except Exception as error:  # the harness's own code: raised in strict mode, else a note
        caught.note = harness_error(error, what, strict)
        if notes is not None:
            notes.append(caught.note)
