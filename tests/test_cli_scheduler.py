"""The run loop's own order and the report it rewrites as cases finish, without real workers:
the next case starts before the finished one's report is written (a large report's rewrite
leaves no slot idle), and each case is validated once as it arrives."""

from __future__ import annotations

import io

import pytest

from harness.cli import commands
from harness.cli import scheduler as scheduling
from harness.cli.progress import make_progress
from harness.cli.sources import Task
from harness.report.document import error_case, new_document


class _Finished:
    """A worker process that has already exited, successfully."""

    returncode = 0

    def poll(self) -> int:
        return 0


def _fake_workers(monkeypatch, events: list[tuple[str, str]]) -> None:
    def launch(self, task, scratch, environment):
        events.append(("start", task.name))
        return scheduling._Running(task, _Finished(), "", "", 0.0)

    monkeypatch.setattr(scheduling.Scheduler, "_launch", launch)
    monkeypatch.setattr(scheduling.Scheduler, "_collect",
                        lambda self, running: {"name": running.task.name, "position": running.task.position})
    monkeypatch.setattr(scheduling, "POLL_S", 0.0)


@pytest.mark.parametrize("jobs, expected", [
    (1, [("start", "a"), ("start", "b"), ("report", "a"), ("start", "c"), ("report", "b"), ("report", "c")]),
    (2, [("start", "a"), ("start", "b"), ("start", "c"), ("report", "a"), ("report", "b"), ("report", "c")]),
])
def test_next_case_starts_before_the_finished_one_is_reported(monkeypatch, tmp_path, jobs, expected):
    events: list[tuple[str, str]] = []
    _fake_workers(monkeypatch, events)
    tasks = [Task(name, {"kind": "zoo", "case": name}, position=i) for i, name in enumerate("abc")]
    run = scheduling.Scheduler(tasks, options={}, jobs=jobs, report_dir=str(tmp_path),
                               progress=make_progress(io.StringIO()),
                               on_case=lambda case: events.append(("report", case["name"])))
    outcome = run.run()
    assert events == expected
    assert [case["name"] for case in outcome.cases] == ["a", "b", "c"] and not outcome.not_run


def _case(name: str, position: int, status: str = "error") -> dict:
    case = error_case(name, error="ExportError: aten.foo has no symbolic")
    case.update(position=position, status=status)
    return case


def test_running_report_validates_each_case_once_and_the_rest_at_each_rewrite(monkeypatch, tmp_path):
    calls: list[tuple[str, object]] = []
    real_case, real_write = commands.case_error, commands.write_report_dir
    monkeypatch.setattr(commands, "case_error", lambda case: (calls.append(("case", case["name"])),
                                                               real_case(case))[1])

    def write(document, out, **kwargs):
        calls.append(("write", kwargs["cases_validated"]))
        return real_write(document, out, **kwargs)

    monkeypatch.setattr(commands, "write_report_dir", write)
    document = new_document(source="roundtrip run", device="cpu", exporter="roundtrip", seed=0, command="roundtrip run")
    report = commands._Report(document, str(tmp_path), None, "")
    report.add(_case("b", 1))
    report.add(_case("a", 0))
    assert calls == [("case", "b"), ("write", True), ("case", "a"), ("write", True)]
    assert [c["name"] for c in document["cases"]] == ["a", "b"] and not document["internal_errors"]

    # a case the schema refuses: every later rewrite validates the whole document, which names it
    calls.clear()
    report.add(_case("c", 2, status="maybe"))
    assert calls == [("case", "c"), ("write", False)]
    assert document["internal_errors"] and "maybe" in document["internal_errors"][0]
    assert (tmp_path / "parity.json").exists()  # the source of truth is written all the same
    report.write()
    assert calls[-1] == ("write", False)
