"""One run per report directory: `roundtrip run/verify/merge --out DIR` hold a lock on DIR.

The lock is an advisory `flock` on `DIR/.roundtrip.lock`, which also holds the holder's pid,
host, command and start time. The kernel drops the lock when its holder exits, however it
exits, so a run killed with SIGKILL leaves no lock behind, only its file: the next run takes it
over and says whose it was. A second run while the first holds the lock stops with a usage
error naming the holder, before it touches anything in DIR (the workers' job files and the
report of a run are its own).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from typing import Any

from harness.cli.errors import UsageError

logger = logging.getLogger(__name__)

LOCK_FILE = ".roundtrip.lock"


def _holder_text(holder: dict[str, Any]) -> str:
    if not holder:
        return "a run that left no details"
    where = "" if holder.get("host") in (None, socket.gethostname()) else f" on {holder['host']}"
    return f"pid {holder.get('pid')}{where}, `{holder.get('command', '?')}`, since {holder.get('started', '?')}"


def _read(handle) -> dict[str, Any]:
    handle.seek(0)
    try:
        found = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


class ReportLock:
    """The lock of a report directory, held from `acquire()` to `release()` (or the `with`
    block's end). `taken_over` names the holder whose stale lock file this one replaced."""

    def __init__(self, directory: str, command: str) -> None:
        self.path = os.path.join(directory, LOCK_FILE)
        self.command = command
        self.handle: Any = None
        self.taken_over: dict[str, Any] = {}

    def acquire(self) -> ReportLock:
        handle = self._lock_current_file()
        previous = _read(handle)
        if previous and previous.get("pid") != os.getpid():
            self.taken_over = previous
            logger.warning("took over the lock of %s: a run that ended without releasing it", _holder_text(previous))
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        handle.flush()
        self.handle = handle
        return self

    def _lock_current_file(self) -> Any:
        """The lock file, open and locked; the file at the path when the lock was taken (a
        holder that was releasing may have unlinked the file this one opened)."""
        while True:
            handle = open(self.path, "a+")  # noqa: SIM115 - held open for as long as the lock
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(handle)
                handle.close()
                raise UsageError(f"--out {os.path.dirname(self.path)} is in use by another roundtrip run "
                                 f"({_holder_text(holder)}); wait for it to finish, or pass another --out") from None
            try:
                if os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino:
                    return handle
            except FileNotFoundError:
                pass
            handle.close()  # locked a file its holder had just removed: lock the one there now

    def release(self) -> None:
        if self.handle is None:
            return
        try:
            os.unlink(self.path)  # while still locked: no other run can be holding this file
        except OSError:
            pass
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
        self.handle = None

    def __enter__(self) -> ReportLock:
        return self if self.handle is not None else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def note(self) -> str:
        """The line a run prints when it took over a stale lock ('' when it did not)."""
        if not self.taken_over:
            return ""
        return (f"note: took over the report directory's lock from {_holder_text(self.taken_over)}, which is no "
                "longer running")
