"""Benchmarks as data: the machine record every bench writes, side-by-side timing, and the
generated docs/PERFORMANCE.md (in step with bench/results/, and rendered from any results)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path) -> ModuleType:
    """A script imported by its file name (registered, as dataclasses need its module)."""
    import sys

    if path.stem not in sys.modules:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = sys.modules[path.stem] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[path.stem]


_common = _load(ROOT / "bench" / "_common.py")
gen_performance_doc = _load(ROOT / "tools" / "gen_performance_doc.py")

MACHINE = {
    "usable_cores": 2, "physical_cores": 2, "memory_gib": 23.0, "load_average": [0.5, 0.4, 0.3],
    "load_average_end": [0.6, 0.4, 0.3], "torch_threads": 2, "versions": {"torch": "2.14.1"},
    "commit": "0123456789abcdef", "dirty": False, "finished": "2026-12-01T10:00:00+0000",
}
DOCUMENTS = {
    "bench_export": {"options": {"repeat": 3}, "summary": {
        "geomean_speedup": 3.1, "min_speedup": 1.4, "below_1x": [], "targets": {"each": 1.0, "geomean": 2.5},
        "met": True}, "rows": [
        {"case": "vgg11", "params": 132.9e6, "ours_s": 2.0, "torch_onnx_s": 2.8, "speedup": 1.4,
         "ours_phases": {"capture": 0.5, "decompose": 0.01, "translate": 0.01, "write": 0.8, "materialise": 0.6},
         "torch_onnx_phases": {"capture": 0.5, "decompose": 0.9, "other": 1.4}},
        {"case": "densenet121", "params": 8.0e6, "ours_s": 3.0, "torch_onnx_error": "RuntimeError: no"},
    ]},
    "bench_verify": {"options": {"torch_threads": "default"}, "rows": [
        {"model": "resnet18", "onnx_nodes": 176, "ours_s": 0.5, "theirs_s": 40.0, "ratio": 80.0, "target": 30.0,
         "roundtrip_end_to_end_s": 1.5, "end_to_end_ratio": 26.7, "end_to_end_target": 20.0,
         "ours_timings": {"torch_s": 0.04}}]},
    "bench_floor": {"summary": {"limit": 3.0}, "rows": [
        {"case": "alexnet", "ops": 20, "verify_s": 0.9, "floor_s": 0.2, "torch32_s": 0.05, "torch64_s": 0.05,
         "backend_run_s": 0.05, "ratio": 4.5, "over_limit": True, "why": "fp64 truth: 0.5 s against 0.05 s of floor"},
        {"case": "resnet18", "ops": 69, "verify_s": 0.3, "floor_s": 0.2, "torch32_s": 0.05, "torch64_s": 0.05,
         "backend_run_s": 0.05, "ratio": 1.5, "over_limit": False, "structural_s": 0.3, "structural_ratio": 1.0,
         "verify_sys_s": 0.04, "compare_s": 0.02}]},
}


@pytest.fixture
def results(tmp_path):
    for name, document in DOCUMENTS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"bench": name, "machine": MACHINE, **document}))
    return tmp_path


def test_every_table_is_rendered_side_by_side_with_its_ratio(results):
    text = gen_performance_doc.render(str(results))
    assert "| vgg11 | 132.9M | 2.00 | 2.80 | 1.40x | 0.50 / 0.01 / 0.01 / 0.80 / 0.60 | 0.50 / 0.90 / 1.40 |" in text
    assert "failed: RuntimeError: no" in text
    assert "Geomean speed-up **3.10x** (target 2.5x)" in text and "Targets met" in text
    assert "| resnet18 | 176 | 0.50 | 40.0 | 80x | 30x | 1.50 | 27x | 20x |" in text
    assert "- **alexnet** (4.5x): fp64 truth: 0.5 s against 0.05 s of floor" in text
    # the structural floor and the system time where the results have them, a dash where older ones do not
    assert "| resnet18 | 69 | 0.300 | 0.200 | 0.050 / 0.050 / 0.050 | 1.5x | 0.300 | 1.0x | 0.040 | 0.020 |" in text
    assert "| alexnet | 20 | 0.900 | 0.200 | 0.050 / 0.050 / 0.050 | 4.5x (over) | - | - | - | - |" in text
    assert "## bench_memory" in text and "No results yet" in text  # a bench not run yet says so
    assert "2 usable cores" in text and "torch 2.14.1" in text and "0123456789" in text
    assert "machine was busy" not in text


@pytest.mark.parametrize("floors, expected", [
    (None, None),
    ({"rows": [{"case": "unet", "ops": 812, "verify_s": 240.0, "floor_s": 60.0, "ratio": 4.0, "over_limit": True,
                "why": "fp64 truth per op: 120 s against 20 s"}]},
     "| unet | 812 | 240.0 | 60.0 | 4.0x | fp64 truth per op: 120 s against 20 s |"),
], ids=["no-floor-results", "floor-results"])
def test_the_scale_table_shows_each_model_against_its_target_and_its_floor(results, floors, expected):
    row = {"case": "unet", "inputs": [[1, 4, 64, 64], [1], [1, 77, 768]], "weight_bytes": 569 * 10**6,
           "baseline_rss": 700 * 2**20, "model_rss": 1300 * 2**20, "peak_rss": 700 * 2**20 + 3 * 2**30, "passed": True,
           "ratio_over_baseline": 5.66, "ratio_raw": 6.9,
           "largest_activation_bytes": 537 * 10**6, "seconds": 300.0, "measured": "2026-12-03T15:00:00"}
    (results / "bench_memory.json").write_text(json.dumps({"bench": "bench_memory", "machine": MACHINE, "rows": [row]}))
    if floors is not None:
        (results / "bench_floor_scale.json").write_text(json.dumps({"bench": "bench_floor", "machine": MACHINE, **floors}))
    text = gen_performance_doc.render(str(results))
    assert "| unet | 1x4x64x64 1 1x77x768 | verify(module) | pass | 0.53 | 0.50 | 3.00 | 5.66x | 2.92 | no |" in text
    assert ("Per-op verification of the scale models" in text) is (expected is not None)
    assert expected is None or expected in text


LINEAR_FILE = {"case": "linear23300", "inputs": [[2, 23300]], "weight_bytes": 2 * 2**30, "baseline_rss": 700 * 2**20,
               "model_rss": 700 * 2**20, "peak_rss": 700 * 2**20 + 3 * 2**30, "passed": True, "seconds": 90.0,
               "ratio_over_baseline": 1.5, "ratio_raw": 1.84,
               "largest_activation_bytes": 186400, "measured": "2026-12-03T15:00:00"}


@pytest.mark.parametrize("path, expected", [
    ({"from_file": True}, "| verify_onnx(file) | pass | 2.00 | 0.00 | 3.00 | 1.50x | 2.60 | no |"),
    ({"export_then_file": True}, "| export, then verify_onnx(file) | pass | 2.00 | 0.00 | 3.00 | 1.50x | 5.86 | yes |"),
    ({}, "| verify(module) | pass | 2.00 | 0.00 | 3.00 | 1.50x | 5.86 | yes |"),
    ({"from_file": True, "session_alone": True},
     "| onnxruntime session(file), no verification | pass | 2.00 | 0.00 | 3.00 | 1.50x | 2.60 | no |"),
], ids=["file-alone-at-1.3x", "export-then-file", "module", "onnxruntime-alone-on-the-file"])
def test_a_file_verified_alone_is_held_to_1_3x_its_weights(results, path, expected):
    (results / "bench_memory.json").write_text(json.dumps({"bench": "bench_memory", "machine": MACHINE,
                                                           "rows": [{**LINEAR_FILE, **path}]}))
    assert expected in gen_performance_doc.render(str(results))


def test_a_busy_machine_is_called_out(results):
    busy = copy.deepcopy(MACHINE)
    busy["load_average_end"] = [6.5, 5.0, 4.0]
    document = json.loads((results / "bench_verify.json").read_text())
    document["machine"] = busy
    (results / "bench_verify.json").write_text(json.dumps(document))
    assert "The machine was busy (load average above its 2 cores)" in gen_performance_doc.render(str(results))


def test_the_committed_page_matches_the_committed_results():
    assert gen_performance_doc.main(["--check"]) == 0, "run python tools/gen_performance_doc.py"


def test_results_carry_the_machine_and_side_by_side_runs_interleave(tmp_path):
    order: list[str] = []
    seconds, results = _common.side_by_side({"ours": lambda: order.append("ours") or 1,
                                             "theirs": lambda: order.append("theirs") or 2}, repeat=3)
    assert order == ["ours", "theirs", "theirs", "ours", "ours", "theirs"]
    assert results == {"ours": 1, "theirs": 2} and all(len(v) == 3 for v in seconds.values())
    machine = _common.machine_info()
    assert {"logical_cores", "usable_cores", "load_average", "torch_threads", "versions", "commit"} <= set(machine)
    assert {"torch", "onnx", "onnxruntime", "numpy"} <= set(machine["versions"])
    path = _common.write_results("bench_test", machine, [{"case": "x"}], summary={"ok": True},
                                 path=str(tmp_path / "out.json"))
    written = json.loads(Path(path).read_text())
    assert written["rows"] == [{"case": "x"}] and "load_average_end" in written["machine"]
    assert os.path.basename(path) == "out.json"


def test_inference_table_shows_latency_nodes_export_and_targets(results):
    rows = [{"model": "mobilenet_v3_small", "kind": "zoo", "ours_ms": 9.0, "torch_onnx_ms": 10.0, "latency_ratio": 0.9,
             "ours_nodes": 122, "torch_onnx_nodes": 122, "ours_export_s": 1.0, "torch_onnx_export_s": 4.0,
             "ours_optimize_s": 0.2, "verify_ratio": 1.1, "op_difference": {}},
            {"model": "hf_gpt2", "kind": "hf", "ours_ms": 1.0, "torch_onnx_ms": 1.1, "latency_ratio": 0.91,
             "ours_nodes": 140, "torch_onnx_nodes": 147, "ours_export_s": 1.0, "torch_onnx_export_s": 3.0,
             "ours_optimize_s": 0.1, "op_difference": {"Expand": -3, "Trilu": 1}},
            {"model": "hf_t5", "kind": "hf", "ours_ms": 5.0, "ours_nodes": 900, "ours_export_s": 2.0,
             "ours_optimize_s": 0.3, "torch_onnx_error": "RuntimeError: no"},
            {"model": "broken", "kind": "block", "error": "ExportError: unsupported"}]
    summary = {"compared": 1, "latency_ratio_geomean": 0.9, "within_latency_target": 1, "nodes_at_most_theirs": 1,
               "export_speedup_geomean": 4.0, "verify_ratio_geomean": 1.1,
               "latency_ratio_geomean_by_kind": {"hf": 0.91, "zoo": 0.9},
               "targets": {"latency_each": 1.05, "latency_geomean": 0.95, "export_geomean": 3.0, "verify_ratio": 1.2}}
    (results / "bench_inference.json").write_text(json.dumps(
        {"bench": "bench_inference", "machine": MACHINE, "options": {"repeat": 20, "threads": 1}, "rows": rows,
         "summary": summary}))
    text = gen_performance_doc.render(str(results))
    assert "| mobilenet_v3_small | zoo | 9.00 | 10.00 | 0.90 | 122 / 122 | 1.00 / 4.00 | 0.20 | 1.10 | same |" in text
    assert "| hf_gpt2 | hf | 1.00 | 1.10 | 0.91 | 140 / 147 | 1.00 / 3.00 | 0.10 | - | Expand -3, Trilu +1 |" in text
    assert "| hf_t5 | hf | 5.00 | failed: RuntimeError: no |" in text and "failed: ExportError: unsupported" in text
    assert "Latency ratio geomean **0.90** (target 0.95); within 1.05x: 1 of 1" in text
    assert "export 4.0x faster in geomean (target 3.0x); per-op verification 1.10x" in text
    assert "Latency ratio geomean by kind: hf 0.91 (1 model), zoo 0.90 (1 model)." in text


def _bench_inference() -> ModuleType:
    """bench/bench_inference.py, imported as its own script would be (it imports `_common`)."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return _load(ROOT / "bench" / "bench_inference.py")
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.mark.parametrize("seconds, calls", [(1.0, 1), (0.05, 1), (0.01, 5), (0.0004, 125), (1e-7, 200)])
def test_a_sample_holds_enough_runs_to_outlast_the_timers_noise(seconds, calls):
    assert _bench_inference().calls_per_sample(seconds) == calls


def test_op_difference_counts_each_op_type_ours_minus_theirs():
    from onnx import helper

    def graph(*ops):
        return helper.make_model(helper.make_graph([helper.make_node(op, [], [f"v{i}"]) for i, op in enumerate(ops)],
                                                   "g", [], []))

    difference = _bench_inference().op_difference
    assert difference(graph("Conv", "Relu", "Trilu"), graph("Relu", "Conv", "Expand", "Expand")) == {
        "Expand": -2, "Trilu": 1}
    assert difference(graph("Conv", "Relu"), graph("Relu", "Conv")) == {}


def test_commits_table_shows_both_sides_their_ratio_and_what_got_worse(results):
    gib = 2**30
    rows = [{"kind": "export", "case": "resnet18", "base_min_s": 0.5, "head_min_s": 0.55, "ratio": 1.1,
             "base_min_cpu_s": 0.8, "head_min_cpu_s": 0.72, "cpu_ratio": 0.9},
            {"kind": "memory", "case": "vgg16", "write": True, "base_net_peak_bytes": 2 * gib,
             "head_net_peak_bytes": 1.5 * gib, "ratio": 0.75, "base_net_write_peak_bytes": gib,
             "head_net_write_peak_bytes": gib, "write_ratio": 1.0}]
    summary = {"commits": {"base": "aaaaaaaaaaaa", "head": "bbbbbbbbbbbb"}, "worse_over_5_percent": ["resnet18"],
               "loads": [{"load": 2.5}, {"load": 4.25}]}
    (results / "bench_commits.json").write_text(json.dumps(
        {"bench": "bench_commits", "machine": MACHINE, "options": {"rounds": 4, "repeat": 3}, "rows": rows,
         "summary": summary}))
    text = gen_performance_doc.render(str(results))
    assert "base `aaaaaaaaaa` and head `bbbbbbbbbb`" in text and "Load average before each process: 2.5-4.2" in text
    assert "| resnet18: export (s) | 0.500 | 0.550 | 1.10x |" in text
    assert "| resnet18: export (CPU s) | 0.800 | 0.720 | 0.90x |" in text
    assert "| vgg16, written to a file first: net peak of export + verify (GiB) | 2.000 | 1.500 | 0.75x |" in text
    assert "| vgg16: net peak of writing the export (GiB) | 1.000 | 1.000 | 1.00x |" in text
    assert "More than 5% worse on head: resnet18." in text
    assert "Outside torch.export" not in text  # rows from before that split say nothing of it


@pytest.mark.parametrize("same, label", [(True, "export outside torch.export (CPU s)"),
                                         (False, "export outside torch.export (CPU s) (torch.export called with other "
                                                 "arguments)")])
def test_commits_table_splits_torch_export_from_the_exporters_own_time(results, same, label):
    rows = [{"kind": "export", "case": "superresolution", "base_min_s": 0.07, "head_min_s": 0.09, "ratio": 1.29,
             "base_min_own_cpu_s": 0.008, "head_min_own_cpu_s": 0.006, "own_cpu_ratio": 0.75,
             "same_torch_export_calls": same, "base_python_calls": 134716, "head_python_calls": 135574,
             "calls_ratio": 135574 / 134716}]
    (results / "bench_commits.json").write_text(json.dumps(
        {"bench": "bench_commits", "machine": MACHINE, "options": {"rounds": 3, "repeat": 3}, "rows": rows,
         "summary": {"commits": {"base": "a" * 12, "head": "b" * 12}}}))
    text = gen_performance_doc.render(str(results))
    assert f"| superresolution: {label} | 0.008 | 0.006 | 0.75x |" in text
    assert "| superresolution: export (Python calls) | 134716 | 135574 | 1.006x |" in text
    assert "Outside torch.export: the CPU seconds of each call less those spent in its torch.export.export" in text


def test_write_table_shows_each_writer_per_case(results):
    rows = [{"case": "vgg16", "writer": "streaming", "weight_bytes": 2**30, "extra_peak_bytes": 2**20, "seconds": 0.5},
            {"case": "vgg16", "writer": "onnx_ir", "weight_bytes": 2**30, "extra_peak_bytes": 2**31, "seconds": 4.0}]
    (results / "bench_write.json").write_text(json.dumps(
        {"bench": "bench_write", "machine": MACHINE, "options": {"rounds": 2}, "rows": rows}))
    text = gen_performance_doc.render(str(results))
    assert "| vgg16 | streaming | 1.00 | 0.001 | 0.50 |" in text and "| vgg16 | onnx_ir | 1.00 | 2.000 | 4.00 |" in text


def _side(cpu: list[list[float]], inside: list[list[float]], call: str, python_calls: int) -> dict:
    """A side's export measurements as bench_commits' children return them, one entry per round
    (python_calls counted in the first round only)."""
    rounds = [{"cases": {"lstm": {"runs_s": [c + 0.01 for c in round_cpu], "cpu_s": round_cpu,
                                  "torch_export_cpu_s": round_inside, "torch_export_calls": [call],
                                  "file_bytes": 10}}} for round_cpu, round_inside in zip(cpu, inside)]
    rounds[0]["cases"]["lstm"]["python_calls"] = python_calls
    return {"export": rounds, "memory": {}}


@pytest.mark.parametrize("head_call, same", [("args=[(2, 3)] {'strict': False}", True),
                                             ("args=[(2, 3)] {'strict': True}", False)])
def test_commits_summary_takes_each_sides_least_cpu_outside_torch_export(head_call, same):
    bench_commits = _load(ROOT / "bench" / "bench_commits.py")
    base = _side([[0.10, 0.12], [0.11]], [[0.09, 0.10], [0.09]], "args=[(2, 3)] {'strict': False}", 1000)
    head = _side([[0.13, 0.11], [0.12]], [[0.125, 0.102], [0.11]], head_call, 1010)
    (row,), memory = bench_commits.summarise({"base": base, "head": head}, ["lstm"])
    assert memory == []
    assert row["base_min_cpu_s"] == 0.10 and row["head_min_cpu_s"] == 0.11
    assert row["base_min_own_cpu_s"] == pytest.approx(0.01) and row["head_min_own_cpu_s"] == pytest.approx(0.005)
    assert row["own_cpu_ratio"] == pytest.approx(0.5) and row["calls_ratio"] == pytest.approx(1.01)
    assert row["same_torch_export_calls"] is same
