"""The dtype a run asks for: `roundtrip run/verify --dtype`, the plugin's `--roundtrip-dtype` and
`@pytest.mark.roundtrip(dtype=...)`, and the zoo cases that cast themselves.

`tiny` below is what `roundtrip verify tests.test_dtype_options:tiny` builds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import model_zoo_cases
from harness.cli import main
from harness.cli.sources import Built
from harness.cli.worker import in_dtype

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny():
    """A float32 model with a normalisation and an integer input beside the float one."""
    torch.manual_seed(0)

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 8)
            self.norm = torch.nn.LayerNorm(8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, tokens, scale):
            return self.head(self.norm(self.embed(tokens)) * scale)

    generator = torch.Generator().manual_seed(0)
    return {"module": Tiny().eval(), "args": (torch.randint(0, 10, (2, 5), generator=generator),
                                              torch.rand(2, 5, 1, generator=generator) + 0.5)}


def test_cli_verify_in_bfloat16_records_the_dtype(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "verify", "tests.test_dtype_options:tiny", "--dtype", "bfloat16",
         "-j", "1", "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    document = json.loads((out / "parity.json").read_text())
    (case,) = document["cases"]
    assert case["status"] not in ("error", "crash"), (case.get("error"), result.stderr[-2000:])
    assert document["dtype"] == "bfloat16"
    assert case["verification"]["environment"]["dtype"] == "bfloat16"
    assert case["verification"]["ops"], "no per-op rows"


@pytest.mark.parametrize("argv, message", [
    (["verify", "model.onnx", "--dtype", "float16"], "an ONNX file's dtype is fixed by the file"),
    (["run", "--cases", "superresolution", "--dtype", "float64"], "invalid choice: 'float64'"),
])
def test_cli_dtype_usage_errors(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err


def test_worker_casts_a_built_model_and_leaves_it_without_a_dtype():
    built = Built(**{k: v for k, v in tiny().items() if k in ("module", "args")})
    cast = in_dtype(built, "float16")
    assert cast.module.head.weight.dtype == torch.float16 and built.module.head.weight.dtype == torch.float32
    assert [a.dtype for a in cast.args] == [torch.int64, torch.float16]
    assert in_dtype(built, None) is built


def test_zoo_case_casts_itself_after_float32_calibration():
    case = model_zoo_cases.get("resnet18")
    module = case.module(0, torch.bfloat16)
    reference = case.module(0)
    assert {p.dtype for p in module.parameters()} == {torch.bfloat16}
    bn, bn32 = module.bn1, reference.bn1
    assert bn.running_var.dtype == torch.bfloat16
    torch.testing.assert_close(bn.running_var.float(), bn32.running_var.to(torch.bfloat16).float(), rtol=0, atol=0)
    (x,) = case.inputs(0, dtype=torch.bfloat16)
    assert x.dtype == torch.bfloat16
    torch.testing.assert_close(x, case.inputs(0)[0].to(torch.bfloat16), rtol=0, atol=0)
    assert case.other_inputs(1, torch.float16)[0].dtype == torch.float16


PLUGIN_TEST = """
    import pytest
    import torch

    def _model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()

    def test_session_dtype(roundtrip):
        verification = roundtrip.verify(_model(), (torch.randn(2, 4),))
        assert verification.environment["dtype"] == "{session}"

    @pytest.mark.roundtrip(dtype="bfloat16")
    def test_marker_dtype(roundtrip):
        model = _model()
        verification = roundtrip.verify(model, (torch.randn(2, 4),))
        assert verification.environment["dtype"] == "bfloat16"
        assert model[0].weight.dtype == torch.float32

    @pytest.mark.roundtrip(dtype="float64")
    def test_bad_marker_dtype(roundtrip):
        roundtrip.verify(_model(), (torch.randn(2, 4),))
"""


def test_plugin_dtype_option_and_marker(pytester: pytest.Pytester):
    """The session's dtype applies to every test, the marker's wins; a bad one fails its test."""
    pytester.makepyfile(test_dtypes=PLUGIN_TEST.replace("{session}", "float16"))
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--roundtrip-dtype", "float16")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*roundtrip dtype='float64': choose one of float32, float16, bfloat16*"])
    result.stdout.fnmatch_lines(["roundtrip: device=cpu * dtype=float16"])


def test_plugin_refuses_an_unknown_dtype(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--roundtrip-dtype", "float64")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
