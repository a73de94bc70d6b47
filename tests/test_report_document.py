"""parity.json documents: the schema, diffs against a baseline, merges of shards, shard slicing.

Documents here are built from hand-written Verification dicts (the shape of
`Verification.to_dict()`), so every rule is checked without running a model.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from harness.cli.errors import UsageError
from harness.cli.sources import Task, apply_costs, shard
from harness.report import diff as diffs
from harness.report.document import (
    case_from_verification, crashed_case, error_case, finish, new_document,
)
from harness.report.files import ReportError, dumps, load_report
from harness.report.merge import merge
from harness.report.schema import case_error, validate


def comparison(max_abs: float, ratio: float, *, passed: bool = True, min_atol: float | None = None) -> dict:
    return {"name": "v", "shape_actual": [2], "shape_expected": [2], "dtype_actual": "float32",
            "dtype_expected": "float32", "atol": 1e-5, "rtol": 1e-4, "shape_match": True, "dtype_match": True,
            "max_abs": max_abs, "max_rel": max_abs, "normalized": max_abs, "scale": 1.0, "mismatch_fraction": 0.0,
            "nonfinite_mismatch": 0, "nonfinite_expected": 0, "tolerance_ratio": ratio,
            "min_atol": max_abs if min_atol is None else min_atol, "min_rtol": 0.0,
            "histogram": {"1e-06": 2}, "allowed_mismatch": 0.0, "passed": passed, "note": ""}


def op_row(name: str, ratio: float, *, passed: bool | None = None, attribution: str = "both-noise",
           isolated: bool = True, aten: str = "aten.conv2d.default") -> dict:
    passed = ratio <= 1 if passed is None else passed
    measured = comparison(ratio * 1e-5, ratio, passed=passed)
    return {"fx_node": name, "aten": aten, "onnx_nodes": [name], "onnx_ops": ["Conv"], "scope": "Net/Conv2d[c]",
            "source": "net.py:3", "attribution": attribution,
            "tolerance": {"aten": "*", "device": "cpu", "atol": 1e-5, "rtol": 1e-4, "source": "default"},
            "passed": passed if isolated else None, "not_isolable": "" if isolated else "no kernel",
            "noise_bound": 1e-6, "reduction_length": 9, "notes": [],
            "accumulated": comparison(ratio * 2e-5, ratio * 2), "isolated": measured if isolated else None,
            "truth": {**comparison(1e-7, 0.01), "dtype_expected": "float64", "dtype_match": False,
                      "note": "dtype float32 != expected float64"},
            "torch_truth": comparison(1e-7, 0.01), "noise_floor": None}


def verification(ops: list[dict], *, passed: bool = True) -> dict:
    return {"model_name": "m", "exporter": "roundtrip", "device": "cpu", "passed": passed,
            "checker": {"passed": True, "message": ""}, "outputs": [comparison(1e-6, 0.1, passed=passed)],
            "worst_op": max(ops, key=lambda o: o["isolated"]["tolerance_ratio"] if o["isolated"] else 0)["fx_node"]
            if ops else None, "ops": ops, "instrumented_vs_production": [], "cpu_placed_nodes": ["conv_b"],
            "environment": {"noise_model": {"ulps": 4}, "torch_seed": 0}, "timings": {"export_s": 1.5},
            "notes": [], "op_reference": "torch"}


def document(cases: list[dict], **header) -> dict:
    doc = new_document(source="roundtrip run", device=header.pop("device", "cpu"), exporter="roundtrip", seed=0,
                       command="roundtrip run", **header)
    doc["cases"] = cases
    for position, case in enumerate(cases):
        case["position"] = position
    return finish(doc)


def passing_case(name: str = "net", ratios: tuple[float, ...] = (0.01, 0.2)) -> dict:
    ops = [op_row(f"conv_{chr(97 + i)}", r) for i, r in enumerate(ratios)]
    return case_from_verification(verification(ops), name=name, other=verification([]), seconds=1.0,
                                  sizes=["batch 2", "batch 3"])


def test_a_run_document_validates_and_keeps_what_a_reader_needs():
    doc = document([passing_case(), crashed_case("boom", reason="segmentation fault", signal="SIGSEGV",
                                                 log_tail=["last line"]),
                    error_case("refused", error="ExportError: aten.foo has no symbolic")])
    validate(doc)
    op = doc["cases"][0]["verification"]["ops"][1]
    assert op["headroom"] == pytest.approx(5.0) and op["dtype"] == "float32"
    assert op["cpu_placed_nodes"] == ["conv_b"] and doc["cases"][0]["verification"]["ops"][0]["cpu_placed_nodes"] == []
    assert "histogram" not in op["isolated"] and "note" not in op["truth"]  # fp64 dtype is by design
    assert doc["versions"]["torch"] and doc["providers"] and doc["host"]["name"] and doc["finished"]
    assert json.loads(dumps(doc)) == doc


BROKEN = [
    (lambda d: d.update(schema_version=1), "schema_version"),
    (lambda d: d["cases"][0].update(status="maybe"), "status"),
    (lambda d: d["cases"][0].pop("verification"), "verification"),
    (lambda d: d["cases"][0]["verification"]["ops"][0].pop("headroom"), "headroom"),
    (lambda d: d.update(started="yesterday"), "started"),
]


@pytest.mark.parametrize("mutate, where", BROKEN)
def test_schema_rejects_broken_documents(mutate, where):
    doc = document([passing_case()])
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError) as caught:
        validate(doc)
    assert where in str(caught.value)


@pytest.mark.parametrize("mutate, where", [
    (lambda d: None, None),
    *BROKEN,
    (lambda d: d["cases"][0]["verification"]["ops"][0]["accumulated"].update(max_abs="big"), "max_abs"),
    (lambda d: d["cases"][0]["verification"]["ops"][0].update(truth=[]), "truth"),
])
def test_case_by_case_validation_says_what_whole_validation_says(mutate, where):
    """Each case alone (case_error) and then the rest (cases_validated=True), as a run in
    progress validates its report, accepts and refuses exactly what one whole validation does."""
    doc = document([passing_case(), passing_case("second")])
    mutate(doc)
    if where is None:
        validate(doc)
        assert [case_error(case) for case in doc["cases"]] == [None, None]
        validate(doc, cases_validated=True)
        return
    with pytest.raises(jsonschema.ValidationError) as whole:
        validate(doc)
    found = next(filter(None, map(case_error, doc["cases"])), None)
    if found is None:
        with pytest.raises(jsonschema.ValidationError) as in_parts:
            validate(doc, cases_validated=True)
        found = in_parts.value
    assert where in str(whole.value) and where in str(found)
    assert found.message == whole.value.message


def test_load_report_names_the_problem(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps({"schema_version": 1, "cases": []}))
    with pytest.raises(ReportError, match="schema_version 1"):
        load_report(tmp_path / "old.json")
    with pytest.raises(ReportError, match="no report there"):
        load_report(tmp_path / "absent")


def _regress(doc: dict, change) -> dict:
    new = copy.deepcopy(doc)
    change(new["cases"][0])
    return new


@pytest.mark.parametrize("change, kind", [
    (lambda c: c.update(status="fail"), "case fail"),
    (lambda c: c.update(crashed_case("net", reason="aborted", signal="SIGABRT")), "case crashed"),
    (lambda c: c["verification"]["ops"][1].update(op_row("conv_b", 1.5)), "crossed"),
    (lambda c: c["verification"]["ops"][1]["isolated"].update(tolerance_ratio=0.9), "grew"),
    (lambda c: c["verification"]["ops"][1].update(isolated=None, not_isolable="no kernel"), "unsupported"),
])
def test_diff_finds_each_kind_of_regression(change, kind):
    base = document([passing_case()])
    found = diffs.diff(base, _regress(base, change))
    assert found["regressed"] and [r["kind"] for r in found["regressions"]] == [kind], found["regressions"]
    assert kind.split()[-1] in diffs.markdown(found)


@pytest.mark.parametrize("change", [
    lambda c: None,
    lambda c: c["verification"]["ops"][0]["isolated"].update(tolerance_ratio=0.05),  # 5x, still negligible
    lambda c: c["verification"]["ops"][1]["isolated"].update(tolerance_ratio=0.7),  # 3.5x: under the factor
])
def test_diff_ignores_noise(change):
    base = document([passing_case()])
    assert diffs.diff(base, _regress(base, change))["regressions"] == []


def test_diff_reports_improvements_and_new_worst_ops():
    base = document([passing_case(ratios=(0.01, 1.5))])
    new = document([passing_case(ratios=(0.01, 0.2)), passing_case("added")])
    found = diffs.diff(base, new)
    assert not found["regressed"]
    assert [i["kind"] for i in found["improvements"]] == ["passes"]
    assert found["added_cases"] == ["added"]
    assert {(w["case"], w["fx_node"]) for w in found["new_worst_ops"]} >= {("added", "conv_b")}


def test_merge_restores_selection_order_and_refuses_mixtures():
    whole = document([passing_case("a"), passing_case("b"), passing_case("c")])
    first, second = copy.deepcopy(whole), copy.deepcopy(whole)
    first["cases"], second["cases"] = [whole["cases"][1]], [whole["cases"][0], whole["cases"][2]]
    first["shard"], second["shard"] = "1/2", "2/2"
    merged = merge([("s1", first), ("s2", second)])
    validate(merged)
    assert [c["name"] for c in merged["cases"]] == ["a", "b", "c"] and len(merged["shards"]) == 2
    with pytest.raises(ReportError, match="overlap"):
        merge([("s1", first), ("s1-again", first)])
    other = copy.deepcopy(second)
    other["versions"]["onnxruntime"] = "0.0.1"
    with pytest.raises(ReportError, match="onnxruntime .* --allow-mixed"):
        merge([("s1", first), ("s2", other)])
    assert merge([("s1", first), ("s2", other)], allow_mixed=True)["mixed"]
    other["device"] = "cuda:0"
    with pytest.raises(ReportError, match="device"):
        merge([("s1", first), ("s2", other)])


def _tasks(costs: dict[str, float]) -> list[Task]:
    return [Task(name, {"kind": "zoo", "case": name}, i, cost) for i, (name, cost) in enumerate(costs.items())]


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_partition_the_selection_and_balance_cost(count):
    costs = {f"case{i}": float((i * 37) % 11 + 1) for i in range(13)}
    slices = [shard(_tasks(costs), k, count) for k in range(1, count + 1)]
    names = [t.name for s in slices for t in s]
    assert sorted(names) == sorted(costs)  # disjoint and complete
    assert slices == [shard(_tasks(costs), k, count) for k in range(1, count + 1)]  # deterministic
    loads = [sum(t.cost for t in s) for s in slices]
    assert max(loads) - min(loads) <= max(costs.values())  # greedy: within one case of even
    assert all([t.position for t in s] == sorted(t.position for t in s) for s in slices)


def test_recorded_seconds_replace_estimates_only_when_complete():
    tasks = _tasks({"a": 100.0, "b": 1.0})
    apply_costs(tasks, {"a": 5.0})
    assert [t.cost for t in tasks] == [100.0, 1.0]
    apply_costs(tasks, {"a": 5.0, "b": 7.0})
    assert [t.cost for t in tasks] == [5.0, 7.0]
    with pytest.raises(UsageError):
        shard(tasks, 3, 2)


def test_a_report_directory_may_hold_its_json_gzipped(tmp_path):
    import gzip

    doc = document([passing_case()])
    (tmp_path / "parity.json.gz").write_bytes(gzip.compress(dumps(doc).encode()))
    assert load_report(tmp_path) == doc
    (tmp_path / "parity.json").write_text(dumps(document([])))  # a plain parity.json wins
    assert load_report(tmp_path)["cases"] == []
