"""Cost of a second backend: per-op verification on two backends vs on one, in one run.

For each model, ONE roundtrip export is verified (export excluded) by

* single: harness.verification.verify_exported(..., backends=("onnxruntime",)), the anchor;
* double: the same with a second backend (default openvino:precision=f32): its own production
  run, instrumented run and isolation run, judged against the SAME torch values and fp64
  truth (computed once per op for both backends), every step one after the other (the
  verification's default);
* double_worker: the double verification with the second backend's production run and rows
  on a worker thread beside torch's and the first backend's work (harness.analysis.overlap,
  OVERLAP = True): what that thread saves, measured alike.

Each of `--repeat` rounds (at least 3; a case under 10 s for a warm-up of both sides gets three
times as many, since its runs are cheap and the machine's load moves them most) runs every side,
the order alternating; the medians and the minima both count, and the load average before each
run is kept. Each run's CPU seconds (the process's, every thread's) are kept too: the machine's
load moves them less than the wall-clock seconds, and the worker thread saves none. The target is
double <= 1.5x single, in wall-clock and in CPU seconds, on the medians and on the minima alike.
Each double run also counts the CPU seconds spent inside the second backend's own calls (its
`prepare`: OpenVINO's model read and compile; its prepared models' `run`: the inference), which no
harness code can take away: `native_bound_cpu_ratio` is the CPU ratio the double side would have
if the harness's own work for the second backend (building its models, its comparisons, its fused
layers' regions) cost nothing. Rows, ratios and the machine go to bench/results/bench_backends.json.

The models are a small conv net and model-zoo cases (model_zoo_cases: the tiers' own modules and
inputs): a word language model (a tiny graph, whose verification takes tens of milliseconds),
then full-tier-sized convolution networks.

    python bench/bench_backends.py                                   # every model below
    python bench/bench_backends.py --models resnet18 --second onnxruntime:level=disabled
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from _common import add_round_options, measure_rows, median, side_by_side, start, write_results

import model_zoo_cases
from harness.analysis import overlap
from harness.exporters import export_for_verification
from harness.report.summary import BackendEntry
from harness.runtime.backends import get_backend
from harness.verification import verify_exported


class SmallConvNet(torch.nn.Module):
    """Three conv layers and a linear head on 32x32 images: the case CI's tests use."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


ZOO_CASES = ("word_language_model_lstm", "resnet18", "mobilenet_v3_small", "resnet50", "densenet121", "inception_v3")
MODELS = ("small_conv_net", *ZOO_CASES)
TARGET = 1.5  # double-backend time over single-backend time, at most (wall and CPU seconds)
CHEAP_S = 10.0  # a warm-up of both sides under this: the case gets three times the rounds
SIDES = ("single", "double", "double_worker")


def _model(name: str, seed: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """The module and its example inputs: the small conv net, or a model-zoo case's."""
    if name == "small_conv_net":
        torch.manual_seed(seed)
        return SmallConvNet().eval(), (torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(seed + 1)),)
    case = model_zoo_cases.get(name)
    return case.module(seed), case.inputs(seed)


def _overlapped(verify: Callable[[], Any], overlapping: bool) -> Callable[[], Any]:
    """`verify` with the further backends' steps on a worker thread, or one after the other."""
    def run() -> Any:
        kept, overlap.OVERLAP = overlap.OVERLAP, overlapping
        try:
            return verify()
        finally:
            overlap.OVERLAP = kept
    return run


@contextlib.contextmanager
def native_cpu(spec: str) -> Iterator[list[float]]:
    """CPU seconds (the process's, every thread's) spent inside the calls of backend `spec`
    itself while the block runs, in a one-element list: its `prepare` (OpenVINO: reading and
    compiling the model) and each prepared model's `run` (its inference). The destruction of a
    prepared model is not counted (it happens where the harness drops it)."""
    backend_class = type(get_backend(spec))
    spent = [0.0]
    original = backend_class.prepare

    def timed(call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - started
        return run

    def prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
        if str(self.spec) != spec:  # the first backend, when both are of one class
            return original(self, *args, **kwargs)
        prepared = timed(original)(self, *args, **kwargs)
        prepared.run = timed(prepared.run)  # this prepared model's inferences
        return prepared

    backend_class.prepare = prepare
    try:
        yield spent
    finally:
        backend_class.prepare = original


def measure(name: str, second: str, *, seed: int, repeat: int) -> dict:
    module, args = _model(name, seed)
    exported = export_for_verification("roundtrip", module, args)
    single = lambda: verify_exported(exported, args, module=module, model_name=name)  # noqa: E731
    double = lambda: verify_exported(exported, args, module=module, model_name=name,  # noqa: E731
                                     backends=("onnxruntime", second))
    loads: list[float] = []
    cpu_seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    native_seconds: list[float] = []  # the double side's CPU seconds inside the second backend's own calls
    second_spec = str(get_backend(second).spec)

    def loaded(side, run_side):  # the load average as each run starts, and the CPU seconds it takes
        def run():
            loads.append(round(os.getloadavg()[0], 2))
            with native_cpu(second_spec) if side == "double" else contextlib.nullcontext([0.0]) as native:
                started = time.process_time()
                try:
                    return run_side()
                finally:
                    cpu_seconds[side].append(time.process_time() - started)
                    if side == "double":
                        native_seconds.append(native[0])
        return run

    started = time.perf_counter()
    single()  # warm-up: first-call imports, OpenVINO's plugin load
    double()
    rounds = repeat * 3 if time.perf_counter() - started < CHEAP_S else repeat
    sides = {"single": single, "double": _overlapped(double, False), "double_worker": _overlapped(double, True)}
    seconds, results = side_by_side({side: loaded(side, run) for side, run in sides.items()}, rounds)
    other = results["double"].backend_results[0]
    row = {
        "model": name, "second": second, "onnx_nodes": len(exported.model.graph.node),
        "ops": len(results["single"].ops), "rounds": rounds, "target": TARGET,
        "single_timings": {k: round(v, 3) for k, v in results["single"].timings.items()},
        "second_timings": {k: round(v, 3) for k, v in other.timings.items()},
        "load_at_runs": loads,
        "second_passed": other.passed, "second_skipped": other.skipped,
        "second_failing_ops": [op.fx_node for op in other.ops if op.passed is False],
        "second_failures": BackendEntry.of(other.to_dict()).failures,  # each output, row or run that fails
    }
    for side in SIDES:
        row[f"{side}_s"] = median(seconds[side])
        row[f"{side}_runs_s"] = [round(s, 3) for s in seconds[side]]
        # the process's CPU seconds (every thread's): what each side costs, less moved by the load
        row[f"{side}_cpu_runs_s"] = [round(s, 3) for s in cpu_seconds[side]]
    for side in SIDES[1:]:
        prefix = "" if side == "double" else "worker_"
        row[f"{prefix}ratio"] = median(seconds[side]) / median(seconds["single"])
        row[f"{prefix}ratio_of_minima"] = min(seconds[side]) / min(seconds["single"])
        row[f"{prefix}cpu_ratio"] = median(cpu_seconds[side]) / median(cpu_seconds["single"])
        row[f"{prefix}cpu_ratio_of_minima"] = min(cpu_seconds[side]) / min(cpu_seconds["single"])
    row["second_native_cpu_runs_s"] = [round(s, 3) for s in native_seconds]
    # the CPU ratio were the harness's own work for the second backend free: what bounds cpu_ratio
    row["native_bound_cpu_ratio"] = 1 + median(native_seconds) / median(cpu_seconds["single"])
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| model | second backend | ops | rounds | one backend (s) | two backends (s) | ratio (medians, minima) | "
             "CPU seconds ratio (medians, minima) | CPU ratio were the harness's own second-backend work free | "
             "two backends, worker thread: ratio, CPU ratio (medians) | load at the runs | target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for row in rows:
        loads = row["load_at_runs"]
        lines.append(f"| {row['model']} | {row['second']} | {row['ops']} | {row['rounds']} | {row['single_s']:.2f} | "
                     f"{row['double_s']:.2f} | {row['ratio']:.2f}x, {row['ratio_of_minima']:.2f}x | "
                     f"{row['cpu_ratio']:.2f}x, {row['cpu_ratio_of_minima']:.2f}x | "
                     f"{row['native_bound_cpu_ratio']:.2f}x | {row['worker_ratio']:.2f}x, {row['worker_cpu_ratio']:.2f}x | "
                     f"{min(loads):.1f}-{max(loads):.1f} | <= {row['target']:.1f}x |")
    return "\n".join(lines)


def met(row: dict, cpu: bool) -> bool:
    """Whether a row is within the target on its medians and on its minima alike (one of them
    alone is one side's luck on a machine whose load moves a run's seconds 2-3x)."""
    key = "cpu_ratio" if cpu else "ratio"
    return row[key] <= row["target"] and row[f"{key}_of_minima"] <= row["target"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--second", default="openvino:precision=f32", help="the second backend's spec")
    add_round_options(parser, "bench_backends")
    options, machine = start(parser, argv, "bench_backends")
    rows = measure_rows(options.models, lambda name: measure(name, options.second, seed=options.seed,
                                                             repeat=options.repeat))
    summary = {"met": {row["model"]: met(row, cpu=False) for row in rows},
               "cpu_met": {row["model"]: met(row, cpu=True) for row in rows}}
    summary["all_met"] = all(summary["met"].values()) and all(summary["cpu_met"].values())
    path = write_results("bench_backends", machine, rows, summary=summary, path=options.json,
                         options={"repeat": options.repeat, "interleaved": True, "second": options.second,
                                  "sides": list(SIDES)})
    print(markdown(rows))
    print(f"\ntargets met (wall-clock, medians and minima): {summary['met']}; in CPU seconds: {summary['cpu_met']}; "
          f"load average at the end {os.getloadavg()[0]:.2f}; results in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
