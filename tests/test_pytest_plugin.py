"""The pytest plugin: --device handling, the report header, records merged across xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness.runtime import cuda_unavailable_reason

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pytest(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path), *args],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                                                          "PYTEST_ADDOPTS": ""},
    )


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_device_cuda_without_gpu_is_a_usage_error(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    result = _pytest(tmp_path, "--device", "cuda")
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage-error exit code
    assert "--device cuda: CUDA cannot be used here" in result.stderr


def test_header_and_cuda_marker_skip_with_reason(tmp_path):
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        import pytest

        def test_device(roundtrip_device):
            assert roundtrip_device in ("cpu", "cuda")

        @pytest.mark.cuda
        def test_needs_gpu():
            pass
    """))
    result = _pytest(tmp_path, "--device", "cpu", "-rs")
    assert "roundtrip: device=cpu" in result.stdout
    assert "onnxruntime" in result.stdout
    if cuda_unavailable_reason() is not None:
        assert "1 passed, 1 skipped" in result.stdout, result.stdout
        assert "needs CUDA" in result.stdout


def test_records_merge_across_xdist_workers(tmp_path):
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_record(roundtrip_records, i):
            roundtrip_records({"value": i})
    """))
    report = tmp_path / "out" / "records.json"
    result = _pytest(tmp_path, "-p", "xdist", "-n", "2", "--roundtrip-report", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads(report.read_text())["records"]
    assert sorted(r["value"] for r in records) == [0, 1, 2, 3]
    assert all(r["test"].startswith("test_x.py::test_record") for r in records)
