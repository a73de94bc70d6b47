"""Export benchmark: roundtrip vs torch.onnx (dynamo) on the model zoo, side by side in one run.

For each case: parameters, ONNX node counts (ours vs torch.onnx), export seconds (ours vs
torch.onnx, and the ratio), and our max abs output error on onnxruntime CPU. Prints a
Markdown table; `--json PATH` also writes the rows.

    python bench/bench_export.py --tier smoke
    python bench/bench_export.py --cases 'resnet*' --json reports/bench_export.json
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import warnings

import numpy as np
import torch

import exporter
import model_zoo_cases
from harness.backend import prepare
from harness.exporters import torch_onnx_export


def _input_axes(case) -> dict:
    return {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}


def measure(case) -> dict:
    module = case.module(0)
    args = case.inputs(0)
    row: dict = {"case": case.name, "params": sum(p.numel() for p in module.parameters())}
    started = time.perf_counter()
    ours = exporter.export(module, args, input_names=list(case.input_names), dynamic_axes=_input_axes(case))
    row["ours_s"] = time.perf_counter() - started
    row["ours_nodes"] = len(ours.graph.node)
    outputs = prepare(ours, "CPU").run([a.numpy() for a in args])
    with torch.no_grad():
        expected = module(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    flat = [e for e in expected for e in (e if isinstance(e, (tuple, list)) else (e,))]
    row["max_abs_err"] = max(float(np.abs(o - e.numpy()).max()) for o, e in zip(outputs, flat))
    del ours, outputs
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            started = time.perf_counter()
            theirs = torch_onnx_export(module, args, input_names=list(case.input_names),
                                       dynamic_axes=_input_axes(case), optimize=True)
            row["torch_onnx_s"] = time.perf_counter() - started
        row["torch_onnx_nodes"] = len(theirs.model_proto.graph.node)
        row["speedup"] = row["torch_onnx_s"] / row["ours_s"]
    except Exception as error:  # torch.onnx failing on a case is a result, not a crash
        row["torch_onnx_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
    model_zoo_cases.clear_module_cache()
    gc.collect()
    return row


def markdown(rows: list[dict]) -> str:
    lines = [
        "| case | params | ONNX nodes ours / torch.onnx | export s ours / torch.onnx (speed-up) | max abs err (ORT CPU) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        theirs_nodes = r.get("torch_onnx_nodes", "n/a")
        theirs_s = f"{r['torch_onnx_s']:.2f} ({r['speedup']:.1f}x)" if "torch_onnx_s" in r else \
            f"failed: {r.get('torch_onnx_error', '')}"
        lines.append(f"| {r['case']} | {r['params'] / 1e6:.1f}M | {r['ours_nodes']} / {theirs_nodes} | "
                     f"{r['ours_s']:.2f} / {theirs_s} | {r['max_abs_err']:.2e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("smoke", "full"), default="smoke")
    parser.add_argument("--cases", default=None, help="fnmatch pattern or comma-separated names")
    parser.add_argument("--json", default=None, help="also write the rows here")
    options = parser.parse_args(argv)
    cases = model_zoo_cases.select(tier=None if options.cases else options.tier, pattern=options.cases)
    rows = []
    for case in cases:
        rows.append(measure(case))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(markdown(rows))
    if options.json:
        from exporter.fileio import write_text_atomic

        write_text_atomic(options.json, json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
