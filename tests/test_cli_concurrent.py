"""Two runs into one report directory: the second stops with exit 2 and names the first (its
pid and command) before touching anything; the first's report is its own and complete. A lock
left by a run that is gone is taken over, with a note. Real processes, tiny cases.

`held` is what `roundtrip verify tests.test_cli_concurrent:held` builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.lock import LOCK_FILE, ReportLock

REPO = Path(__file__).resolve().parent.parent
RELEASE = "ROUNDTRIP_TEST_RELEASE"


def held():
    """A tiny model, built once the file named by $ROUNDTRIP_TEST_RELEASE exists."""
    import torch

    while not os.path.exists(os.environ[RELEASE]):
        time.sleep(0.1)
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()).eval(), (torch.randn(2, 8),)


def _command(out: Path, target: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "verify", target, "--out", str(out), "-j", "1"]


def test_a_second_run_into_the_same_directory_is_refused_and_the_first_completes(tmp_path):
    out, release = tmp_path / "report", tmp_path / "release"
    environment = {**os.environ, RELEASE: str(release)}
    first = subprocess.Popen(_command(out, "tests.test_cli_concurrent:held"), cwd=REPO, env=environment,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        logs = out / "logs"
        while first.poll() is None and not (logs.is_dir() and any(logs.iterdir())):  # its worker is running
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()
        second = subprocess.run(_command(out, "tests.test_cli_concurrent:held"), cwd=REPO, env=environment,
                                capture_output=True, text=True)
        release.touch()
        stdout, stderr = first.communicate()
    finally:
        release.touch()
        first.kill()
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"is in use by another roundtrip run (pid {first.pid}" in second.stderr, second.stderr
    assert "roundtrip verify tests.test_cli_concurrent:held" in second.stderr and not second.stdout
    assert first.returncode == 0, stdout + stderr
    document = json.loads((out / "parity.json").read_text())
    assert document["status"] == "complete" and str(first.pid) not in document["command"]
    assert [c["name"] for c in document["cases"]] == ["tests.test_cli_concurrent:held"]
    assert document["cases"][0]["status"] == "pass"
    assert not (out / LOCK_FILE).exists(), "the lock outlived its run"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_lock_left_by_a_run_that_is_gone_is_taken_over_with_a_note(tmp_path):
    stale = {"pid": _dead_pid(), "host": os.uname().nodename, "command": "roundtrip run --tier full",
             "started": "2026-01-01T00:00:00Z"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(stale))
    with ReportLock(str(tmp_path), "roundtrip run") as lock:
        assert f"pid {stale['pid']}" in lock.note() and "no longer running" in lock.note()
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
        with pytest.raises(Exception, match=f"in use by another roundtrip run \\(pid {os.getpid()}"):
            ReportLock(str(tmp_path), "roundtrip run --again").acquire()
    assert not (tmp_path / LOCK_FILE).exists()
    with ReportLock(str(tmp_path), "roundtrip run") as lock:  # released: free again, nothing taken over
        assert lock.note() == ""
