"""Run cases in worker processes, N at a time, so that a crash costs one case only.

Each case runs as `python -m harness.cli.worker JOB.json` in its own session (a terminal's
Ctrl-C reaches the parent alone, which then ends the workers), its output going to the case's
log. A worker that exits without writing its result is recorded as crashed, with its signal or
exit code and the last lines of its log. `stop(signum)` (from a signal handler) stops
scheduling, ends the running workers and lets `run` return what finished.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.contract.fileio import safe_filename
from harness.cli.progress import Progress
from harness.cli.sources import Task
from harness.report.document import crashed_case

JOBS_DIR = ".jobs"  # the workers' job and result files, inside the report directory
POLL_S = 0.1
TERMINATE_GRACE_S = 3.0
LOG_TAIL_LINES = 20
_SIGNAL_HINTS = {
    "SIGKILL": "killed by SIGKILL: out of memory (the kernel's OOM killer) or killed by hand",
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "aborted",
    "SIGBUS": "bus error",
}


@dataclass
class _Running:
    task: Task
    process: subprocess.Popen
    result: str
    log: str
    started: float


@dataclass
class Outcome:
    """What `run` returns: the finished cases (in finishing order) and the tasks not finished."""

    cases: list[dict[str, Any]] = field(default_factory=list)
    not_run: list[Task] = field(default_factory=list)
    signal: int | None = None


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` lines of a log file (empty when there is none)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def crash_reason(returncode: int) -> tuple[str, str | None, int | None]:
    """(reason, signal name, exit code) of a worker that exited without a result."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return _SIGNAL_HINTS.get(name, f"killed by {name}"), name, None
    if returncode == 0:
        return "the worker exited without writing its result", None, 0
    return f"the worker exited with code {returncode}", None, returncode


class Scheduler:
    """Runs `tasks` through workers, `jobs` at a time; calls `on_case` after each one."""

    def __init__(self, tasks: Sequence[Task], *, options: dict[str, Any], jobs: int, report_dir: str,
                 progress: Progress, on_case: Callable[[dict[str, Any]], None]) -> None:
        self.tasks = list(tasks)
        self.options = options
        self.jobs = max(1, jobs)
        self.report_dir = report_dir
        self.progress = progress
        self.on_case = on_case
        self.stop_signal: int | None = None

    def stop(self, signum: int) -> None:
        """Stop scheduling; `run` ends the running workers and returns."""
        self.stop_signal = signum

    def _environment(self) -> dict[str, str]:
        threads = str(self.options.get("threads") or 1)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONPATH": path,
                "PYTHONUNBUFFERED": "1"}

    def _launch(self, task: Task, scratch: str, environment: dict[str, str]) -> _Running:
        stem = safe_filename(task.name, "case")
        result = os.path.join(scratch, f"{stem}.result.json")
        log = os.path.join(self.report_dir, "logs", f"{stem}.log")
        job = {"task": task.to_dict(), "options": self.options, "report_dir": self.report_dir, "result": result,
               "log": os.path.relpath(log, self.report_dir), "parent_pid": os.getpid()}
        job_path = os.path.join(scratch, f"{stem}.job.json")
        with open(job_path, "w") as handle:
            json.dump(job, handle)
        with open(log, "wb") as log_handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "harness.cli.worker", job_path], stdin=subprocess.DEVNULL,
                stdout=log_handle, stderr=subprocess.STDOUT, env=environment, start_new_session=True,
            )
        self.progress.case_started(task.name)
        return _Running(task, process, result, log, time.monotonic())

    def _collect(self, running: _Running) -> dict[str, Any]:
        seconds = time.monotonic() - running.started
        returncode = running.process.returncode
        if returncode == 0 and os.path.exists(running.result):
            try:
                with open(running.result) as handle:
                    return json.load(handle)
            except (OSError, json.JSONDecodeError):
                pass
        reason, name, code = crash_reason(returncode)
        case = crashed_case(running.task.name, reason=reason, exit_code=code, signal=name,
                            log_tail=log_tail(running.log), seconds=seconds,
                            log=os.path.relpath(running.log, self.report_dir))
        case.update(position=running.task.position, family=running.task.family)
        return case

    @staticmethod
    def _end(processes: Sequence[subprocess.Popen]) -> None:
        """SIGTERM each worker's process group, then SIGKILL what is left after a grace period."""
        for process in processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + TERMINATE_GRACE_S
        for process in processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()

    def run(self) -> Outcome:
        outcome = Outcome()
        os.makedirs(os.path.join(self.report_dir, "logs"), exist_ok=True)
        scratch = os.path.join(self.report_dir, JOBS_DIR)  # a killed run's are cleared by the next
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        environment = self._environment()
        pending = deque(self.tasks)
        running: list[_Running] = []
        self.progress.start(len(self.tasks), sum(t.cost for t in self.tasks))

        def launch() -> None:
            while pending and len(running) < self.jobs and self.stop_signal is None:
                running.append(self._launch(pending.popleft(), scratch, environment))

        try:
            while (pending or running) and self.stop_signal is None:
                launch()
                time.sleep(POLL_S)
                finished = [r for r in running if r.process.poll() is not None]
                for item in finished:
                    running.remove(item)
                collected = [(self._collect(item), item) for item in finished]
                launch()  # the next cases start before the report is rewritten, not after
                for case, item in collected:
                    outcome.cases.append(case)
                    self.on_case(case)  # in the report before it is on the screen
                    self.progress.case_finished(case, item.task.cost)
        finally:
            self._end([r.process for r in running])
            self.progress.stop()
            shutil.rmtree(scratch, ignore_errors=True)
        outcome.not_run = [r.task for r in running] + list(pending)
        outcome.signal = self.stop_signal
        return outcome


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
