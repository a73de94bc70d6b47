"""`roundtrip verify --backend ...`: every backend named is verified against the same fp64 truth
and recorded in the report (a real process, one tiny factory case)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report.files import load_report
from harness.runtime.backends import get_backend

REPO = Path(__file__).resolve().parent.parent


def small_conv_net():
    """The factory `roundtrip verify tests.test_cli_backends:small_conv_net` builds."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3)).eval()
    return model, (torch.randn(1, 3, 10, 10),)


def test_a_run_on_two_backends_records_both(tmp_path):
    if get_backend("openvino").unavailable_reason():
        pytest.skip(get_backend("openvino").unavailable_reason())
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "verify", "tests.test_cli_backends:small_conv_net", "--out", str(out),
         "-j", "1", "--backend", "onnxruntime:level=all", "--backend", "openvino:precision=bf16"],
        cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    document = load_report(out)
    assert document["schema_version"] == 3
    assert document["backends"] == ["onnxruntime:level=all", "openvino:precision=bf16"]
    verification = document["cases"][0]["verification"]
    assert verification["backend"] == "onnxruntime:level=all"
    assert {op["backend"] for op in verification["ops"]} == {"onnxruntime:level=all"}
    (other,) = verification["backend_results"]
    assert other["backend"] == "openvino:precision=bf16" and other["passed"] is True
    assert other["settings"]["runtime"]["precision"] == "bfloat16"
    convs = [op for op in other["ops"] if op["aten"].startswith("aten.conv")]
    assert convs and {op["runtime_precision"]["precision"] for op in convs} == {"bfloat16"}
    assert json.loads((out / "parity.json").read_text())["cases"][0]["status"] == "pass"
