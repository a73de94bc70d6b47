"""Measure and write docs/COVERAGE.md: every zoo model, Hugging Face model and torchvision
detection model, exported and verified by roundtrip and by torch.onnx (dynamo) in the same run;
the detection models by the TorchScript exporter too (`torch.onnx.export(dynamo=False)`, which
has exported them for years), side by side.

Per model and exporter: whether it exported, whether onnxruntime (CPU) matched torch at the
traced batch AND at another batch (the case's tolerance), the max output error, and the export
time. Each model runs in its own process (memory is returned, a crash or timeout costs one
model), one at a time, cheapest first; results go to docs/coverage.json after every model, so
the run resumes where it stopped (models already measured are skipped unless --redo).

    python tools/gen_coverage.py                  # measure what is missing, then render
    python tools/gen_coverage.py --only 'vit_*'   # a subset (fnmatch patterns, comma-separated)
    python tools/gen_coverage.py --render         # only rewrite docs/COVERAGE.md from the JSON
    python tools/gen_coverage.py --measurements   # print measured rows for model_zoo_cases/measurements.py
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exporter.contract.fileio import write_text_atomic  # noqa: E402

RESULTS = ROOT / "docs" / "coverage.json"
OUTPUT = ROOT / "docs" / "COVERAGE.md"
EXPORTERS = ("roundtrip", "torch.onnx")
DETECTION_EXPORTERS = (*EXPORTERS, "torchscript")
MODEL_TIMEOUT_S = 1800

logger = logging.getLogger("gen_coverage")


# -- the model list ---------------------------------------------------------------------------


def model_list() -> list[dict[str, str]]:
    """Every model of the coverage table: {"name", "kind", "family"} (cheapest first is
    decided at run time from parameter counts)."""
    import model_zoo_cases
    from model_zoo_cases import huggingface

    cases = model_zoo_cases.CASES.values()
    models = [{"name": c.name, "kind": "zoo", "family": c.family} for c in cases if c.tier not in ("detection", "quantized")]
    models += [{"name": name, "kind": "huggingface", "family": "huggingface"} for name in huggingface.MODELS]
    models += [{"name": c.name, "kind": "detection", "family": "detection"} for c in cases if c.tier == "detection"]
    models += [{"name": c.name, "kind": "quantized", "family": c.family} for c in cases if c.tier == "quantized"]
    return models


def _parameter_count(entry: dict[str, str]) -> int:
    """Parameters of a torchvision model, from its weights' metadata (nothing is built or
    downloaded); 0 for the hand-written zoo models and the Hugging Face models (all small)."""
    import torchvision

    if entry["kind"] != "zoo":
        return 0
    try:
        weights = list(torchvision.models.get_model_weights(entry["name"]))
    except (ValueError, KeyError):
        return 0
    return int(weights[0].meta.get("num_params", 0)) if weights else 0


# -- one model, in a worker process ------------------------------------------------------------


def _max_error(verifications: Sequence[Any]) -> float | None:
    errors = [c.max_abs for v in verifications for c in v.outputs if getattr(c, "max_abs", None) is not None]
    return max(errors) if errors else None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


_DATA_DEPENDENT = re.compile(r"(Could not (?:guard on|extract specialized integer from) data-dependent "
                            r"expression .*?) \(unhinted.*?Caused by: \(?([^\s)]+)", re.S)


_NO_FUNCTION = re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>")


def _first_line(error: BaseException) -> str:
    """The error's type and message on one line, without terminal colours, cut at 400 characters;
    a data-dependent guard anywhere in its chain of causes comes first, with where it was raised
    (torch.onnx's step-1 error says only that torch.export failed), and so does an op torch.onnx
    has no function for (its step-3 error says only that conversion failed)."""
    text = _ANSI.sub("", f"{type(error).__name__}: {error}")
    cause, seen = error, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        message = _ANSI.sub("", str(cause))
        found = _DATA_DEPENDENT.search(message)
        if found:
            text = f"{type(cause).__name__}: {found.group(1)} at {found.group(2)}; {text}"
            break
        missing = _NO_FUNCTION.search(message)
        if missing:
            text = f"{type(cause).__name__}: no ONNX function for {missing.group(1)}.{missing.group(2)}; {text}"
            break
        cause = cause.__cause__ or cause.__context__
    return " ".join(text.split())[:400]


def _verify_both_batches(module, traced_args, other_args, exporter: str, **common: Any) -> dict[str, Any]:
    """Export once with `exporter`, verify at the traced inputs (against the FX program's values)
    and at the other inputs (the same ONNX model against the module run eagerly)."""
    from harness.exporters import ExportedForVerification, export_for_verification
    from harness.verification import verify_exported

    result: dict[str, Any] = {"exported": False, "verified": False, "max_abs_error": None, "export_s": None}
    export_options = {k: common[k] for k in ("dynamic_axes", "input_names") if k in common}
    options = {k: v for k, v in common.items() if k not in export_options}
    started = time.perf_counter()
    try:
        exported = export_for_verification(exporter, module, tuple(traced_args), **export_options)
    except Exception as error:  # the export (or capture) failed: the reason is the result
        result.update(export_s=round(time.perf_counter() - started, 2), error=_first_line(error))
        return result
    result.update(exported=True, export_s=round(time.perf_counter() - started, 2))
    runs = [(exported, traced_args, module)]
    if other_args is not None:
        runs.append((ExportedForVerification(exported.model, None, exporter, weights=exported.weights), other_args,
                     module))
    verifications = []
    for index, (subject, args, reference) in enumerate(runs):
        try:
            verifications.append(verify_exported(subject, tuple(args), module=reference, per_op=False, **options))
        except Exception as error:
            result["error"] = f"{'at the other batch: ' if index else ''}{_first_line(error)}"
            return result
    result["verified"] = all(v.passed for v in verifications)
    result["max_abs_error"] = _max_error(verifications)
    if not result["verified"]:
        failing = next(v for v in verifications if not v.passed)
        result["error"] = "; ".join(failing.notes[:2]) or (
            "checker: " + failing.checker.message if not failing.checker.passed else "outputs outside tolerance")
    return result


def _activation_stats(module, args) -> dict[str, float]:
    """max |activation| over every leaf module and max |output| (for the measurements)."""
    import torch
    from op_table.table import flat_tensors

    peak = [0.0]

    def record(_module, _inputs, output) -> None:
        for tensor in flat_tensors(output):
            if tensor.is_floating_point() and tensor.numel():
                peak[0] = max(peak[0], float(tensor.abs().max()))

    leaves = [m for m in module.modules() if not any(True for _ in m.children())]
    handles = [m.register_forward_hook(record) for m in leaves]
    try:
        with torch.no_grad():
            outputs = flat_tensors(module(*args))
    finally:
        for handle in handles:
            handle.remove()
    scale = max((float(t.abs().max()) for t in outputs if t.is_floating_point() and t.numel()), default=0.0)
    return {"activation_max": max(peak[0], scale), "output_scale": scale}


def _zoo_subject(name: str) -> dict[str, Any]:
    import model_zoo_cases

    case = model_zoo_cases.get(name)
    axes = {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}
    return {
        "module": case.module(0), "traced": case.inputs(0), "other": case.other_inputs(1),
        "common": dict(dynamic_axes=axes, input_names=list(case.input_names), output_atol=case.atol,
                       output_rtol=case.rtol, allowed_mismatch=case.allowed_mismatch_fraction, model_name=name),
        "input": case.description, "tolerance": f"atol {case.atol:g}, rtol {case.rtol:g}",
    }


def _huggingface_subject(name: str) -> dict[str, Any]:
    import torch
    from model_zoo_cases import huggingface

    build, inputs, input_names, _ = huggingface.MODELS[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = build().eval()
    traced = inputs(torch.Generator().manual_seed(0), 2)
    shorter = huggingface.SEQUENCE - 3  # every sequence axis is dynamic: cut it at the other batch
    other = tuple(t[:, :shorter].contiguous() for t in inputs(torch.Generator().manual_seed(1), 3))
    axes = {k: v for k, v in huggingface.dynamic_axes(name).items() if k in input_names}
    return {
        "module": module, "traced": traced, "other": other,
        "common": dict(dynamic_axes=axes, input_names=list(input_names), model_name=name),
        "input": f"{huggingface.LAYERS} layers, hidden {huggingface.HIDDEN}, batch 2 (traced) and 3, "
                 f"{huggingface.SEQUENCE} and {shorter} tokens",
        "tolerance": "harness default (atol 1e-4, rtol 1e-3)",
    }


def _detection_subject(name: str) -> dict[str, Any]:
    """A detector of the zoo's detection tier: one image at its size and at half of it (height
    and width dynamic), outputs matched box to box (harness.metrics.detections)."""
    subject = _zoo_subject(name)
    subject["input"] += " (outputs matched by label and IoU)"
    return subject


def _quantized_subject(name: str) -> dict[str, Any]:
    """A case of the zoo's quantized tier: the converted module at its one size, judged by the
    rule (a dequantized output) and per op in quantization steps, at two graph optimisation levels."""
    import model_zoo_cases

    case = model_zoo_cases.get(name)
    return {"module": case.module(0), "traced": case.inputs(0), "other": None,
            "common": dict(model_name=name), "input": case.description, "tolerance": "quantization steps"}


QUANTIZED_LEVELS = ("disabled", "all")


def _verify_quantized(module, args, exporter: str, level: str, **common: Any) -> dict[str, Any]:
    """Export with `exporter` and verify per op at onnxruntime's graph optimisation `level`: the
    verdict, and the quantize rows' steps (largest, elements off, of those at ties)."""
    import harness

    result: dict[str, Any] = {"exported": False, "verified": False, "max_abs_error": None, "export_s": None}
    started = time.perf_counter()
    try:
        verification = harness.verify(module, tuple(args), exporter=exporter,
                                      session_options={"graph_optimization_level": level}, **common)
    except Exception as error:  # the export (or capture) failed: the reason is the result
        result.update(export_s=round(time.perf_counter() - started, 2), error=_first_line(error))
        return result
    rows = [op for op in verification.ops if op.quant_steps is not None and op.aten.startswith(
        "quantized_decomposed.quantize")]
    failing = [op.fx_node for op in verification.ops if op.passed is False]
    result.update(
        exported=True, verified=verification.passed, export_s=round(verification.timings.get("export_s", 0.0), 2),
        max_abs_error=_max_error([verification]), quantize_rows=len(rows),
        max_steps=max((op.quant_steps.max_steps for op in rows), default=None),
        off=sum(op.quant_steps.off_by_one_or_more for op in rows), ties=sum(op.quant_steps.at_ties for op in rows),
        requantized=sum(1 for op in rows if any("requantized by the runtime" in note for note in op.notes)),
        failing=failing[:5])
    if not verification.passed:
        result["error"] = (f"failing rows: {', '.join(failing[:5])}" if failing
                           else "; ".join(v.reason for v in verification.output_verdicts if not v.passed)[:300])
    return result


SUBJECTS = {"zoo": _zoo_subject, "huggingface": _huggingface_subject, "detection": _detection_subject,
            "quantized": _quantized_subject}


def measure(entry: dict[str, str], exporters: Sequence[str] | None = None) -> dict[str, Any]:
    """One model through both exporters, or those of `exporters` (run in a worker process)."""
    import torch

    subject = SUBJECTS[entry["kind"]](entry["name"])
    module = subject["module"]
    record: dict[str, Any] = {
        **entry, "input": subject["input"], "tolerance": subject["tolerance"],
        "params": sum(p.numel() for p in module.parameters()),
    }
    if entry["kind"] == "zoo":
        record.update(_activation_stats(module, subject["traced"]))
    if entry["kind"] == "quantized":
        for exporter in EXPORTERS:
            if not exporters or exporter in exporters:
                for level in QUANTIZED_LEVELS:
                    record[f"{exporter}@{level}"] = _verify_quantized(module, subject["traced"], exporter, level,
                                                                      **subject["common"])
        record["torch"] = torch.__version__
        return record
    for exporter in DETECTION_EXPORTERS if entry["kind"] == "detection" else EXPORTERS:
        if exporters and exporter not in exporters:
            continue
        record[exporter] = _verify_both_batches(module, subject["traced"], subject["other"], exporter, **subject["common"])
    record["torch"] = torch.__version__
    return record


# -- the run -----------------------------------------------------------------------------------


def load_results(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _run_worker(entry: dict[str, str], timeout_s: int, exporters: Sequence[str] | None = None) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(entry)]
    if exporters:
        command += ["--exporters", ",".join(exporters)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        failure = f"the measurement did not finish in {timeout_s} s"
        return {**entry, "failure": failure, **{e: {"exported": False, "verified": False, "error": failure} for e in EXPORTERS}}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])[:400]
        failure = f"the worker exited with {done.returncode}: {tail}"
        return {**entry, "failure": failure, **{e: {"exported": False, "verified": False, "error": failure} for e in EXPORTERS}}
    record = json.loads(lines[-1])
    record["wall_s"] = round(time.perf_counter() - started, 1)
    return record


def model_timeout(entry: dict[str, str], timeout_s: int) -> int:
    """Seconds for one model's worker: `timeout_s` for each per-op verification it runs per
    exporter. A zoo model runs one (the other batch is outputs only); a quantized case one per
    graph optimisation level, so it gets that many times the limit (quantized mobilenet_v3 took
    1348 s for its four under load, mobilenet_v2 did not finish in 1800 s)."""
    return timeout_s * (len(QUANTIZED_LEVELS) if entry["kind"] == "quantized" else 1)


def run(patterns: Sequence[str] | None, redo: bool, timeout_s: int, exporters: Sequence[str] | None = None) -> None:
    results = load_results()
    entries = [e for e in model_list() if not patterns or any(fnmatch.fnmatchcase(e["name"], p) for p in patterns)]
    todo = [e for e in entries if redo or e["name"] not in results]
    todo.sort(key=lambda e: (e["kind"] == "detection", _parameter_count(e)))
    for index, entry in enumerate(todo, 1):
        logger.info("[%d/%d] %s", index, len(todo), entry["name"])
        record = _run_worker(entry, model_timeout(entry, timeout_s), exporters)
        results = load_results()  # merge: another run (--only) may have added models meanwhile
        if exporters:  # a run of some exporters keeps the others' results
            record = {**results.get(entry["name"], {}), **record}
        results[entry["name"]] = record
        write_text_atomic(RESULTS, json.dumps(results, indent=1, sort_keys=True) + "\n")
        write_text_atomic(OUTPUT, render(results))


# -- the document -------------------------------------------------------------------------------


def _cell(result: dict[str, Any] | None) -> str:
    if not result:
        return "- | - | - | -"
    error = result.get("max_abs_error")
    seconds = result.get("export_s")
    return " | ".join([
        "yes" if result.get("exported") else "**no**",
        "yes" if result.get("verified") else ("**no**" if result.get("exported") else "-"),
        "-" if error is None else f"{error:.2g}",
        "-" if seconds is None else f"{seconds:.1f}",
    ])


def _note(record: dict[str, Any]) -> str:
    notes = []
    for exporter in EXPORTERS:
        error = (record.get(exporter) or {}).get("error")
        if error:
            notes.append(f"{exporter}: {error}")
    return _ANSI.sub("", "; ".join(notes)).replace("|", "\\|")


def render(results: dict[str, Any]) -> str:
    """docs/COVERAGE.md from the measured results."""
    expected = model_list()
    lines = [
        "# Coverage: roundtrip and torch.onnx on the same models",
        "",
        "Generated by `python tools/gen_coverage.py` from `docs/coverage.json`; do not edit by hand.",
        "Every model is built from its case (seeded weights, calibrated BatchNorm, no all-zero",
        "heads), exported by roundtrip and by `torch.onnx.export(dynamo=True)` in the same process,",
        "and verified by `harness.verify` on onnxruntime's CPU provider against torch: *verified*",
        "means the checker passed and every output was inside the case's tolerance at the traced",
        "batch (2) AND at another batch (3; other dynamic axes such as the sequence cut to about",
        "half), with the same ONNX model. Max error is the largest |onnxruntime - torch| over every",
        "output at both batches. Export time is the exporter's own (capture + conversion). Inputs",
        "are small (see the Input column and model_zoo_cases/torchvision_extended.py). Detection",
        "models (the zoo's `detection` tier) take one image whose height and width are dynamic, and",
        "are verified at two image sizes; their outputs are matched by label and IoU, and they are",
        "also exported by the TorchScript exporter (see the last table).",
        "",
    ]
    totals = []
    for exporter in EXPORTERS:
        measured = [r for r in results.values() if exporter in r]
        exported = sum(bool(r[exporter].get("exported")) for r in measured)
        verified = sum(bool(r[exporter].get("verified")) for r in measured)
        totals.append(f"| {exporter} | {len(measured)} | {exported} | {verified} |")
    lines += ["| Exporter | Models measured | Exported | Verified |", "|---|---|---|---|", *totals, ""]
    missing = [e["name"] for e in expected if e["name"] not in results]
    if missing:
        lines += [f"Not measured yet ({len(missing)}): {', '.join(missing)}.", ""]
    lines += [
        "| Model | Family | Params | roundtrip exported | verified | max error | export s "
        "| torch.onnx exported | verified | max error | export s | Input | Notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in expected:
        record = results.get(entry["name"])
        if record is None or entry["kind"] == "quantized":
            continue
        params = record.get("params")
        lines.append(
            f"| `{entry['name']}` | {entry['family']} | {'-' if params is None else f'{params / 1e6:.1f}M'} "
            f"| {_cell(record.get('roundtrip'))} | {_cell(record.get('torch.onnx'))} "
            f"| {record.get('input', '-')} | {_note(record) or '-'} |"
        )
    lines += _detection_table(expected, results)
    lines += _quantized_table(expected, results)
    return _with_suite_section("\n".join(lines) + "\n")


def _with_suite_section(document: str) -> str:
    """`document` with the coverage suite's section (tools/run_coverage_suite.py) appended."""
    import coverage_suite
    from coverage_suite import report

    return report.splice(document, report.section(report.load(), len(coverage_suite.CASES)))


def _detection_table(expected: Sequence[dict[str, str]], results: dict[str, Any]) -> list[str]:
    """The detection models through all three exporters, side by side (measured in one run)."""
    rows = [(e, results[e["name"]]) for e in expected if e["kind"] == "detection" and e["name"] in results]
    if not rows:
        return []
    header = " | ".join(f"{e} exported | verified | max error | export s" for e in DETECTION_EXPORTERS)
    lines = [
        "", "## Detection models: roundtrip, torch.onnx (dynamo) and TorchScript", "",
        "Each detector exported by the three exporters in one process, and verified at two image",
        "sizes with the same ONNX model (outputs matched by label and IoU; an unmatched detection",
        "fails; a continuous field's atol covers twice torch's own float32 error against the module",
        "run in float64, docs/ARCHITECTURE.md \"Detections\"). roundtrip captures the data-dependent",
        "post-processing through its capture rules (exporter/capturing/rules/); what stops the others",
        "is in the notes.", "",
        f"| Model | {header} | Notes |",
        "|---|" + "---|" * (4 * len(DETECTION_EXPORTERS)) + "---|",
    ]
    for entry, record in rows:
        cells = " | ".join(_cell(record.get(e)) for e in DETECTION_EXPORTERS)
        notes = "; ".join(f"{e}: {record[e]['error']}" for e in DETECTION_EXPORTERS if (record.get(e) or {}).get("error"))
        lines.append(f"| `{entry['name']}` | {cells} | {_ANSI.sub('', notes).replace('|', chr(92) + '|') or '-'} |")
    return lines


def _quantized_table(expected: Sequence[dict[str, str]], results: dict[str, Any]) -> list[str]:
    """The quantized tier through both exporters at both graph optimisation levels."""
    rows = [(e, results[e["name"]]) for e in expected if e["kind"] == "quantized" and e["name"] in results]
    if not rows:
        return []
    lines = [
        "", "## Quantized models (PT2E): roundtrip and torch.onnx, at two optimisation levels", "",
        "Each case of the zoo's `quantized` tier (torchao 0.18 `prepare_pt2e`/`convert_pt2e`, XNNPACK",
        "symmetric int8, calibrated on seeded batches) exported by both exporters and verified per op",
        "at onnxruntime's `disabled` and `all` levels. Steps are the quantize rows' regions against",
        "their fp64 truth (docs/ARCHITECTURE.md \"Quantized ops\"): the largest distance, elements off",
        "by a step or more, how many of those at a rounding tie, and how many regions onnxruntime",
        "requantized (an integer kernel, or a bias quantized to int32). torch.onnx's nodes are joined",
        "to the FX graph through its own provenance key (`pkg.torch.onnx.fx_node`).", "",
        "| Model | exporter | level | verified | max steps | off (at ties) | requantized regions | max output error "
        "| export s | Notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry, record in rows:
        for exporter in EXPORTERS:
            for level in QUANTIZED_LEVELS:
                result = record.get(f"{exporter}@{level}")
                if result is None:
                    continue
                steps = "-" if result.get("max_steps") is None else f"{result['max_steps']:g}"
                off = "-" if result.get("off") is None else f"{result['off']} ({result.get('ties', 0)})"
                error = result.get("max_abs_error")
                note = _ANSI.sub("", result.get("error") or "").replace("|", chr(92) + "|") or "-"
                lines.append(
                    f"| `{entry['name']}` | {exporter} | {level} | "
                    f"{'yes' if result.get('verified') else ('**no**' if result.get('exported') else 'not exported')} | "
                    f"{steps} | {off} | {result.get('requantized', '-')} | "
                    f"{'-' if error is None else f'{error:.2g}'} | {result.get('export_s', '-')} | {note} |")
    return lines


def measurement_rows(results: dict[str, Any]) -> list[str]:
    """Rows for measurements._EXTENDED_ROWS: the worst ORT error of the two exporters."""
    import model_zoo_cases

    rows = []
    for name, record in sorted(results.items()):
        case = model_zoo_cases.CASES.get(name)
        if case is None or case.tier != "extended" or "activation_max" not in record:
            continue
        errors = [record[e]["max_abs_error"] for e in EXPORTERS if record.get(e, {}).get("max_abs_error") is not None]
        if not errors:
            continue
        rows.append(f'    ({name!r:<34}, {record["params"]:>10}, {record["activation_max"]:8.3g}, '
                    f'{record["activation_max"]:8.3g}, {max(errors):9.3g}, {record["output_scale"]:8.3g}),')
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="fnmatch patterns of model names, comma-separated")
    parser.add_argument("--redo", action="store_true", help="measure again models already in the results")
    parser.add_argument("--render", action="store_true", help="only rewrite docs/COVERAGE.md from the results")
    parser.add_argument("--measurements", action="store_true", help="print measured rows for the extended cases")
    parser.add_argument("--timeout", type=int, default=MODEL_TIMEOUT_S,
                        help="seconds per model and per-op verification (a quantized case runs one per level)")
    parser.add_argument("--exporters", help="measure only these exporters (comma-separated), keeping the others' results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    exporters = [e.strip() for e in options.exporters.split(",")] if options.exporters else None
    if options.worker:
        logging.getLogger().setLevel(logging.ERROR)
        sys.stdout.write(json.dumps(measure(json.loads(options.worker), exporters)) + "\n")
        return 0
    if options.measurements:
        sys.stdout.write("\n".join(measurement_rows(load_results())) + "\n")
        return 0
    if not options.render:
        patterns = [p.strip() for p in options.only.split(",")] if options.only else None
        run(patterns, options.redo, options.timeout, exporters)
    write_text_atomic(OUTPUT, render(load_results()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
