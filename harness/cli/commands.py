"""The `roundtrip` subcommands: run and verify (through the worker scheduler), diff, merge,
tolerances. Each returns an exit code; a UsageError becomes one line on stderr and code 2."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from harness.cli.errors import EXIT_FAIL, EXIT_INTERNAL, EXIT_PASS, UsageError
from harness.cli.lines import summary_lines
from harness.cli.lock import ReportLock
from harness.cli.progress import clock, make_progress
from harness.cli.scheduler import JOBS_DIR, Scheduler
from harness.cli.sources import Task, apply_costs, parse_shard, shard, target_tasks, zoo_tasks
from harness.report import diff as diffs
from harness.report.document import finish, new_document
from harness.report.files import (
    INDEX_HTML, PARITY_JSON, ReportError, dumps, load_report, read_json_text, report_json_path, write_text,
)
from harness.report.merge import merge
from harness.report.schema import case_error
from harness.report.summary import verdict_counts
from harness.report.writer import write_report_dir


def dispatch(options: argparse.Namespace, command: str) -> int:
    handler = {"run": run, "verify": verify, "diff": diff, "merge": merge_reports, "tolerances": tolerances}
    try:
        return handler[options.command](options, command)
    except ReportError as error:
        raise UsageError(str(error)) from None


# --- run / verify ------------------------------------------------------------------------------


def prepare_out(path: str, command: str) -> tuple[str, ReportLock]:
    """The report directory, made, proven writable and locked for this run before any case
    runs (a UsageError naming the holder when another run has it); the caller releases the
    lock when done."""
    out = os.path.abspath(path)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {path} is a file; give a directory (the report is {PARITY_JSON}, parity.md "
                         f"and {INDEX_HTML} inside it)")
    if not os.path.exists(out) and out.endswith(".json"):
        raise UsageError(f"--out {path}: --out names a report directory now, e.g. {path.removesuffix('.json')}")
    try:
        os.makedirs(out, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=out, prefix=".roundtrip-write-test-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UsageError(f"--out {path} cannot be written: {error.strerror or error}") from None
    lock = ReportLock(out, command).acquire()
    if lock.note():
        print(lock.note(), file=sys.stderr)
    if any(os.path.exists(os.path.join(out, name)) for name in (PARITY_JSON, f"{PARITY_JSON}.gz")):
        # a previous report: its logs, reproducers and Model Explorer files go
        for stale in ("logs", "reproducers", "model_explorer", JOBS_DIR):
            shutil.rmtree(os.path.join(out, stale), ignore_errors=True)
    return out, lock


def _check_run_options(options: argparse.Namespace) -> dict[str, Any] | None:
    """Refuse what cannot work before anything runs; returns the baseline document, if any."""
    if options.jobs is not None and options.jobs < 1:
        raise UsageError(f"-j {options.jobs}: need at least 1")
    if options.shapes is not None and options.shapes < 1:
        raise UsageError(f"--shapes {options.shapes}: need at least 1 (the traced size)")
    if options.device == "cuda":
        from harness.runtime import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason:
            raise UsageError(f"--device cuda: CUDA cannot be used here: {reason}")
    if options.tolerances:
        _load_table(options.tolerances, "--tolerances")
    if options.dtype and any(t.endswith(".onnx") for t in getattr(options, "targets", ())):
        raise UsageError(f"--dtype {options.dtype}: an ONNX file's dtype is fixed by the file; export it in that dtype")
    options.session_record = _session_record(options)
    options.backend_specs = _backend_specs(options)
    return load_report(options.baseline) if options.baseline else None


def _backend_specs(options: argparse.Namespace) -> list[str] | None:
    """The --backend specs, canonical (None: none given, onnxruntime as always); a UsageError
    for an unknown backend or option, a repeated one, or a first backend that cannot run here."""
    if not options.backends:
        return None
    from harness.runtime.backends import BackendSpecError, get_backend

    try:
        backends = [get_backend(text) for text in options.backends]
    except BackendSpecError as error:
        raise UsageError(f"--backend {error}") from None
    specs = [str(backend.spec) for backend in backends]
    if len(set(specs)) != len(specs):
        raise UsageError(f"--backend: {sorted({s for s in specs if specs.count(s) > 1})} given more than once")
    reason = backends[0].unavailable_reason("CUDA" if options.device == "cuda" else "CPU")
    if reason:
        raise UsageError(f"--backend {specs[0]}: cannot run here: {reason}")
    return specs


def _session_record(options: argparse.Namespace) -> dict[str, Any]:
    """The onnxruntime configuration the run verifies (--ort-config, --graph-optimization-level),
    as recorded; a UsageError naming the file for a bad one."""
    from harness.runtime.ort_config import OrtConfig, OrtConfigError

    try:
        config = OrtConfig.of(options.ort_config) if options.ort_config else OrtConfig()
    except OrtConfigError as error:
        raise UsageError(f"--ort-config {error}") from None
    return config.with_level(options.graph_optimization_level).to_dict()


def _load_table(path: str | None, flag: str) -> Any:
    from harness.metrics import tolerances as tables

    try:
        return tables.load(path)
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}: no such file") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{flag} {path}: {error}") from None


def run(options: argparse.Namespace, command: str) -> int:
    baseline = _check_run_options(options)
    tasks = zoo_tasks(tier=options.tier, pattern=options.cases)
    shard_text = None
    if options.shard:
        index, count = parse_shard(options.shard)
        if options.costs:
            apply_costs(tasks, {c["name"]: c.get("seconds") for c in load_report(options.costs)["cases"]})
        tasks = shard(tasks, index, count)
        shard_text = f"{index}/{count}"
    return _run_tasks(tasks, options, command, source="roundtrip run", baseline=baseline, shard_text=shard_text)


def verify(options: argparse.Namespace, command: str) -> int:
    baseline = _check_run_options(options)
    tasks = target_tasks(options.targets, inputs=options.inputs, expected=options.expected)
    return _run_tasks(tasks, options, command, source="roundtrip verify", baseline=baseline, shard_text=None)


class _Report:
    """The report directory of a run in progress, rewritten after every finished case. Each case
    is validated once, as it arrives (harness.report.schema.case_error), and each rewrite
    validates the rest of the document: validating the whole document every time took a 31-case
    run on six backends (a 44 MB report at its end) 42 s per rewrite by the end. A case that
    fails validation leaves every later rewrite to validate the whole document, which raises and
    is recorded as before."""

    def __init__(self, document: dict[str, Any], out: str, baseline: dict[str, Any] | None, baseline_path: str):
        self.document, self.out, self.baseline, self.baseline_path = document, out, baseline, baseline_path
        self._valid: set[int] = set()  # id() of each case without a case_error (held by the document)

    def add(self, case: dict[str, Any]) -> None:
        if case_error(case) is None:  # else every rewrite validates the whole document, which names it
            self._valid.add(id(case))
        self.document["cases"].append(case)
        self.document["cases"].sort(key=lambda c: c.get("position", 0))
        self.write()

    def write(self) -> None:
        try:
            write_report_dir(self.document, self.out, baseline=self.baseline, baseline_path=self.baseline_path,
                             cases_validated=all(id(case) in self._valid for case in self.document["cases"]))
        except Exception as error:  # keep the source of truth even when rendering fails
            message = f"writing the report failed: {type(error).__name__}: {error}".splitlines()[0]
            if message not in self.document["internal_errors"]:
                self.document["internal_errors"].append(message)
            write_text(os.path.join(self.out, PARITY_JSON), dumps(self.document))


def _run_tasks(tasks: list[Task], options: argparse.Namespace, command: str, *, source: str,
               baseline: dict[str, Any] | None, shard_text: str | None) -> int:
    out, lock = prepare_out(options.out, command)
    with lock:
        return _run_locked(tasks, options, command, out, source=source, baseline=baseline, shard_text=shard_text)


def _run_locked(tasks: list[Task], options: argparse.Namespace, command: str, out: str, *, source: str,
                baseline: dict[str, Any] | None, shard_text: str | None) -> int:
    jobs = options.jobs or os.cpu_count() or 1
    document = new_document(source=source, device=options.device, exporter=options.exporter, seed=options.seed,
                            command=command, tolerances=options.tolerances, opset=options.opset, shard=shard_text)
    document["jobs"] = jobs
    document["dtype"] = options.dtype  # None: each model as built (its record's environment names it)
    document["onnxruntime_session"] = options.session_record
    document["backends"] = options.backend_specs or ["onnxruntime"]
    report = _Report(document, out, baseline, options.baseline or "")
    report.write()
    worker_options = {
        "device": options.device, "exporter": options.exporter, "seed": options.seed, "per_op": not options.no_per_op,
        "optimize": not options.no_optimize,
        "tolerances": os.path.abspath(options.tolerances) if options.tolerances else None, "opset": options.opset,
        "dtype": options.dtype, "shapes": options.shapes,
        "ort_config": options.session_record, "backends": options.backend_specs,
        "model_explorer": options.model_explorer,
        "threads": max(1, (os.cpu_count() or 1) // min(jobs, max(len(tasks), 1))),
    }
    progress = make_progress(verbose=options.verbose)
    scheduler = Scheduler(tasks, options=worker_options, jobs=jobs, report_dir=out, progress=progress,
                          on_case=report.add)
    previous = {s: signal.signal(s, lambda signum, _frame: scheduler.stop(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        outcome = scheduler.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    document["not_run"] = [task.name for task in sorted(outcome.not_run, key=lambda t: t.position)]
    finish(document, status="interrupted" if outcome.signal else "complete")
    report.write()
    return _conclude(document, out, baseline, outcome.signal, time.monotonic() - started, options.baseline)


def _exit_code(document: Mapping[str, Any], regressed: bool) -> int:
    if document["internal_errors"] or any(c["status"] == "error" and c.get("internal") for c in document["cases"]):
        return EXIT_INTERNAL
    if regressed or any(c["status"] != "pass" for c in document["cases"]):
        return EXIT_FAIL
    return EXIT_PASS


def _conclude(document: dict[str, Any], out: str, baseline: dict[str, Any] | None, stopped_by: int | None,
              seconds: float | None, baseline_path: str | None) -> int:
    counts = verdict_counts(document)
    total = sum(counts.values())
    details = ", ".join(f"{n} {s}" for s, n in counts.items() if s != "pass" and n)
    took = f" in {clock(seconds)}" if seconds is not None else ""
    for line in summary_lines(document):
        print(line)
    print(f"{counts['pass']}/{total} cases passed{f' ({details})' if details else ''}{took}; "
          f"report: {os.path.join(out, INDEX_HTML)}")
    regressed = False
    if baseline is not None:
        found = diffs.diff(baseline, document, base_path=baseline_path or "", new_path=out)
        regressed = found["regressed"]
        print(f"against {baseline_path}: {len(found['regressions'])} regression(s), "
              f"{len(found['improvements'])} improvement(s)")
    for error in document["internal_errors"]:
        print(f"internal error: {error}", file=sys.stderr)
    if stopped_by is not None:
        print(f"interrupted by {signal.Signals(stopped_by).name}: {len(document['not_run'])} case(s) not run; "
              f"the report holds the {total} that finished", file=sys.stderr)
        return 128 + stopped_by
    return _exit_code(document, regressed)


# --- diff / merge ----------------------------------------------------------------------------


def diff(options: argparse.Namespace, command: str) -> int:
    del command
    base, new = load_report(options.base), load_report(options.new)
    if options.factor is not None and options.factor <= 1:
        raise UsageError(f"--factor {options.factor}: must be above 1")
    found = diffs.diff(base, new, thresholds=diffs.Thresholds.shipped(options.factor),
                       base_path=options.base, new_path=options.new)
    out = options.out or os.path.dirname(os.path.abspath(report_json_path(options.new)))
    text = diffs.markdown(found, heading="#")
    try:
        os.makedirs(out, exist_ok=True)
        write_text(os.path.join(out, "diff.json"), json.dumps(found, indent=1) + "\n")
        write_text(os.path.join(out, "diff.md"), text + "\n")
    except OSError as error:
        raise UsageError(f"--out {out} cannot be written: {error.strerror or error}") from None
    print(text)
    print(f"wrote {os.path.join(out, 'diff.json')} and diff.md")
    return EXIT_FAIL if found["regressed"] else EXIT_PASS


def merge_reports(options: argparse.Namespace, command: str) -> int:
    reports = [(path, load_report(path)) for path in options.reports]
    baseline = load_report(options.baseline) if options.baseline else None
    merged = merge(reports, allow_mixed=options.allow_mixed, command=command)
    out, lock = prepare_out(options.out, command)
    with lock:
        _copy_artifacts([path for path, _ in reports], out)
        try:  # every case comes unchanged from a report load_report validated
            write_report_dir(merged, out, baseline=baseline, baseline_path=options.baseline or "",
                             cases_validated=True)
        except Exception as error:
            merged["internal_errors"].append(f"writing the report failed: {type(error).__name__}: {error}")
            write_text(os.path.join(out, PARITY_JSON), dumps(merged))
        return _conclude(merged, out, baseline, None, None, options.baseline)


def _copy_artifacts(report_paths: list[str], out: str) -> None:
    """Bring each shard's logs, reproducers and Model Explorer files along, so the merged report's
    links resolve."""
    for path in report_paths:
        for folder in ("logs", "reproducers", "model_explorer"):
            source = os.path.join(path, folder)
            if os.path.isdir(source) and os.path.realpath(source) != os.path.realpath(os.path.join(out, folder)):
                shutil.copytree(source, os.path.join(out, folder), dirs_exist_ok=True)


# --- tolerances ------------------------------------------------------------------------------


def _inside_package(path: str) -> bool:
    import harness

    package = os.path.realpath(os.path.dirname(harness.__file__))
    target = os.path.realpath(path)
    return os.path.commonpath([package, target]) == package


def _read_run_report(path: str) -> dict[str, Any]:
    """A run report for calibration: a report directory or JSON file holding `cases`."""
    file = report_json_path(path)
    try:
        document = json.loads(read_json_text(file))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"cannot read report {path}: {getattr(error, 'strerror', None) or error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        raise UsageError(f"{path} is not a run report (no 'cases'); give a report directory or its parity.json")
    return document


def tolerances(options: argparse.Namespace, command: str) -> int:
    del command
    table = _load_table(options.table, "--table")
    if options.calibrate:
        from harness.metrics.calibration import calibrate

        if not options.out:
            raise UsageError("--calibrate needs --out PATH: calibration writes a new table, never the shipped one")
        if _inside_package(options.out):
            raise UsageError(f"--out {options.out} is inside the installed harness package; write the table "
                             "elsewhere and pass it with --tolerances")
        if options.margin is not None and options.margin < 1:
            raise UsageError(f"--margin {options.margin}: must be at least 1")
        reports = [(path, _read_run_report(path)) for path in options.calibrate]
        result = calibrate(table, reports, options.margin, allow_loosen=options.allow_loosen)
        if not result.observations:
            raise UsageError(f"nothing to learn: no passing op rows attributed to fp32 noise (both-noise) in "
                             f"{', '.join(options.calibrate)} ({result.ignored} row(s) ignored); run with per-op "
                             "analysis on")
        try:
            write_text(options.out, json.dumps(result.table.to_dict(), indent=1) + "\n")
        except OSError as error:
            raise UsageError(f"--out {options.out} cannot be written: {error.strerror or error}") from None
        table = result.table
        capped = [c for c in result.changes if c.capped]
        print(f"learned {len(result.changes)} row(s) from {result.observations} both-noise op row(s) "
              f"({result.ignored} ignored); wrote {len(table.rows)} rows to {options.out}")
        for change in capped:
            print(f"held at the cap: {change.aten} {change.device} {change.dtype} atol {change.after:g} "
                  f"(was {change.before:g}); pass --allow-loosen to go past it")
    print(f"{'aten':<44} {'device':<6} {'dtype':<8} {'atol':>9} {'rtol':>9}  source")
    for row in table.to_dict()["rows"]:
        print(f"{row['aten']:<44} {row['device']:<6} {row['dtype']:<8} {row['atol']:>9.3g} {row['rtol']:>9.3g}  "
              f"{row['source']}")
    return EXIT_PASS
