"""Progress of a run: a live rich display (cases running, elapsed time, ETA) on a terminal,
plain lines for CI logs otherwise (stdout not a terminal, or CI=true in the environment). Each
finished case prints its lines (harness.cli.lines: the short form, at most 120 characters a
line, or with `verbose` the long one).

The ETA weighs cases by their cost estimates (recorded seconds or parameter counts): the time
so far per unit of finished cost, times the cost still to run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol, TextIO

from harness.cli.lines import WIDTH, case_lines


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress(Protocol):
    def start(self, total_cases: int, total_cost: float) -> None: ...
    def case_started(self, name: str) -> None: ...
    def case_finished(self, case: Mapping[str, Any], cost: float) -> None: ...
    def message(self, text: str) -> None: ...
    def stop(self) -> None: ...


class _Counter:
    """Cases and cost done, and the ETA they imply."""

    def __init__(self) -> None:
        self.started_at = time.monotonic()
        self.total_cases = 0
        self.total_cost = 0.0
        self.done_cases = 0
        self.done_cost = 0.0

    def begin(self, total_cases: int, total_cost: float) -> None:
        self.started_at = time.monotonic()
        self.total_cases, self.total_cost = total_cases, total_cost

    def finish(self, cost: float) -> None:
        self.done_cases += 1
        self.done_cost += cost

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started_at

    @property
    def eta(self) -> float | None:
        if self.done_cost <= 0:
            return None
        return self.elapsed / self.done_cost * max(self.total_cost - self.done_cost, 0.0)


class PlainProgress(_Counter):
    """One line per event, for logs (stdout is not a terminal)."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False, width: int = WIDTH) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.verbose, self.width = verbose, width

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self, total_cases: int, total_cost: float) -> None:
        self.begin(total_cases, total_cost)

    def case_started(self, name: str) -> None:
        self._print(f"[{self.done_cases:>3}/{self.total_cases}] start {name} (elapsed {clock(self.elapsed)})")

    def case_finished(self, case: Mapping[str, Any], cost: float) -> None:
        self.finish(cost)
        prefix = f"[{self.done_cases:>{len(str(self.total_cases))}}/{self.total_cases} ETA {clock(self.eta)}] "
        first, *rest = case_lines(case, verbose=self.verbose, width=self.width - len(prefix))
        self._print(prefix + first)
        for line in rest:  # the reason, under the case
            self._print(" " * len(prefix) + line)

    def message(self, text: str) -> None:
        self._print(text)

    def stop(self) -> None:
        pass


class RichProgress(_Counter):
    """A live display: the whole run's bar with elapsed time and ETA, and one line per running
    case; each finished case's line is printed above it."""

    def __init__(self, console: Any = None, *, verbose: bool = False, width: int = WIDTH) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console or Console()
        self.verbose, self.width = verbose, min(width, self.console.width)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
                                 TextColumn("ETA {task.fields[eta]}"), console=self.console, transient=True)
        self.run_task: Any = None
        self.running: dict[str, Any] = {}

    def start(self, total_cases: int, total_cost: float) -> None:
        self.begin(total_cases, total_cost)
        self.progress.start()
        self.run_task = self.progress.add_task("run", total=total_cost or 1.0, counts=f"0/{total_cases}", eta="--:--")

    def case_started(self, name: str) -> None:
        self.running[name] = self.progress.add_task(f"  {name}", total=None, counts="", eta="")

    def case_finished(self, case: Mapping[str, Any], cost: float) -> None:
        self.finish(cost)
        task = self.running.pop(case["name"], None)
        if task is not None:
            self.progress.remove_task(task)
        self.progress.update(self.run_task, advance=cost, counts=f"{self.done_cases}/{self.total_cases}",
                             eta=clock(self.eta))
        for line in case_lines(case, verbose=self.verbose, width=self.width):
            self.progress.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def message(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)

    def stop(self) -> None:
        self.progress.stop()


def live_display(stream: TextIO) -> bool:
    """Whether to draw the live display: a terminal, and not a CI job (CI=true: its log is a
    terminal to some runners, but nobody watches it redraw)."""
    return stream.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


def make_progress(stream: TextIO | None = None, *, verbose: bool = False) -> Progress:
    """Rich on a terminal, plain lines otherwise; `verbose`: each case's long line."""
    stream = stream or sys.stdout
    return RichProgress(verbose=verbose) if live_display(stream) else PlainProgress(stream, verbose=verbose)
