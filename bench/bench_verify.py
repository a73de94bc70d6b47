"""Per-op verification benchmark: harness vs torch.onnx.verification, side by side in one run.

For each model, ONE torch.onnx (dynamo) export is verified by both:

* ours:   harness.verification.verify_exported: production run, accumulated error (one instrumented
          run), isolated error (one batched run), fp64 truth and attribution for every op;
* theirs: torch.onnx.verification.verify_onnx_program(onnx_program, compare_intermediates=True),
          which builds one onnxruntime session per FX value it compares.

Both start from the exported program (export time is excluded from both) and include torch's
reference run. Each of `--repeat` rounds (at least 3) runs every side once, the order
alternating from round to round (ours, theirs, verify; verify, theirs, ours; ...), so that load
from other processes hits every side alike; the medians count. `harness.verify` end to end on
our own export (export included) is the third side, against the same torch.onnx.verification
time. Both sides run at torch's default thread
settings unless `--torch-threads` says otherwise. Rows, ratios, targets and the machine's cores,
load and versions go to bench/results/bench_verify.json.

    python bench/bench_verify.py                       # ResNet-18 and DenseNet-121
    python bench/bench_verify.py --models resnet18 --repeat 5
"""

from __future__ import annotations

import argparse
import logging
import os
import warnings

import torch
import torchvision

from _common import banner, machine_info, measure_rows, median, quiet_onnxruntime, side_by_side, write_results

from harness.exporters import ExportedForVerification, torch_onnx_export
from harness.verification import verify, verify_exported

MODELS = {
    "resnet18": torchvision.models.resnet18,
    "densenet121": torchvision.models.densenet121,
}
TARGETS = {"resnet18": 30.0, "densenet121": 100.0}  # minimum speed-up over torch.onnx.verification
END_TO_END_TARGETS = {"resnet18": 20.0}  # harness.verify with our export, over the same
MIN_REPEAT = 3


def _model(name: str, seed: int):
    torch.manual_seed(seed)
    module = MODELS[name]().eval()
    args = (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(seed + 1)),)
    return module, args


def _theirs(program, args):
    from torch.onnx.verification import verify_onnx_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return verify_onnx_program(program, args, compare_intermediates=True)


def measure(name: str, *, seed: int, repeat: int, optimize: bool, roundtrip: bool) -> dict:
    module, args = _model(name, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch_onnx_export(module, args, optimize=optimize)
    exported = ExportedForVerification(program.model_proto, program.exported_program, "torch.onnx")
    row: dict = {"model": name, "onnx_nodes": len(exported.model.graph.node), "optimize": optimize,
                 "target": TARGETS.get(name), "end_to_end_target": END_TO_END_TARGETS.get(name)}
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)

    verify_exported(exported, args, module=module, model_name=name)  # warm-up (first-call imports)
    sides = {"ours": lambda: verify_exported(exported, args, module=module, model_name=name),
             "theirs": lambda: _theirs(program, args)}
    if roundtrip:
        try:
            verify(module, args, model_name=name)  # warm-up of our exporter
            sides["verify"] = lambda: verify(module, args, model_name=name)
        except Exception as error:  # an op our exporter lacks is a result, not a crash
            row["roundtrip_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
    seconds, results = side_by_side(sides, repeat)  # every side each round, the order alternating
    verification = results["ours"]
    row["ours_s"] = median(seconds["ours"])
    row["ours_runs_s"] = [round(s, 3) for s in seconds["ours"]]
    row["ours_ops"] = len(verification.ops)
    row["ours_isolated"] = sum(op.isolated is not None for op in verification.ops)
    row["ours_truth"] = sum(op.truth is not None for op in verification.ops)
    row["ours_passed"] = verification.passed
    row["ours_timings"] = {k: round(v, 3) for k, v in verification.timings.items()}
    row["theirs_s"] = median(seconds["theirs"])
    row["theirs_runs_s"] = [round(s, 1) for s in seconds["theirs"]]
    row["theirs_values"] = len(results["theirs"])
    row["ratio"] = row["theirs_s"] / row["ours_s"]
    if "verify" in sides:
        row["roundtrip_end_to_end_s"] = median(seconds["verify"])
        row["roundtrip_runs_s"] = [round(s, 3) for s in seconds["verify"]]
        row["roundtrip_timings"] = {k: round(v, 3) for k, v in results["verify"].timings.items()}
        row["end_to_end_ratio"] = row["theirs_s"] / row["roundtrip_end_to_end_s"]
    return row


def markdown(rows: list[dict]) -> str:
    lines = [
        "| model | ONNX nodes | ours (s) | torch.onnx.verification (s) | ratio | target | harness.verify end to end (s) | ratio | target | ops isolated / truth |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        end = row.get("roundtrip_end_to_end_s")
        end_text = f"{end:.2f} | {row['end_to_end_ratio']:.0f}x" if end else "- | -"
        end_target = f"{row['end_to_end_target']:.0f}x" if row.get("end_to_end_target") else "-"
        lines.append(
            f"| {row['model']} | {row['onnx_nodes']} | {row['ours_s']:.2f} | {row['theirs_s']:.1f} | "
            f"{row['ratio']:.0f}x | {row['target']:.0f}x | {end_text} | {end_target} | "
            f"{row['ours_isolated']}/{row['ours_ops']}, {row['ours_truth']}/{row['ours_ops']} |")
    return "\n".join(lines)


def summarise(rows: list[dict]) -> dict:
    met = {}
    for row in rows:
        met[row["model"]] = row["ratio"] >= (row["target"] or 0)
        if row.get("end_to_end_target") and "end_to_end_ratio" in row:
            met[f"{row['model']} end to end"] = row["end_to_end_ratio"] >= row["end_to_end_target"]
    return {"met": met, "all_met": all(met.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=MIN_REPEAT,
                        help=f"rounds; each runs every side once, interleaved (the medians count; at least {MIN_REPEAT})")
    parser.add_argument("--optimize", action="store_true",
                        help="export with torch.onnx's optimizer (fuses values away; default: off, as the harness does)")
    parser.add_argument("--no-roundtrip", dest="roundtrip", action="store_false",
                        help="skip the end-to-end harness.verify on our own export")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads for both sides (default: torch's choice)")
    parser.add_argument("--json", default=None, help="where to write the results (default bench/results/bench_verify.json)")
    options = parser.parse_args(argv)
    if options.repeat < MIN_REPEAT:
        parser.error(f"--repeat {options.repeat}: at least {MIN_REPEAT}, or the median is one run's luck")
    if options.torch_threads:
        torch.set_num_threads(options.torch_threads)
    quiet_onnxruntime()
    machine = machine_info()
    print(banner("bench_verify", machine))
    rows = measure_rows(options.models, lambda name: measure(name, seed=options.seed, repeat=options.repeat,
                                                             optimize=options.optimize, roundtrip=options.roundtrip))
    summary = summarise(rows)
    path = write_results("bench_verify", machine, rows, summary=summary, path=options.json,
                         options={"repeat": options.repeat, "interleaved": True,
                                  "optimize": options.optimize, "torch_threads": options.torch_threads or "default"})
    print(markdown(rows))
    print(f"\ntargets met: {summary['met']}; load average at the end {os.getloadavg()[0]:.2f}; results in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
