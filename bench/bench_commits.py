"""The export and memory benchmarks on two commits, side by side: is the newer one worse?

Both commits are checked out (`git worktree add --detach DIR COMMIT`); each side runs its OWN
bench scripts on its own code, in fresh processes, interleaved round by round (base, head, then
head, base, ...), so load from other processes falls on both alike:

* export: in one process per side and round, `bench_export.ours` (the call bench/bench_export.py
  times for our exporter: `exporter.export(module, args, path, input_names=..., dynamic_axes=...)`)
  once to warm up, then `--repeat` timed calls per case. The fastest call over every round
  counts (load only ever adds time), in wall seconds and in the process's CPU seconds (all its
  threads: less sensitive to other processes taking the cores). Each call's torch.export.export
  is timed too: both sides make that library call (the row says whether with the same arguments),
  so the CPU seconds outside it (`own`) are what the exporter's code costs, without the larger
  swing load gives the trace. In the first round, one more export per case runs under cProfile
  and counts the Python function calls: the work done, untouched by load.
* memory: `bench_memory.py --child CASE [--write]` per side and round (the measurement
  bench/bench_memory.py makes: a fresh process's peak resident set while `harness.verify` runs,
  net of the interpreter's; with `--write`, the export written to a file first and that peak too).
  The lowest net peak over the rounds counts.

Rows, the load before every process and both commits go to bench/results/bench_commits.json;
tools/gen_performance_doc.py renders them in docs/PERFORMANCE.md.

    git worktree add --detach /tmp/base 58e2735
    python bench/bench_commits.py --base /tmp/base --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HEAD = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT_CASES = ("alexnet", "resnet18", "vgg16", "densenet121", "inception_v3", "dcgan_generator",
                "superresolution", "word_language_model_lstm")
MEMORY_CASES = ("vgg16", "vgg16:write", "linear3g:write")
"""bench_memory's cases, `:write` when the export is written to a file first: its default case
(vgg16, 528 MB) from the module and from a file, and three 1 GB Linear layers written with
external data."""


def _side_environment(checkout: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = checkout
    return environment


def _commit(checkout: str) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip()


class _TorchExportTimer:
    """Wraps torch.export.export while the child runs: the CPU seconds spent inside it and the
    arguments it was called with (shapes, dynamic_shapes, strict), which both sides should share."""

    def __init__(self) -> None:
        import torch

        self.module, self.original = torch.export, torch.export.export
        self.cpu_s = 0.0
        self.calls: list[str] = []

    def __enter__(self) -> _TorchExportTimer:
        def timed(model: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
            self.calls.append(_describe_call(args, kwargs))
            started = time.process_time()
            try:
                return self.original(model, args, *rest, **kwargs)
            finally:
                self.cpu_s += time.process_time() - started

        self.module.export = timed
        return self

    def __exit__(self, *exc: Any) -> None:
        self.module.export = self.original


def _describe_call(args: Any, kwargs: dict[str, Any]) -> str:
    import torch

    shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else type(a).__name__ for a in args]
    rest = {key: kwargs[key] for key in sorted(kwargs) if key != "kwargs"}
    return f"args={shapes} {rest}"


def _python_calls(export: Any) -> int:
    """Python function calls (and C functions called from Python) made by `export()`."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(export)
    return sum(calls for _, calls, _, _, _ in pstats.Stats(profile).stats.values())


def export_child(cases: list[str], repeat: int, count_calls: bool = False) -> dict[str, Any]:
    """In a side's own process (its checkout first on sys.path): every case's timed exports."""
    bench = os.path.join(os.getcwd(), "bench")
    sys.path.insert(0, bench)
    import bench_export  # the side's own bench script, and through it the side's exporter

    import exporter
    import model_zoo_cases

    bench_export.quiet_onnxruntime()
    rows: dict[str, Any] = {"exporter": exporter.__file__, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as folder, _TorchExportTimer() as trace:
        path = os.path.join(folder, "model.onnx")
        for name in cases:
            case = model_zoo_cases.get(name)
            module, args = case.module(0), case.inputs(0)
            trace.calls.clear()
            bench_export.ours(case, module, args, path)  # warm-up: first-call imports and caches
            calls = list(trace.calls)
            runs, cpu, capture_cpu = [], [], []
            for _ in range(repeat):
                trace.cpu_s = 0.0
                started, started_cpu = time.perf_counter(), time.process_time()
                bench_export.ours(case, module, args, path)
                runs.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
                capture_cpu.append(trace.cpu_s)
            rows["cases"][name] = {"runs_s": [round(s, 4) for s in runs], "cpu_s": [round(s, 4) for s in cpu],
                                   "torch_export_cpu_s": [round(s, 4) for s in capture_cpu],
                                   "torch_export_calls": calls, "file_bytes": os.path.getsize(path)}
            if count_calls:
                rows["cases"][name]["python_calls"] = _python_calls(lambda: bench_export.ours(case, module, args, path))
            model_zoo_cases.clear_module_cache()
    return rows


def _run_export(checkout: str, cases: list[str], repeat: int, count_calls: bool) -> dict[str, Any]:
    command = [sys.executable, os.path.abspath(__file__), "--export-child", ",".join(cases), "--repeat", str(repeat)]
    command += ["--count-calls"] if count_calls else []
    done = subprocess.run(command, cwd=checkout, env=_side_environment(checkout), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"export child in {checkout} failed: {done.stderr.strip()[-2000:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    if not measured["exporter"].startswith(checkout):
        raise RuntimeError(f"the child in {checkout} imported {measured['exporter']}: PYTHONPATH did not take")
    return measured


def _run_memory(checkout: str, case: str, write: bool) -> dict[str, Any]:
    command = [sys.executable, os.path.join(checkout, "bench", "bench_memory.py"), "--child", case, "--batch", "1"]
    command += ["--write"] if write else []
    done = subprocess.run(command, cwd=checkout, env=_side_environment(checkout), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"memory child {case} in {checkout} failed: {done.stderr.strip()[-2000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    measured = {"net_peak_bytes": row["peak_rss"] - row["baseline_rss"], "weight_bytes": row["weight_bytes"],
                "seconds": row["seconds"], "passed": row["passed"]}
    if "after_write_peak" in row:
        measured["net_write_peak_bytes"] = row["after_write_peak"] - row["baseline_rss"]
    return measured


def _lowest(values: list[float]) -> float | None:
    return min(values) if values else None


def summarise(sides: dict[str, dict[str, Any]], export_cases: list[str]) -> tuple[list[dict], list[dict]]:
    """Per case: each side's fastest export (over every run of every round) and the ratio
    head / base; per memory case: each side's lowest net peak and the ratio."""
    export_rows = []
    for name in export_cases:
        row: dict[str, Any] = {"kind": "export", "case": name}
        for side, data in sides.items():
            runs = [s for measured in data["export"] for s in measured["cases"][name]["runs_s"]]
            row[f"{side}_min_s"] = _lowest(runs)
            row[f"{side}_runs_s"] = runs
            cpu = [s for measured in data["export"] for s in measured["cases"][name].get("cpu_s", [])]
            row[f"{side}_min_cpu_s"] = _lowest(cpu)
            row[f"{side}_file_bytes"] = data["export"][-1]["cases"][name]["file_bytes"]
            measured = [m["cases"][name] for m in data["export"]]
            own = [total - inside for m in measured if "torch_export_cpu_s" in m
                   for total, inside in zip(m["cpu_s"], m["torch_export_cpu_s"])]
            if own:  # the exporter's own CPU seconds: everything but torch.export.export
                row[f"{side}_min_own_cpu_s"] = _lowest(own)
                row[f"{side}_torch_export_calls"] = measured[0]["torch_export_calls"]
            counted = [m["python_calls"] for m in measured if "python_calls" in m]
            if counted:
                row[f"{side}_python_calls"] = counted[0]
        row["ratio"] = row["head_min_s"] / row["base_min_s"]
        if row["head_min_cpu_s"] and row["base_min_cpu_s"]:
            row["cpu_ratio"] = row["head_min_cpu_s"] / row["base_min_cpu_s"]
        if row.get("head_min_own_cpu_s") and row.get("base_min_own_cpu_s"):
            row["own_cpu_ratio"] = row["head_min_own_cpu_s"] / row["base_min_own_cpu_s"]
            row["same_torch_export_calls"] = row["head_torch_export_calls"] == row["base_torch_export_calls"]
        if row.get("head_python_calls") and row.get("base_python_calls"):
            row["calls_ratio"] = row["head_python_calls"] / row["base_python_calls"]
        export_rows.append(row)
    memory_rows = []
    for key in sides["head"]["memory"]:
        case, write = key.split("|")
        row: dict[str, Any] = {"kind": "memory", "case": case, "write": write == "write"}
        for side, data in sides.items():
            measured = data["memory"][key]
            row[f"{side}_net_peak_bytes"] = _lowest([m["net_peak_bytes"] for m in measured])
            row[f"{side}_net_peaks_bytes"] = [m["net_peak_bytes"] for m in measured]
            row[f"{side}_passed"] = all(m["passed"] for m in measured)
            writes = [m["net_write_peak_bytes"] for m in measured if "net_write_peak_bytes" in m]
            if writes:
                row[f"{side}_net_write_peak_bytes"] = _lowest(writes)
            row["weight_bytes"] = measured[0]["weight_bytes"]
        row["ratio"] = row["head_net_peak_bytes"] / row["base_net_peak_bytes"]
        if "head_net_write_peak_bytes" in row and "base_net_write_peak_bytes" in row:
            row["write_ratio"] = row["head_net_write_peak_bytes"] / row["base_net_write_peak_bytes"]
        memory_rows.append(row)
    return export_rows, memory_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", help="a checkout of the older commit")
    parser.add_argument("--head", default=HEAD, help="a checkout of the newer commit (default: this one)")
    parser.add_argument("--cases", default=",".join(EXPORT_CASES), help="comma-separated zoo cases to export")
    parser.add_argument("--repeat", type=int, default=3, help="timed exports per case in each process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per side, interleaved")
    parser.add_argument("--memory-cases", default=",".join(MEMORY_CASES),
                        help="comma-separated bench_memory cases, CASE:write to write the export first; '' for none")
    parser.add_argument("--json", default=None, help="default bench/results/bench_commits.json")
    parser.add_argument("--export-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--count-calls", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.export_child:
        print(json.dumps(export_child(options.export_child.split(","), options.repeat, options.count_calls)))
        return 0
    if not options.base:
        parser.error("--base: a checkout of the commit to compare against")
    if options.rounds < 2 or options.repeat < 1:
        parser.error("at least 2 rounds (interleaved) and 1 timed export per case")
    from _common import machine_info, write_results

    machine = machine_info()
    checkouts = {"base": os.path.abspath(options.base), "head": os.path.abspath(options.head)}
    cases = options.cases.split(",")
    memory_cases = [(name.partition(":")[0], name.endswith(":write")) for name in options.memory_cases.split(",") if name]
    sides: dict[str, dict[str, Any]] = {side: {"export": [], "memory": {}} for side in checkouts}
    loads: list[dict[str, Any]] = []
    for round_index in range(options.rounds):
        order = ["base", "head"] if round_index % 2 == 0 else ["head", "base"]
        for side in order:
            loads.append({"round": round_index, "side": side, "what": "export", "load": os.getloadavg()[0]})
            sides[side]["export"].append(_run_export(checkouts[side], cases, options.repeat, round_index == 0))
            print(f"round {round_index} {side} export: {json.dumps(sides[side]['export'][-1]['cases'])}",
                  file=sys.stderr, flush=True)
        for case, write in memory_cases:
            for side in order:
                loads.append({"round": round_index, "side": side, "what": f"memory {case}{' write' if write else ''}",
                              "load": os.getloadavg()[0]})
                measured = _run_memory(checkouts[side], case, write)
                sides[side]["memory"].setdefault(f"{case}|{'write' if write else 'verify'}", []).append(measured)
                print(f"round {round_index} {side} memory {case} write={write}: {json.dumps(measured)}",
                      file=sys.stderr, flush=True)
    export_rows, memory_rows = summarise(sides, cases)
    commits = {side: _commit(path) for side, path in checkouts.items()}
    worse = ([r["case"] for r in export_rows if r["ratio"] > 1.05]
             + [f"{r['case']} memory" for r in memory_rows if r["ratio"] > 1.05])
    path = write_results("bench_commits", machine, export_rows + memory_rows, path=options.json,
                         summary={"commits": commits, "loads": loads, "worse_over_5_percent": worse},
                         options={"cases": cases, "repeat": options.repeat, "rounds": options.rounds,
                                  "memory_cases": options.memory_cases})
    for row in export_rows:
        print(f"{row['case']}: base {row['base_min_s']:.3f} s, head {row['head_min_s']:.3f} s ({row['ratio']:.2f}x); "
              f"CPU {row.get('cpu_ratio', 0):.2f}x, outside torch.export {row.get('own_cpu_ratio', 0):.2f}x, "
              f"Python calls {row.get('calls_ratio', 0):.3f}x")
    for row in memory_rows:
        print(f"{row['case']}{' written' if row['write'] else ''}: net peak base {row['base_net_peak_bytes'] / 2**30:.3f} "
              f"GiB, head {row['head_net_peak_bytes'] / 2**30:.3f} GiB ({row['ratio']:.2f}x)")
    print(f"results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
