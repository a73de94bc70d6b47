"""Cost of a full per-op verification against its floor, per zoo case.

The floor of verifying a model is what any per-op verification must at least do: one torch
fp32 forward (torch's values), one fp64 forward (the truth) and two backend runs (production,
and one run that yields every op's value). A full per-op verification (`verify_exported`:
production, accumulated, isolated and fp64 truth for every op, our export excluded) should take
at most `LIMIT` times that floor. Each part is timed `--repeat` times, interleaved with the
verification, in CPU seconds of this process (user and system, all its threads: the machine is
shared, and other processes' load adds wall time, not this process's CPU time; wall seconds are
kept beside them); the fastest of the repeats counts. The backend runs use the harness's session
options on an already created session.

For each case above the limit, the phases furthest above their share of the floor (in wall
seconds, as the verification times its phases) are named:
the production, instrumented and isolation phases (session creation, run, and that phase's
comparisons) against the backend run, the fp64 truth of the outputs and of each op (replays,
and the comparisons with the truth) against the fp64 forward, and so on. One more verification,
untimed, measures the seconds spent comparing tensors (`compare_s`), across all phases. Results
go to bench/results/bench_floor.json.

Two more figures say how far the limit is reachable. A per-op verification cannot do less than
one fp32 forward (torch's values), two fp64 passes (the outputs' truth chains float64 values,
each op's truth starts from torch's float32 inputs: different computations) and three backend
runs (production at the user's settings; the instrumented model, whose exposed values change the
runtime's fusions; the isolation batch, fed torch's values): `structural_s` is that sum, and
`structural_ratio` the verification against it (session creation excluded, as in the floor).
`verify_sys_s` is the verification's system CPU time in its fastest repeat: the kernel zeroing
the fresh pages the verification's held values need (every value of torch's, of the
instrumented run and of the isolation batch, held at once), which the floor's forwards, reusing
freed memory, hardly pay. `session_load_s` is the CPU time of loading one production session
(onnxruntime's graph optimisers, and its packing of every matrix-product and convolution
weight): the verification loads three (production, instrumented, isolation; two where the last
two are joined, more for a streamed model's segments), the floor's already-loaded session none.

    python bench/bench_floor.py                    # the smoke tier
    python bench/bench_floor.py --tier full --repeat 3
    python bench/bench_floor.py --scale unet --repeat 1   # a scale model, alone: bench_floor_scale.json
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from _common import load_note, machine_info, quiet_onnxruntime, results_path, write_results

import model_zoo_cases
from exporter.capturing.trace import eval_mode
from harness.exporters import export_for_verification
from harness.metrics import comparison
from harness.runtime import prepare, real_inputs
from harness.runtime.sessions import harness_session_options
from harness.verification import verify_exported

LIMIT = 2.0

# verification phase -> the part of the floor it stands against
PHASES = {
    "torch_s": ("torch fp32 forward (recording its values)", "torch32"),
    "backend_s": ("production session (creation + run + output comparisons)", "backend"),
    "output_truth_s": ("fp64 truth of the outputs (the program replayed)", "torch64"),
    "accumulated_s": ("instrumented session (creation + run) and comparisons with torch's values", "backend"),
    "isolated_s": ("isolation session (creation + run) and comparisons with torch's values", "backend"),
    "truth_s": ("fp64 truth per op (replays) and comparisons with it", "torch64"),
}


def _double(value):
    return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def measure(case, repeat: int) -> dict:
    module = case.module(0)
    args = case.inputs(0)
    axes = {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}
    exported = export_for_verification("roundtrip", module, args, dynamic_axes=axes or None,
                                       input_names=list(case.input_names) or None)
    module64 = copy.deepcopy(module).double()
    args64 = tuple(_double(a) for a in args)
    from harness.runtime import SharedWeights

    shared = SharedWeights.of(exported.model, exported.weights)
    rep = prepare(shared.stubbed(exported.model), "CPU", shared_weights=shared, **harness_session_options())
    feeds = dict(zip(real_inputs(exported.model), [a.numpy() for a in args if isinstance(a, torch.Tensor)]))

    def forward(m, a):
        with torch.no_grad(), eval_mode(m):
            return m(*a)

    def load():  # one more production session loaded and released, as each of the verification's
        loaded = prepare(shared.stubbed(exported.model), "CPU", shared_weights=shared, **harness_session_options())
        del loaded

    sides = {
        "verify": lambda: verify_exported(exported, args, module=module, model_name=case.name),
        "torch32": lambda: forward(module, args),
        "torch64": lambda: forward(module64, args64),
        "backend": lambda: rep.run(feeds),
        "load": load,
    }
    for side in sides.values():  # warm-up
        side()
    cpu, wall, results, system = timed_sides(sides, repeat)
    parts = {name: min(values) for name, values in cpu.items()}
    walls = {name: min(values) for name, values in wall.items()}
    floor = parts["torch32"] + parts["torch64"] + 2 * parts["backend"]
    floor_wall = walls["torch32"] + walls["torch64"] + 2 * walls["backend"]
    structural = parts["torch32"] + 2 * parts["torch64"] + 3 * parts["backend"]
    fastest = cpu["verify"].index(parts["verify"])
    timings = results["verify"].timings
    row = {
        "case": case.name, "ops": len(results["verify"].ops),
        "verify_s": parts["verify"], "floor_s": floor, "ratio": parts["verify"] / floor,
        "structural_s": structural, "structural_ratio": parts["verify"] / structural,
        "verify_sys_s": system["verify"][fastest],
        "torch32_s": parts["torch32"], "torch64_s": parts["torch64"], "backend_run_s": parts["backend"],
        "session_load_s": parts["load"],
        "wall": {"verify_s": walls["verify"], "floor_s": floor_wall, "ratio": walls["verify"] / floor_wall,
                 "torch32_s": walls["torch32"], "torch64_s": walls["torch64"], "backend_run_s": walls["backend"]},
        "verify_timings": {k: round(v, 4) for k, v in timings.items()},
        **comparison_seconds(sides["verify"]),
    }
    row["over_limit"] = row["ratio"] > LIMIT
    if row["over_limit"]:
        row["why"] = (f"{explain(timings, walls)}; comparing tensors took {row['compare_s']:.3f} s of CPU "
                      f"({row['comparisons']} comparisons); loading one session took {row['session_load_s']:.3f} s "
                      f"of CPU ({sessions_loaded(results['verify'])} loaded, none in the floor)")
    del rep, module64
    model_zoo_cases.clear_module_cache()
    return row


def sessions_loaded(verification: Any) -> int:
    """How many onnxruntime sessions the verification loaded on one backend: the production one,
    and the instrumented and isolation ones (one joint load where they were joined; one per
    segment of a streamed model)."""
    environment = verification.environment
    if environment.get("instrumented_segments"):
        return 1 + 2 * int(environment["instrumented_segments"])
    return 2 if environment.get("joint_instrumented_isolation_runs") else 3


class ScaleCase:
    """A scale model (model_zoo_cases.scale) measured like a zoo case: built once, static sizes."""

    dynamic_axes: dict = {}
    input_names: tuple = ()

    def __init__(self, name: str) -> None:
        from model_zoo_cases.scale import build

        self.name = name
        self._module, self._args = build(name)

    def module(self, seed: int) -> torch.nn.Module:
        return self._module

    def inputs(self, seed: int) -> tuple:
        return self._args


def timed_sides(sides: Mapping[str, Callable[[], Any]], repeat: int
                ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, Any], dict[str, list[float]]]:
    """Run each side `repeat` times, interleaved and alternating which goes first, with a
    garbage collection before each run. Returns each run's CPU seconds (this process's user and
    system time, all its threads: what other processes' load does not add to) and wall seconds
    per side, each side's last result, and each run's system seconds alone."""
    names = list(sides)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    system: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, Any] = {}
    for round_index in range(repeat):
        for name in names if round_index % 2 == 0 else names[::-1]:
            results.pop(name, None)  # free the previous result before measuring again
            gc.collect()
            started, started_cpu, started_sys = time.perf_counter(), time.process_time(), os.times().system
            results[name] = sides[name]()
            cpu[name].append(time.process_time() - started_cpu)
            wall[name].append(time.perf_counter() - started)
            system[name].append(os.times().system - started_sys)
    return cpu, wall, results, system


def comparison_seconds(verify: Callable[[], Any]) -> dict[str, float | int]:
    """CPU seconds spent comparing tensors (harness.metrics.comparison's element-wise work, one
    thread) during one more run of `verify`, and how many comparisons it made."""
    spent = {"compare_s": 0.0, "comparisons": 0}
    originals = {name: getattr(comparison, name) for name in ("_compare_inexact", "_compare_exact")}

    def timed(function: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            started = time.process_time()
            try:
                function(*args)
            finally:
                spent["compare_s"] += time.process_time() - started
                spent["comparisons"] += 1
        return run

    try:
        for name, function in originals.items():
            setattr(comparison, name, timed(function))
        verify()
    finally:
        for name, function in originals.items():
            setattr(comparison, name, function)
    return {"compare_s": round(spent["compare_s"], 4), "comparisons": spent["comparisons"]}


def explain(timings: dict[str, float], parts: dict[str, float]) -> str:
    """The phase furthest above the floor part it stands against, in words."""
    excess = []
    for key, (label, part) in PHASES.items():
        if key in timings:
            budget = parts[part]
            excess.append((timings[key] - budget, f"{label}: {timings[key]:.3f} s against {budget:.3f} s of floor"))
    excess.sort(reverse=True)
    return "; ".join(text for _, text in excess[:2])


def markdown(rows: list[dict]) -> str:
    lines = [f"| case | ops | verify (s) | floor (s): fp32 + fp64 + 2 x backend | ratio | structural floor (s) | "
             f"ratio to it | system (s) | comparisons (s) | within {LIMIT:g}x |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['ops']} | {r['verify_s']:.3f} | {r['floor_s']:.3f}: {r['torch32_s']:.3f} + "
                     f"{r['torch64_s']:.3f} + 2 x {r['backend_run_s']:.3f} | {r['ratio']:.1f}x | "
                     f"{r['structural_s']:.3f} | {r['structural_ratio']:.1f}x | {r['verify_sys_s']:.3f} | "
                     f"{r['compare_s']:.3f} | {'yes' if not r['over_limit'] else 'no'} |")
    over = [r for r in rows if r["over_limit"]]
    if over:
        lines.append(f"\nabove {LIMIT:g}x:")
        lines += [f"- {r['case']} ({r['ratio']:.1f}x): {r['why']}" for r in over]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("smoke", "full"), default="smoke")
    parser.add_argument("--cases", default=None, help="fnmatch pattern or comma-separated names")
    parser.add_argument("--scale", nargs="+", default=(), metavar="MODEL",
                        help="measure these scale models (model_zoo_cases.scale: unet, llama, ...) instead of a tier")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=None, help="where to write the results (default bench/results/bench_floor.json)")
    options = parser.parse_args(argv)
    quiet_onnxruntime()
    machine = machine_info()
    rows = []
    cases = ([ScaleCase(name) for name in options.scale] if options.scale else
             model_zoo_cases.select(tier=None if options.cases else options.tier, pattern=options.cases))
    for case in cases:
        rows.append(measure(case, options.repeat))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    over = [r["case"] for r in rows if r["over_limit"]]
    path = write_results("bench_floor", machine, rows,
                         path=options.json or (results_path("bench_floor_scale") if options.scale else None),
                         summary={"limit": LIMIT, "above_limit": over,
                                  "max_ratio": max((r["ratio"] for r in rows), default=None)},
                         options={"tier": options.tier, "cases": options.cases, "repeat": options.repeat,
                                  "scale": list(options.scale)})
    print(markdown(rows))
    print(f"\n{load_note({**machine, 'load_average_end': os.getloadavg()})}; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
