"""Generate docs/PERFORMANCE.md from the latest benchmark results (bench/results/*.json).

Each bench script writes its rows with the machine they were measured on (cores, load
average at the start and the end, torch's threads, library versions, commit); this renders
them as side-by-side tables with ratios and targets, and says where the machine was busy.

    python tools/gen_performance_doc.py            # write docs/PERFORMANCE.md
    python tools/gen_performance_doc.py --check    # exit 1 if the file is not up to date
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
OUTPUT = os.path.join(ROOT, "docs", "PERFORMANCE.md")
GIB = 2**30
BENCHES = ("bench_export", "bench_inference", "bench_verify", "bench_floor", "bench_memory", "bench_shape_sweep",
           "bench_commits", "bench_write")


def load(name: str, folder: str = RESULTS) -> dict[str, Any] | None:
    path = os.path.join(folder, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain_text(text: str) -> str:
    """`text` without terminal colour codes (torch.onnx colours its errors) or table pipes."""
    return _ANSI.sub("", text).replace("|", "\\|")


def machine_line(machine: dict[str, Any]) -> str:
    versions = machine.get("versions", {})
    start, end = machine.get("load_average", [0])[0], machine.get("load_average_end", [0])[0]
    cores = machine.get("usable_cores") or machine.get("logical_cores")
    text = (f"{cores} usable cores ({machine.get('physical_cores')} physical), {machine.get('memory_gib')} GiB; "
            f"load average {start:.2f} at the start, {end:.2f} at the end; torch threads {machine.get('torch_threads')}"
            f"{' ' + str(machine['thread_environment']) if machine.get('thread_environment') else ''}; "
            f"torch {versions.get('torch')}, onnx {versions.get('onnx')}, onnxruntime {versions.get('onnxruntime')}, "
            f"onnxscript {versions.get('onnxscript')}; commit {str(machine.get('commit'))[:10]}"
            f"{' (with local changes)' if machine.get('dirty') else ''}; {machine.get('finished', machine.get('started'))}")
    if cores and max(start, end) > cores:
        text += (f"\n\n> The machine was busy (load average above its {cores} cores): the absolute times are "
                 "inflated and noisy. Both sides ran interleaved in one process, so the ratios are less "
                 "affected, but they should be taken again on a quiet machine.")
    return text


def _heading(title: str, intro: str, document: dict[str, Any], columns: list[str], numeric: int) -> list[str]:
    """A section's title, what it measures, the machine, and its table's header (the last
    `numeric` columns right-aligned)."""
    align = ["---"] * (len(columns) - numeric) + ["---:"] * numeric
    return [f"## {title}", "", intro, "", machine_line(document["machine"]), "",
            "| " + " | ".join(columns) + " |", "|" + "|".join(align) + "|"]


def _fmt(value: Any, spec: str = ".2f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def export_section(document: dict[str, Any]) -> list[str]:
    rows, summary = document["rows"], document.get("summary", {})
    lines = _heading(
        "Export: roundtrip vs torch.onnx (dynamo)",
        "Both write the model to a file (`exporter.export(module, args, path)` and "
        "`torch.onnx.export(module, args, path, dynamo=True)` with its defaults: optimize, external data), "
        f"interleaved, median of {document['options'].get('repeat')} runs each.",
        document, ["case", "params", "ours (s)", "torch.onnx (s)", "speed-up",
                   "ours: capture / decompose / convert / write / materialise (s)",
                   "torch.onnx: capture / decompose / rest (s)"], 0)
    for row in rows:
        ours = row.get("ours_phases", {})
        theirs = row.get("torch_onnx_phases", {})
        convert = sum(ours.get(k, 0.0) for k in ("translate", "fold", "serialise", "optimize"))
        ours_split = (f"{ours.get('capture', 0):.2f} / {ours.get('decompose', 0):.2f} / {convert:.2f} / "
                      f"{ours.get('write', 0):.2f} / {ours.get('materialise', 0):.2f}") if ours else "-"
        theirs_split = (f"{theirs.get('capture', 0):.2f} / {theirs.get('decompose', 0):.2f} / "
                        f"{theirs.get('other', 0):.2f}") if theirs else "-"
        their_time = (_fmt(row.get("torch_onnx_s")) if "torch_onnx_s" in row
                      else f"failed: {_plain_text(row.get('torch_onnx_error', ''))}")
        lines.append(f"| {row['case']} | {row['params'] / 1e6:.1f}M | {row['ours_s']:.2f} | {their_time} | "
                     f"{_fmt(row.get('speedup'), '.2f') + 'x' if row.get('speedup') else '-'} | {ours_split} | "
                     f"{theirs_split} |")
    if summary.get("geomean_speedup") is not None:
        targets = summary.get("targets", {})
        lines += ["", f"Geomean speed-up **{summary['geomean_speedup']:.2f}x** (target {targets.get('geomean')}x); "
                      f"lowest {summary['min_speedup']:.2f}x (target {targets.get('each')}x on every case); "
                      f"below 1.0x: {', '.join(summary.get('below_1x', [])) or 'none'}. "
                      f"Targets {'met' if summary.get('met') else 'NOT met'} on this run."]
    lines += ["", "Phases of ours: *capture* is torch.export; *decompose* the local rewrites that replace "
                  "torch's decomposition pass (or that pass, when a graph needs it); *convert* translation, "
                  "the skeleton proto and the optimisation stage (exporter.optimize); *write* the file, each weight copied once from the "
                  "parameters to it; *materialise* the ModelProto `export` returns (protobuf keeps its own "
                  "copy of every weight). torch.onnx's *rest* is its translation, optimisation and saving.", ""]
    return lines


def inference_section(document: dict[str, Any]) -> list[str]:
    summary, options = document.get("summary", {}), document.get("options", {})
    threads = options.get("threads") or "onnxruntime's default"
    lines = _heading(
        "Inference: our export vs torch.onnx's, onnxruntime CPU",
        "`exporter.export_program` (optimize=True) and `torch.onnx.export(..., dynamo=True)` (its own optimize "
        f"default) of the same module, each run in an onnxruntime CPU session (intra-op threads: {threads}), "
        f"warmed up, then interleaved, median of {options.get('repeat')} samples each; a sample is as many runs as "
        "last 50 ms (the same count on both sides) and the time is per run. Ratio = ours / torch.onnx "
        "(below 1: ours is faster). Export times are one call each; *optimise* is our optimisation stage's "
        "share of ours. *verify* is `harness.verify` per op, optimised over one node per op. *ops vs torch.onnx* "
        "is how many more nodes of each op type our graph has (negative: fewer); *same* when both graphs hold "
        "the same ops, which onnxruntime runs with the same kernels: there the ratio is the measurement's noise.",
        document, ["model", "kind", "ours (ms)", "torch.onnx (ms)", "ratio", "nodes ours / torch.onnx",
                   "export ours / torch.onnx (s)", "optimise (s)", "verify ratio", "ops vs torch.onnx"], 7)
    for row in document["rows"]:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['kind']} | failed: {_plain_text(row['error'])[:120]} |"
                         " - | - | - | - | - | - | - |")
            continue
        theirs = _fmt(row.get("torch_onnx_ms")) if "torch_onnx_ms" in row else (
            f"failed: {_plain_text(row.get('torch_onnx_error', ''))[:80]}")
        lines.append(
            f"| {row['model']} | {row['kind']} | {row['ours_ms']:.2f} | {theirs} | {_fmt(row.get('latency_ratio'))} | "
            f"{row['ours_nodes']} / {row.get('torch_onnx_nodes', '-')} | "
            f"{row['ours_export_s']:.2f} / {_fmt(row.get('torch_onnx_export_s'))} | {row['ours_optimize_s']:.2f} | "
            f"{_fmt(row.get('verify_ratio'))} | {_op_difference(row)} |")
    if summary.get("compared"):
        targets = summary.get("targets", {})
        cpu = (f", {summary['export_speedup_cpu_geomean']:.1f}x in process CPU time (which other processes' load "
               "distorts less)") if "export_speedup_cpu_geomean" in summary else ""
        verify = (f"; per-op verification {summary['verify_ratio_geomean']:.2f}x the one-node-per-op time "
                  f"(target {targets.get('verify_ratio')}x)") if "verify_ratio_geomean" in summary else ""
        lines += ["", f"Latency ratio geomean **{summary['latency_ratio_geomean']:.2f}** (target "
                      f"{targets.get('latency_geomean')}); within {targets.get('latency_each')}x: "
                      f"{summary['within_latency_target']} of {summary['compared']}; node count at most torch.onnx's: "
                      f"{summary['nodes_at_most_theirs']} of {summary['compared']}; export "
                      f"{summary['export_speedup_geomean']:.1f}x faster in geomean (target {targets.get('export_geomean')}x)"
                      f"{cpu}{verify}."]
        by_kind = summary.get("latency_ratio_geomean_by_kind")
        if by_kind:
            counts = Counter(r.get("kind") for r in document["rows"] if "latency_ratio" in r)
            lines += ["", "Latency ratio geomean by kind: " + ", ".join(
                f"{kind} {ratio:.2f} ({counts[kind]} model{'' if counts[kind] == 1 else 's'})"
                for kind, ratio in by_kind.items()) + "."]
    return lines + [""]


def _op_difference(row: dict[str, Any]) -> str:
    if "op_difference" not in row:
        return "-"
    return ", ".join(f"{op} {count:+d}" for op, count in row["op_difference"].items()) or "same"


def verify_section(document: dict[str, Any]) -> list[str]:
    lines = _heading(
        "Verification: harness vs torch.onnx.verification",
        "The same torch.onnx export verified by both at torch's default threads "
        f"({document['options'].get('torch_threads')}): ours is `verify_exported` (production, accumulated, "
        "isolated and fp64 truth for every op), theirs `verify_onnx_program(..., compare_intermediates=True)`; "
        "export excluded from both. *End to end* is `harness.verify` with our own export included.",
        document, ["model", "ONNX nodes", "ours (s)", "torch.onnx.verification (s)", "ratio", "target",
                   "harness.verify end to end (s)", "ratio", "target"], 8)
    for row in document["rows"]:
        lines.append(
            f"| {row['model']} | {row['onnx_nodes']} | {row['ours_s']:.2f} | {row['theirs_s']:.1f} | "
            f"{row['ratio']:.0f}x | {_fmt(row.get('target'), '.0f')}x | {_fmt(row.get('roundtrip_end_to_end_s'))} | "
            f"{_fmt(row.get('end_to_end_ratio'), '.0f')}x | {_fmt(row.get('end_to_end_target'), '.0f')}x |")
    lines += ["", "Phases of ours (s): " + "; ".join(
        f"{row['model']}: " + ", ".join(f"{k} {v}" for k, v in row.get("ours_timings", {}).items())
        for row in document["rows"]), ""]
    return lines


_SHAPE_SWEEP_COLUMNS: list[tuple[str, Any]] = [
    ("case", lambda row: row["case"]),
    ("per-op (s)", lambda row: f"{row['per_op_s']:.2f}"),
    ("per extra size (s)", lambda row: f"{row['per_size_s']:.3f}"),
    ("ratio", lambda row: f"{row['ratio']:.3f}x"),
    ("ratio of medians", lambda row: _fmt(row.get("ratio_of_medians"), ".3f") + ("x" if "ratio_of_medians" in row else "")),
    ("load", lambda row: row.get("load", "-")),
    ("size / traced", lambda row: _fmt(row.get("work_factor"))),
    ("ratio per traced size", lambda row: f"{_fmt(row.get('ratio_per_traced_work'), '.3f')}x"),
    ("target", lambda row: f"<= {row['target']}x"),
    ("torch.onnx.verification per size (s)", lambda row: f"{row['anchor_per_size_s']:.3f}"),
    ("theirs / ours", lambda row: f"{row['anchor_ratio']:.2f}x"),
]


def shape_sweep_section(document: dict[str, Any]) -> list[str]:
    statistic = document.get("options", {}).get("statistic", "median")
    intro = ("One roundtrip export with the case's swept axes dynamic: *per-op* is `verify_exported` at the traced "
             "size; *per extra size* is `run_sweep` over sizes near the traced one (outputs judged in one session) "
             "divided by their count; *per traced size* divides that by the sizes' element count relative to the "
             "traced inputs; torch.onnx.verification is `verify_onnx_program` once per size on a torch.onnx export. "
             f"The sides ran interleaved, {document.get('options', {}).get('repeat', '?')} rounds; the times and "
             f"the ratio are each side's {'fastest run' if statistic == 'min' else 'median'}"
             + (", the ratio of the medians beside it; *load* is the load average over the rounds."
                if statistic == "min" else "."))
    lines = _heading("Shape sweep: each extra size against one per-op verification", intro, document,
                     [name for name, _ in _SHAPE_SWEEP_COLUMNS], len(_SHAPE_SWEEP_COLUMNS) - 1)
    lines += ["| " + " | ".join(cell(row) for _, cell in _SHAPE_SWEEP_COLUMNS) + " |" for row in document["rows"]]
    return lines + [""]


def floor_section(document: dict[str, Any]) -> list[str]:
    limit = document.get("summary", {}).get("limit", 3.0)
    lines = _heading(
        "Per-op verification against its floor",
        "Floor = one torch fp32 forward + one fp64 forward + two runs of an already created onnxruntime "
        f"session. A full per-op verification (our export excluded) should take at most {limit:g}x that. "
        "Seconds are CPU seconds of the benchmark's process (user and system, all threads; the fastest of the "
        "repeats) where the results record them, else wall seconds: on a shared machine other processes' load "
        "adds wall time, not this process's CPU time. *Comparing* is the CPU time spent comparing tensors "
        "(every phase's comparisons, measured in one more run). *Structural* = one fp32 forward + two fp64 "
        "passes + three backend runs: what any per-op verification computes at least (the outputs' truth "
        "chains float64 values while each op's starts from torch's float32 inputs; production, the "
        "instrumented model and the isolation batch are three runs). *System* is the verification's system "
        "CPU time: the kernel zeroing the fresh pages its held values take.",
        document, ["case", "ops", "verify (s)", "floor (s)", "fp32 / fp64 / backend run (s)", "ratio",
                   "structural (s)", "ratio to structural", "system (s)", "comparing (s)"],
        9)
    for row in document["rows"]:
        comparing = f"{row['compare_s']:.3f}" if "compare_s" in row else "-"
        structural = (f"{row['structural_s']:.3f} | {row['structural_ratio']:.1f}x" if "structural_s" in row
                      else "- | -")
        system = f"{row['verify_sys_s']:.3f}" if "verify_sys_s" in row else "-"
        lines.append(f"| {row['case']} | {row['ops']} | {row['verify_s']:.3f} | {row['floor_s']:.3f} | "
                     f"{row['torch32_s']:.3f} / {row['torch64_s']:.3f} / {row['backend_run_s']:.3f} | "
                     f"{row['ratio']:.1f}x{' (over)' if row['over_limit'] else ''} | {structural} | {system} | "
                     f"{comparing} |")
    over = [row for row in document["rows"] if row["over_limit"]]
    lines += [""] + ([f"Above {limit:g}x:", ""] + [f"- **{row['case']}** ({row['ratio']:.1f}x): {row['why']}"
                                                   for row in over] if over else [f"Every case is within {limit:g}x."])
    lines += [""]
    return lines


def memory_section(document: dict[str, Any]) -> list[str]:
    lines = _heading(
        "Peak memory of export plus verify",
        "Each case in a fresh process: the resident set after importing torch, onnx, onnxruntime and the "
        "harness (the baseline), after building the model, and at its peak while `harness.verify` (our export "
        "included) runs. The ratio that counts is (peak - baseline) / weight bytes: the model's own "
        "parameters plus all that export and verify add; the interpreter and its libraries do not grow "
        f"with the model. Limit: {document.get('summary', {}).get('limit', 2.5)}x. The large cases, and the "
        "file paths, are in the scale table below.",
        document, ["case", "inputs", "weights (GiB)", "baseline (GiB)", "with the model (GiB)", "peak (GiB)",
                   "(peak - baseline) / weights", "peak / weights", "wrote a file first"], 0)
    for row in document["rows"]:
        if row.get("case") in SCALE_CASES:
            continue
        if "error" in row:
            lines.append(f"| {row['case']} | failed: {row['error']} ||||||||")
            continue
        shapes = " ".join("x".join(str(d) for d in shape) for shape in row.get("inputs", []))
        lines.append(f"| {row['case']} | {shapes} | {row['weight_bytes'] / GIB:.2f} | {row['baseline_rss'] / GIB:.2f} | "
                     f"{row['model_rss'] / GIB:.2f} | {row['peak_rss'] / GIB:.2f} | "
                     f"**{row['ratio_over_baseline']:.2f}x** | {row['ratio_raw']:.2f}x | "
                     f"{'yes' + (' (external data)' if row.get('external_data') else '') if row.get('write') else 'no'} |")
    lines += [""]
    return lines


FILE_TARGET = 1.3
"""bench_memory's target for a file verified on its own: net peak at most this many times its weights."""
SCALE_CASES = ("fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", "llama", "unet", "linear23300")
"""bench_memory's cases at scale, where activations or one huge initializer set the peak."""


def _session_note(row: dict[str, Any]) -> str:
    """What the row's onnxruntime settings change from onnxruntime's defaults, for the path column."""
    entries = (row.get("onnxruntime_session") or {}).get("config_entries") or {}
    if entries.get("session.disable_prepacking") == "1":
        return ", prepacking off"
    return f", {row['ort_config']}" if row.get("ort_config") else ""


def scale_section(document: dict[str, Any], floors: dict[str, Any] | None = None) -> list[str]:
    """The scale table: bench_memory's large cases, peak net of the interpreter against the
    weights, the largest activation and the target (2 x weights + 2 GB); then, from
    `floors` (bench_floor --scale's results), each scale model's verification against its floor."""
    rows = [row for row in document["rows"] if row.get("case") in SCALE_CASES]
    lines = ["## Scale", "",
             "The models users most need per-op verification for, each verified per op in a fresh process "
             "(`bench/bench_memory.py`, models from `model_zoo_cases.scale`: detectors at torchvision's default 800 px "
             "transform, BatchNorm calibrated; Llama on 128 tokens; a diffusion UNet laid out as Stable Diffusion's "
             "on 64 x 64 latents; one Linear(23300, 23300) of 2.17 GB). Net peak is the peak "
             "resident set minus the interpreter's (torch, onnxruntime and the harness imported); the target is "
             "2 x the weights + 2 GB, and 1.3 x the weights for a file verified on its own (`verify_onnx(file)`, "
             "the module gone: one copy of the weights for onnxruntime, memory-mapped). At onnxruntime's defaults a "
             "session cannot meet that: it packs every matrix-product weight into a copy of its own while the "
             "mapped original is still resident, so one session alone on the file peaks at twice the weights (the "
             "row \"onnxruntime session(file), no verification\"), and the verification adds nothing measurable to "
             "it. With prepacking off (`session_options={\"config_entries\": {\"session.disable_prepacking\": "
             "\"1\"}}`, `bench/ort_no_prepacking.json`) onnxruntime keeps the mapped weights only. Prepacking "
             "changes the order of a product's sums (the outputs of a 2 x 23300 by 23300 x 512 MatMul, about 150 in size, differ by up to 2.7e-4 "
             "between the two), so the harness verifies at the user's settings and never turns it off by itself. "
             "The largest activation is the largest tensor one eager forward makes. Time is "
             "the whole `harness.verify` (export included) on the machine as it was loaded then (load average "
             "beside the date); the anchor, torch.onnx.verification, was not run on these models.", "",

             "| case | inputs | path | verdict | weights (GiB) | largest activation (GiB) | net peak (GiB) | "
             "net peak / weights | target (GiB) | within | time (s) | measured |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for row in rows:
        path = ("onnxruntime session(file), no verification" if row.get("session_alone") else
                "verify_onnx(file)" if row.get("from_file") else
                "export, then verify_onnx(file)" if row.get("export_then_file") else
                "export, write, verify" if row.get("write") else "verify(module)") + _session_note(row)
        if "error" in row:
            lines.append(f"| {row['case']} | | {path} | failed: {row['error']} ||||||||")
            continue
        shapes = " ".join("x".join(str(d) for d in shape) for shape in row.get("inputs", []))
        net = row["peak_rss"] - row["baseline_rss"]
        target = FILE_TARGET * row["weight_bytes"] if row.get("from_file") else 2 * row["weight_bytes"] + 2 * 10**9
        activation = row.get("largest_activation_bytes")
        verdict = "pass" if row.get("passed") else "fail" if row.get("passed") is False else "-"
        lines.append(f"| {row['case']} | {shapes} | {path} | {verdict} | {row['weight_bytes'] / GIB:.2f} | "
                     f"{_fmt(activation / GIB if activation else None)} | {net / GIB:.2f} | "
                     f"{net / row['weight_bytes']:.2f}x | {target / GIB:.2f} | {'yes' if net <= target else 'no'} | "
                     f"{_fmt(row.get('seconds'), '.0f')} | {str(row.get('measured', ''))[:10]}"
                     f"{' (load ' + format(row['load_average'], '.0f') + ')' if row.get('load_average') else ''} |")
    if not rows:
        lines.append("| no scale case measured yet: `python bench/bench_memory.py --cases fasterrcnn_resnet50_fpn` |||||||||||")
    lines += [""]
    if floors and floors.get("rows"):
        lines += ["Per-op verification of the scale models against their floor (`bench/bench_floor.py --scale`, "
                  "CPU seconds, fastest of the repeats; the floor is one fp32 and one fp64 forward and two "
                  f"backend runs; {load_note_of(floors)}):", "",
                  "| case | ops | verify (s) | floor (s) | verify / floor | where the time goes |", "|---|---:|---:|---:|---:|---|"]
        for row in floors["rows"]:
            lines.append(f"| {row['case']} | {row['ops']} | {row['verify_s']:.1f} | {row['floor_s']:.1f} | "
                         f"{row['ratio']:.1f}x | {row.get('why', 'within the limit')[:300]} |")
        lines += [""]
    return lines


def load_note_of(document: dict[str, Any]) -> str:
    """When and under what load a bench document was measured."""
    machine = document.get("machine", {})
    start, end = machine.get("load_average") or [None], machine.get("load_average_end") or [None]
    return (f"measured {str(machine.get('started', ''))[:10]}, load {_fmt(start[0], '.1f')} at the start and "
            f"{_fmt(end[0], '.1f')} at the end")


COMMITS_OWN = (" Outside torch.export: the CPU seconds of each call less those spent in its torch.export.export (the "
               "same library call on both sides; the row says so when the arguments differ), the fastest of all counts: "
               "what the exporter's own code costs, without the larger swing load gives the trace. Python calls: "
               "function calls in one export under cProfile (first round), the work done, which load does not change.")


def commits_section(document: dict[str, Any]) -> list[str]:
    """bench/bench_commits.py: the export and memory benches on two commits, each side's best."""
    summary, options = document.get("summary", {}), document.get("options", {})
    commits = summary.get("commits", {})
    loads = [entry["load"] for entry in summary.get("loads", [])]
    lines = _heading(
        "Export and memory against an earlier commit",
        f"Both benches on base `{str(commits.get('base'))[:10]}` and head `{str(commits.get('head'))[:10]}`, each side "
        "running its own bench scripts on its own code in fresh processes, interleaved over "
        f"{options.get('rounds')} rounds (base first, then head first, ...). Export: `bench_export.ours` (the call "
        f"bench/bench_export.py times), {options.get('repeat')} timed calls per case and process after a warm-up, "
        "the fastest of all counts (wall and CPU seconds). Memory: `bench_memory.py --child` (peak resident set of export plus "
        "`harness.verify` in a fresh process, net of the interpreter's), the lowest of the rounds counts. "
        + (f"Load average before each process: {min(loads):.1f}-{max(loads):.1f}." if loads else "")
        + (COMMITS_OWN if any("own_cpu_ratio" in row or "calls_ratio" in row for row in document["rows"]) else ""),
        document, ["case", "base", "head", "head / base"], 3)
    for row in document["rows"]:
        if row.get("kind") == "export":
            lines.append(f"| {row['case']}: export (s) | {row['base_min_s']:.3f} | {row['head_min_s']:.3f} | "
                         f"{row['ratio']:.2f}x |")
            if row.get("cpu_ratio") is not None:
                lines.append(f"| {row['case']}: export (CPU s) | {row['base_min_cpu_s']:.3f} | "
                             f"{row['head_min_cpu_s']:.3f} | {row['cpu_ratio']:.2f}x |")
            if row.get("own_cpu_ratio") is not None:
                same = "" if row.get("same_torch_export_calls") else " (torch.export called with other arguments)"
                lines.append(f"| {row['case']}: export outside torch.export (CPU s){same} | "
                             f"{row['base_min_own_cpu_s']:.3f} | {row['head_min_own_cpu_s']:.3f} | "
                             f"{row['own_cpu_ratio']:.2f}x |")
            if row.get("calls_ratio") is not None:
                lines.append(f"| {row['case']}: export (Python calls) | {row['base_python_calls']} | "
                             f"{row['head_python_calls']} | {row['calls_ratio']:.3f}x |")
    for row in document["rows"]:
        if row.get("kind") != "memory":
            continue
        label = f"{row['case']}{', written to a file first' if row.get('write') else ''}"
        lines.append(f"| {label}: net peak of export + verify (GiB) | {row['base_net_peak_bytes'] / GIB:.3f} | "
                     f"{row['head_net_peak_bytes'] / GIB:.3f} | {row['ratio']:.2f}x |")
        if row.get("write_ratio") is not None:
            lines.append(f"| {row['case']}: net peak of writing the export (GiB) | "
                         f"{row['base_net_write_peak_bytes'] / GIB:.3f} | {row['head_net_write_peak_bytes'] / GIB:.3f} | "
                         f"{row['write_ratio']:.2f}x |")
    worse = summary.get("worse_over_5_percent") or []
    lines += ["", f"More than 5% worse on head: {', '.join(worse) if worse else 'none'}.", ""]
    return lines


WRITE_INTRO = ("Per case and writer, a fresh process exports the model, then writes it: `ExportResult.save` (the "
               "exporter's writer, straight from the weights) or `onnx_ir.save` of the same onnx_ir model (a "
               "ModelProto built and serialised first), to one file and with external data. Extra peak: the "
               "resident set's high-water mark during the write over the RSS before it; lowest and fastest of "
               "{rounds} interleaved rounds.")


def write_section(document: dict[str, Any]) -> list[str]:
    """bench/bench_write.py: the streaming writer against onnx_ir's save, per case."""
    title = "Writing the file: the streaming writer against onnx_ir's save"
    columns = ["case", "writer", "weights (GiB)", "extra peak (GiB)", "seconds"]
    lines = _heading(title, WRITE_INTRO.format(rounds=document["options"].get("rounds")), document, columns, 3)
    for row in document["rows"]:
        lines.append(f"| {row['case']} | {row['writer']} | {row['weight_bytes'] / GIB:.2f} | "
                     f"{row['extra_peak_bytes'] / GIB:.3f} | {row['seconds']:.2f} |")
    lines += [""]
    return lines


SECTIONS = {"bench_export": export_section, "bench_inference": inference_section, "bench_verify": verify_section, "bench_floor": floor_section,
            "bench_memory": memory_section, "bench_shape_sweep": shape_sweep_section, "bench_commits": commits_section,
            "bench_write": write_section}

COMMANDS = """## Reproducing

```sh
tox -e bench                                        # every benchmark below, then this page
python bench/bench_export.py --tier full --repeat 3  # the 31 zoo cases (long: run it on a quiet machine)
python bench/bench_inference.py --all --verify       # every zoo case, block and HF model (quiet machine)
python bench/bench_verify.py                         # ResNet-18 and DenseNet-121
python bench/bench_floor.py --tier full
python bench/bench_memory.py --cases vgg16
python bench/bench_memory.py --cases linear3g        # alone: about 8 GB
python bench/bench_memory.py --cases fasterrcnn_resnet50_fpn   # alone: the detector at 800 px (scale)
python bench/bench_memory.py --cases maskrcnn_resnet50_fpn     # alone, each: the scale table
python bench/bench_memory.py --cases llama
python bench/bench_memory.py --cases unet
python bench/bench_floor.py --scale unet --repeat 1  # alone: the scale models against their floor
python bench/bench_memory.py --cases linear23300 --from-file
python bench/bench_shape_sweep.py                    # ResNet-18, super-resolution, word LM (LSTM)
git worktree add --detach /tmp/base BASE && python bench/bench_commits.py --base /tmp/base --rounds 4
python bench/bench_write.py --cases vgg16              # the streaming writer against onnx_ir's save
python tools/gen_performance_doc.py
```
"""


def render(folder: str = RESULTS) -> str:
    lines = ["# Performance", "",
             "Generated by `tools/gen_performance_doc.py` from the latest `bench/results/*.json`; do not edit by hand.",
             "Every figure is measured side by side in one run, with the machine it ran on.", ""]
    for name in BENCHES:
        document = load(name, folder)
        if document is None:
            lines += [f"## {name}", "", f"No results yet: run `python bench/{name}.py`.", ""]
            continue
        lines += SECTIONS[name](document)
        if name == "bench_memory":
            lines += scale_section(document, load("bench_floor_scale", folder))
    lines.append(COMMANDS)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/PERFORMANCE.md is out of date")
    parser.add_argument("--results", default=RESULTS, help="the folder of the bench JSON files")
    parser.add_argument("--out", default=OUTPUT)
    options = parser.parse_args(argv)
    text = render(options.results)
    if options.check:
        current = open(options.out).read() if os.path.exists(options.out) else ""
        if current != text:
            print(f"{options.out} is out of date: run python tools/gen_performance_doc.py", file=sys.stderr)
            return 1
        return 0
    sys.path.insert(0, ROOT)
    from exporter.contract.fileio import write_text_atomic

    write_text_atomic(options.out, text)
    print(f"wrote {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
