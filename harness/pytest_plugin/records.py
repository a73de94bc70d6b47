"""Verification records, per test, from the process that ran the test to the one that reports.

A test's verifications become report cases (harness.report.document) on the process that ran
it. Each case travels on that test phase's report, in `report.user_properties` as one
("roundtrip_case", JSON) entry: with xdist the report reaches the controller as soon as the
phase ends, so a worker that crashes later loses only the test it was running, which the
controller records as crashed. On the controller (or the single process) the entries are taken
off the report before other plugins see it; what remains on the test's own `user_properties` is
compact, and is what `--junitxml` writes per test: `roundtrip_verdict`, `roundtrip_worst_op`,
`roundtrip_worst_ratio`, `roundtrip_worst_op_max_abs`, `roundtrip_max_abs`, `roundtrip_reproducer`.

The controller alone writes the report directory (`--roundtrip-report-dir`): parity.json,
parity.md and index.html, in the schema `roundtrip run` writes, with source "pytest".
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from harness.pytest_plugin.state import RunState, run_state

logger = logging.getLogger(__name__)

CASE_PROPERTY = "roundtrip_case"
JUNIT_PROPERTIES = ("verdict", "worst_op", "worst_ratio", "worst_op_max_abs", "max_abs")
_PENDING = pytest.StashKey[list[str]]()


def record(item: pytest.Item, case: dict[str, Any], headline: dict[str, Any] | None = None) -> None:
    """Add one report case (and its headline: verdict, worst op, errors) to the test `item`."""
    headline = dict(headline or {})
    for key in JUNIT_PROPERTIES:
        if headline.get(key) is not None:
            item.user_properties.append((f"roundtrip_{key}", headline[key]))
    if case.get("status") in ("error", "crashed"):
        item.user_properties.append(("roundtrip_verdict", case["status"]))
    reproducers = case.get("reproducers") or {}
    for folder in reproducers.values():
        item.user_properties.append(("roundtrip_reproducer", folder))
    payload = {"case": case, "headline": headline}
    item.stash.setdefault(_PENDING, []).append(json.dumps(payload, default=str))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Put the cases recorded so far on this phase's report (a copy of the properties list: the
    test's own list, which junitxml reads at teardown, stays compact)."""
    report = yield
    pending = item.stash.get(_PENDING, None)
    if pending:
        report.user_properties = [*report.user_properties, *((CASE_PROPERTY, text) for text in pending)]
        pending.clear()
    return report


def add_case(state: RunState, case: dict[str, Any], headline: dict[str, Any], nodeid: str) -> None:
    """Keep `case` for the report, and its line for the terminal summary."""
    state.cases.append(case)
    state.headlines.append({**headline, "test": nodeid, "name": case.get("name"), "status": case.get("status"),
                            "detail": case.get("error") or (case.get("crash") or {}).get("reason", "")})


class Collector:
    """The controller's (or single process's) side: cases off the reports, crashed tests, the
    report directory. Registered per run by the plugin's pytest_configure (hooks such as
    pytest_runtest_logreport get no config; this object holds it)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = run_state(config)
        self.node_errors: dict[str, str] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the cases a report carries, and take them off it."""
        if not any(name == CASE_PROPERTY for name, _ in report.user_properties):
            return
        kept = []
        for name, value in report.user_properties:
            if name == CASE_PROPERTY:
                payload = json.loads(value)
                add_case(self.state, payload["case"], payload.get("headline") or {}, report.nodeid)
            else:
                kept.append((name, value))
        report.user_properties = kept

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: remember why a worker went down, for its crashed test's entry."""
        if error:
            self.node_errors[node.gateway.id] = str(error).strip().splitlines()[-1][:300]

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """xdist: the worker running `crashitem` died; record that test as crashed."""
        from harness.report.document import crashed_case

        worker = getattr(getattr(report, "node", None), "gateway", None)
        reason = str(report.longrepr)
        if worker is not None and self.node_errors.get(worker.id):
            reason = f"{reason} ({self.node_errors[worker.id]})"
        add_case(self.state, crashed_case(crashitem, reason=reason, test=crashitem), {"verdict": "crashed"},
                 crashitem)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the report directory when one was asked for and any roundtrip case was recorded."""
        if not self.state.settings.report_dir or not self.state.cases:
            return
        try:
            self.state.report_paths = write_report(self.config, exitstatus)
        except Exception as error:  # the test outcomes stand; the summary says why there is no report
            logger.exception("roundtrip: writing the report failed")
            self.state.report_error = f"{type(error).__name__}: {error}"


def write_report(config: pytest.Config, exitstatus: int) -> dict[str, str]:
    """parity.json, parity.md and index.html under the report directory; returns their paths."""
    from harness.report.document import finish, new_document
    from harness.report.writer import write_report_dir

    state = run_state(config)
    settings = state.settings
    devices = {str((case.get("verification") or {}).get("device", "")) for case in state.cases}
    device = settings.device if settings.device != "auto" else (
        "cuda" if any(d.startswith("cuda") for d in devices) else "cpu")
    document = new_document(
        source="pytest", device=device, exporter=settings.exporter, seed=None,
        command=" ".join(["pytest", *config.invocation_params.args]), tolerances=settings.tolerances,
        opset=settings.opset,
    )
    document["cases"] = sorted(state.cases, key=lambda case: (case.get("test") or "", case["name"]))
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    finish(document, status="interrupted" if interrupted else "complete")
    return write_report_dir(document, settings.report_dir)
