"""The command line's smaller promises: the run's exporter judges the second input size too,
every zoo tier is offered, bad `--inputs` are a usage error, every failing case's line says
why, and a harness error is the harness's (exit 3), never the backend's."""

from __future__ import annotations

import onnx
import pytest

from harness.cli import main
from harness.cli import worker
from harness.cli.sources import Built


@pytest.mark.parametrize("exporter", ["roundtrip", "torch.onnx", "torchscript"])
def test_the_second_size_is_verified_with_the_runs_exporter(monkeypatch, exporter):
    import harness.verification

    seen = {}

    class Record:
        onnx_model = onnx.ModelProto()  # an export that fixed no declared dynamic axis
        output_verdicts = []

    monkeypatch.setattr(harness.verification, "verify_exported", lambda *a, **k: Record())
    monkeypatch.setattr(harness.verification, "verify", lambda *a, **k: seen.update(k) or Record())
    built = Built(module=object(), args=(1,), other_args=(2,))
    worker._verify(built, object(), {"device": "cpu", "exporter": exporter, "per_op": True}, "case")
    assert seen["exporter"] == exporter and seen["onnx_model"] is Record.onnx_model
    assert seen["per_op"] is False  # outputs only: the verification asks for rows where it needs them


def test_run_offers_every_zoo_tier(capsys):
    import model_zoo_cases
    from harness.cli.main import TIERS

    assert TIERS == model_zoo_cases.TIERS
    assert main(["run", "--tier", "extended", "--cases", "nothing*"]) == 2  # parsed; no case matches
    assert "no case matches" in capsys.readouterr().err


def _bench(name: str):
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parent.parent / "bench")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def test_bench_verify_interleaves_every_side_in_each_round(monkeypatch):
    """ours, theirs and harness.verify run once per round, the order alternating; a warm-up
    of ours and of verify comes first and is not timed."""
    bench = _bench("bench_verify")
    calls: list[str] = []

    class Program:
        model_proto = type("Proto", (), {"graph": type("Graph", (), {"node": []})()})()
        exported_program = None

    class Record:
        ops, passed, timings = [], True, {}

    monkeypatch.setattr(bench, "_model", lambda name, seed: (object(), (object(),)))
    monkeypatch.setattr(bench, "torch_onnx_export", lambda *a, **k: Program())
    monkeypatch.setattr(bench, "verify_exported", lambda *a, **k: calls.append("ours") or Record())
    monkeypatch.setattr(bench, "verify", lambda *a, **k: calls.append("verify") or Record())
    monkeypatch.setattr(bench, "_theirs", lambda *a: calls.append("theirs") or [1, 2])
    row = bench.measure("resnet18", seed=0, repeat=3, optimize=False, roundtrip=True)
    rounds = ["ours", "theirs", "verify"]
    assert calls == ["ours", "verify", *rounds, *rounds[::-1], *rounds]
    assert len(row["theirs_runs_s"]) == len(row["ours_runs_s"]) == len(row["roundtrip_runs_s"]) == 3
    with pytest.raises(SystemExit):
        bench.main(["--repeat", "2"])


def test_bench_results_are_dirty_only_when_the_measured_code_is(monkeypatch):
    common = _bench("_common")
    seen = []
    monkeypatch.setattr(common, "_git", lambda *args: seen.append(args) or "harness/verification.py\n")
    assert common.local_changes() == ["harness/verification.py"]
    assert {f":(exclude){path}" for path in common.RESULT_PATHS} <= set(seen[0])


# --- roundtrip verify model.onnx --inputs in.npz ---------------------------------------------------


def _two_input_model(path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["out"], name="add")], "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _npz(path, **arrays):
    import numpy as np

    np.savez(path, **arrays)
    return path


def _f32(*shape):
    import numpy as np

    return np.ones(shape, np.float32)


BAD_INPUTS = [
    ({"x": _f32(2, 3)}, "has no array for input 'y' (the model expects float32 [1, 3])"),
    ({"x": _f32(2, 3), "y": _f32(1, 3).astype("float64")},
     "input 'y' must be float32 [1, 3], the file holds float64 [1, 3]"),
    ({"x": _f32(2, 3, 1), "y": _f32(1, 3)}, "input 'x' must be float32 [batch, 3], the file holds float32 [2, 3, 1]"),
    ({"x": _f32(2, 3), "y": _f32(2, 3)}, "input 'y' must be float32 [1, 3], the file holds float32 [2, 3]"),
    ({"x": _f32(2, 3), "y": _f32(1, 3), "z": _f32(1)}, "holds ['z'], which the model has no input of"),
    ({"arr_0": _f32(2, 3), "arr_1": _f32(1, 3)}, "holds unnamed arrays"),
    (None, "not a readable .npz"),
    ({"x": _f32(2, 3), "y": _f32(1, 3), "expected": {"sum": _f32(2, 3)}}, "must hold the model's outputs ['out']"),
    ({"x": _f32(2, 3), "y": _f32(1, 3), "expected": {"arr_0": _f32(2, 3), "arr_1": _f32(2, 3)}},
     "2 unnamed array(s) for the model's 1 output(s)"),
]


@pytest.mark.parametrize("arrays, message", BAD_INPUTS, ids=[str(i) for i in range(len(BAD_INPUTS))])
def test_inputs_that_do_not_fit_the_model_are_a_usage_error(tmp_path, capsys, arrays, message):
    model = _two_input_model(tmp_path / "model.onnx")
    inputs = tmp_path / "in.npz"
    expected = []
    if arrays is None:
        inputs.write_text("not an npz")
    else:
        outputs = arrays.pop("expected", None)
        _npz(inputs, **arrays)
        if outputs is not None:
            expected = ["--expected", str(_npz(tmp_path / "out.npz", **outputs))]
    assert main(["verify", str(model), "--inputs", str(inputs), *expected, "--out", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert not (tmp_path / "r").exists(), "a case ran"


def test_inputs_that_fit_are_accepted():
    from harness.cli.npz_inputs import check_inputs

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        model = _two_input_model(Path(folder) / "model.onnx")
        check_inputs(str(model), str(_npz(Path(folder) / "in.npz", x=_f32(5, 3), y=_f32(1, 3))))


# --- every failing case says why ---------------------------------------------------------------


def _failing(**verification):
    record = {"checker": {"passed": True}, "outputs": [], "ops": [], "notes": [], "worst_op": None,
              "op_reference": "torch", **verification}
    return {"name": "m", "status": "fail", "seconds": 1.0, "verification": record, "sizes": ["batch 2", "batch 3"]}


_OUT_FAIL = {"name": "out", "passed": False, "max_abs": 0.5, "tolerance_ratio": 50.0, "atol": 1e-4, "rtol": 1e-3,
             "mismatch_fraction": 0.25}
_OUT_PASS = {"name": "out", "passed": True, "max_abs": 1e-7, "tolerance_ratio": 0.01, "atol": 1e-4, "rtol": 1e-3}
_OP_PASS = {"fx_node": "conv2d", "passed": True, "onnx_ops": ["Conv"], "isolated": {"tolerance_ratio": 0.0132}}
_OP_FAIL = {"fx_node": "gelu", "passed": False, "onnx_ops": ["Gelu"], "isolated": {"tolerance_ratio": 9.0}}

REASONS = [
    (_failing(checker={"passed": False, "message": "ValidationError: bad\nmore"}), "checker: ValidationError: bad"),
    (_failing(notes=["the backend refused the model: ModelLoadError: no kernel"]), "the backend refused the model"),
    (_failing(outputs=[_OUT_FAIL], ops=[_OP_FAIL]), "output 'out': max_abs 0.5 (50x its tolerance"),
    (_failing(outputs=[_OUT_FAIL], ops=[_OP_FAIL]), "1 op(s) over tolerance, first gelu"),
    (_failing(outputs=[_OUT_FAIL], ops=[_OP_PASS], op_reference="onnx.reference"),
     "every op agrees with onnx.reference op by op, so the difference is in the model itself"),
    (_failing(outputs=[{**_OUT_FAIL, "shape_match": False, "shape_actual": [2], "shape_expected": [3]}]),
     "shape [2] where [3] was expected"),
    (_failing(outputs=[], notes=["no expected outputs and no reference: the outputs are unverified"]),
     "the outputs are unverified"),
    (_failing(outputs=[_OUT_PASS], ops=[_OP_FAIL]), "1 op(s) over tolerance, first gelu"),
    ({**_failing(outputs=[_OUT_PASS]), "other": {"passed": False, "outputs": [_OUT_FAIL]}},
     "at batch 3: output 'out': max_abs 0.5"),
    ({"name": "m", "status": "error", "error": "export: ExportError: no symbolic for aten.foo"},
     "export: ExportError: no symbolic for aten.foo"),
    ({"name": "m", "status": "crashed", "seconds": 2.0, "crash": {"reason": "segmentation fault"}},
     "segmentation fault"),
]


@pytest.mark.parametrize("case, reason", REASONS, ids=[str(i) for i in range(len(REASONS))])
def test_every_failing_case_line_ends_with_its_reason(case, reason):
    from harness.cli.reasons import failure_reason, terminal_line

    assert reason in failure_reason(case)
    line = terminal_line(case)
    assert line.endswith(failure_reason(case)) and "\n" not in line, line


def test_a_failing_case_names_no_healthy_op_as_worst():
    from harness.cli.reasons import terminal_line

    case = _failing(outputs=[_OUT_FAIL], ops=[_OP_PASS], worst_op="conv2d", op_reference="onnx.reference")
    assert "worst_op=-" in terminal_line(case) and "conv2d" not in terminal_line(case)
    case = _failing(outputs=[_OUT_FAIL], ops=[_OP_PASS, _OP_FAIL], worst_op="gelu")
    assert "worst_op=gelu" in terminal_line(case)


# --- the backend's reasons, whole --------------------------------------------------------------


def _fancy_model(path=None):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.full((3, 300), 0.5, np.float32), "w")  # shared: loaded from a file
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("FancyOp", ["r", "w"], ["out"], name="fancy", domain="com.example")],
        "fancy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])], initializer=[weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                              ir_version=8)
    if path is not None:
        onnx.save(model, path)
    return model


def test_an_op_of_an_unknown_domain_is_named_first():
    import numpy as np

    import harness

    verification = harness.verify_onnx(_fancy_model(), [np.ones((2, 3), np.float32)], per_op=False, strict=True)
    refused = next(note for note in verification.notes if note.startswith("the backend refused"))
    assert "com.example::FancyOp (node 'fancy') cannot run" in refused[:160], refused
    assert "Load model from" not in refused and "[ONNXRuntimeError]" not in refused


# --- a file that computes something else, op by op correctly ----------------------------------------


def _hard_sigmoid_file(folder):
    """A model whose Sigmoid became HardSigmoid, with the Sigmoid model's outputs expected."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    generator = np.random.default_rng(0)
    weight = generator.standard_normal((3, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["r"], name="matmul"),
         helper.make_node("HardSigmoid", ["r"], ["out"], name="act")],
        "hs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(weight, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              folder / "hs.onnx")
    x = generator.standard_normal((2, 3)).astype(np.float32)
    np.savez(folder / "in.npz", x=x)
    np.savez(folder / "expected.npz", out=1 / (1 + np.exp(-(x @ weight))))
    return folder / "hs.onnx", x, 1 / (1 + np.exp(-(x @ weight)))


def test_a_file_that_computes_something_else_says_what_the_analysis_sees(tmp_path):
    import harness

    path, x, expected = _hard_sigmoid_file(tmp_path)
    verification = harness.verify_onnx(str(path), [x], [expected], strict=True)
    assert not verification.passed and all(op.passed for op in verification.ops)
    note = verification.notes[-1]
    assert "every op agrees with onnx.reference" in note and "difference is in the model itself" in note
    assert "package.module:factory" in note


def test_the_cli_line_of_such_a_file_ends_with_the_reason(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path, _, _ = _hard_sigmoid_file(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "verify", str(path), "--inputs", str(tmp_path / "in.npz"),
         "--expected", str(tmp_path / "expected.npz"), "--out", str(tmp_path / "r"), "-v"],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    # -v: the long line, whole; the short form's reason line is cut at 120 (tests/test_cli_lines.py)
    line = next(line for line in result.stdout.splitlines() if " FAIL hs " in line)
    assert "worst_op=-" in line and line.endswith("to localise it"), line


# --- harness errors are never the backend's -----------------------------------------------------


def _plant_session_fault(monkeypatch=None):
    """From the second session on, preparing a session's weights fails inside the harness."""
    from harness.runtime.shared_weights import SharedWeights

    original = SharedWeights.session_file
    calls = []

    def failing(self, model):
        calls.append(1)
        if len(calls) > 1:
            raise KeyError("planted fault in the harness's session preparation")
        return original(self, model)

    if monkeypatch is None:
        SharedWeights.session_file = failing
    else:
        monkeypatch.setattr(SharedWeights, "session_file", failing)


def _tiny():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval(), (
        torch.randn(2, 16),)


def test_a_harness_error_around_the_backend_call_is_raised_in_strict_mode(monkeypatch):
    import harness

    _plant_session_fault(monkeypatch)
    module, args = _tiny()
    with pytest.raises(KeyError, match="planted fault"):
        harness.verify(module, args, strict=True)


def test_a_harness_error_is_recorded_as_the_harnesss_never_the_backends(monkeypatch):
    import harness

    _plant_session_fault(monkeypatch)
    module, args = _tiny()
    verification = harness.verify(module, args, strict=False)
    text = " ".join(verification.notes + [op.not_isolable for op in verification.ops])
    assert "harness error while running the instrumented model: KeyError" in text, text
    assert "harness error while running the isolation model" in text, text
    assert "backend" not in text.replace("the instrumented run failed", ""), text


def test_the_backends_own_run_errors_are_still_findings():
    import numpy as np
    from onnx import TensorProto, helper

    import harness
    from harness.runtime import BackendRunError, prepare

    graph = helper.make_graph(  # a Reshape whose target shape does not fit the data at run time
        [helper.make_node("Reshape", ["x", "shape"], ["out"], name="reshape")], "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = [np.ones((2, 3), np.float32), np.array([4, 4], np.int64)]
    with pytest.raises(BackendRunError, match="onnxruntime failed to run the model"):
        prepare(model).run(feeds)
    verification = harness.verify_onnx(model, feeds, [np.ones((4, 4), np.float32)], per_op=False, strict=True)
    assert not verification.passed
    assert any(note.startswith("the backend failed to run the model: BackendRunError") for note in verification.notes)


def planted_harness_fault():
    """A factory for `roundtrip verify`: the harness fails while preparing a session."""
    _plant_session_fault()
    return _tiny()


def test_the_cli_runs_strict_and_a_harness_error_exits_3(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "r"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "verify", "tests.test_cli_hardening:planted_harness_fault",
         "--out", str(out)], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    assert result.returncode == 3, result.stdout + result.stderr
    (case,) = json.loads((out / "parity.json").read_text())["cases"]
    assert case["status"] == "error" and case["internal"] and "planted fault" in case["error"], case
    assert any(line.rstrip("'\"").endswith("planted fault in the harness's session preparation") for line in
               result.stdout.splitlines()), result.stdout
