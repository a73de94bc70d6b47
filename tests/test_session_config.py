"""Verify what users deploy: the production run, and the analysis sessions with it, run with
onnxruntime's defaults (prepacking on) or the user's own session settings (a SessionOptions, a
mapping, a JSON file: `session_options=`, `--ort-config`, `--roundtrip-ort-config`), and every
report records the configuration it verified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import harness
from harness.runtime import OrtConfig, OrtConfigError

REPO = Path(__file__).resolve().parent.parent


def _matmul(width: int = 256):
    """A MatMul wide enough that onnxruntime's prepacked kernel rounds differently (K=256)."""
    generator = np.random.default_rng(0)
    weight = numpy_helper.from_array(generator.standard_normal((width, width)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, width])], initializer=[weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, generator.standard_normal((8, width)).astype(np.float32)


def _deployed(model, x, options=None):
    session = ort.InferenceSession(model.SerializeToString(), options or ort.SessionOptions(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_the_production_run_gives_bit_for_bit_what_a_default_session_gives():
    model, x = _matmul()
    deployed = _deployed(model, x)
    verification = harness.verify_onnx(model, [x], [deployed], output_atol=0.0, output_rtol=0.0, per_op=False,
                                       strict=True)
    assert verification.passed, verification.outputs[0].max_abs


def test_the_users_session_options_are_what_is_verified_and_recorded(monkeypatch):
    created = []
    real = ort.InferenceSession

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, source, sess_options=None, *args, **kwargs):
            super().__init__(source, sess_options, *args, **kwargs)
            created.append(sess_options)

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    model, x = _matmul()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.disable_prepacking", "1")
    deployed = _deployed(model, x, options)
    del created[:]
    verification = harness.verify_onnx(model, [x], [deployed], output_atol=0.0, output_rtol=0.0,
                                       session_options=options, strict=True)
    assert verification.passed and len(created) == 3  # production, instrumented, isolation: all alike
    for used in created:
        assert used is not options  # each session gets its own options built from the user's
        assert used.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        assert used.get_session_config_entry("session.disable_prepacking") == "1"
    record = verification.environment["onnxruntime_session"]
    assert record["source"] == "SessionOptions" and record["graph_optimization_level"] == "disabled"
    assert record["config_entries"]["session.disable_prepacking"] == "1"


@pytest.mark.parametrize("data, message", [
    ({"graph_optimization_level": "fast"}, "choose one of disabled, basic, extended, all"),
    ({"threads": 4}, "unknown setting(s) ['threads']"),
    ({"intra_op_num_threads": -1}, "a number of threads"),
    ({"provider_options": {"CPUExecutionProvider": 1}}, "a mapping of provider name to its options"),
    ([1, 2], "holds a list, expected a JSON object"),
])
def test_a_bad_configuration_file_is_named_with_the_problem(tmp_path, data, message):
    path = tmp_path / "ort.json"
    path.write_text(json.dumps(data))
    with pytest.raises(OrtConfigError, match="ort.json") as raised:
        OrtConfig.load(path)
    assert message in str(raised.value)


def test_a_contradicting_provider_option_is_refused():
    config = OrtConfig(provider_options={"CUDAExecutionProvider": {"use_tf32": 1, "arena_extend_strategy": "x"}})
    with pytest.raises(OrtConfigError, match="use_tf32=1 contradicts"):
        config.provider_options_for("CUDAExecutionProvider", {"device_id": 0, "use_tf32": 0})
    assert OrtConfig(provider_options={"CUDAExecutionProvider": {"arena_extend_strategy": "x"}}).provider_options_for(
        "CUDAExecutionProvider", {"device_id": 0, "use_tf32": 0}) == {"device_id": 0, "use_tf32": 0,
                                                                         "arena_extend_strategy": "x"}


def test_the_cli_verifies_and_records_the_configuration_file(tmp_path):
    import onnx

    model, x = _matmul(64)
    onnx.save(model, tmp_path / "mm.onnx")
    np.savez(tmp_path / "in.npz", x=x)
    (tmp_path / "ort.json").write_text(json.dumps({"config_entries": {"session.disable_prepacking": "1"},
                                                   "intra_op_num_threads": 1}))
    out = tmp_path / "r"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "verify", str(tmp_path / "mm.onnx"), "--inputs", str(tmp_path / "in.npz"),
         "--ort-config", str(tmp_path / "ort.json"), "--graph-optimization-level", "basic", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    from harness.report.files import load_report

    document = load_report(out)  # valid against the schema
    expected = {"graph_optimization_level": "basic", "intra_op_num_threads": 1,
                "config_entries": {"session.disable_prepacking": "1"}}
    for record in (document["onnxruntime_session"],
                   document["cases"][0]["verification"]["environment"]["onnxruntime_session"]):
        assert {key: record[key] for key in expected} == expected, record
        assert record["source"] == f"{tmp_path / 'ort.json'}; graph_optimization_level basic"


def test_a_bad_ort_config_is_a_usage_error(tmp_path, capsys):
    from harness.cli import main

    (tmp_path / "ort.json").write_text('{"graph_optimization_level": "fast"}')
    assert main(["run", "--cases", "superresolution", "--ort-config", str(tmp_path / "ort.json"),
                 "--out", str(tmp_path / "r")]) == 2
    assert "--ort-config" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_the_plugin_verifies_with_the_configuration_file(pytester: pytest.Pytester):
    pytester.makefile(".json", ort='{"graph_optimization_level": "extended"}')
    pytester.makepyfile(test_model="""
        import torch

        def test_model(roundtrip):
            verification = roundtrip.verify(torch.nn.Linear(4, 2).eval(), (torch.randn(3, 4),))
            session = verification.environment["onnxruntime_session"]
            assert session["graph_optimization_level"] == "extended" and session["source"].endswith("ort.json")
    """)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--roundtrip-ort-config", "ort.json")
    result.assert_outcomes(passed=1)
    bad = pytester.runpytest_subprocess("-p", "no:xdist", "--roundtrip-ort-config", "missing.json")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "missing.json: no such file" in bad.stderr.str()


def test_shards_verified_with_other_session_settings_do_not_merge_quietly():
    from harness.report.document import new_document
    from harness.report.files import ReportError
    from harness.report.merge import merge

    def shard(level):
        document = new_document(source="roundtrip run", device="cpu", exporter="roundtrip", seed=0, command="x",
                                shard="1/2")
        document["onnxruntime_session"] = OrtConfig(graph_optimization_level=level).to_dict()
        return document

    merged = merge([("a", shard("basic")), ("b", shard("basic"))])
    assert merged["onnxruntime_session"]["graph_optimization_level"] == "basic"
    with pytest.raises(ReportError, match="onnxruntime_session"):
        merge([("a", shard("basic")), ("b", shard("all"))])
