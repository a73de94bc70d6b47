"""Export benchmark: roundtrip vs torch.onnx (dynamo), side by side, serialisation on both sides.

Per zoo case, both exporters write the model to a file, as a user calls them:

* ours:   exporter.export(module, args, "ours.onnx", input_names=..., dynamic_axes=...)
* theirs: torch.onnx.export(module, args, "theirs.onnx", dynamo=True, input_names=...,
          dynamic_axes=...) with torch.onnx's defaults (optimize=True, external_data=True)

The two run interleaved (ours, theirs, theirs, ours, ...) `--repeat` times and the medians
are compared, so load from other processes hits both. One extra, instrumented run of each
splits the time into phases: torch.export's capture, the decompositions (ours: the local
rewrites that replace them when they can), the conversion, and writing the file. Rows, the
geomean speed-up and the machine's cores, load and versions go to bench/results/bench_export.json.

    python bench/bench_export.py --tier smoke
    python bench/bench_export.py --tier full --repeat 3
    python bench/bench_export.py --cases 'vgg*' --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from _common import geomean, load_note, machine_info, median, quiet_onnxruntime, side_by_side, write_results

import exporter
import model_zoo_cases
from exporter import api as exporting
from exporter.capturing import functionalize
from exporter.capturing.trace import eval_mode
from harness.backend import prepare

TARGET_GEOMEAN = 2.5
TARGET_EACH = 1.0


def _input_axes(case) -> dict:
    return {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}


def ours(case, module, args, path: str) -> Any:
    return exporter.export(module, args, path, input_names=list(case.input_names), dynamic_axes=_input_axes(case))


def theirs(case, module, args, path: str) -> Any:
    with warnings.catch_warnings(), eval_mode(module):
        warnings.simplefilter("ignore")
        return torch.onnx.export(module, args, path, dynamo=True, input_names=list(case.input_names),
                                 dynamic_axes=_input_axes(case), verbose=False)


def _or_error(export: Callable[..., Any], *args: Any) -> Any:
    """The export's result, or the exception it raised (torch.onnx's fallbacks do not always
    behave the same from one call to the next)."""
    try:
        return export(*args)
    except Exception as error:
        return error


# --- phase breakdown ----------------------------------------------------------------------------


class _Phases:
    """Seconds spent inside named functions during one call (wrapped for that call only)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def timing(self, owner: Any, attribute: str, phase: str) -> Iterator[None]:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started

        setattr(owner, attribute, timed)
        try:
            yield
        finally:
            setattr(owner, attribute, original)


def _breakdown(run: Callable[[], Any], hooks: list[tuple[Any, str, str]]) -> dict[str, float]:
    phases = _Phases()
    with contextlib.ExitStack() as stack:
        for owner, attribute, phase in hooks:
            stack.enter_context(phases.timing(owner, attribute, phase))
        started = time.perf_counter()
        run()
        total = time.perf_counter() - started
    breakdown = {name: round(value, 3) for name, value in phases.seconds.items()}
    breakdown["other"] = round(total - sum(phases.seconds.values()), 3)
    breakdown["total"] = round(total, 3)
    return breakdown


def ours_breakdown(case, module, args, path: str) -> dict[str, float]:
    """capture (torch.export), decompose (rewrites, or run_decompositions), translate, serialise
    (the onnx_ir model built from the translation, and its skeleton proto at the end), optimize (exporter.optimize's passes), write (the file, straight from the weights), materialise (the
    returned ModelProto, parsed back from the file written)."""
    return _breakdown(lambda: ours(case, module, args, path), [
        (torch.export, "export", "capture"),
        (functionalize, "rewrite", "decompose"),
        (torch.export.ExportedProgram, "run_decompositions", "decompose"),
        (exporting, "translate", "translate"),
        (exporting, "optimize_ir", "optimize"),
        (exporting, "build_model", "serialise"),
        (exporting, "to_skeleton", "serialise"),
        (exporting, "write_model", "write"),
        (exporting, "with_weights", "materialise"),
        (exporting, "_parse_mapped", "materialise"),  # to a path: parsed back from the file
    ])


def theirs_breakdown(case, module, args, path: str) -> dict[str, float]:
    """capture (torch.export) and decompose (run_decompositions); `other` is torch.onnx's
    translation, optimisation and saving."""
    return _breakdown(lambda: theirs(case, module, args, path), [
        (torch.export, "export", "capture"),
        (torch.export.ExportedProgram, "run_decompositions", "decompose"),
    ])


# --- one case -------------------------------------------------------------------------------------


def measure(case, repeat: int, folder: str, breakdown: bool) -> dict:
    module = case.module(0)
    args = case.inputs(0)
    ours_path, theirs_path = os.path.join(folder, "ours.onnx"), os.path.join(folder, "theirs.onnx")
    row: dict = {"case": case.name, "params": sum(p.numel() for p in module.parameters()),
                 "weight_bytes": sum(p.numel() * p.element_size() for p in module.parameters())}
    sides = {"ours": lambda: ours(case, module, args, ours_path),
             "theirs": lambda: _or_error(theirs, case, module, args, theirs_path)}
    for side in sides.values():  # each side once outside the timing (warm-up, and failing fast)
        warm = side()
    if isinstance(warm, Exception):
        del sides["theirs"]
    seconds, results = side_by_side(sides, repeat)
    failed = results.get("theirs", warm)
    if isinstance(failed, Exception):  # torch.onnx failing on a case is a result, not a crash
        row["torch_onnx_error"] = f"{type(failed).__name__}: {str(failed).splitlines()[0][:160]}"
        seconds.pop("theirs", None)
        results.pop("theirs", None)
    row["ours_s"] = median(seconds["ours"])
    row["ours_runs_s"] = [round(s, 3) for s in seconds["ours"]]
    model = results.pop("ours")
    row["ours_nodes"] = len(model.graph.node)
    row["ours_file_bytes"] = os.path.getsize(ours_path)
    row["max_abs_err"] = _max_error(model, module, args)
    del model
    if "theirs" in seconds:
        row["torch_onnx_s"] = median(seconds["theirs"])
        row["torch_onnx_runs_s"] = [round(s, 3) for s in seconds["theirs"]]
        program = results.pop("theirs")
        row["torch_onnx_nodes"] = len(program.model.graph) if hasattr(program, "model") else None
        row["torch_onnx_file_bytes"] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
                                           if f.startswith("theirs.onnx"))
        del program
        row["speedup"] = row["torch_onnx_s"] / row["ours_s"]
    if breakdown:
        row["ours_phases"] = ours_breakdown(case, module, args, ours_path)
        if "theirs" in seconds:
            try:
                row["torch_onnx_phases"] = theirs_breakdown(case, module, args, theirs_path)
            except Exception as error:  # torch.onnx's fallbacks may behave differently when timed
                row["torch_onnx_phases_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    model_zoo_cases.clear_module_cache()
    return row


def _max_error(model, module, args) -> float:
    outputs = prepare(model, "CPU").run([a.numpy() for a in args])
    with torch.no_grad(), eval_mode(module):
        expected = module(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    flat = [e for e in expected for e in (e if isinstance(e, (tuple, list)) else (e,))]
    return max(float(np.abs(o - e.numpy()).max()) for o, e in zip(outputs, flat))


def summarise(rows: list[dict]) -> dict:
    compared = [r for r in rows if "speedup" in r]
    speedups = [r["speedup"] for r in compared]
    return {
        "cases": len(rows), "compared": len(compared),
        "geomean_speedup": geomean(speedups) if speedups else None,
        "min_speedup": min(speedups) if speedups else None,
        "below_1x": [r["case"] for r in compared if r["speedup"] < TARGET_EACH],
        "targets": {"each": TARGET_EACH, "geomean": TARGET_GEOMEAN},
        "met": bool(speedups) and min(speedups) >= TARGET_EACH and geomean(speedups) >= TARGET_GEOMEAN,
    }


def markdown(rows: list[dict], summary: dict) -> str:
    lines = [
        "| case | params | ONNX nodes ours / torch.onnx | export s ours / torch.onnx | speed-up | ours: capture / decompose / convert / write / materialise s |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        theirs_s = f"{r['torch_onnx_s']:.2f}" if "torch_onnx_s" in r else f"failed: {r.get('torch_onnx_error', '')}"
        speed = f"{r['speedup']:.2f}x" if "speedup" in r else "-"
        phases = r.get("ours_phases", {})
        convert = sum(phases.get(k, 0.0) for k in ("translate", "fold", "serialise"))
        split = (f"{phases.get('capture', 0):.2f} / {phases.get('decompose', 0):.2f} / {convert:.2f} / "
                 f"{phases.get('write', 0):.2f} / {phases.get('materialise', 0):.2f}") if phases else "-"
        lines.append(f"| {r['case']} | {r['params'] / 1e6:.1f}M | {r['ours_nodes']} / {r.get('torch_onnx_nodes') or '-'} | "
                     f"{r['ours_s']:.2f} / {theirs_s} | {speed} | {split} |")
    if summary.get("geomean_speedup"):
        lines.append(f"\ngeomean speed-up {summary['geomean_speedup']:.2f}x (target {TARGET_GEOMEAN}x), "
                     f"lowest {summary['min_speedup']:.2f}x (target {TARGET_EACH}x each); "
                     f"below 1.0x: {', '.join(summary['below_1x']) or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=("smoke", "full"), default="smoke")
    parser.add_argument("--cases", default=None, help="fnmatch pattern or comma-separated names")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per side (the median counts)")
    parser.add_argument("--no-breakdown", dest="breakdown", action="store_false",
                        help="skip the extra instrumented run that splits the time into phases")
    parser.add_argument("--json", default=None, help="where to write the results (default bench/results/bench_export.json)")
    options = parser.parse_args(argv)
    quiet_onnxruntime()
    machine = machine_info()
    cases = model_zoo_cases.select(tier=None if options.cases else options.tier, pattern=options.cases)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
        for case in cases:
            rows.append(measure(case, options.repeat, folder, options.breakdown))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary = summarise(rows)
    path = write_results("bench_export", machine, rows, summary=summary,
                         options={"tier": options.tier, "cases": options.cases, "repeat": options.repeat},
                         path=options.json)
    print(markdown(rows, summary))
    print(f"\n{load_note({**machine, 'load_average_end': os.getloadavg()})}; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
