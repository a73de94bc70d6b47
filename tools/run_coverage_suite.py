"""Run roundtrip's coverage suite (coverage_suite/): every case exported by roundtrip and by
torch.onnx (dynamo) and verified by the harness, in worker processes, one family batch at a
time. A case that crashes its worker or outlives `--timeout` is recorded as such and the batch
goes on in a fresh worker. Results go to docs/coverage_suite.json after every case, so a run
resumes where it stopped (cases measured with every requested exporter are skipped unless
--redo); docs/COVERAGE.md's suite section is rewritten at the end.

    python tools/run_coverage_suite.py                         # everything missing
    python tools/run_coverage_suite.py --family conv,pool      # some families
    python tools/run_coverage_suite.py --only 'unary.*'        # fnmatch patterns
    python tools/run_coverage_suite.py --exporters roundtrip   # one exporter
    python tools/run_coverage_suite.py --render                # only rewrite the docs section
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from coverage_suite.measure import CRASH, TIMEOUT, failed  # noqa: E402
from coverage_suite.report import COVERAGE_DOC, RESULTS, load, splice_into  # noqa: E402
from exporter.contract.fileio import write_text_atomic  # noqa: E402

EXPORTERS = ("roundtrip", "torch.onnx")
CASE_TIMEOUT_S = 120
BATCH_SIZE = 25
STARTUP_S = 180  # a worker's imports, on a loaded machine, before its first case starts
SUITE = "coverage_suite"

logger = logging.getLogger("run_coverage_suite")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def worker(names: Sequence[str], exporters: Sequence[str], per_op: bool, cases_module: str = SUITE) -> None:
    """Measure `names` (cases of the module `cases_module`'s CASES) in this process, one JSON line
    per event on stdout: {"start": name} before a case, {"case": name, "results": {...}} after it."""
    import importlib

    import torch

    import exporter.api  # noqa: F401  (the exporter and the harness load on first use: import them before the
    import harness.verification  # noqa: F401  first case's clock starts, within STARTUP_S)
    from coverage_suite.measure import measure

    torch.set_num_threads(1)
    cases = importlib.import_module(cases_module).CASES
    for name in names:
        case = cases[name]
        sys.stdout.write(json.dumps({"start": name}) + "\n")
        sys.stdout.flush()
        results = {exporter: measure(case, exporter, per_op=per_op) for exporter in exporters}
        sys.stdout.write(json.dumps({"case": name, "results": results}) + "\n")
        sys.stdout.flush()


def run_batch(names: Sequence[str], exporters: Sequence[str], *, timeout_s: float, per_op: bool,
              on_result, cases_module: str = SUITE) -> None:
    """Measure `names` in worker processes: a worker that crashes or stalls on a case longer
    than `timeout_s` is killed, the case recorded as a crash or timeout, and a fresh worker takes
    the rest. `on_result(name, results)` gets each case's results as they come."""
    pending = list(names)
    while pending:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--cases-module", cases_module,
                   "--exporters", ",".join(exporters), *(["--no-per-op"] if not per_op else [])]
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, cwd=ROOT, env=env)
        process.stdin.write(json.dumps(pending))
        process.stdin.close()
        current, reason = _drain(process, pending, timeout_s, on_result)
        if current is None:
            break
        pending.remove(current)
        logger.warning("%s: %s", current, reason)
        on_result(current, {e: failed(TIMEOUT if reason.startswith("no result") else CRASH, reason) for e in exporters})


def _drain(process: subprocess.Popen, pending: list[str], timeout_s: float, on_result) -> tuple[str | None, str]:
    """Read the worker's results until it ends; the case it died or stalled on and why (None when done)."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    current, deadline = None, time.monotonic() + max(timeout_s, STARTUP_S)  # importing torch comes first
    while True:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            process.kill()
            process.wait()
            return current, f"no result in {timeout_s:g} s; the worker was stopped"
        line = process.stdout.readline()
        if not line:
            process.wait()
            tail = " ".join(process.stderr.read().strip().splitlines()[-2:])[:300]
            if current is None:
                return (pending[0] if pending else None), f"the worker exited with {process.returncode}: {tail}"
            return current, f"the worker exited with {process.returncode} during the case: {tail}"
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if "start" in event:
            current, deadline = event["start"], time.monotonic() + timeout_s
        elif "case" in event:
            pending.remove(event["case"])
            on_result(event["case"], event["results"])
            current = None
            if not pending:
                process.wait()
                return None, ""


def run(cases, exporters: Sequence[str], *, redo: bool = False, timeout_s: float = CASE_TIMEOUT_S,
        batch_size: int = BATCH_SIZE, per_op: bool = True, path: Path = RESULTS, cases_module: str = SUITE) -> dict[str, Any]:
    """Measure `cases` (coverage_suite.Case), family by family, into the results file at `path`."""
    results = load(path)
    todo = [c for c in cases if redo or any(e not in results["cases"].get(c.name, {}) for e in exporters)]
    results["run"].update(started=results["run"].get("started") or _now(), commit=_commit(),
                          exporters=sorted(set(results["run"].get("exporters", [])) | set(exporters)),
                          per_op=per_op, torch=_torch_version())
    by_family: dict[str, list[Any]] = {}
    for case in todo:
        by_family.setdefault(case.family, []).append(case)
    done = 0

    def on_result(name: str, measured: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        case = next(c for c in todo if c.name == name)
        record = results["cases"].setdefault(name, {})
        record.update(case.to_dict(), **measured)
        results["run"]["updated"] = _now()
        write_text_atomic(path, json.dumps(results, indent=1, sort_keys=True) + "\n")
        logger.info("[%d/%d] %s: %s", done, len(todo), name,
                    ", ".join(f"{e} {'ok' if r['verified'] else r['failure']}" for e, r in measured.items()))

    for batch in _interleaved_batches(by_family, batch_size):
        run_batch([c.name for c in batch], exporters, timeout_s=timeout_s, per_op=per_op, on_result=on_result,
                  cases_module=cases_module)
    return results


def _interleaved_batches(by_family: dict[str, list[Any]], batch_size: int) -> list[list[Any]]:
    """Each family's cases in batches, the families taken in turn: a run stopped early has
    measured some of every family, not all of the first few."""
    queues = {family: [members[i:i + batch_size] for i in range(0, len(members), batch_size)]
              for family, members in by_family.items()}
    batches = []
    while any(queues.values()):
        for family in list(queues):
            if queues[family]:
                batches.append(queues[family].pop(0))
    return batches


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _torch_version() -> str:
    import torch

    return torch.__version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="fnmatch patterns of case names, comma-separated")
    parser.add_argument("--family", help="families, comma-separated")
    parser.add_argument("--exporters", default=",".join(EXPORTERS), help="comma-separated (default: both)")
    parser.add_argument("--redo", action="store_true", help="measure cases already in the results again")
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT_S, help="seconds per case")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="cases per worker process")
    parser.add_argument("--no-per-op", action="store_true", help="verify outputs only (no per-op analysis)")
    parser.add_argument("--render", action="store_true", help="only rewrite docs/COVERAGE.md's suite section")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cases-module", default=SUITE, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    exporters = [e for e in options.exporters.split(",") if e]
    unknown = [e for e in exporters if e not in EXPORTERS]
    if unknown:
        parser.error(f"unknown exporters {unknown}; choose from {list(EXPORTERS)}")
    if options.worker:
        worker(json.loads(sys.stdin.read()), exporters, not options.no_per_op, options.cases_module)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not options.render:
        import coverage_suite

        cases = coverage_suite.select(options.only.split(",") if options.only else None,
                                      options.family.split(",") if options.family else None)
        run(cases, exporters, redo=options.redo, timeout_s=options.timeout, batch_size=options.batch_size,
            per_op=not options.no_per_op, path=options.results)
    if options.results == RESULTS:
        splice_into(COVERAGE_DOC, load(RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
