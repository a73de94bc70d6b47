"""Atomic file writes: readers see the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


@contextmanager
def atomic_writer(path: str | os.PathLike, *, sync: bool = True) -> Iterator[IO[bytes]]:
    """A binary file to write `path` through: written beside it under a temporary name, synced
    to disk (unless `sync=False`), and renamed over `path` when the block ends; removed (and
    `path` left as it was) on error. Lets a writer stream large content (model weights) without
    holding it in memory. Readers see the old file or the new one either way; `sync` also makes
    the new one survive a power cut, at the cost of waiting for the disk."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode())
