"""`roundtrip verify` and the worker scheduler, end to end in real processes, on tiny models:
a crash costs one case, Ctrl-C or a kill leaves a valid report marked interrupted, failing ops
get reproducers linked from the report, files follow the umask, an internal error exits 3.

The factories below are what `roundtrip verify tests.test_report_runs:NAME` builds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings

import pytest

from harness.report.files import load_report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = "tests.test_report_runs"


# --- factories (run inside worker processes) -------------------------------------------------


def _mlp(width: int = 16):
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, 32), torch.nn.GELU(approximate="tanh"),
                               torch.nn.LayerNorm(32), torch.nn.Linear(32, 4), torch.nn.Softmax(-1)).eval()


def tiny():
    """A passing model at two batch sizes; it warns, as torch does, into the worker's log."""
    import torch

    warnings.warn("tiny factory warning: this goes to the case log", UserWarning)
    generator = torch.Generator().manual_seed(0)
    return {"module": _mlp(), "args": (torch.randn(2, 16, generator=generator),),
            "other_args": (torch.randn(5, 16, generator=generator),), "dynamic_axes": {"x": {0: "batch"}},
            "input_names": ["x"]}


def strict():
    """The same kind of model judged at atol 1e-12: float32 reductions cannot meet it."""
    import torch

    return {"module": _mlp(256), "args": (torch.randn(3, 256, generator=torch.Generator().manual_seed(1)),),
            "atol": 1e-12, "rtol": 0.0}


def aborts():
    print("about to abort", flush=True)
    os.abort()


def slow():
    time.sleep(120)
    return tiny()


def broken_harness():
    """Makes the harness itself fail after the export: an internal error."""
    import harness.verification

    def fail(*args, **kwargs):
        raise RuntimeError("planted harness fault")

    harness.verification.verify_exported = fail
    return tiny()


# --- helpers -----------------------------------------------------------------------------------


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def _run(*args: str, umask: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(_command(*args), cwd=REPO, capture_output=True, text=True,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def _target(name: str) -> str:
    return f"{HERE}:{name}"


def _cases(report_dir) -> dict[str, dict]:
    return {case["name"]: case for case in load_report(report_dir)["cases"]}


# --- tests -------------------------------------------------------------------------------------


def test_a_crash_costs_one_case_and_warnings_stay_in_the_log(tmp_path):
    out = tmp_path / "report"
    result = _run("verify", _target("tiny"), _target("aborts"), "--out", str(out), "-j", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    cases = _cases(out)
    assert cases[_target("tiny")]["status"] == "pass" and cases[_target("tiny")]["other"]["passed"]
    crash = cases[_target("aborts")]["crash"]
    assert crash["signal"] == "SIGABRT" and crash["exit_code"] is None and "aborted" in crash["reason"]
    assert any("about to abort" in line for line in crash["log_tail"])
    assert {p.name for p in out.iterdir()} >= {"parity.json", "parity.md", "index.html", "logs"}
    assert "[2/2 ETA" in result.stdout and "CRASH" in result.stdout and "PASS" in result.stdout  # plain lines
    assert "tiny factory warning" not in result.stdout + result.stderr
    log = out / cases[_target("tiny")]["log"]
    assert "tiny factory warning" in log.read_text()
    assert "| tests.test_report_runs:aborts | crashed |" in (out / "parity.md").read_text()


def test_failing_ops_get_reproducers_and_files_follow_the_umask(tmp_path):
    out = tmp_path / "report"
    table = tmp_path / "strict.json"
    table.write_text(json.dumps({"schema_version": 2, "rows": [
        {"aten": "*", "device": "cpu", "dtype": "*", "atol": 1e-12, "rtol": 0.0, "source": "test: strict"}]}))
    result = _run("verify", _target("strict"), "--out", str(out), "--tolerances", str(table), umask=0o027)
    assert result.returncode == 1, result.stdout + result.stderr
    case = _cases(out)[_target("strict")]
    assert case["status"] == "fail" and case["reproducers"], case.get("reproducers")
    html = (out / "index.html").read_text()
    for op, folder in case["reproducers"].items():
        assert (out / folder / "model.onnx").is_file() and (out / folder / "README.md").is_file()
        assert f'href="{folder}/README.md"' in html
        assert (out / folder).stat().st_mode & 0o777 == 0o750
        rerun = subprocess.run([sys.executable, "run.py"], cwd=out / folder, capture_output=True, text=True)
        assert rerun.returncode == 1 and "MISMATCH" in rerun.stdout, (op, rerun.stdout, rerun.stderr)
    for name in ("parity.json", "parity.md", "index.html"):
        assert (out / name).stat().st_mode & 0o777 == 0o640, name
    assert load_report(out)["tolerances"] == str(table)


def test_an_internal_error_exits_3_with_the_report_written(tmp_path):
    out = tmp_path / "report"
    result = _run("verify", _target("broken_harness"), "--out", str(out))
    assert result.returncode == 3, result.stdout + result.stderr
    case = _cases(out)[_target("broken_harness")]
    assert case["status"] == "error" and case["internal"] and "planted harness fault" in case["error"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_a_valid_report_of_what_finished(tmp_path, signum):
    out = tmp_path / "report"
    process = subprocess.Popen(_command("verify", _target("tiny"), _target("slow"), "--out", str(out), "-j", "1"),
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while process.poll() is None:  # the first case finished: the report was rewritten with it
            if (out / "parity.json").exists() and _cases(out):
                break
            time.sleep(0.2)
        process.send_signal(signum)
        stdout, stderr = process.communicate()
    finally:
        process.kill()
    assert process.returncode == 128 + signum, stdout + stderr
    document = load_report(out)
    assert document["status"] == "interrupted" and document["not_run"] == [_target("slow")]
    assert [c["name"] for c in document["cases"]] == [_target("tiny")]
    assert "INTERRUPTED" in (out / "parity.md").read_text() and signal.Signals(signum).name in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def _worker_pid(log) -> int | None:
    found = re.search(r"worker pid (\d+)", log.read_text()) if log.exists() else None
    return int(found.group(1)) if found else None


def test_a_killed_run_keeps_its_last_report_and_leaves_no_worker_behind(tmp_path):
    out = tmp_path / "report"
    process = subprocess.Popen(_command("verify", _target("tiny"), _target("slow"), "--out", str(out), "-j", "1"),
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    slow_log = out / "logs" / "tests.test_report_runs_slow.log"
    while process.poll() is None and _worker_pid(slow_log) is None:  # the first case is in, the second running
        time.sleep(0.2)
    worker = _worker_pid(slow_log)
    process.kill()
    process.wait()
    document = load_report(out)
    assert document["status"] == "running" and [c["name"] for c in document["cases"]] == [_target("tiny")]
    deadline = time.monotonic() + 60  # a hang guard: the worker checks its parent every second
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), "the worker outlived the run that started it"
    assert (out / ".jobs").is_dir()  # the killed run's job files stay in its report, not in /tmp ...
    assert _run("verify", _target("tiny"), "--out", str(out)).returncode == 0
    assert not (out / ".jobs").exists()  # ... until the next run into it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie has exited
        return handle.read().split(") ", 1)[1][0] != "Z"


def test_an_onnx_file_with_inputs_and_expected_outputs(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["out"], name="relu")],
        "addrelu", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              tmp_path / "model.onnx")
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3) - 3, np.ones((2, 3), np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=y)
    np.savez(tmp_path / "good.npz", out=np.maximum(x + y, 0))
    np.savez(tmp_path / "bad.npz", out=np.maximum(x + y, 0) + 1)
    for expected, code, status in (("good.npz", 0, "pass"), ("bad.npz", 1, "fail")):
        out = tmp_path / f"report-{status}"
        result = _run("verify", str(tmp_path / "model.onnx"), "--inputs", str(tmp_path / "in.npz"),
                      "--expected", str(tmp_path / expected), "--out", str(out))
        assert result.returncode == code, result.stdout + result.stderr
        case = _cases(out)["model"]
        assert case["status"] == status and [op["aten"] for op in case["verification"]["ops"]] == [
            "onnx::Add", "onnx::Relu"]
