"""Giving freed memory back to the system between the phases of a verification.

A verification allocates and frees activation-sized buffers phase after phase (torch's values,
each onnxruntime session, the fp64 replay). glibc keeps freed blocks below its (dynamic, up to
32 MB) mmap threshold inside its heaps, so without a trim the process's resident set carries
the slack of one phase into the next and its peak varies from run to run with the same live
data. `release_freed_memory` hands the free pages of every heap back (glibc's malloc_trim);
elsewhere it does nothing.

Fresh pages are not free either: the kernel faults in and zeroes each page a new mapping
touches, at about 0.5 s of system CPU per GB on this project's 2-core VM, and a block above
glibc's mmap threshold (dynamic, at most 32 MB) is mapped on every allocation and unmapped on
every free. The fp64 replays allocate such blocks op after op (float64 copies of torch's
values, each op's output, a convolution's unfolded input in 48 MB slices): vgg16's two fp64
passes mapped 4.9 GB of fresh pages, superresolution's 2.7 GB. `reusing_freed_memory` scopes a
pass so that blocks up to `REUSED_BLOCK_BYTES` come from the heap, where a freed block's pages
are reused by the next allocation, and trims once when the pass is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


REUSED_BLOCK_BYTES = 32 * 2**20
"""Inside `reusing_freed_memory`, blocks up to this size come from the heap: glibc's own largest
dynamic threshold, fixed from the start, so what the scope changes is mostly that nothing is
trimmed inside it (the replay used to trim after every sliced layer). Measured on vgg16 at load
3-5 (one process each, bench/bench_memory.py for the peak): the verification's page faults fell
from 1.73 M to 1.25 M (system CPU 4.8-5.1 s to 3.0 s) and its peak stayed at 2.08-2.10 GB; at
64 MB the peak rose by 40-70 MB, at 1 GB superresolution's by 0.5 GB (blocks of every size
fragment the heap)."""

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # glibc's mallopt parameters
GLIBC_MMAP_MAX = 65536
"""glibc's default for how many blocks it may map at once, restored after `any_size_from_heap`."""
GLIBC_MMAP_THRESHOLD = 32 * 2**20
"""glibc's largest dynamic mmap threshold (64-bit): where its threshold settles once the process
has freed a block that large, restored after a `reusing_freed_memory` scope; the trim threshold
is restored to twice it, as glibc keeps it."""

_reusing = 0  # depth of nested reusing_freed_memory scopes


@functools.cache
def _libc(symbol: str):
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        function = getattr(ctypes.CDLL(name), symbol)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune or trim
        return None
    function.argtypes, function.restype = ([ctypes.c_size_t] if symbol == "malloc_trim" else
                                           [ctypes.c_int, ctypes.c_int]), ctypes.c_int
    return function


def _malloc_trim():
    return _libc("malloc_trim")


def release_freed_memory() -> bool:
    """Return the free pages of the allocator's heaps to the system; whether it could. Inside a
    `reusing_freed_memory` scope it does nothing (the scope trims when it ends)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    if not _reusing:
        trim(0)
    return True


@contextmanager
def reusing_freed_memory(block_bytes: int = REUSED_BLOCK_BYTES) -> Iterator[bool]:
    """A scope in which blocks up to `block_bytes` are allocated from glibc's heap and freed
    into it (not mapped and unmapped), and nothing is trimmed, so that a freed block's pages are
    reused instead of faulted in and zeroed again; at its end the thresholds return to glibc's
    settled values (`GLIBC_MMAP_THRESHOLD`) and the heaps are trimmed. Yields whether the
    allocator could be tuned (glibc only). Nested scopes act as the outermost one."""
    global _reusing
    mallopt = _libc("mallopt")
    if mallopt is None or _reusing:
        _reusing += 1
        try:
            yield mallopt is not None
        finally:
            _reusing -= 1
        return
    tuned = bool(mallopt(M_MMAP_THRESHOLD, block_bytes)) and bool(mallopt(M_TRIM_THRESHOLD, 2**30))
    _reusing += 1
    try:
        yield tuned
    finally:
        _reusing -= 1
        mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD)
        mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_THRESHOLD)
        release_freed_memory()


@contextmanager
def any_size_from_heap() -> Iterator[bool]:
    """A scope in which every block, however large, comes from glibc's heap (mapping is off:
    glibc takes no mmap threshold above `GLIBC_MMAP_THRESHOLD`) and nothing is trimmed until
    its end, where the heap is trimmed even inside a `reusing_freed_memory` scope, so that no
    large free block outlives it. For phases that free large blocks and allocate the same sizes
    again, holding nothing large in between: two onnxruntime sessions that pack the same weights
    one after the other (vgg16's first Linear: 411 MB packed), the second packing into the pages
    the first freed instead of faulting in and zeroing fresh ones. Yields whether the allocator
    could be tuned (glibc only)."""
    global _reusing
    mallopt = _libc("mallopt")
    if mallopt is None:
        yield False
        return
    tuned = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**30))
    _reusing += 1
    try:
        yield tuned
    finally:
        _reusing -= 1
        mallopt(M_MMAP_MAX, GLIBC_MMAP_MAX)
        if not _reusing:
            mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_THRESHOLD)
        trim = _malloc_trim()
        if trim is not None:
            trim(0)
