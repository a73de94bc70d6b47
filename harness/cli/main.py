"""`roundtrip` command line: `roundtrip run` verifies the model zoo and writes a report."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from harness.exporters import EXPORTERS
from harness.runtime import BackendUnavailableError, cuda_unavailable_reason


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roundtrip", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="export and verify the model zoo cases, per op")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device to verify on (default cpu)")
    run.add_argument("--tier", choices=("smoke", "full"), default="smoke",
                     help="smoke: one small case per family (default); full: every case")
    run.add_argument("--cases", default=None, metavar="PATTERN",
                     help="fnmatch pattern or comma-separated case names (overrides --tier)")
    run.add_argument("--exporter", choices=EXPORTERS, default="roundtrip")
    run.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    run.add_argument("--no-per-op", action="store_true", help="compare final outputs only")
    run.add_argument("--out", default="reports/latest.json",
                     help="JSON report path; a Markdown summary is written beside it (default reports/latest.json)")
    run.add_argument("-v", "--verbose", action="store_true", help="log progress")

    tolerances = commands.add_parser("tolerances", help="show the per-op tolerance table, or calibrate it")
    tolerances.add_argument("--table", default=None, help="table to read (default: the one shipped)")
    tolerances.add_argument("--calibrate", nargs="+", metavar="REPORT", default=None,
                            help="rewrite the table from the isolated errors in these run reports")
    tolerances.add_argument("--margin", type=float, default=4.0, help="calibration margin (default 4x)")
    tolerances.add_argument("--out", default=None, help="where to write the calibrated table (default: --table,"
                            " or the shipped table)")
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(options, "verbose", False) else logging.WARNING, format="%(message)s")
    if options.command == "run":
        return run(options)
    if options.command == "tolerances":
        return tolerances(options)
    return 2


def tolerances(options: argparse.Namespace) -> int:
    from harness.metrics import tolerances as tolerance_tables

    table = tolerance_tables.load(options.table)
    if options.calibrate:
        from exporter.fileio import write_text_atomic
        from harness.metrics.calibration import calibrate

        reports = []
        for path in options.calibrate:
            try:
                with open(path) as handle:
                    reports.append((path, json.load(handle)))
            except (OSError, json.JSONDecodeError) as error:
                print(f"roundtrip tolerances: cannot read report {path}: {error}", file=sys.stderr)
                return 2
        table = calibrate(table, reports, margin=options.margin)
        out = options.out or options.table or tolerance_tables.shipped_path()
        write_text_atomic(out, json.dumps(table.to_dict(), indent=1) + "\n")
        print(f"wrote {len(table.rows)} rows to {out}")
    print(f"{'aten':<48} {'device':<6} {'atol':>9} {'rtol':>9}  source")
    for row in table.to_dict()["rows"]:
        print(f"{row['aten']:<48} {row['device']:<6} {row['atol']:>9.3g} {row['rtol']:>9.3g}  {row['source']}")
    return 0


def run(options: argparse.Namespace) -> int:
    reason = cuda_unavailable_reason() if options.device == "cuda" else None
    if reason:
        print(f"roundtrip run --device cuda: CUDA cannot be used here: {reason}", file=sys.stderr)
        return 2
    import model_zoo_cases
    from harness.report.summary import case_line, markdown

    try:
        cases = model_zoo_cases.select(tier=None if options.cases else options.tier, pattern=options.cases)
    except KeyError as error:
        print(f"roundtrip run: {error}", file=sys.stderr)
        return 2
    if not cases:
        print(f"roundtrip run: no case matches {options.cases!r}; see model_zoo_cases.CASES", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    environment: dict[str, Any] = {}
    for case in cases:
        result = verify_case(case, options)
        results.append(result)
        record = result.get("verification")
        if record is None:
            print(f"ERROR {case.name:<28} {result['error']}")
            continue
        environment = record.get("environment", environment)
        print(case_line(case.name, record))
        if result.get("other_batch") is not None:
            other = result["other_batch"]
            print(f"      {'':<28} batch {other['batch']}: {'pass' if other['passed'] else 'FAIL'} "
                  f"max_out_err={other['max_abs']:.3g}")
    report = {
        "schema_version": 1,
        "device": options.device,
        "exporter": options.exporter,
        "seed": options.seed,
        "command": "roundtrip " + " ".join(sys.argv[1:]),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": environment,
        "cases": results,
    }
    from exporter.fileio import write_text_atomic

    write_text_atomic(options.out, json.dumps(report, indent=1))
    md_path = options.out.removesuffix(".json") + ".md"
    write_text_atomic(md_path, markdown(report))
    passed = sum(1 for r in results if r.get("passed"))
    print(f"{passed}/{len(results)} cases passed; report: {options.out} and {md_path}")
    return 0 if passed == len(results) else 1


def verify_case(case: Any, options: argparse.Namespace) -> dict[str, Any]:
    """Verify one zoo case at its traced batch, then the same ONNX model at another batch."""
    from exporter.errors import ExportError
    from harness.verification import verify

    started = time.perf_counter()
    common = dict(
        device=options.device, exporter=options.exporter,
        dynamic_axes={k: v for k, v in case.dynamic_axes.items() if k in case.input_names},
        input_names=case.input_names, output_atol=case.atol, output_rtol=case.rtol,
        allowed_mismatch=case.allowed_mismatch_fraction, model_name=case.name,
    )
    try:
        module = case.module(options.seed)
        verification = verify(module, case.inputs(options.seed), per_op=not options.no_per_op, **common)
        onnx_model = verification.onnx_model
        other = verify(module, case.other_inputs(options.seed + 1), per_op=False,
                       onnx_model=onnx_model, **{**common, "exporter": "roundtrip"})
    except (ExportError, BackendUnavailableError, RuntimeError, ValueError) as error:
        return {"name": case.name, "passed": False, "error": f"{type(error).__name__}: {error}".splitlines()[0],
                "seconds": time.perf_counter() - started}
    record = verification.to_dict()
    return {
        "name": case.name,
        "family": case.family,
        "passed": verification.passed and other.passed,
        "seconds": time.perf_counter() - started,
        "verification": record,
        "other_batch": {
            "batch": case.other_batch, "passed": other.passed, "max_abs": other.max_output_error,
            "outputs": [c.to_dict() for c in other.outputs],
        },
    }


if __name__ == "__main__":
    sys.exit(main())
