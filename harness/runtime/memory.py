"""Giving freed memory back to the system between the phases of a verification.

A verification allocates and frees activation-sized buffers phase after phase (torch's values,
each onnxruntime session, the fp64 replay). glibc keeps freed blocks below its (dynamic, up to
32 MB) mmap threshold inside its heaps, so without a trim the process's resident set carries
the slack of one phase into the next and its peak varies from run to run with the same live
data. `release_freed_memory` hands the free pages of every heap back (glibc's malloc_trim);
elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

logger = logging.getLogger(__name__)


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return the free pages of the allocator's heaps to the system; whether it could."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
