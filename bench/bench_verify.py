"""Per-op verification benchmark: harness vs torch.onnx.verification, side by side in one run.

For each model, ONE torch.onnx (dynamo) export is verified by both:

* ours:   harness.verification.verify_exported: production run, accumulated error (one instrumented
          run), isolated error (one batched run), fp64 truth and attribution for every op;
* theirs: torch.onnx.verification.verify_onnx_program(onnx_program, compare_intermediates=True),
          which builds one onnxruntime session per FX value it compares.

Both start from the exported program (export time is excluded from both) and include torch's
reference run. `--exporter roundtrip` additionally times `harness.verify` end to end on our
own export (export included). Prints a Markdown table with seconds and ratios, the machine's
load average and thread counts; `--json PATH` writes the rows.

    python bench/bench_verify.py                       # ResNet-18 and DenseNet-121
    python bench/bench_verify.py --models resnet18 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import time
import warnings

import torch
import torchvision

from harness.exporters import ExportedForVerification, torch_onnx_export
from harness.verification import verify, verify_exported

MODELS = {
    "resnet18": torchvision.models.resnet18,
    "densenet121": torchvision.models.densenet121,
}
TARGETS = {"resnet18": 30.0, "densenet121": 100.0}  # minimum speed-up over torch.onnx.verification


def _model(name: str, seed: int):
    torch.manual_seed(seed)
    module = MODELS[name]().eval()
    args = (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(seed + 1)),)
    return module, args


def _timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def measure(name: str, *, seed: int, repeat: int, optimize: bool, roundtrip: bool) -> dict:
    module, args = _model(name, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch_onnx_export(module, args, optimize=optimize)
    exported = ExportedForVerification(program.model_proto, program.exported_program, "torch.onnx")
    row: dict = {"model": name, "onnx_nodes": len(exported.model.graph.node), "optimize": optimize}

    ours_s, verification = _timed(
        lambda: verify_exported(exported, args, module=module, model_name=name), repeat)
    row["ours_s"] = ours_s
    row["ours_ops"] = len(verification.ops)
    row["ours_isolated"] = sum(op.isolated is not None for op in verification.ops)
    row["ours_truth"] = sum(op.truth is not None for op in verification.ops)
    row["ours_passed"] = verification.passed
    row["ours_timings"] = {k: round(v, 3) for k, v in verification.timings.items()}

    from torch.onnx.verification import verify_onnx_program

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs_s, infos = _timed(lambda: verify_onnx_program(program, args, compare_intermediates=True), 1)
    row["theirs_s"] = theirs_s
    row["theirs_values"] = len(infos)
    row["ratio"] = theirs_s / ours_s
    row["target"] = TARGETS.get(name)

    if roundtrip:
        try:
            started = time.perf_counter()
            ours_rt = verify(module, args, model_name=name)
            row["roundtrip_end_to_end_s"] = time.perf_counter() - started
            row["roundtrip_timings"] = {k: round(v, 3) for k, v in ours_rt.timings.items()}
        except Exception as error:  # an op our exporter lacks is a result, not a crash
            row["roundtrip_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of ours (the minimum counts); theirs runs once")
    parser.add_argument("--optimize", action="store_true",
                        help="export with torch.onnx's optimizer (fuses values away; default: off, as the harness does)")
    parser.add_argument("--no-roundtrip", dest="roundtrip", action="store_false",
                        help="skip the end-to-end harness.verify on our own export")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads for both sides (default: torch's choice)")
    parser.add_argument("--json", help="also write the rows to this path")
    options = parser.parse_args(argv)
    if options.torch_threads:
        torch.set_num_threads(options.torch_threads)

    load = os.getloadavg()
    print(f"# bench_verify: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, torch threads {torch.get_num_threads()}, "
          f"torch {torch.__version__}")
    rows = []
    for name in options.models:
        row = measure(name, seed=options.seed, repeat=options.repeat, optimize=options.optimize,
                      roundtrip=options.roundtrip)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| model | ONNX nodes | ours (s) | torch.onnx.verification (s) | ratio | target | ops isolated / truth |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(f"| {row['model']} | {row['onnx_nodes']} | {row['ours_s']:.2f} | {row['theirs_s']:.1f} | "
              f"{row['ratio']:.0f}x | {row['target']:.0f}x | {row['ours_isolated']}/{row['ours_ops']}, "
              f"{row['ours_truth']}/{row['ours_ops']} |")
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if options.json:
        with open(options.json, "w") as handle:
            json.dump({"load_average": load, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
