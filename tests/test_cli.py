"""The `roundtrip` command line refuses what cannot work before any case runs: one line on
stderr, exit code 2, no traceback, nothing already written lost. (Runs that verify models are
in tests/test_report_runs.py and tests/test_nightly_workflow.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.runtime import cuda_unavailable_reason

REPO = Path(__file__).resolve().parent.parent


def _report_dir(path: Path) -> Path:
    """A directory holding a previous report's parity.json (content need not be valid)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "parity.json").write_text('{"previous": true}')
    return path


USAGE_ERRORS = [
    (lambda t: ["run", "--cases", "alexnett", "--out", str(_report_dir(t / "r"))], "did you mean alexnet"),
    (lambda t: ["run", "--cases", "nothing*", "--out", str(t / "r")], "no case matches"),
    (lambda t: ["run", "--cases", "superresolution", "--out", str(_file(t / "f"))], "is a file; give a directory"),
    (lambda t: ["run", "--cases", "superresolution", "--out", str(_file(t / "f") / "sub")], "cannot be written"),
    (lambda t: ["run", "--cases", "superresolution", "--out", str(t / "latest.json")], "names a report directory"),
    (lambda t: ["run", "--shard", "3/2", "--out", str(t / "r")], "need 1 <= K <= N"),
    (lambda t: ["run", "--shard", "half", "--out", str(t / "r")], "expected K/N"),
    (lambda t: ["run", "-j", "0", "--out", str(t / "r")], "at least 1"),
    (lambda t: ["run", "--baseline", str(t / "none"), "--out", str(t / "r")], "no report there"),
    (lambda t: ["run", "--tolerances", str(t / "none.json"), "--out", str(t / "r")], "no such file"),
    (lambda t: ["run", "--tolerances", str(_file(t / "bad.json")), "--out", str(t / "r")], "not a tolerance table"),
    (lambda t: ["run", "--tier", "huge"], "invalid choice"),
    (lambda t: ["verify", "not-a-target", "--out", str(t / "r")], "neither an ONNX file nor"),
    (lambda t: ["verify", str(t / "missing.onnx"), "--out", str(t / "r")], "no ONNX file"),
    (lambda t: ["verify", "a.b:c", "--inputs", "in.npz", "--out", str(t / "r")], "exactly one ONNX file"),
    (lambda t: ["diff", str(t / "a"), str(t / "b")], "no report there"),
    (lambda t: ["diff", str(_file(t / "a.json")), str(t / "b")], "cannot read the report"),
    (lambda t: ["merge", str(t / "a")], "--out"),
    (lambda t: ["bogus"], "invalid choice"),
    (lambda t: ["run", "--backend", "tvm", "--out", str(t / "r")],
     "--backend unknown backend 'tvm'; choose one of onnx.reference, onnxruntime, openvino"),
    (lambda t: ["run", "--backend", "openvino:precision=int4", "--out", str(t / "r")],
     "precision='int4' is not valid; choose one of bf16, f16, f32"),
    (lambda t: ["run", "--backend", "onnxruntime", "--backend", "ONNXRUNTIME", "--out", str(t / "r")],
     "['onnxruntime'] given more than once"),
    (lambda t: ["run", "--backend", "onnxruntime:provider=tensorrt", "--out", str(t / "r")],
     "--backend onnxruntime:provider=tensorrt: cannot run here: "),
]


def _file(path: Path) -> Path:
    path.write_text("not json")
    return path


@pytest.mark.parametrize("make_args, message", USAGE_ERRORS, ids=[str(i) for i in range(len(USAGE_ERRORS))])
def test_usage_errors_are_one_line_and_run_nothing(tmp_path, capsys, make_args, message):
    args = make_args(tmp_path)
    assert main(args) == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err and not captured.out
    assert not list(tmp_path.rglob("logs")), "a case ran"
    previous = tmp_path / "r" / "parity.json"
    if previous.exists():
        assert json.loads(previous.read_text()) == {"previous": True}


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_cuda_run_refused_without_gpu(tmp_path, capsys):
    assert main(["run", "--device", "cuda", "--cases", "alexnet", "--out", str(tmp_path / "r")]) == 2
    assert "CUDA cannot be used here" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def _empty_report(tmp_path: Path) -> Path:
    report = tmp_path / "empty"
    report.mkdir()
    (report / "parity.json").write_text(json.dumps({"schema_version": 2, "device": "cpu", "cases": []}))
    return report


@pytest.mark.parametrize("make_args, message", [
    (lambda t: ["tolerances", "--table", "missing.json"], "--table missing.json: no such file"),
    (lambda t: ["tolerances", "--calibrate", str(_empty_report(t)), "--out", str(t / "tol.json")],
     "nothing to learn"),
])
def test_cli_errors_in_a_real_process_print_one_line(tmp_path, make_args, message):
    """As a user runs it: the process's own stderr holds one line, the exit code is 2."""
    result = subprocess.run([sys.executable, "-m", "harness.cli", *make_args(tmp_path)], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and message in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "tol.json").exists()


def test_the_cli_offers_every_exporter_and_diff_starts_without_torch(tmp_path):
    from harness.cli.main import EXPORTERS
    from harness.exporters import EXPORTERS as API_EXPORTERS

    assert EXPORTERS == API_EXPORTERS
    probe = ("import sys; from harness.cli import main; main(['diff', 'a', 'b']); "
             "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stdout + result.stderr
