"""harness.testing.assert_roundtrip and harness.report.failure: the failure message is a compact
per-op table that names the diverging op, and ends with a reproducer that reproduces it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import exporter
from harness.report.failure import failure_message, headline
from harness.testing import RoundtripAssertionError, assert_roundtrip, assert_roundtrip_onnx, assert_verified


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


def sigmoid_for_relu(g, x):
    return g.op("Sigmoid", x)


@pytest.fixture
def model_and_args():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)


@pytest.fixture
def planted(model_and_args):
    """The model exported with aten::relu written as Sigmoid."""
    model, args = model_and_args
    return exporter.export(model, args, custom_symbolics={"aten::relu": sigmoid_for_relu})


def test_a_passing_model_returns_its_verification(model_and_args):
    verification = assert_roundtrip(*model_and_args)
    assert verification.passed and verification.worst_op is not None


def test_a_planted_divergence_names_the_op_and_writes_a_reproducer(model_and_args, planted, tmp_path):
    with pytest.raises(RoundtripAssertionError) as raised:
        assert_roundtrip(*model_and_args, onnx_model=planted, reproducer_dir=tmp_path)
    message = str(raised.value)
    lines = message.splitlines()
    assert lines[0].startswith("roundtrip: Net FAILED: worst op relu [Sigmoid] at ")
    assert "x its tolerance in Net/ReLU[act] (tests/test_plugin_failure.py:" in lines[0]
    assert "output 'relu': max abs" in lines[1] and "100.0% of elements outside" in lines[1]
    header = next(line for line in lines if "FX node" in line).split()
    assert header == ["op", "ratio", "FX", "node", "ONNX", "ops", "isolated", "accumulated", "tolerance",
                      "(atol+rtol*|e|)", "attribution", "scope", "source"]
    rows = [line.split() for line in lines if line.startswith("    ") and line.split()[0] in ("FAIL", "ok")]
    assert [row[2] for row in rows] == ["relu", "linear"]  # worst first
    relu, linear = rows
    assert relu[0] == "FAIL" and relu[3] == "Sigmoid" and relu[7] == "backend" and relu[8] == "Net/ReLU[act]"
    assert relu[9].startswith("tests/test_plugin_failure.py:")
    assert linear[0] == "ok" and linear[3] == "Gemm"
    assert raised.value.reproducer == str(tmp_path / "relu")
    assert lines[-1] == f"  reproducer: {tmp_path / 'relu'}  (python run.py)"
    rerun = subprocess.run([sys.executable, "run.py"], cwd=raised.value.reproducer, capture_output=True, text=True)
    assert rerun.returncode == 1 and "MISMATCH" in rerun.stdout


def test_the_assertion_raises_without_a_reproducer_when_nothing_was_isolated(model_and_args, planted):
    with pytest.raises(RoundtripAssertionError) as raised:
        assert_roundtrip(*model_and_args, onnx_model=planted, per_op=False)
    message = str(raised.value)
    assert "no per-op rows (per_op=False, or the model never ran)" in message
    assert message.endswith("no reproducer: no op was isolated (per-op analysis was off, or the model never ran)")
    assert raised.value.reproducer is None


def test_an_onnx_file_whose_ops_agree_fails_on_accumulation(model_and_args, planted, tmp_path):
    model, args = model_and_args
    path = tmp_path / "planted.onnx"
    path.write_bytes(planted.SerializeToString())
    expected = model(*args).detach().numpy()
    with pytest.raises(RoundtripAssertionError) as raised:
        assert_roundtrip_onnx(str(path), [args[0].numpy()], [expected], reproducer_dir=tmp_path / "repro")
    message = str(raised.value)
    assert "none of 2 op(s) is outside its own tolerance: the error builds up across ops" in message
    assert "(onnx.reference as reference)" in message


def _row(name, ratio, *, passed=True, not_isolable="", ops=("Relu",)):
    measured = None if not_isolable else {"max_abs": ratio * 1e-5, "tolerance_ratio": ratio, "passed": passed}
    return {"fx_node": name, "aten": "aten.relu.default", "onnx_nodes": [f"n_{name}"], "onnx_ops": list(ops),
            "scope": f"M/Block[{name}]", "source": f"m.py:{len(name)}", "attribution": "backend" if measured else "",
            "tolerance": {"atol": 1e-5, "rtol": 1e-4}, "passed": None if not_isolable else passed,
            "not_isolable": not_isolable, "isolated": measured, "accumulated": measured}


def test_ops_that_failed_to_run_or_are_not_isolable_are_listed():
    ops = [_row(f"op{i}", ratio=float(i)) for i in range(12)]
    ops[11]["passed"] = ops[11]["isolated"]["passed"] = False
    ops.append(_row("gather_3", 0, not_isolable="the backend cannot run its subgraph alone: [ONNXRuntimeError] "
                    "bad index", ops=("Gather",)))
    ops.append(_row("view_2", 0, not_isolable="its value 'view_2' is not computed by its own nodes (an alias of an "
                    "input?)", ops=("Reshape", "Constant")))
    record = {"model_name": "M", "exporter": "roundtrip", "device": "cpu", "passed": False,
              "checker": {"passed": True, "message": ""}, "outputs": [], "worst_op": "op11", "ops": ops,
              "notes": ["the backend failed to run the model: [ONNXRuntimeError] bad index"]}
    lines = failure_message(record, reproducer_note="none").splitlines()
    assert lines[0] == "roundtrip: M FAILED: worst op op11 [Relu] at 11x its tolerance in M/Block[op11] (m.py:4) " \
                       "(exporter roundtrip, device cpu)"
    assert "  no output was compared (the backend did not run the model; see the notes)" in lines
    table = [line.split() for line in lines if line.startswith("    ") and "M/Block" in line and "[" not in line[:8]]
    measured_rows = [row for row in table if row[0] in ("ok", "FAIL")]
    assert [row[2] for row in measured_rows] == ["op11", "op10", "op9", "op8", "op7", "op6", "op5", "op4"]
    assert measured_rows[0][0] == "FAIL"
    assert "  1 op(s) failed to run alone:" in lines
    gather = "    gather_3 [Gather] at M/Block[gather_3] m.py:8: the backend cannot run"
    assert any(line.startswith(gather) for line in lines)
    assert "  1 op(s) not isolable (no own error):" in lines
    assert any(line.startswith("    view_2 [Reshape] at") for line in lines)
    assert "  note: the backend failed to run the model: [ONNXRuntimeError] bad index" in lines
    assert lines[-1] == "  no reproducer: none"


def test_headline_gives_the_numbers_of_a_summary_line(model_and_args, planted):
    with pytest.raises(RoundtripAssertionError) as raised:
        assert_roundtrip(*model_and_args, onnx_model=planted, per_op=True)
    found = headline(raised.value.verification)
    assert found["verdict"] == "fail" and found["worst_op"] == "relu" and found["worst_op_onnx"] == "Sigmoid"
    assert found["worst_ratio"] > 1e3 and found["scope"] == "Net/ReLU[act]"
    assert found["max_abs"] == pytest.approx(raised.value.verification.max_output_error)
    assert headline(raised.value.verification.to_dict()) == found
    assert assert_verified(assert_roundtrip(*model_and_args)).passed
