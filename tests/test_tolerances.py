"""Tolerance tables: lookup by overload, device and dtype; old tables; calibration from reports
(only passing rows the fp64 truth calls noise, a loosening cap, never into the package)."""

from __future__ import annotations

import json
import os

import pytest

import harness
from harness.metrics import tolerances
from harness.metrics.calibration import calibrate
from harness.metrics.tolerances import CalibrationPolicy, Tolerance, ToleranceTable

TABLE = ToleranceTable([
    Tolerance("*", "cpu", 1e-5, 1e-4, "default"),
    Tolerance("*", "cuda", 1e-4, 1e-3, "default"),
    Tolerance("*", "cpu", 1e-2, 1e-2, "half default", "float16"),
    Tolerance("aten.conv2d.default", "cpu", 3e-5, 1e-4, "calibrated"),
    Tolerance("aten.conv2d.default", "cpu", 5e-3, 1e-3, "calibrated fp16", "float16"),
], calibration=CalibrationPolicy(margin=4.0, max_loosen_factor=10.0))


@pytest.mark.parametrize("aten, device, dtype, expected_atol", [
    ("aten.conv2d.default", "cpu", "float32", 3e-5),
    ("aten.conv2d.default", "cpu", None, 3e-5),
    ("aten.conv2d.default", "cpu", "float16", 5e-3),
    ("aten.conv2d.default", "cuda", "float32", 1e-4),
    ("aten.conv2d.default", "CUDA:0", None, 1e-4),
    ("aten.relu.default", "cpu", "float32", 1e-5),
    ("aten.relu.default", "cpu", "float16", 1e-2),
])
def test_lookup_takes_the_most_specific_row(aten, device, dtype, expected_atol):
    assert TABLE.lookup(aten, device, dtype).atol == expected_atol


def test_shipped_table_loads_and_round_trips():
    table = tolerances.load()
    assert table.lookup("aten.anything.default", "cpu").source
    assert table.calibration.margin > 1 and table.calibration.sources["margin"]
    assert ToleranceTable.from_dict(table.to_dict()).to_dict() == table.to_dict()


def test_version_1_tables_read_as_any_dtype():
    old = {"schema_version": 1, "rows": [{"aten": "*", "device": "cpu", "atol": 2e-5, "rtol": 1e-4, "source": "s"}]}
    row = ToleranceTable.from_dict(old).lookup("aten.add.Tensor", "cpu", "float64")
    assert (row.dtype, row.atol) == ("*", 2e-5)


@pytest.mark.parametrize("data, message", [
    ({"schema_version": 99, "rows": []}, "schema_version"),
    ({"schema_version": 2, "rows": [{"aten": "*"}]}, "malformed"),
    ({"schema_version": 2, "rows": [{"aten": "*", "device": "cpu", "atol": 1, "rtol": 1}] * 2}, "two tolerance rows"),
])
def test_bad_tables_are_refused(data, message):
    with pytest.raises(ValueError, match=message):
        ToleranceTable.from_dict(data)


def _op(aten: str, min_atol: float, *, passed: bool = True, attribution: str = "both-noise",
        dtype: str = "float32") -> dict:
    return {"aten": aten, "dtype": dtype, "passed": passed, "attribution": attribution,
            "isolated": {"min_atol": min_atol, "shape_match": True}}


def _report(device: str, ops: list[dict]) -> dict:
    return {"device": device, "cases": [{"name": "case", "verification": {"ops": ops}}]}


@pytest.mark.parametrize("observed, expected_atol, own_row", [
    (1e-5, 4e-5, True),    # above the floor: observed x margin
    (1e-7, 1e-5, False),   # never stricter than the default, which already says it: no row of its own
])
def test_calibrate_uses_margin_and_floor(observed, expected_atol, own_row):
    result = calibrate(TABLE, [("r.json", _report("cpu", [_op("aten.add.Tensor", observed)]))])
    row = result.table.lookup("aten.add.Tensor", "cpu", "float32")
    assert row.atol == pytest.approx(expected_atol) and bool(result.changes) == own_row
    assert result.observations == 1
    if own_row:
        assert row.dtype == "float32" and "r.json" in row.source and "x4 margin" in row.source
        assert "both-noise" in row.source
    else:
        assert row.source == "default"


@pytest.mark.parametrize("ignored", [
    _op("aten.mm.default", 1e-3, passed=False),                       # failing rows teach nothing
    _op("aten.mm.default", 1e-3, attribution="backend"),             # the backend diverged
    _op("aten.mm.default", 1e-3, attribution="both"),
    {"aten": "aten.mm.default", "passed": True, "attribution": "both-noise", "isolated": None},
])
def test_calibrate_learns_only_from_passing_noise(ignored):
    result = calibrate(TABLE, [("r", _report("cpu", [ignored, _op("aten.relu.default", 2e-5)]))])
    assert [c.aten for c in result.changes] == ["aten.relu.default"] and result.ignored == 1
    assert result.table.lookup("aten.mm.default", "cpu").atol == 1e-5


def test_calibrate_caps_loosening_unless_allowed():
    report = [("r", _report("cpu", [_op("aten.conv2d.default", 1e-3)]))]  # wants 4e-3, 133x the 3e-5 row
    capped = calibrate(TABLE, report)
    (change,) = capped.changes
    assert change.capped and capped.table.lookup("aten.conv2d.default", "cpu").atol == pytest.approx(3e-4)
    assert "--allow-loosen" in capped.table.lookup("aten.conv2d.default", "cpu").source
    allowed = calibrate(TABLE, report, allow_loosen=True)
    assert allowed.table.lookup("aten.conv2d.default", "cpu").atol == pytest.approx(4e-3)


def test_cli_calibrate_writes_table(tmp_path, capsys):
    from harness.cli import main

    report = tmp_path / "run.json"
    report.write_text(json.dumps(_report("cpu", [_op("aten.mm.default", 2e-5)])))
    out = tmp_path / "tol.json"
    assert main(["tolerances", "--calibrate", str(report), "--out", str(out)]) == 0
    written = tolerances.load(out)
    assert written.lookup("aten.mm.default", "cpu").atol == pytest.approx(8e-5)
    assert "aten.mm.default" in capsys.readouterr().out
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _calibrate_cli(tmp_path, ops: list[dict] | None, *extra: str) -> list[str]:
    report = tmp_path / "run.json"
    if ops is not None:
        report.write_text(json.dumps(_report("cpu", ops)))
    return ["tolerances", "--calibrate", str(report), *extra]


@pytest.mark.parametrize("make_args, message", [
    (lambda t: ["tolerances", "--table", str(t / "missing.json")], "missing.json: no such file"),
    (lambda t: _calibrate_cli(t, [], "--out", str(t / "tol.json")), "nothing to learn"),
    (lambda t: _calibrate_cli(t, [_op("aten.mm.default", 1e-3, passed=False)], "--out", str(t / "tol.json")),
     "nothing to learn"),
    (lambda t: _calibrate_cli(t, None, "--out", str(t / "tol.json")), "cannot read report"),
    (lambda t: _calibrate_cli(t, [_op("aten.mm.default", 2e-5)]), "needs --out"),
    (lambda t: _calibrate_cli(t, [_op("aten.mm.default", 2e-5)], "--out", tolerances.shipped_path()),
     "inside the installed harness package"),
    (lambda t: _calibrate_cli(t, [_op("aten.mm.default", 2e-5)], "--out",
                              os.path.join(os.path.dirname(harness.__file__), "mine.json")), "inside the installed"),
])
def test_cli_tolerance_errors_are_one_line(tmp_path, capsys, make_args, message):
    from harness.cli import main

    shipped = open(tolerances.shipped_path()).read()
    assert main(make_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "tol.json").exists()
    assert open(tolerances.shipped_path()).read() == shipped


def test_tolerances_doc_is_generated_from_the_shipped_table():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "gen_tolerances_doc.py"
    spec = importlib.util.spec_from_file_location("gen_tolerances_doc", path)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = generator.generate()
    for row in tolerances.load().rows:
        assert row.source in generated
    assert generator.OUTPUT.read_text() == generated, "docs/TOLERANCES.md is stale: run python tools/gen_tolerances_doc.py"


def test_calibrate_learns_per_dtype_floored_at_that_dtypes_default():
    shipped = tolerances.load()
    reports = [("r.json", _report("cpu", [_op("aten.add.Tensor", 1e-5, dtype="float16"),
                                          _op("aten.add.Tensor", 1e-7, dtype="float32")]))]
    result = calibrate(shipped, reports)
    half = result.table.lookup("aten.add.Tensor", "cpu", "float16")
    assert (half.dtype, half.atol, half.rtol) == ("float16", pytest.approx(4e-5), shipped.lookup("*", "cpu", "float16").rtol)
    assert result.table.lookup("aten.add.Tensor", "cpu", "float32") == shipped.lookup("*", "cpu", "float32")
    assert [(c.dtype, c.before) for c in result.changes] == [("float16", shipped.lookup("*", "cpu", "float16").atol)]
