"""The detection tier at non-square sizes, roundtrip beside the TorchScript exporter, in one run.

Every detector of the zoo's `detection` tier is exported once per exporter on its traced
(square) image, then the same ONNX model is verified with onnxruntime (CPU) against the module
run eagerly at the traced size and at each of the case's other sizes (non-square, with
internal sizes other than the traced one: model_zoo_cases.detection.OTHER_SIZES), outputs
matched by label and IoU. Per model, exporter and size: the verdict, the max error and why a
size failed (onnxruntime's message names the node that stopped it); for roundtrip also the
initializers the export found size-dependent (exporter.optimize.baked_sizes), with their FX
nodes. Each model runs in its own process, one at a time; results go to
docs/detection_sizes.json after every model (a rerun skips models already measured unless
--redo) and the table to stdout (`--render`).

    python tools/detection_sizes.py                      # every detector
    python tools/detection_sizes.py --only 'fasterrcnn_*'
    python tools/detection_sizes.py --render             # the Markdown table from the JSON
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exporter.contract.fileio import write_text_atomic  # noqa: E402

RESULTS = ROOT / "docs" / "detection_sizes.json"
EXPORTERS = ("roundtrip", "torchscript")
MODEL_TIMEOUT_S = 3600


def measure(name: str) -> dict[str, Any]:
    """One detector through both exporters at its traced size and its other sizes."""
    import model_zoo_cases
    from exporter.contract.keys import BAKED_SIZES_KEY

    case = model_zoo_cases.get(name)
    module = case.module(0)
    sizes = [("traced", case.inputs(0))] + [(f"{s['height']}x{s['width']}", case.inputs_at(s, 1))
                                            for s in case.other_sizes]
    traced_shape = tuple(sizes[0][1][0].shape[-2:])
    record: dict[str, Any] = {"name": name, "traced": f"{traced_shape[0]}x{traced_shape[1]}",
                              "sizes": [label for label, _ in sizes[1:]], "description": case.description}
    for exporter in EXPORTERS:
        result: dict[str, Any] = {"sizes": {}}
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exported = _export(exporter, module, sizes[0][1], case)
        except Exception as error:  # the export failed: the reason is the result
            result.update(exported=False, error=_first_line(error), export_s=round(time.perf_counter() - started, 1))
            record[exporter] = result
            continue
        result.update(exported=True, export_s=round(time.perf_counter() - started, 1))
        if exporter == "roundtrip":
            entry = {p.key: p.value for p in exported.model.metadata_props}.get(BAKED_SIZES_KEY)
            result["baked"] = [f"{b['initializer']} {b['shape']} ({b['fx_node']}, {b['source']})"
                               for b in json.loads(entry)] if entry else []
        for label, args in sizes:
            result["sizes"][label] = _verify(exported, module, args, case, first=label == "traced")
        result["verified"] = all(r["passed"] for r in result["sizes"].values())
        record[exporter] = result
    return record


def _export(exporter: str, module: Any, args: tuple[Any, ...], case: Any) -> Any:
    from harness.exporters import export_for_verification

    axes = {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}
    return export_for_verification(exporter, module, tuple(args), dynamic_axes=axes,
                                   input_names=list(case.input_names))


def _verify(exported: Any, module: Any, args: tuple[Any, ...], case: Any, first: bool) -> dict[str, Any]:
    from harness.exporters import ExportedForVerification
    from harness.verification import verify_exported

    subject = exported if first else ExportedForVerification(exported.model, None, exported.exporter,
                                                              weights=exported.weights)
    try:
        verification = verify_exported(subject, tuple(args), module=module, per_op=False, output_atol=case.atol,
                                       output_rtol=case.rtol, model_name=case.name)
    except Exception as error:
        return {"passed": False, "error": _first_line(error)}
    failing = [c for c in verification.outputs if not c.passed]
    return {
        "passed": bool(verification.passed),
        "max_abs": max((float(c.max_abs) for c in verification.outputs if c.max_abs is not None), default=None),
        "error": "" if verification.passed else _first_line_text(
            "; ".join([*(f"{c.name}: {c.note}" for c in failing[:2]), *verification.notes[:2]])
            or verification.checker.message),
    }


def _first_line(error: BaseException) -> str:
    return _first_line_text(f"{type(error).__name__}: {error}")


def _first_line_text(text: str) -> str:
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " ".join(text.split())[:400]


def run(patterns: list[str] | None, redo: bool) -> None:
    import model_zoo_cases

    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    names = [c.name for c in model_zoo_cases.select(tier="detection")
             if not patterns or any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    for name in names:
        if name in results and not redo:
            continue
        started = time.perf_counter()
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=MODEL_TIMEOUT_S, cwd=ROOT)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            record = json.loads(lines[-1]) if done.returncode == 0 and lines else {
                "name": name, "failure": f"the worker exited with {done.returncode}: "
                                         + _first_line_text(" ".join(done.stderr.strip().splitlines()[-3:]))}
        except subprocess.TimeoutExpired:
            record = {"name": name, "failure": f"the measurement did not finish in {MODEL_TIMEOUT_S} s"}
        record["wall_s"] = round(time.perf_counter() - started, 1)
        results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        results[name] = record
        write_text_atomic(RESULTS, json.dumps(results, indent=1, sort_keys=True) + "\n")
        sys.stderr.write(f"{name}: {_summary(record)}\n")


def _summary(record: dict[str, Any]) -> str:
    if "failure" in record:
        return record["failure"]
    return ", ".join(f"{e} {'verified' if record[e].get('verified') else 'FAILED'}" for e in EXPORTERS if e in record)


def render(results: dict[str, Any]) -> str:
    """The Markdown table: one row per model and size, both exporters' verdicts side by side."""
    lines = ["| Model | Size | roundtrip | TorchScript | export s (roundtrip / TorchScript) | What stops roundtrip |",
             "|---|---|---|---|---|---|"]
    for name, record in results.items():
        if "failure" in record:
            lines.append(f"| {name} | - | not measured | not measured | - | {record['failure']} |")
            continue
        for label in ["traced", *record["sizes"]]:
            size = record["traced"] + " (traced)" if label == "traced" else label
            cells = []
            for exporter in EXPORTERS:
                result = record.get(exporter) or {}
                if not result.get("exported"):
                    cells.append("export failed")
                    continue
                at = result["sizes"].get(label, {})
                cells.append(("pass" if at.get("passed") else "**fail**")
                             + (f" ({at['max_abs']:.2g})" if at.get("max_abs") is not None else ""))
            ours = record.get("roundtrip") or {}
            why = ours.get("error") or ours.get("sizes", {}).get(label, {}).get("error", "")
            seconds = " / ".join(f"{(record.get(e) or {}).get('export_s', '-')}" for e in EXPORTERS) if label == "traced" else ""
            lines.append(f"| {name} | {size} | {cells[0]} | {cells[1]} | {seconds} | {why.replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="fnmatch patterns, comma-separated")
    parser.add_argument("--redo", action="store_true", help="measure models already in the JSON again")
    parser.add_argument("--render", action="store_true", help="print the table from the JSON only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        sys.stdout.write(json.dumps(measure(options.worker)) + "\n")
        return 0
    if not options.render:
        run(options.only.split(",") if options.only else None, options.redo)
    sys.stdout.write(render(json.loads(RESULTS.read_text()) if RESULTS.exists() else {}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
