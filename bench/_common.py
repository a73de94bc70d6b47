"""What every benchmark shares: the machine it ran on, side-by-side timing, JSON results.

Each bench script records `machine_info()` at its start and the load average again at its end,
times the two sides of a comparison interleaved (ours, theirs, theirs, ours, ...) so that load
from other processes hits both alike, takes the median of the repeats, and writes its rows
with `write_results` to `bench/results/<name>.json`, from which `tools/gen_performance_doc.py`
generates docs/PERFORMANCE.md.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def machine_info() -> dict[str, Any]:
    """Cores, load, memory, thread settings and library versions of this process's machine."""
    import numpy
    import onnx
    import onnxruntime
    import torch

    try:
        import onnxscript

        onnxscript_version = onnxscript.__version__
    except ImportError:  # torch.onnx's translator; only the comparisons need it
        onnxscript_version = None
    info: dict[str, Any] = {
        "host": platform.node(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "physical_cores": _physical_cores(),
        "memory_gib": round(_meminfo("MemTotal") / 2**20, 1),
        "memory_available_gib": round(_meminfo("MemAvailable") / 2**20, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "thread_environment": {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
        "versions": {
            "python": platform.python_version(), "torch": torch.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "onnxscript": onnxscript_version, "numpy": numpy.__version__,
        },
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(local_changes()),
        "local_changes": local_changes(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    return info


def _physical_cores() -> int | None:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo; None where it is not readable."""
    try:
        with open("/proc/cpuinfo") as handle:
            text = handle.read()
    except OSError:
        return None
    cores, physical = set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "physical id":
            physical = value.strip()
        elif key.strip() == "core id":
            cores.add((physical, value.strip()))
    return len(cores) or None


def _meminfo(key: str) -> int:
    """A /proc/meminfo entry in KiB (0 where unavailable)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _git(*args: str) -> str | None:
    try:
        found = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                               cwd=os.path.dirname(RESULTS_DIR))
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() if found.returncode == 0 else None


RESULT_PATHS = ("bench/results", "docs/PERFORMANCE.md")
"""What the benchmarks themselves write: a change there does not make the measured code dirty."""


def local_changes() -> list[str]:
    """Tracked files that differ from the commit, the benchmarks' own outputs left out: a
    result is marked dirty only when the code it measured was not the commit's."""
    excluded = [f":(exclude){path}" for path in RESULT_PATHS]
    text = _git("diff", "--name-only", "HEAD", "--", ".", *excluded)
    return [line for line in (text or "").splitlines() if line.strip()]


def side_by_side(sides: Mapping[str, Callable[[], Any]], repeat: int, *,
                 loads: list[float] | None = None) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run each side `repeat` times, interleaved and alternating which goes first, with a
    garbage collection before each run. Returns the seconds of every run per side, and each
    side's last result; `loads`, when given, receives the 1-minute load average before each round."""
    names = list(sides)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, Any] = {}
    for round_index in range(repeat):
        if loads is not None:
            loads.append(round(os.getloadavg()[0], 2))
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            results.pop(name, None)  # free the previous result before measuring again
            gc.collect()
            started = time.perf_counter()
            results[name] = sides[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds, results


def banner(bench: str, machine: dict[str, Any]) -> str:
    """The first line a benchmark prints: its name, the processor, the load, torch's version."""
    import torch

    return (f"# {bench}: {machine['processor']}, {load_note({**machine, 'load_average_end': os.getloadavg()})}, "
            f"torch {torch.__version__}")


def measure_rows(names: Sequence[str], measure_one: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """`measure_one(name)` for each name, each row stamped with the seconds it took and printed
    to stderr as JSON as soon as it is done (a long run shows its progress)."""
    rows = []
    for name in names:
        started = time.perf_counter()
        rows.append(measure_one(name))
        rows[-1]["bench_seconds"] = round(time.perf_counter() - started, 1)
        print(json.dumps(rows[-1], default=_plain), file=sys.stderr, flush=True)
    return rows


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def results_path(name: str, path: str | None = None) -> str:
    return path or os.path.join(RESULTS_DIR, f"{name}.json")


def write_results(name: str, machine: dict[str, Any], rows: list[dict[str, Any]], *,
                  summary: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
                  path: str | None = None) -> str:
    """Write `{bench, machine, options, rows, summary}` as JSON (atomically); return the path."""
    from exporter.contract.fileio import write_text_atomic

    machine = dict(machine)
    machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    machine["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    document = {"bench": name, "machine": machine, "options": options or {}, "rows": rows, "summary": summary or {}}
    target = results_path(name, path)
    write_text_atomic(target, json.dumps(document, indent=1, default=_plain) + "\n")
    return target


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def load_note(machine: dict[str, Any]) -> str:
    """One line on how busy the machine was, for the printed tables."""
    start, end = machine.get("load_average"), machine.get("load_average_end", os.getloadavg())
    cores = machine.get("usable_cores")
    return (f"{cores} usable cores; load average {start[0]:.2f} at the start, {end[0]:.2f} at the end; "
            f"torch threads {machine.get('torch_threads')}")


def load_range(loads: Sequence[float]) -> str:
    """'7.1-9.4': the lowest and highest load average seen over a benchmark's rounds."""
    if not loads:
        return "-"
    low, high = min(loads), max(loads)
    return f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}"


def quiet_onnxruntime() -> None:
    """Keep onnxruntime's own warnings (a CUDA provider that cannot load, ...) out of the output."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)


MIN_REPEAT = 3
"""Interleaved rounds a side-by-side benchmark runs at least: a median of fewer is one run's luck."""


def add_round_options(parser: Any, name: str) -> None:
    """`--seed`, `--repeat` (rounds, every side once each, interleaved) and `--json`."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=MIN_REPEAT,
                        help=f"rounds, every side once each, interleaved (the medians count; at least {MIN_REPEAT})")
    parser.add_argument("--json", default=None, help=f"where to write the results (default bench/results/{name}.json)")


def start(parser: Any, argv: Sequence[str] | None, name: str, quiet: Sequence[str] = ("torch",)) -> tuple[Any, dict]:
    """Parse the options (refusing fewer than MIN_REPEAT rounds), keep onnxruntime's and the
    `quiet` loggers' warnings out of the output, record the machine and print the banner;
    returns (options, machine)."""
    import logging

    options = parser.parse_args(argv)
    if options.repeat < MIN_REPEAT:
        parser.error(f"--repeat {options.repeat}: at least {MIN_REPEAT}, or the median is one run's luck")
    quiet_onnxruntime()
    for logger in quiet:
        logging.getLogger(logger).setLevel(logging.ERROR)
    machine = machine_info()
    print(banner(name, machine))
    return options, machine
