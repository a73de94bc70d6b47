"""The command line's smaller promises: the run's exporter judges the second input size too,
every zoo tier is offered, bad `--inputs` are a usage error, every failing case's line says
why, and a harness error is the harness's (exit 3), never the backend's."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.cli import worker
from harness.cli.sources import Built


@pytest.mark.parametrize("exporter", ["roundtrip", "torch.onnx", "torchscript"])
def test_the_second_size_is_verified_with_the_runs_exporter(monkeypatch, exporter):
    import harness.verification

    seen = {}

    class Record:
        onnx_model = object()

    monkeypatch.setattr(harness.verification, "verify_exported", lambda *a, **k: Record())
    monkeypatch.setattr(harness.verification, "verify", lambda *a, **k: seen.update(k) or Record())
    built = Built(module=object(), args=(1,), other_args=(2,))
    worker._verify(built, object(), {"device": "cpu", "exporter": exporter, "per_op": True}, "case")
    assert seen["exporter"] == exporter and seen["onnx_model"] is Record.onnx_model


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
