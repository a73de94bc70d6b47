"""Shape-sweep benchmark: the cost of each extra size against one full per-op verification,
and against torch.onnx.verification checking the same sizes, side by side in one run.

For each zoo case, ONE roundtrip export with the case's swept axes dynamic (image sides too) is
verified by three sides, interleaved over `--repeat` rounds (the fastest runs count):

* per_op:  harness.verification.verify_exported at the traced size, per op (production run,
           instrumented run, batched isolation, fp64 truth): one full per-op verification;
* sweep:   harness.shapes.run_sweep over the extra sizes (the traced verification given, so only
           the extra sizes run): outputs judged at each size in one onnxruntime session;
* anchor:  torch.onnx.verification.verify_onnx_program on a torch.onnx export with the same dynamic
           axes, once per extra size (outputs only, as the sweep checks them).

Timing under load: the sides run interleaved (the order alternating each round) for `--repeat`
rounds (default 5), and each side's FASTEST run counts (load from other processes only ever adds
time, so the minimum is the estimate least touched by it); the medians are recorded beside them,
with the load average before every round.

The extra sizes are the sweep's points near the traced size (every axis moved to a prime, then
each axis alone moved), so that a size costs what the traced size costs; the ranges' bounds
(a 1-image batch, 512-px images) cost what their element count says. Ratios: per extra size over
one per-op verification from the fastest runs (target: at most 0.3; the target is judged on this
raw ratio; the ratio of the medians is recorded too), the same
divided by the extra sizes' mean element count relative to the traced inputs (batch 3 against 2
costs half as much again), and torch.onnx.verification's time per size over ours. Rows go to bench/results/bench_shape_sweep.json.

    python bench/bench_shape_sweep.py                      # resnet18, superresolution, word LM (LSTM)
    python bench/bench_shape_sweep.py --cases resnet18 --sizes 3 --repeat 7
    python bench/bench_shape_sweep.py --torch-threads 1      # a machine loaded past its cores
"""

from __future__ import annotations

import argparse
import os
import warnings

import torch

from _common import add_round_options, load_range, measure_rows, median, side_by_side, start, write_results

import model_zoo_cases
from harness.exporters import export_for_verification, torch_onnx_export
from harness.shapes.selection import SizePoint, select_sizes
from harness.shapes.sweep import SweepSettings, inputs_at, run_sweep
from harness.verification import verify_exported

CASES = ("resnet18", "superresolution", "word_language_model_lstm")
TARGET = 0.3  # at most this fraction of one full per-op verification per extra size
DEFAULT_REPEAT = 5  # rounds: the fastest of five is steadier than a median of three on a loaded machine


def near_traced_points(sweep_axes, count: int) -> list[SizePoint]:
    """`count` sweep points near the traced size: every axis moved to a prime, then each alone."""
    near = [p for p in select_sizes(sweep_axes.axes, 64)[1:]
            if p.reasons[0].startswith("moved") or p.reasons[0].endswith("alone moved")]
    return near[:count]


def _anchor(program, sized_args) -> None:
    from torch.onnx.verification import verify_onnx_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in sized_args:
            verify_onnx_program(program, args, compare_intermediates=False)


def measure(name: str, *, sizes: int, repeat: int, seed: int) -> dict:
    case = model_zoo_cases.get(name)
    module, args = case.module(seed), case.inputs(seed)
    axes = case.swept_axes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = export_for_verification("roundtrip", module, args, dynamic_axes=axes,
                                           input_names=list(case.input_names))
        program = torch_onnx_export(module, args, dynamic_axes=axes, input_names=list(case.input_names))
    settings = dict(output_atol=case.atol, output_rtol=case.rtol, allowed_mismatch=case.allowed_mismatch_fraction)
    traced = verify_exported(exported, args, module=module, model_name=name, **settings)  # warm-up and the record
    probe = run_sweep(exported, module, args, traced, 1, dynamic_axes=axes, axis_ranges=case.axis_ranges)
    points = near_traced_points(probe.axes, sizes)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    sized_args = [inputs_at(point, probe.axes, args, None, tensors)[0] for point in points]
    sweep_settings = SweepSettings(model_name=name, locate=False, **settings)
    sides = {
        "per_op": lambda: verify_exported(exported, args, module=module, model_name=name, **settings),
        "sweep": lambda: run_sweep(exported, module, args, traced, [p.sizes for p in points], dynamic_axes=axes,
                                   axis_ranges=case.axis_ranges, settings=sweep_settings),
        "anchor": lambda: _anchor(program, sized_args),
    }
    loads: list[float] = []
    seconds, results = side_by_side(sides, repeat, loads=loads)
    sweep = results["sweep"]
    extra = len(sweep.sizes) - 1
    row = {
        "case": name, "onnx_nodes": len(exported.model.graph.node), "sizes": [s.point.label() for s in sweep.sizes],
        "statuses": [s.status for s in sweep.sizes], "per_op_s": min(seconds["per_op"]),
        "sweep_s": min(seconds["sweep"]), "anchor_s": min(seconds["anchor"]), "extra_sizes": extra,
        "medians_s": {side: median(values) for side, values in seconds.items()},
        "runs_s": {side: [round(s, 3) for s in values] for side, values in seconds.items()},
        "load_per_round": loads, "load": load_range(loads), "ops": len(results["per_op"].ops), "target": TARGET,
    }
    row["per_size_s"] = row["sweep_s"] / max(extra, 1)
    row["ratio"] = row["per_size_s"] / row["per_op_s"]
    row["ratio_of_medians"] = row["medians_s"]["sweep"] / max(extra, 1) / row["medians_s"]["per_op"]
    # the extra sizes hold more elements than the traced one (batch 3 against 2): the ratio per
    # traced size's worth of elements says what a size costs when it is as large as the traced one
    work = [_elements(a) / _elements(args) for a in sized_args]
    row["work_factor"] = sum(work) / len(work) if work else 1.0
    row["ratio_per_traced_work"] = row["ratio"] / row["work_factor"]
    row["anchor_per_size_s"] = row["anchor_s"] / max(extra, 1)
    row["anchor_ratio"] = row["anchor_per_size_s"] / row["per_size_s"]
    return row


def _elements(args) -> int:
    return sum(a.numel() for a in args if isinstance(a, torch.Tensor))


def markdown(rows: list[dict]) -> str:
    lines = ["| case | ONNX nodes | ops | per-op verification (s) | per extra size (s) | ratio | ratio of medians "
             "| load | size / traced (elements) | ratio per traced size | target | torch.onnx.verification per size "
             "(s) | theirs / ours |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['case']} | {row['onnx_nodes']} | {row['ops']} | {row['per_op_s']:.2f} | "
                     f"{row['per_size_s']:.3f} | {row['ratio']:.3f}x | {row['ratio_of_medians']:.3f}x | "
                     f"{row['load']} | {row['work_factor']:.2f} | "
                     f"{row['ratio_per_traced_work']:.3f}x | <= {row['target']}x | "
                     f"{row['anchor_per_size_s']:.3f} | {row['anchor_ratio']:.1f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--sizes", type=int, default=3, help="extra sizes per case (default 3)")
    add_round_options(parser, "bench_shape_sweep")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads for every side (default: torch's choice); on a machine "
                             "loaded past its cores, 1 keeps torch's thread pool from waiting on descheduled threads")
    parser.set_defaults(repeat=DEFAULT_REPEAT)
    options, machine = start(parser, argv, "bench_shape_sweep", quiet=("torch.onnx",))
    if options.torch_threads:
        torch.set_num_threads(options.torch_threads)
        machine["torch_threads"] = torch.get_num_threads()
        print(f"# torch threads set to {machine['torch_threads']}")
    rows = measure_rows(options.cases, lambda name: measure(name, sizes=options.sizes, repeat=options.repeat,
                                                            seed=options.seed))
    met = {row["case"]: row["ratio"] <= TARGET for row in rows}  # the raw ratio decides
    summary = {"met": met, "all_met": all(met.values())}
    path = write_results("bench_shape_sweep", machine, rows, summary=summary, path=options.json,
                         options={"repeat": options.repeat, "sizes": options.sizes, "interleaved": True,
                                  "statistic": "min", "torch_threads": options.torch_threads or "default"})
    print(markdown(rows))
    for row in rows:
        print(f"{row['case']}: each extra size costs {row['ratio']:.3f}x one per-op verification (fastest runs; "
              f"{row['ratio_of_medians']:.3f}x from the medians; load {row['load']}) "
              f"({row['ratio_per_traced_work']:.3f}x per traced size's worth of elements; target <= {TARGET}x); "
              f"torch.onnx.verification takes {row['anchor_ratio']:.2f}x our time per size")
    print(f"targets met: {met}; load average at the end {os.getloadavg()[0]:.2f}; results in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
