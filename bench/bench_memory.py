"""Peak memory of export plus verify, against the model's weight bytes, one process per measurement.

Each measurement runs in a fresh child process, which records its resident set size (RSS)
after importing torch, onnx, onnxruntime, the exporter and the harness (the interpreter's
baseline: the packages' public modules included, which they load on first use), after
building the model, and at its peak while

    harness.verify(module, args)      # our export + checker + production + per-op analysis

runs (the kernel's high-water mark, VmHWM, reset once the model is built, so building it does
not count; `resource`'s ru_maxrss, which does, is recorded too); optionally the export is also
written to a file first (`--write`, external data past 2 GB). The ratio that counts is (peak - baseline) / weight bytes: the model's own parameters
(1x) plus everything export and verify add, with the interpreter and its libraries (about
0.7 GB for torch, torchvision and onnxruntime) left out, since they do not grow with the model.
The raw peak is recorded beside it. Each row also records the largest
activation (the largest tensor one eager forward makes, measured before the peak is reset) and
whether the net peak is within the scale target, 2 x the weights + 2 GB (`within_target`);
tools/gen_performance_doc.py puts the large cases in docs/PERFORMANCE.md's scale table.

`--from-file` measures the file path instead: the export is written to a file (external data),
the module's outputs kept and the module dropped, and then

    harness.verify_onnx(path, args, expected)     # checker + production + per-node analysis

runs on the file alone; the ratio is against the same weight bytes, and its target is
`FILE_TARGET` (1.3) x the weights. `--export-then-file` keeps the module: the export is written
to a file and verified with `harness.verify_onnx` in the same process, the peak counted from
before the export (what a script that exports, then verifies its file, holds).
`--from-file --session-alone` is the file's anchor: one onnxruntime session, configured as the
verification's, loads the file and runs it once, and nothing is verified.

Cases: `vgg16` (the zoo case, 528 MB of weights, on `--batch` images, 1 by default),
`linear3g` (three Linear(16384, 16384) layers, 3.2 GB) and `linear23300` (one Linear(23300,
23300): 2.17 GB in a single initializer, past protobuf's limit on its own); and at scale, where
the activations, not the weights, set the peak: `fasterrcnn_resnet50_fpn` and
`maskrcnn_resnet50_fpn` at their default transform (a 600 x 800 image resized to 800 x 1066),
`llama` (a random-config LlamaForCausalLM of 0.40B parameters on 128 tokens, transformers, no
download) and `unet` (a diffusion UNet laid out as Stable Diffusion's, 0.53 GiB, on 64 x 64
latents); model_zoo_cases.scale builds them. Run the large ones alone, after checking `free -g`: they need 4 to 8 GB. `--ort-config FILE` verifies with those onnxruntime settings
(e.g. `{"config_entries": {"session.disable_prepacking": "1"}}`, to measure what prepacking costs).

    python bench/bench_memory.py --cases vgg16
    python bench/bench_memory.py --cases linear3g --write
    python bench/bench_memory.py --cases linear23300 --from-file
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from _common import load_note, machine_info, results_path, write_results

LIMIT = 3.0
"""Target for (peak - baseline) / weights. The sessions run as users deploy them, prepacking on:
onnxruntime keeps a packed copy of every matrix-product weight beside the array it was given
in place, so the peak holds the weights about twice (the module's, the packed copy) plus the
activations. Measured on a 2-core shared machine (2026-12-02): vgg16 2.79x with prepacking,
2.23x with `{"config_entries": {"session.disable_prepacking": "1"}}`; linear23300 2.02x from
the module and 2.04x from its file (2.17 GB in one initializer)."""
CASES = ("vgg16", "linear3g", "linear23300", "fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", "llama", "unet")


def _rss_bytes() -> int:
    """The current resident set size, from /proc/self/statm."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_bytes() -> int:
    """The high-water mark since the last `_reset_peak` (VmHWM), in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return _max_rss_bytes()


def _reset_peak() -> None:
    """Reset the kernel's high-water mark to the current RSS (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _build(name: str, batch: int):
    import torch

    from model_zoo_cases.scale import SCALE_MODELS, build

    if name in SCALE_MODELS:
        return build(name, batch)
    import model_zoo_cases

    torch.manual_seed(0)
    case = model_zoo_cases.get(name)
    return case.module(0), tuple(a[:batch] for a in case.inputs(0))


def _from_file(module, args, result: dict, ort_config: str | None, keep_module: bool = False,
               session_alone: bool = False):
    """Write the export (external data) and verify the file with `harness.verify_onnx`. By
    default the module is dropped first and the peak counts from the moment it is gone (the
    file verified on its own); `keep_module`: the module stays and the peak counts from before
    the export (a script that exports a model, then verifies the file it wrote). `session_alone`:
    instead of verifying, one onnxruntime session loads the file as the verification's sessions
    are configured and runs it once (the anchor: what onnxruntime itself holds for the file)."""
    import gc

    import torch

    import exporter
    import harness

    with torch.no_grad():
        expected = [module(*args).numpy()]
    folder = tempfile.TemporaryDirectory(prefix="bench-memory-")
    path = os.path.join(folder.name, "model.onnx")
    exporter.export_program(module, args).save(path, external_data=True)
    result["file_bytes"] = sum(os.path.getsize(os.path.join(folder.name, f)) for f in os.listdir(folder.name))
    if not keep_module:
        for parameter in module.parameters():
            parameter.data = torch.empty(0)
        gc.collect()
        from harness.runtime.memory import release_freed_memory

        release_freed_memory()
        result["model_rss"] = _rss_bytes()
        _reset_peak()
    if session_alone:
        return _session_alone(path, [a.numpy() for a in args], ort_config), folder
    verification = harness.verify_onnx(path, [a.numpy() for a in args], expected, model_name="file",
                                       session_options=ort_config)
    return verification, folder


def _session_alone(path: str, inputs: list, ort_config: str | None) -> Any:
    """One onnxruntime session of the file at `path`, with the verification's session settings
    (harness.runtime.sessions), run once on `inputs`; returns a stand-in for a verification
    whose `passed` says it ran."""
    import types

    import onnxruntime as ort

    from harness.runtime.ort_config import OrtConfig
    from harness.runtime.sessions import harness_session_options, session_options, session_record

    config = OrtConfig.of(ort_config)
    options = session_options(**harness_session_options(config))
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    session.run(None, dict(zip([i.name for i in session.get_inputs()], inputs)))
    del session
    return types.SimpleNamespace(passed=True, timings={}, environment={"onnxruntime_session": session_record(config)})


TARGET_ACTIVATIONS = 2 * 10**9
"""The scale target: peak - baseline at most 2 x the weights plus this many bytes of activations."""
FILE_TARGET = 1.3
"""The target of a file verified on its own (`--from-file`): peak - baseline at most this many
times its weights (one copy of the weights for onnxruntime, memory-mapped where it can be)."""


def target_bytes(row: dict) -> float:
    """The net peak a row is held to: FILE_TARGET x the weights for a file verified on its own,
    else 2 x the weights + TARGET_ACTIVATIONS."""
    if row.get("from_file"):
        return FILE_TARGET * row["weight_bytes"]
    return 2 * row["weight_bytes"] + TARGET_ACTIVATIONS


def largest_activation(module, args) -> int:
    """Bytes of the largest tensor one eager forward of `module` makes (every ATen op's output
    with storage of its own, seen by a dispatch mode; views of weights or inputs are none): the
    activation the scale table sets the peak against."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    import torch.utils._pytree as pytree

    class Largest(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            read = {leaf.untyped_storage().data_ptr() for leaf in pytree.tree_leaves((args, kwargs))
                    if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided}
            for leaf in pytree.tree_leaves(out):
                if (isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided
                        and leaf.untyped_storage().data_ptr() not in read):
                    Largest.largest = max(Largest.largest, leaf.numel() * leaf.element_size())
            return out

    from exporter.capturing.trace import eval_mode

    with torch.no_grad(), eval_mode(module), Largest():
        module(*args)
    return Largest.largest


def child(name: str, write: bool, batch: int, from_file: bool = False, ort_config: str | None = None,
          export_then_file: bool = False, session_alone: bool = False) -> dict:
    """One measurement, in this process (the parent runs it as a fresh child)."""
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    import exporter
    import harness

    exporter.export_program, harness.verify  # noqa: B018 (loads their modules: part of the baseline)
    baseline = _rss_bytes()
    module, args = _build(name, batch)
    activation_bytes = largest_activation(module, args)
    from harness.runtime.memory import release_freed_memory

    release_freed_memory()
    built = _rss_bytes()
    _reset_peak()
    weight_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    result: dict = {"case": name, "weight_bytes": weight_bytes, "baseline_rss": baseline, "model_rss": built,
                    "largest_activation_bytes": activation_bytes,
                    "inputs": [list(a.shape) for a in args]}
    started = time.perf_counter()
    result["from_file"] = from_file
    result["export_then_file"] = export_then_file
    result["session_alone"] = session_alone
    if from_file or export_then_file:
        verification, folder = _from_file(module, args, result, ort_config, keep_module=export_then_file,
                                          session_alone=session_alone)
        result["seconds"] = round(time.perf_counter() - started, 1)
        result["passed"] = verification.passed
        if not verification.passed:
            result["failures"] = failures(verification)
        result["timings"] = {k: round(v, 3) for k, v in verification.timings.items()}
        result["peak_rss"] = _peak_bytes()
        result["max_rss_with_model_build"] = _max_rss_bytes()
        result["onnxruntime_session"] = verification.environment.get("onnxruntime_session")
        folder.cleanup()
        return result
    if write:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as folder:
            path = os.path.join(folder, "model.onnx")
            written = exporter.export_program(module, args)
            written.save(path)
            result["file_bytes"] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
            result["external_data"] = any(f.endswith(".data") for f in os.listdir(folder))
            del written
        result["after_write_peak"] = _peak_bytes()
    verification = harness.verify(module, args, model_name=name, session_options=ort_config)
    result["onnxruntime_session"] = verification.environment.get("onnxruntime_session")
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["passed"] = verification.passed
    if not verification.passed:
        result["failures"] = failures(verification)
    result["timings"] = {k: round(v, 3) for k, v in verification.timings.items()}
    result["peak_rss"] = _peak_bytes()
    result["max_rss_with_model_build"] = _max_rss_bytes()
    return result


def failures(verification: Any, most: int = 10) -> dict[str, list[str]]:
    """What failed, in words: the outputs and the ops (the first `most` of each), each with its
    verdict's reason, so a failing row says which op and which output without a rerun."""
    outputs = []
    for index, comparison in enumerate(verification.outputs):
        verdict = verification.output_verdicts[index] if index < len(verification.output_verdicts) else None
        if (verdict.passed if verdict is not None else comparison.passed) is False:
            reason = getattr(verdict, "reason", "") or comparison.note
            outputs.append(f"{comparison.name}: tolerance ratio {comparison.tolerance_ratio:.3g}; {reason}"[:400])
    ops = [f"{op.fx_node} ({op.aten}): {op.verdict.reason if op.verdict is not None else '; '.join(op.notes)}"[:400]
           for op in verification.ops if op.passed is False]
    return {"outputs": outputs[:most], "ops": ops[:most], "failing_ops": len(ops)}


def measure(name: str, write: bool, batch: int, from_file: bool = False, ort_config: str | None = None,
            export_then_file: bool = False, session_alone: bool = False) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", name, "--batch", str(batch)]
    command += ["--write"] if write else []
    command += ["--from-file"] if from_file else []
    command += ["--export-then-file"] if export_then_file else []
    command += ["--session-alone"] if session_alone else []
    command += ["--ort-config", os.path.abspath(ort_config)] if ort_config else []
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"case": name, "error": (done.stderr.strip().splitlines() or ["(no output)"])[-1][:300]}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["ratio_over_baseline"] = (row["peak_rss"] - row["baseline_rss"]) / row["weight_bytes"]
    row["ratio_raw"] = row["peak_rss"] / row["weight_bytes"]
    row["within_limit"] = row["ratio_over_baseline"] <= LIMIT
    row["target_bytes"] = target_bytes(row)
    row["within_target"] = row["peak_rss"] - row["baseline_rss"] <= row["target_bytes"]
    return row


def _key(row: dict) -> tuple:
    """What a row measured: case, batch, written first, verified from the file, session settings."""
    return (row.get("case"), row.get("batch", 1), bool(row.get("write")), bool(row.get("from_file")),
            row.get("ort_config"), bool(row.get("export_then_file")), bool(row.get("session_alone")))


def _earlier_rows(path: str | None, keep_except: list[tuple]) -> list[dict]:
    """The rows not measured now, from the last results (the large cases run alone)."""
    try:
        with open(results_path("bench_memory", path)) as handle:
            earlier = json.load(handle)["rows"]
    except (OSError, ValueError, KeyError):
        return []
    return [row for row in earlier if _key(row) not in keep_except]


def markdown(rows: list[dict]) -> str:
    gib = 2**30
    lines = ["| case | weights (GiB) | baseline RSS | after building the model | peak RSS | (peak - baseline) / weights | peak / weights |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']}{' (written)' if r.get('write') else ''} | failed: {r['error']} |||||")
            continue
        case = f"{r['case']} (written to a file first)" if r.get("write") else r["case"]
        case = f"{r['case']} (harness.verify_onnx on its file)" if r.get("from_file") else case
        case = f"{r['case']} (exported to a file, then harness.verify_onnx on it)" if r.get("export_then_file") else case
        case = f"{r['case']} (one onnxruntime session on its file, no verification)" if r.get("session_alone") else case
        case += f" with {r['ort_config']}" if r.get("ort_config") else ""
        lines.append(f"| {case} | {r['weight_bytes'] / gib:.2f} | {r['baseline_rss'] / gib:.2f} | "
                     f"{r['model_rss'] / gib:.2f} | {r['peak_rss'] / gib:.2f} | {r['ratio_over_baseline']:.2f}x | "
                     f"{r['ratio_raw']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=["vgg16"], choices=CASES)
    parser.add_argument("--write", action="store_true", help="also write the export to a file before verifying")
    parser.add_argument("--batch", type=int, default=1, help="images per input of the zoo cases")
    parser.add_argument("--from-file", action="store_true",
                        help="verify the exported file (external data) with harness.verify_onnx, the module dropped")
    parser.add_argument("--export-then-file", action="store_true",
                        help="export to a file and verify it with harness.verify_onnx in one process, the module kept")
    parser.add_argument("--session-alone", action="store_true",
                        help="with --from-file: one onnxruntime session loads and runs the file, nothing verified "
                             "(the anchor for the file's peak)")
    parser.add_argument("--ort-config", default=None, metavar="FILE", help="onnxruntime session settings (JSON)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="where to write the results (default bench/results/bench_memory.json)")
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(child(options.child, options.write, options.batch, options.from_file, options.ort_config,
                               options.export_then_file, options.session_alone)))
        return 0
    machine = machine_info()
    config_name = os.path.basename(options.ort_config) if options.ort_config else None
    measured = [(name, options.batch if name == "vgg16" else 1, options.write, options.from_file, config_name,
                 options.export_then_file, options.session_alone) for name in options.cases]
    rows = _earlier_rows(options.json, keep_except=measured)
    for name, batch, *_ in measured:
        row = measure(name, options.write, batch, options.from_file, options.ort_config, options.export_then_file,
                      options.session_alone)
        row.update(batch=batch, write=options.write, from_file=options.from_file, ort_config=config_name,
                   export_then_file=options.export_then_file, session_alone=options.session_alone,
                   measured=time.strftime("%Y-%m-%dT%H:%M:%S%z"), load_average=os.getloadavg()[0])
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    path = write_results("bench_memory", machine, rows, path=options.json,
                         summary={"limit": LIMIT, "all_within": all(r.get("within_limit") for r in rows)},
                         options={"cases": options.cases, "write": options.write, "batch": options.batch,
                                  "from_file": options.from_file, "ort_config": options.ort_config,
                                  "export_then_file": options.export_then_file,
                                  "session_alone": options.session_alone})
    print(markdown(rows))
    print(f"\n{load_note({**machine, 'load_average_end': os.getloadavg()})}; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
