"""Inference benchmark: onnxruntime CPU latency of our export against torch.onnx's, side by side.

Per model, both exporters export the same module in eval mode, as a user calls them:

* ours:   exporter.export_program(module, args, input_names=..., dynamic_axes=...) (optimize=True,
          the default: exporter.optimize's passes);
* theirs: torch.onnx.export(module, args, dynamo=True, ...) with its own defaults (optimize=True).

Each model runs in an onnxruntime CPU session (default session options unless `--threads`),
warmed up, then timed interleaved (ours, theirs, theirs, ours, ...) `--repeat` times; medians
are compared. A timed sample holds as many runs as last SAMPLE_SECONDS (the same count on both
sides), so that a sub-millisecond model is not timed one run at a time. Rows also hold the node counts of both graphs, both export times (one call each),
the time of our optimisation stage, and with `--verify` the per-op verification of our export
with and without optimisation. Models: every zoo case of the full tier, the transformer blocks
of the op table and the Hugging Face models. Results: bench/results/bench_inference.json, from
which tools/gen_performance_doc.py renders docs/PERFORMANCE.md.

    python bench/bench_inference.py --all                      # everything, on a quiet machine
    python bench/bench_inference.py --models resnet18,mobilenet_v3_small,hf_bert --verify
    python bench/bench_inference.py --models 'resnet*' --repeat 50
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from _common import geomean, load_note, machine_info, median, quiet_onnxruntime, side_by_side, write_results

import exporter
import model_zoo_cases
from exporter.capturing.trace import eval_mode

TARGET_LATENCY_EACH = 1.05  # ours / theirs, per model
TARGET_LATENCY_GEOMEAN = 0.95
TARGET_EXPORT_GEOMEAN = 3.0  # theirs / ours export time
TARGET_EXPORT_EACH = 1.5
TARGET_VERIFY_RATIO = 1.2  # per-op verification, optimised / one node per op
QUICK = ("resnet18", "mobilenet_v3_small", "hf_bert")
SAMPLE_SECONDS = 0.05  # one timed sample: the same number of runs on both sides, at least this long
MAX_CALLS_PER_SAMPLE = 200


@dataclass
class Model:
    """One benchmarked model: how to build it and call it."""

    name: str
    kind: str  # "zoo", "block" or "hf"
    build: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]
    input_names: tuple[str, ...] = ()
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)


def models(tier: str | None = "full") -> list[Model]:
    """Every zoo case of `tier` (None: every tier), the transformer blocks and the Hugging Face
    models."""
    from model_zoo_cases import huggingface
    from op_table.cases_transformer import CASES as BLOCKS
    from op_table.table import build_sample

    found = []
    for case in model_zoo_cases.select(tier=tier):
        axes = {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}
        found.append(Model(case.name, "zoo", lambda case=case: (case.module(0), case.inputs(0)),
                           tuple(case.input_names), axes))
    for block in BLOCKS:
        def sample(block=block):
            built = build_sample(block)
            return built.module, built.args
        found.append(Model(block.name, "block", sample, (), dict(block.dynamic_axes or {})))
    for name, (builder, inputs, input_names, _) in huggingface.MODELS.items():
        axes = {k: v for k, v in huggingface.dynamic_axes(name).items() if k in input_names}
        found.append(Model(name, "hf", lambda builder=builder, inputs=inputs: (
            builder().eval(), inputs(torch.Generator().manual_seed(0), 2)), tuple(input_names), axes))
    return found


def _export_ours(model: Model, module, args):
    return exporter.export_program(module, args, input_names=list(model.input_names) or None,
                                   dynamic_axes=model.dynamic_axes or None)


def _export_theirs(model: Model, module, args):
    options: dict[str, Any] = {"dynamo": True, "verbose": False}
    if model.dynamic_axes:
        options["dynamic_axes"] = model.dynamic_axes
        options["input_names"] = list(model.input_names or model.dynamic_axes)
    elif model.input_names:
        options["input_names"] = list(model.input_names)
    with warnings.catch_warnings(), eval_mode(module):
        warnings.simplefilter("ignore")
        return torch.onnx.export(module, args, **options)


def _session(proto, threads: int | None):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _feeds(session, args) -> dict[str, np.ndarray]:
    tensors = [a.detach().numpy() for a in args if isinstance(a, torch.Tensor)]
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(tensors):
        raise ValueError(f"the model has {len(names)} inputs for {len(tensors)} tensor arguments")
    return dict(zip(names, tensors))


def _timed(call: Callable[[], Any], cpu: dict[str, float] | None = None, key: str = "") -> tuple[Any, float]:
    """`call()` and its wall time; its process CPU time (which load from other processes
    distorts less) goes to `cpu[key]` when given."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = call()
    if cpu is not None:
        cpu[key] = time.process_time() - cpu_started
    return result, time.perf_counter() - started


def op_difference(ours, theirs) -> dict[str, int]:
    """Per op type, how many more nodes our graph has than torch.onnx's (negative: fewer);
    empty when both graphs hold the same ops, which onnxruntime then runs with the same kernels."""
    counts = Counter(n.op_type for n in ours.graph.node)
    counts.subtract(Counter(n.op_type for n in theirs.graph.node))
    return {op: count for op, count in sorted(counts.items()) if count}


def calls_per_sample(seconds_per_call: float) -> int:
    """How many runs one timed sample holds so that it lasts at least SAMPLE_SECONDS: a single
    run of a sub-millisecond model is as long as the timer's and the scheduler's noise."""
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_SECONDS / max(seconds_per_call, 1e-6))))


def measure(model: Model, repeat: int, threads: int | None, verify: bool) -> dict[str, Any]:
    module, args = model.build()
    module.eval()
    row: dict[str, Any] = {"model": model.name, "kind": model.kind}
    ours, row["ours_export_s"] = _timed(lambda: _export_ours(model, module, args), row, "ours_export_cpu_s")
    row["ours_optimize_s"] = ours.optimize_seconds
    row["ours_optimize_cpu_s"] = {name: round(value, 4) for name, value in ours.optimize_cpu_seconds.items()}
    row["ours_nodes"] = len(ours.skeleton.graph.node)
    row["optimize_changes"] = ours.changes
    sessions = {"ours": _session(ours.model, threads)}
    try:
        theirs, row["torch_onnx_export_s"] = _timed(lambda: _export_theirs(model, module, args), row,
                                                    "torch_onnx_export_cpu_s")
        row["torch_onnx_nodes"] = len(theirs.model_proto.graph.node)
        row["op_difference"] = op_difference(ours.skeleton, theirs.model_proto)
        sessions["theirs"] = _session(theirs.model_proto, threads)
    except Exception as error:  # torch.onnx failing on a model is a result, not a crash
        row["torch_onnx_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    feeds = {side: _feeds(session, args) for side, session in sessions.items()}
    runs = {side: (lambda s=session, f=feeds[side]: s.run(None, f)) for side, session in sessions.items()}
    warm = {}
    for side, run in runs.items():  # warm-up: first-run allocations and kernel selection
        for _ in range(3):
            _, warm[side] = _timed(run)
    row["calls_per_sample"] = number = calls_per_sample(max(warm.values()))
    calls = {side: (lambda run=run: [run() for _ in range(number)][-1]) for side, run in runs.items()}
    seconds, _ = side_by_side(calls, repeat)
    row["ours_ms"] = median(seconds["ours"]) * 1e3 / number
    if "theirs" in seconds:
        row["torch_onnx_ms"] = median(seconds["theirs"]) * 1e3 / number
        row["latency_ratio"] = row["ours_ms"] / row["torch_onnx_ms"]
        row["export_speedup"] = row["torch_onnx_export_s"] / row["ours_export_s"]
        row["export_speedup_cpu"] = row["torch_onnx_export_cpu_s"] / row["ours_export_cpu_s"]
    if verify:
        row.update(_verification_times(model, module, args))
    model_zoo_cases.clear_module_cache()
    return row


def _verification_times(model: Model, module, args) -> dict[str, float]:
    """harness.verify per op of our export, optimised and one node per op, interleaved."""
    from harness.verification import verify

    def run(optimize: bool) -> Callable[[], Any]:
        return lambda: verify(module, args, optimize=optimize, dynamic_axes=model.dynamic_axes or None,
                              input_names=list(model.input_names) or None)

    seconds, results = side_by_side({"optimized": run(True), "plain": run(False)}, 2)
    return {"verify_optimized_s": median(seconds["optimized"]), "verify_plain_s": median(seconds["plain"]),
            "verify_ratio": median(seconds["optimized"]) / median(seconds["plain"]),
            "verify_passed": [bool(results["optimized"].passed), bool(results["plain"].passed)]}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    compared = [r for r in rows if "latency_ratio" in r]
    summary: dict[str, Any] = {
        "models": len(rows), "compared": len(compared),
        "latency_ratio_geomean": geomean([r["latency_ratio"] for r in compared]),
        "within_latency_target": sum(r["latency_ratio"] <= TARGET_LATENCY_EACH for r in compared),
        "nodes_at_most_theirs": sum(r["ours_nodes"] <= r["torch_onnx_nodes"] for r in compared),
        "export_speedup_geomean": geomean([r["export_speedup"] for r in compared]),
        "export_speedup_cpu_geomean": geomean([r["export_speedup_cpu"] for r in compared]),
        "optimize_share_of_export": geomean([r["ours_optimize_s"] / r["ours_export_s"] for r in rows]),
        "targets": {"latency_each": TARGET_LATENCY_EACH, "latency_geomean": TARGET_LATENCY_GEOMEAN,
                    "export_geomean": TARGET_EXPORT_GEOMEAN, "export_each": TARGET_EXPORT_EACH,
                    "verify_ratio": TARGET_VERIFY_RATIO},
    }
    kinds = sorted({r["kind"] for r in compared})
    summary["latency_ratio_geomean_by_kind"] = {
        kind: geomean([r["latency_ratio"] for r in compared if r["kind"] == kind]) for kind in kinds}
    verified = [r for r in rows if "verify_ratio" in r]
    if verified:
        summary["verify_ratio_geomean"] = geomean([r["verify_ratio"] for r in verified])
    return summary


def _print(row: dict[str, Any]) -> None:
    theirs = (f"{row['torch_onnx_ms']:8.2f} ms, {row['torch_onnx_nodes']:4d} nodes, ratio {row['latency_ratio']:.2f}, "
              f"export {row['export_speedup']:.1f}x faster" if "latency_ratio" in row else row.get("torch_onnx_error", ""))
    verify = f", verify {row['verify_ratio']:.2f}x" if "verify_ratio" in row else ""
    print(f"{row['model']:32s} ours {row['ours_ms']:8.2f} ms, {row['ours_nodes']:4d} nodes "
          f"(optimise {row['ours_optimize_s']:.2f} s) | torch.onnx {theirs}{verify}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="every model: full zoo tier, blocks, Hugging Face")
    parser.add_argument("--models", default=",".join(QUICK),
                        help=f"comma-separated names or fnmatch patterns (default {','.join(QUICK)})")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per side (default 20)")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: its own)")
    parser.add_argument("--verify", action="store_true", help="also time per-op verification, optimised vs not")
    parser.add_argument("--out", default=None, help="results JSON (default bench/results/bench_inference.json)")
    options = parser.parse_args(argv)
    quiet_onnxruntime()
    torch.manual_seed(0)
    machine = machine_info()
    everything = models("full" if options.all else None)  # a name of another tier may be asked for
    patterns = ["*"] if options.all else options.models.split(",")
    chosen = [m for m in everything if any(fnmatch.fnmatch(m.name, p) for p in patterns)]
    if not chosen:
        print(f"no model matches {options.models!r}; known: {', '.join(m.name for m in everything)}", file=sys.stderr)
        return 2
    rows = []
    for model in chosen:
        try:
            rows.append(measure(model, options.repeat, options.threads, options.verify))
        except Exception as error:  # one model failing to export or run is a row, not the end
            rows.append({"model": model.name, "kind": model.kind, "error": f"{type(error).__name__}: {error}"[:300]})
            print(f"{model.name:32s} error: {rows[-1]['error']}", flush=True)
            continue
        _print(rows[-1])
    measured = [r for r in rows if "error" not in r]
    summary = summarise(measured)
    path = write_results("bench_inference", machine, rows, summary=summary, path=options.out,
                         options={"repeat": options.repeat, "threads": options.threads, "verify": options.verify})
    print(f"latency ours/torch.onnx geomean {summary['latency_ratio_geomean']:.2f} (target <= "
          f"{TARGET_LATENCY_GEOMEAN}); export {summary['export_speedup_geomean']:.1f}x faster "
          f"({summary['export_speedup_cpu_geomean']:.1f}x in process CPU time); "
          f"{load_note(machine)}; written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
