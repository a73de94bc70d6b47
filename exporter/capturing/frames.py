"""Which frames of a stack are the user's code, and how to name them: the one filter that error
messages (a failed capture), specialisation reports and provenance (`roundtrip.source`) share."""

from __future__ import annotations

import os
import site
import sys
from functools import lru_cache

import torch

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_EXPORTER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_user_file(file: str, *, strict: bool = True) -> bool:
    """Whether a frame in `file` is the user's code: never torch's. With `strict` (what messages
    quote) also not the exporter's own code nor code compiled at run time (`<string>`); provenance
    passes strict=False, so an op a capture rule makes is located in that rule and an op of a
    generated module at the generated line."""
    if _inside_torch(file):
        return False
    if not strict:
        return True
    return not file.startswith("<") and not os.path.abspath(file).startswith(_EXPORTER_DIR)


def _inside_torch(file: str) -> bool:
    return os.path.abspath(file).startswith(_TORCH_DIR) or file.replace(os.sep, "/").startswith("torch/")


@lru_cache(maxsize=4096)
def short_path(file: str) -> str:
    """Path relative to the working directory, or to site-packages for installed code."""
    absolute = os.path.abspath(file)
    for root in _site_roots():
        if absolute.startswith(root):
            return absolute[len(root) :]
    cwd = os.getcwd() + os.sep
    if absolute.startswith(cwd):
        return absolute[len(cwd) :]
    return file


@lru_cache(maxsize=1)
def _site_roots() -> tuple[str, ...]:
    roots = list(site.getsitepackages()) + [site.getusersitepackages()]
    roots += [p for p in sys.path if p.endswith("site-packages")]
    return tuple(sorted({os.path.abspath(r) + os.sep for r in roots}, key=len, reverse=True))
