"""The plugin in a user's project (tests/plugin_project.py): its own conftest with its own
`--device`, tests using the `roundtrip` fixture and marker, a planted divergence, and a test that
aborts its worker, run as `pytest -n 2` with the package installed (the plugin auto-loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from harness.report.schema import validate
from tests import plugin_project


def _require_entry_point() -> None:
    if not any(ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11")):
        pytest.fail("the roundtrip package is not installed (its pytest11 entry point is missing): "
                    "run `pip install -e .` first", pytrace=False)


def clean_environment() -> dict[str, str]:
    """This process's environment without what would change how a nested pytest runs."""
    drop = ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER",
            "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST", "ROUNDTRIP_TIER")
    return {k: v for k, v in os.environ.items() if k not in drop}


@dataclass
class ProjectRun:
    project: Path
    result: pytest.RunResult
    report: dict
    junit: ElementTree.Element

    def properties(self, test: str) -> dict[str, list[str]]:
        """junit properties of the test case named `test`, name -> values."""
        case = next(c for c in self.junit.iter("testcase") if c.get("name") == test)
        found: dict[str, list[str]] = {}
        for prop in case.iter("property"):
            found.setdefault(prop.get("name"), []).append(prop.get("value"))
        return found

    def case(self, test: str) -> dict:
        return next(c for c in self.report["cases"] if c["test"] == test)


@pytest.fixture(scope="module")
def xdist_run(tmp_path_factory: pytest.TempPathFactory) -> ProjectRun:
    """`pytest -n 2 --device cpu --roundtrip-report-dir ... --junitxml ...` in the user's project."""
    _require_entry_point()
    project = tmp_path_factory.mktemp("user_project")
    for name, text in plugin_project.files(abort=True, many=True).items():
        (project / name).write_text(text)
    command = [sys.executable, "-m", "pytest", "-n", "2", "--device", "cpu", "-rs",
               "--roundtrip-report-dir", "reports", "--junitxml", "junit.xml", "--basetemp", str(project / "tmp")]
    completed = subprocess.run(command, cwd=project, env=clean_environment(), capture_output=True, text=True)
    result = pytest.RunResult(completed.returncode, completed.stdout.splitlines(), completed.stderr.splitlines(), 0.0)
    report_path = project / "reports" / "parity.json"
    assert report_path.exists(), completed.stdout[-4000:] + completed.stderr[-4000:]
    return ProjectRun(project, result, json.loads(report_path.read_text()),
                      ElementTree.parse(project / "junit.xml").getroot())


def test_the_projects_own_device_option_works_beside_the_plugin(xdist_run):
    outcomes = xdist_run.result.parseoutcomes()
    assert "conflicting option string" not in "\n".join(xdist_run.result.errlines)
    assert outcomes.get("passed") == 12, xdist_run.result.outlines[-40:]  # test_passes uses the project's --device


def test_a_planted_divergence_fails_naming_the_op(xdist_run):
    xdist_run.result.stdout.fnmatch_lines([
        "*RoundtripAssertionError: roundtrip: Net FAILED: worst op relu [[]Sigmoid[]] at *x its tolerance"
        " in Net/ReLU[[]act[]] (models.py:*)*",
        "*FAIL*relu*Sigmoid*backend*Net/ReLU[[]act[]]*models.py:*",
        "*reproducer: *reports/reproducers/test_models.py_test_planted_divergence/1/relu*",
    ])
    assert xdist_run.case("test_models.py::test_planted_divergence")["status"] == "fail"


def test_the_reproducer_reproduces_the_divergence(xdist_run):
    folder = xdist_run.project / "reports" / "reproducers" / "test_models.py_test_planted_divergence" / "1" / "relu"
    rerun = subprocess.run([sys.executable, "run.py"], cwd=folder, capture_output=True, text=True)
    assert rerun.returncode == 1 and "MISMATCH" in rerun.stdout, rerun.stdout + rerun.stderr


def test_an_aborted_worker_loses_only_its_own_test(xdist_run):
    statuses = {case["test"]: case["status"] for case in xdist_run.report["cases"]}
    assert statuses.pop("test_abort.py::test_abort") == "crashed"
    many = {test: status for test, status in statuses.items() if test.startswith("test_many.py")}
    assert many == {f"test_many.py::test_passes[{seed}]": "pass" for seed in range(6)}
    crash = xdist_run.case("test_abort.py::test_abort")["crash"]
    assert "crashed while running 'test_abort.py::test_abort'" in crash["reason"]


def test_the_controller_writes_a_valid_report_of_every_verification(xdist_run):
    report = xdist_run.report
    validate(report)
    assert report["source"] == "pytest" and report["status"] == "complete" and report["device"] == "cpu"
    tests = sorted(case["test"] for case in report["cases"])
    assert tests == sorted([
        "test_abort.py::test_abort", *(f"test_many.py::test_passes[{seed}]" for seed in range(6)),
        "test_models.py::test_marker_opset", "test_models.py::test_marker_tolerance_admits_the_divergence",
        "test_models.py::test_passes", "test_models.py::test_planted_divergence",
        "test_models.py::test_verify_onnx_file",
    ])
    assert xdist_run.case("test_many.py::test_passes[3]")["name"] == "net seed 3"
    assert not any(name == "roundtrip_case" for case in xdist_run.junit.iter("property") for name in [case.get("name")])


def test_junitxml_carries_verdict_worst_op_and_errors(xdist_run):
    failed = xdist_run.properties("test_planted_divergence")
    assert failed["roundtrip_verdict"] == ["fail"] and failed["roundtrip_worst_op"] == ["relu"]
    assert float(failed["roundtrip_worst_ratio"][0]) > 1 and float(failed["roundtrip_max_abs"][0]) > 0.1
    assert failed["roundtrip_reproducer"][0].endswith("relu")
    passed = xdist_run.properties("test_passes")
    assert passed["roundtrip_verdict"] == ["pass"] and float(passed["roundtrip_worst_ratio"][0]) <= 1


def test_the_marker_overrides_the_run_settings(xdist_run):
    assert xdist_run.case("test_models.py::test_marker_tolerance_admits_the_divergence")["status"] == "pass"
    marked = xdist_run.case("test_models.py::test_marker_opset")
    assert marked["status"] == "pass"


def test_cuda_marker_skips_by_marker_not_by_keyword(xdist_run):
    xdist_run.result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] test_models.py:*: needs CUDA: the run verifies on the CPU*"])
    skipped = {case.get("name") for case in xdist_run.junit.iter("testcase") if case.find("skipped") is not None}
    assert skipped == {"test_marked_cuda"}  # test_parameter_named_cuda_runs[cuda] ran


def test_the_terminal_summary_lists_failing_verifications_and_the_report(xdist_run):
    xdist_run.result.stdout.fnmatch_lines([
        "*= roundtrip =*",
        "12 verification(s): 1 crashed, 1 fail, 10 pass",
        "*test*verdict*worst op*ratio*scope*source*",
        "*test_abort.py::test_abort*CRASHED*crashed while running*",
        "*test_models.py::test_planted_divergence*FAIL*relu [[]Sigmoid[]]*Net/ReLU[[]act[]]*models.py:*",
        f"report: {xdist_run.project / 'reports' / 'parity.json'}",
    ])
