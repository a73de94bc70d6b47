"""The plugin as a guest in other projects (pytester): prefixed options that never meet a
project's own, settings from the ini file, nothing heavy imported when unused, CUDA asked for
where it is unusable is a usage error with the reason, misuse of the marker is an error, and
--lf works."""

from __future__ import annotations

import textwrap

import pytest

import harness.exporters
from harness.pytest_plugin import options
from harness.runtime import cuda_unavailable_reason

HEAVY = ("torch", "onnxruntime", "onnx", "numpy")


def test_the_exporter_choices_are_the_harness_exporters():
    assert options.EXPORTERS == harness.exporters.EXPORTERS


def test_nothing_heavy_is_imported_when_the_plugin_is_unused(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain=f"""
        import sys

        def test_plain():
            assert not [m for m in {HEAVY!r} if m in sys.modules]
    """)
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["roundtrip: device=cpu exporter=roundtrip *"])  # the plugin did load
    disabled = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:roundtrip")
    disabled.assert_outcomes(passed=1)
    assert "roundtrip: device" not in disabled.stdout.str()


def test_a_projects_own_device_option_never_conflicts(pytester: pytest.Pytester):
    pytester.makeconftest("""
        def pytest_addoption(parser):
            parser.addoption("--device", default="cpu")
    """)
    pytester.makepyfile(test_own="""
        def test_own(request):
            assert request.config.getoption("--device") == "tpu"
            assert request.config.getoption("roundtrip_device") == "auto"
    """)
    result = pytester.runpytest("--device", "tpu", "--roundtrip-device", "auto")
    result.assert_outcomes(passed=1)


def test_settings_come_from_the_ini_file_and_the_command_line_wins(pytester: pytest.Pytester):
    pytester.makepyprojecttoml("""
        [tool.pytest.ini_options]
        roundtrip_device = "auto"
        roundtrip_exporter = "torch.onnx"
        roundtrip_opset = "17"
        roundtrip_report_dir = "out/parity"
        roundtrip_tolerances = "tolerances.json"
    """)
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--co")
    result.stdout.fnmatch_lines([
        f"roundtrip: device=auto (cuda when torch and onnxruntime can use it, else cpu; *) exporter=torch.onnx "
        f"opset=17 tolerances={pytester.path / 'tolerances.json'} zoo tier=smoke cases=all "
        f"report={pytester.path / 'out' / 'parity'}",
    ])
    overridden = pytester.runpytest("--co", "--roundtrip-device", "cpu", "--roundtrip-opset", "18",
                                    "--roundtrip-report-dir", "elsewhere")
    overridden.stdout.fnmatch_lines([f"roundtrip: device=cpu exporter=torch.onnx opset=18 *"
                                     f"report={pytester.path / 'elsewhere'}"])


@pytest.mark.parametrize(("ini", "message"), [
    ('roundtrip_device = "gpu"', "roundtrip_device = 'gpu' in *pyproject.toml: choose one of cpu, cuda, auto"),
    ('roundtrip_opset = "latest"', "roundtrip_opset = 'latest' in *pyproject.toml: not an integer"),
    ('roundtrip_exporter = "onnxscript"',
     "roundtrip_exporter = 'onnxscript' in *pyproject.toml: choose one of roundtrip, torch.onnx, torchscript"),
])
def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester, ini, message):
    pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\n{ini}\n")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


@pytest.mark.parametrize(("args", "message"), [
    (["--roundtrip-backend", "tvm"], "--roundtrip-backend unknown backend 'tvm'; choose one of *"),
    (["--roundtrip-backend", "openvino:mode=fast"], "--roundtrip-backend openvino: mode='fast' is not valid; *"),
    (["--roundtrip-backend", "onnxruntime", "--roundtrip-backend", "onnxruntime"],
     "--roundtrip-backend: [[]'onnxruntime'[]] given more than once"),
])
def test_a_bad_backend_is_a_usage_error(pytester: pytest.Pytester, args, message):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_backends_come_from_the_command_line_the_ini_file_and_the_marker(pytester: pytest.Pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nroundtrip_backend = "onnxruntime:level=ALL onnx.reference"\n')
    pytester.makepyfile(test_x="""
        import pytest

        def test_session(roundtrip, request):
            assert roundtrip.settings()["backend"] == request.config.getoption("roundtrip_backend")

        @pytest.mark.roundtrip(backend="openvino:precision=F32")
        def test_marker(roundtrip):
            assert roundtrip.settings()["backend"] == ("openvino:precision=f32",)
            assert roundtrip.settings(backend=["onnx.reference"])["backend"] == ("onnx.reference",)
    """)
    result = pytester.runpytest("-p", "no:xdist")
    result.assert_outcomes(passed=2)
    overridden = pytester.runpytest("-p", "no:xdist", "-k", "session", "--roundtrip-backend", "openvino")
    overridden.assert_outcomes(passed=1, deselected=1)


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_asking_for_cuda_without_it_is_a_usage_error_with_the_reason(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--roundtrip-device", "cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: --roundtrip-device cuda: CUDA cannot be used here: {cuda_unavailable_reason()}*",
    ])


@pytest.mark.parametrize(("marker", "message"), [
    ("@pytest.mark.roundtrip(atl=1e-3)", "@pytest.mark.roundtrip got unknown keyword(s) [[]'atl'[]]; it takes atol,*"),
    ("@pytest.mark.roundtrip(1e-3)", "@pytest.mark.roundtrip takes keywords only (atol, rtol, *), got (0.001,)"),
])
def test_a_misused_marker_is_an_error_of_that_test(pytester: pytest.Pytester, marker, message):
    pytester.makepyfile(test_x=f"""
        import pytest

        {marker}
        def test_x(roundtrip):
            pass

        def test_other():
            pass
    """)
    result = pytester.runpytest("-p", "no:xdist")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([message])


def test_the_cuda_marker_is_read_from_the_marker_not_the_keywords(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="""
        import pytest

        @pytest.mark.parametrize("name", ["cuda", "cpu"])
        def test_named(name):
            pass

        class TestOnGpu:
            pytestmark = pytest.mark.cuda

            def test_inherits_the_marker(self):
                pass
    """)
    result = pytester.runpytest("-p", "no:xdist", "-rs", "--roundtrip-device", "cpu")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_x.py: needs CUDA: the run verifies on the CPU*"])


def test_last_failed_reruns_only_the_failure(pytester: pytest.Pytester):
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


def test_the_tier_and_cases_alias_reach_getoption_with_ini_values(pytester: pytest.Pytester):
    pytester.makeini(textwrap.dedent("""
        [pytest]
        roundtrip_tier = full
    """))
    pytester.makepyfile(test_x="""
        def test_x(request):
            assert request.config.getoption("roundtrip_tier") == "full"
            assert request.config.getoption("roundtrip_cases") is None
    """)
    pytester.runpytest("-p", "no:xdist").assert_outcomes(passed=1)


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_auto_falls_back_to_the_cpu_and_skips_cuda_tests_with_the_reason(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="""
        import pytest

        def test_device(roundtrip_device):
            assert roundtrip_device == "cpu"

        @pytest.mark.cuda
        def test_gpu():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-rs", "--roundtrip-device", "auto")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] test_x.py:*: needs CUDA: {cuda_unavailable_reason()}"])
