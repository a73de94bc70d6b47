"""Progress of a run: plain lines for logs, a rich live display on a terminal; both show each
finished case, the elapsed time and an ETA weighted by the cases' costs."""

from __future__ import annotations

import io

import pytest

from harness.cli import progress as progress_module
from harness.cli.progress import PlainProgress, RichProgress, clock, make_progress
from harness.report.document import crashed_case


@pytest.mark.parametrize("seconds, text", [(None, "--:--"), (0, "0:00"), (75.4, "1:15"), (3725, "1:02:05")])
def test_clock(seconds, text):
    assert clock(seconds) == text


def test_plain_lines_weigh_the_eta_by_cost(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    shown = PlainProgress(stream)
    shown.start(3, 10.0)
    shown.case_started("big")
    now[0] += 60
    shown.case_finished(crashed_case("big", reason="aborted", signal="SIGABRT", seconds=60.0), 2.0)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[  0/3] start big (elapsed 0:00)"
    # 60 s for 2 of 10 cost units: 8 units left take 240 s; the reason on the case's second line
    assert lines[1].startswith("[1/3 ETA 4:00] CRASH big") and lines[2].strip() == "aborted"
    assert lines[2].startswith(" " * len("[1/3 ETA 4:00] ")) and all(len(line) <= 120 for line in lines)


def test_rich_display_shows_running_cases_and_prints_finished_ones():
    from rich.console import Console

    buffer = io.StringIO()
    shown = RichProgress(Console(file=buffer, force_terminal=True, width=200))
    shown.start(2, 2.0)
    shown.case_started("first")
    assert [task.description.strip() for task in shown.progress.tasks] == ["run", "first"]
    shown.case_finished(crashed_case("first", reason="aborted", signal="SIGABRT", seconds=1.0), 1.0)
    assert [task.description.strip() for task in shown.progress.tasks] == ["run"]
    assert shown.progress.tasks[0].fields["counts"] == "1/2" and shown.progress.tasks[0].fields["eta"] != "--:--"
    shown.stop()
    assert "CRASH first" in buffer.getvalue()


def test_a_terminal_gets_the_live_display_and_a_log_the_lines(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    assert isinstance(make_progress(io.StringIO()), PlainProgress)
    assert isinstance(make_progress(Terminal()), RichProgress)
    monkeypatch.setenv("CI", "true")  # a CI log gets plain lines even where the runner gives it a terminal
    assert isinstance(make_progress(Terminal()), PlainProgress)
