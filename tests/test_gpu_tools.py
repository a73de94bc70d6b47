"""tools/gpu: the JUnit failure list that separates a GPU run's own failures from those of the
GPU image's older torch, and the shell scripts' syntax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "gpu" / "junit_failures.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="" name="tests.test_broken"><error message="collection failure">ImportError</error></testcase>
  <testcase classname="tests.test_cuda" name="test_a[tf32 on]"><failure message="x">boom</failure></testcase>
  <testcase classname="tests.test_cuda" name="test_b"/>
  <testcase classname="tests.sub.test_mod.TestThing" name="test_c"><error message="y">setup</error></testcase>
  <testcase classname="tests.test_cuda" name="test_d"><skipped message="no GPU"/></testcase>
</testsuite></testsuites>
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, check=False)


def test_list_gives_node_ids_of_failures_and_errors_only(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    listed = _run("list", str(junit))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n")[:-1] == [
        "tests/sub/test_mod.py::TestThing::test_c",
        "tests/test_broken.py",
        "tests/test_cuda.py::test_a[tf32 on]",
    ]


@pytest.mark.parametrize("known, expected_line, others", [
    ([], "3 failed or errored; 0 of them", 3),
    (["tests/test_broken.py", "tests/test_cuda.py::test_a[tf32 on]"], "3 failed or errored; 2 of them", 1),
    (["tests/test_broken.py", "tests/test_cuda.py::test_a[tf32 on]", "tests/sub/test_mod.py::TestThing::test_c"],
     "3 failed or errored; 3 of them", 0),
])
def test_compare_names_only_failures_beyond_the_known_ones(tmp_path, known, expected_line, others):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    known_file = tmp_path / "known.txt"
    known_file.write_text("# a comment line is not a test\n" + "\n".join(known) + "\n")
    compared = _run("compare", str(junit), str(known_file))
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert lines[0].startswith(expected_line) and f"; {others} others" in lines[0]
    assert len(lines) == 1 + others
    assert not set(known) & {line.strip() for line in lines[1:]}


def test_compare_without_results_says_so(tmp_path):
    compared = _run("compare", str(tmp_path / "missing.xml"), str(REPO / "tools" / "gpu" / "known_failures.txt"))
    assert compared.returncode == 1 and "no JUnit results" in compared.stdout


def test_the_known_list_holds_node_ids():
    lines = [line for line in (REPO / "tools" / "gpu" / "known_failures.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines and all(line.startswith("tests/") and ".py" in line for line in lines)


@pytest.mark.parametrize("script", ["run_checks.sh", "fetch_wheels.sh"])
def test_the_scripts_parse(script):
    checked = subprocess.run(["bash", "-n", str(REPO / "tools" / "gpu" / script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
