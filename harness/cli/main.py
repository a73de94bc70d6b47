"""`roundtrip`: verify the model zoo or your own models and write parity reports.

  run         verify zoo cases, each in its own worker process, and write a report directory
  verify      the same for ONNX files or `package.module:factory` functions
  diff        regressions between two reports
  merge       merge shard reports into one
  tolerances  show the per-op tolerance table, or calibrate one from reports

Exit codes: 0 all pass; 1 a divergence, crash or regression; 2 a usage error (one line on
stderr); 3 an internal error (the report is still written); 128+N when stopped by signal N.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import traceback
from typing import NoReturn

from harness.cli.errors import EXIT_INTERNAL, EXIT_USAGE, UsageError
DEFAULT_OUT = os.path.join("reports", "latest")


# harness.exporters.EXPORTERS, spelled out so that diff, merge and tolerances start without
# importing torch (tests/test_cli.py checks the two agree).
EXPORTERS = ("roundtrip", "torch.onnx", "torchscript")
# harness.runtime.OPTIMIZATION_LEVELS and model_zoo_cases.TIERS, spelled out for the same reason.
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
TIERS = ("smoke", "full", "extended", "detection", "quantized")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (raised, not printed with the usage)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device to verify on (default cpu)")
    parser.add_argument("--exporter", choices=EXPORTERS, default="roundtrip")
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset to export at (default: the exporter's)")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    parser.add_argument("--no-per-op", action="store_true", help="compare final outputs only")
    parser.add_argument("--no-optimize", action="store_true",
                        help="verify roundtrip's one-node-per-op export (export(optimize=False)), not the optimised one")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"report directory: parity.json, parity.md, index.html (default {DEFAULT_OUT})")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="cases verified at once, each in its own process (default: the number of cores)")
    parser.add_argument("--baseline", default=None, metavar="PATH",
                        help="a report (directory or parity.json) to diff against; regressions fail the run")
    parser.add_argument("--tolerances", default=None, metavar="PATH", help="per-op tolerance table (default: shipped)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default=None,
                        help="cast each model and its float inputs to this dtype before exporting "
                             "(default: as built; zoo cases are float32)")
    parser.add_argument("--ort-config", default=None, metavar="FILE",
                        help="onnxruntime session settings to verify, a JSON object (graph_optimization_level, "
                             "intra_op_num_threads, config_entries, provider_options, custom_ops_libraries, ...); "
                             "default: onnxruntime's own")
    parser.add_argument("--graph-optimization-level", choices=OPTIMIZATION_LEVELS, default=None,
                        help="onnxruntime's graph optimisation level (overrides --ort-config's; default all)")
    parser.add_argument("--shapes", type=int, default=None, metavar="N",
                        help="verify each ONNX model at N sizes of its dynamic axes (the traced size first, then the "
                             "most informative: primes, non-square, the ranges' bounds, both sides of each guard), "
                             "instead of the one other size; zoo cases also make their image sides dynamic")
    parser.add_argument("--backend", action="append", default=None, metavar="SPEC", dest="backends",
                        help="a backend to verify on, repeatable: onnxruntime[:provider=cpu|cuda|tensorrt|openvino,"
                             "level=disabled|basic|extended|all], openvino[:precision=f32|bf16|f16,"
                             "mode=accuracy|performance], onnx.reference; the first decides each case's rows, every "
                             "one is judged against the same fp64 truth (default: onnxruntime)")
    parser.add_argument("--model-explorer", action="store_true",
                        help="also write each case's graphs and per-op node data for Google's Model Explorer "
                             "(REPORT/model_explorer/; index.html links each failing op to its node on both graphs)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="the long form of each case's line (checker, both sizes, worst op's region and truth "
                             "errors, allowance, scope, source), and log what the CLI does")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="roundtrip", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="verify model zoo cases, per op, and write a report directory")
    run.add_argument("--tier", choices=TIERS, default="smoke",
                     help="smoke: one small case per family (default); full: the 2018 zoo; extended: full plus "
                          "every other torchvision model at small inputs (nightly); detection: extended plus "
                          "torchvision's 12 detectors")
    run.add_argument("--cases", default=None, metavar="PATTERN",
                     help="fnmatch pattern or comma-separated case names (overrides --tier)")
    run.add_argument("--shard", default=None, metavar="K/N",
                     help="run the K-th of N deterministic, cost-balanced slices of the selected cases")
    run.add_argument("--costs", default=None, metavar="REPORT",
                     help="balance --shard by the seconds each case took in this report (default: parameter counts)")
    _add_run_options(run)

    verify = commands.add_parser("verify", help="verify ONNX files or package.module:factory models")
    verify.add_argument("targets", nargs="+", metavar="TARGET",
                        help="model.onnx, or package.module:factory (a function returning (module, args))")
    verify.add_argument("--inputs", default=None, metavar="NPZ", help="inputs of the ONNX file, by input name")
    verify.add_argument("--expected", default=None, metavar="NPZ",
                        help="expected outputs of the ONNX file (default: onnx's reference evaluator)")
    _add_run_options(verify)

    diff = commands.add_parser("diff", help="regressions of NEW against BASE (report directories or JSON files)")
    diff.add_argument("base")
    diff.add_argument("new")
    diff.add_argument("--out", default=None,
                      help="where to write diff.json and diff.md (default: NEW's report directory)")
    diff.add_argument("--factor", type=float, default=None,
                      help="isolated-error growth that counts as a regression (default: the shipped threshold)")

    merge = commands.add_parser("merge", help="merge shard reports into one report directory")
    merge.add_argument("reports", nargs="+", metavar="DIR")
    merge.add_argument("--out", required=True, help="report directory to write")
    merge.add_argument("--allow-mixed", action="store_true",
                       help="merge reports made with different library versions, devices or exporters")
    merge.add_argument("--baseline", default=None, metavar="PATH", help="a report to diff the merged one against")

    tolerances = commands.add_parser("tolerances", help="show the per-op tolerance table, or calibrate it")
    tolerances.add_argument("--table", default=None, help="table to read (default: the one shipped)")
    tolerances.add_argument("--calibrate", nargs="+", metavar="REPORT", default=None,
                            help="learn rows from the passing, fp64-attributed-to-noise ops of these reports")
    tolerances.add_argument("--margin", type=float, default=None,
                            help="calibration margin (default: the table's own, 4x in the shipped one)")
    tolerances.add_argument("--allow-loosen", action="store_true",
                            help="let calibration loosen a row past the table's cap")
    tolerances.add_argument("--out", default=None, help="where to write the calibrated table (required with "
                            "--calibrate; never inside the installed harness package)")
    return parser


def command_line(argv: list[str]) -> str:
    return "roundtrip " + " ".join(shlex.quote(arg) for arg in argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and not argv[0].startswith("-") else ""
    try:
        options = _parser().parse_args(argv)
        logging.basicConfig(level=logging.INFO if getattr(options, "verbose", False) else logging.WARNING,
                            format="%(message)s")
        from harness.cli import commands

        return commands.dispatch(options, command_line(argv))
    except UsageError as error:
        print(f"roundtrip {command}: {error}".replace("  ", " ", 1), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"roundtrip {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a fault of the harness: one line, the traceback with -v
        if "-v" in argv or "--verbose" in argv:
            traceback.print_exc()
        print(f"roundtrip {command}: internal error: {type(error).__name__}: {error}".splitlines()[0]
              + ("" if "-v" in argv else " (-v shows the traceback)"), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
