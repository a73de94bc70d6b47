"""Tolerance tables: lookup order, schema checks, calibration from reports."""

from __future__ import annotations

import json

import pytest

from harness.metrics import tolerances
from harness.metrics.calibration import calibrate
from harness.metrics.tolerances import Tolerance, ToleranceTable

TABLE = ToleranceTable([
    Tolerance("*", "cpu", 1e-5, 1e-4, "default"),
    Tolerance("*", "cuda", 1e-4, 1e-3, "default"),
    Tolerance("aten.conv2d.default", "cpu", 3e-5, 1e-4, "calibrated"),
])


@pytest.mark.parametrize("aten, device, expected_atol", [
    ("aten.conv2d.default", "cpu", 3e-5),
    ("aten.conv2d.default", "cuda", 1e-4),
    ("aten.conv2d.default", "CUDA:0", 1e-4),
    ("aten.relu.default", "cpu", 1e-5),
])
def test_lookup(aten, device, expected_atol):
    assert TABLE.lookup(aten, device).atol == expected_atol


def test_shipped_table_loads_and_round_trips():
    table = tolerances.load()
    assert table.lookup("aten.anything.default", "cpu").source
    assert ToleranceTable.from_dict(table.to_dict()).to_dict() == table.to_dict()


def test_wrong_schema_version_is_refused():
    with pytest.raises(ValueError, match="schema_version"):
        ToleranceTable.from_dict({"schema_version": 99, "rows": []})


def _report(device: str, ops: list[tuple[str, float]]) -> dict:
    return {"device": device, "cases": [{"name": "case", "verification": {"ops": [
        {"aten": aten, "isolated": {"min_atol": value, "shape_match": True}} for aten, value in ops
    ]}}]}


@pytest.mark.parametrize("observed, expected_atol", [
    (1e-4, 4e-4),   # above the floor: observed x margin
    (1e-7, 1e-5),   # tiny errors never make a row stricter than the default
])
def test_calibrate_uses_margin_and_floor(observed, expected_atol):
    table = calibrate(TABLE, [("r.json", _report("cpu", [("aten.add.Tensor", observed)]))], margin=4.0)
    row = table.lookup("aten.add.Tensor", "cpu")
    assert row.atol == pytest.approx(expected_atol)
    assert "r.json" in row.source and "x4 margin" in row.source


def test_cli_calibrate_writes_table_atomically(tmp_path, capsys):
    from harness.cli import main

    report = tmp_path / "run.json"
    report.write_text(json.dumps(_report("cpu", [("aten.mm.default", 2e-4)])))
    out = tmp_path / "tol.json"
    assert main(["tolerances", "--calibrate", str(report), "--out", str(out)]) == 0
    written = ToleranceTable.from_dict(json.loads(out.read_text()))
    assert written.lookup("aten.mm.default", "cpu").atol == pytest.approx(8e-4)
    assert "aten.mm.default" in capsys.readouterr().out


def test_cli_calibrate_refuses_unreadable_report(tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "tol.json"
    out.write_text("keep me")
    assert main(["tolerances", "--calibrate", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
    assert "cannot read report" in capsys.readouterr().err
    assert out.read_text() == "keep me"
