"""The pytest plugin in this repository: the `--device` alias of the mission's command, the
`roundtrip_device` fixture, a run without xdist writing its own report (verified, recorded and
erroring cases), and --lf under this repository's pytest settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

from harness.report.schema import validate
from harness.runtime import cuda_unavailable_reason
from tests.plugin_project import MODELS
from tests.test_plugin_user_project import clean_environment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_device_cuda_without_gpu_is_a_usage_error_that_says_why():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "--device", "cuda", "tests/test_layering.py"],
        capture_output=True, text=True, cwd=REPO, env=clean_environment(),
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert f"--roundtrip-device cuda: CUDA cannot be used here: {cuda_unavailable_reason()}" in result.stderr


def test_the_device_alias_sets_the_plugins_device(pytester: pytest.Pytester):
    pytester.makeconftest((open(os.path.join(REPO, "conftest.py")).read()))
    pytester.makepyfile(test_x="""
        def test_device(roundtrip_device, request):
            assert roundtrip_device == "cpu"
            assert request.config.getoption("roundtrip_tier") == "full"
    """)
    result = pytester.runpytest("-p", "no:xdist", "--device", "cpu", "--zoo-tier", "full")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["roundtrip: device=cpu * zoo tier=full cases=all *"])
    bad = pytester.runpytest("-p", "no:xdist", "--device", "tpu")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: --roundtrip-device 'tpu': choose one of cpu, cuda, auto"])


def test_a_run_without_xdist_writes_the_report_of_its_cases(pytester: pytest.Pytester):
    pytester.makepyfile(models=MODELS, test_x="""
        import harness
        from models import make

        def test_verified(roundtrip):
            roundtrip.verify(*make(), name="net")

        def test_recorded(roundtrip):
            verification = harness.verify(*make(), per_op=False)
            roundtrip.record(verification, name="made elsewhere", family="mine")

        def test_refused(roundtrip):
            roundtrip.verify(*make(), exporter="onnxscript")
    """)
    # In a subprocess: an in-process run would unload the torch modules it imports lazily, and
    # torch cannot import them twice.
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--roundtrip-report-dir", "out")
    result.assert_outcomes(passed=2, failed=1)
    report = json.loads((pytester.path / "out" / "parity.json").read_text())
    validate(report)
    cases = {case["name"]: case for case in report["cases"]}
    assert cases["net"]["status"] == "pass" and cases["net"]["test"] == "test_x.py::test_verified"
    assert cases["made elsewhere"]["status"] == "pass" and cases["made elsewhere"]["family"] == "mine"
    refused = cases["test_x.py::test_refused"]
    assert refused["status"] == "error" and "exporter='onnxscript'" in refused["error"]
    assert sorted(os.listdir(pytester.path / "out")) == ["index.html", "parity.json", "parity.md"]
    result.stdout.fnmatch_lines(["3 verification(s): 1 error, 2 pass", "*test_x.py::test_refused*ERROR*"])


def test_last_failed_works_under_this_repositorys_settings(pytester: pytest.Pytester):
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        settings = tomllib.load(handle)["tool"]["pytest"]["ini_options"]
    pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\naddopts = {json.dumps(settings['addopts'])}\n"
                               f"markers = {json.dumps(settings['markers'])}\n")
    pytester.makepyfile(test_x="""
        def test_good():
            pass

        def test_bad():
            assert False
    """)
    pytester.runpytest("-p", "no:xdist").assert_outcomes(passed=1, failed=1)
    rerun = pytester.runpytest("-p", "no:xdist", "--lf")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])
    first = pytester.runpytest("-p", "no:xdist", "--ff")
    first.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure first*"])
