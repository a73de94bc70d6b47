"""`roundtrip run`: per-case summary lines, reports written atomically, clear refusals."""

from __future__ import annotations

import json

import pytest

from harness.runtime import cuda_unavailable_reason
from harness.cli import main


def test_run_verifies_and_writes_reports(tmp_path, capsys):
    out = tmp_path / "reports" / "run.json"
    code = main(["run", "--cases", "alexnet", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "PASS alexnet" in printed and "checker=ok" in printed and "worst_op=" in printed
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1
    (case,) = report["cases"]
    assert case["name"] == "alexnet" and case["passed"] and case["other_batch"]["passed"]
    assert case["verification"]["ops"], "per-op rows missing"
    assert "| alexnet | pass |" in (tmp_path / "reports" / "run.md").read_text()


def test_unknown_case_is_refused_and_old_report_kept(tmp_path, capsys):
    out = tmp_path / "run.json"
    out.write_text('{"previous": true}')
    assert main(["run", "--cases", "alexnett", "--out", str(out)]) == 2
    assert "alexnet" in capsys.readouterr().err  # suggests the close name
    assert json.loads(out.read_text()) == {"previous": True}


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_cuda_run_refused_without_gpu(tmp_path, capsys):
    assert main(["run", "--device", "cuda", "--cases", "alexnet", "--out", str(tmp_path / "r.json")]) == 2
    assert "CUDA cannot be used here" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
