"""Atomic file writes (readers see the old file or the new one, never half of either), and the
one sanitiser that turns names into file names."""

from __future__ import annotations

import os
import re
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
        os.chmod(temp, _mode_for(path))  # mkstemp's file is private (0600); a written file is not
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


def _mode_for(path: str) -> int:
    """The permissions `path` keeps when it exists, else what open() would give it (0666 less
    the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~umask()


def umask() -> int:
    """The process's umask, read without changing it where the OS says (Linux), else by
    setting and restoring it."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode())


_UNSAFE_IN_FILENAMES = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_FILENAME_LENGTH = 120  # well under the 255 bytes of common file systems, with room for suffixes


def safe_filename(name: str, fallback: str = "unnamed") -> str:
    """`name` (an op, case or test name) as one path component, the repository's one such
    sanitiser: each run of characters outside [A-Za-z0-9_.-] becomes "_", leading and trailing
    dots and underscores go (no "..", no hidden files), at most MAX_FILENAME_LENGTH characters;
    `fallback` when nothing is left."""
    return _UNSAFE_IN_FILENAMES.sub("_", name).strip("._")[:MAX_FILENAME_LENGTH] or fallback
