"""The recorded sweep (docs/opinfo.json): every sample of every entry, per dtype, with the
overloads it exercised and its verdict; resumable entry by entry.

    {"entries": {key: {dtype: [[index, targets, passed, reason], ...]}}, "summary": {overload:
     {dtype: [passed, total]}}, "max_samples_of": {key: limit}, "max_samples": default, "opset", "torch"}
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from exporter.contract.fileio import write_text_atomic
from op_table.opinfo.entries import DTYPES, MAX_SAMPLES, entries_for, entry_key, registered_targets, resolve, sample_dtypes, samples_of
from op_table.opinfo.forms import DIRECT_KEY_SEPARATOR, DirectCall
from op_table.opinfo.run import OPSET, run_sample

logger = logging.getLogger(__name__)


def sweep_entry(entry: Any, claimed: set[str], limit: Callable[[str], int], call: DirectCall | None = None,
                dtypes: Sequence[torch.dtype] | None = None) -> dict[str, Any]:
    """Every sample of one entry (through `call`, a kernel form, if given) in each of its
    dtypes: {dtype: [[index, targets, passed, reason]]}. `limit(dtype name)` is the number of
    samples: the entry's first ones, or for a kernel form, the first ones that fit it."""
    results: dict[str, Any] = {}
    for dtype in sample_dtypes(entry):
        if dtypes is not None and dtype not in dtypes:
            continue
        name = str(dtype).removeprefix("torch.")
        rows, max_samples = [], limit(name)
        try:
            samples = samples_of(entry, dtype, max_samples, call)
        except Exception as error:  # OpInfo's own generator failed: logged, the dtype left out
            logger.warning("%s %s: no samples (%s)", entry_key(entry), dtype, error)
            continue
        for index, sample in enumerate(samples):
            outcome = run_sample(entry, sample, claimed, call)
            if outcome is not None:
                rows.append([index, outcome.targets, outcome.passed, outcome.reason])
                if call is not None and len(rows) >= max_samples:
                    break
        results[name] = rows
    return results


def summarize(results: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """overload -> dtype -> [passed, total], from the per-entry results."""
    summary: dict[str, dict[str, list[int]]] = {}
    for per_dtype in results.get("entries", {}).values():
        for dtype, rows in per_dtype.items():
            for _, targets, passed, _ in rows:
                for target in targets:
                    cell = summary.setdefault(target, {}).setdefault(dtype, [0, 0])
                    cell[0] += int(passed)
                    cell[1] += 1
    return summary


def load(path: Path) -> dict[str, Any]:
    """The recorded sweep at `path` (an empty one if there is none yet)."""
    return json.loads(path.read_text()) if path.exists() else {"entries": {}}


def recorded_max_samples(results: dict[str, Any], key: str, dtype: str) -> int:
    """The sample limit `key` was last swept with. For entries recorded before the limit was
    kept per entry: one past the last recorded index in `dtype` (samples after it that reach
    no claimed overload are then not counted); for a kernel form, whose limit counts the
    samples that fit it (its rows), not indices, the number of its recorded rows."""
    limit = results.get("max_samples_of", {}).get(key)
    if limit is not None:
        return int(limit)
    indices = [row[0] for row in results["entries"].get(key, {}).get(dtype, [])]
    if not indices:
        return results.get("max_samples", MAX_SAMPLES)
    return len(indices) if DIRECT_KEY_SEPARATOR in key else max(indices) + 1


def sweep(path: Path, patterns: Sequence[str] | None = None, *, max_samples: int | None = None, redo: bool = False,
          dtypes: Sequence[torch.dtype] | None = None, jobs: int = 1,
          entries: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the sweep for the entries of the registered overloads matching `patterns` (all when
    None), and among them those whose results key matches one of `entries` (fnmatch; all when
    None), saving to `path` after each entry. Each entry runs for every registered overload it
    reaches, not only the matching ones (an entry such as group_norm serves two). Entries already
    recorded run again only with `redo`, or with `dtypes` (only those dtypes, merged into the
    recorded entry). `max_samples` None keeps each recorded entry's own limit
    (`recorded_max_samples`, what tests/test_opinfo.py runs), MAX_SAMPLES for a new one. `jobs`
    processes run entries side by side; this one records them as they finish."""
    selected = {t for t in registered_targets() if not patterns or any(fnmatch.fnmatchcase(t, p) for p in patterns)}
    results = load(path)
    results.update(opset=OPSET, torch=torch.__version__)
    if not patterns and max_samples is not None:  # the default for entries without a limit of their own
        results["max_samples"] = max_samples
    dtype_names = [str(d).removeprefix("torch.") for d in dtypes] if dtypes is not None else None
    work = {}
    for key, (_, claimed) in sorted(entries_for(registered_targets()).items()):
        recorded = key in results["entries"]
        if not claimed & selected or (recorded and not redo and dtypes is None):
            continue
        if entries is not None and not any(fnmatch.fnmatchcase(key, pattern) for pattern in entries):
            continue
        limits = {str(d).removeprefix("torch."): (recorded_max_samples(results, key, str(d).removeprefix("torch."))
                                                 if max_samples is None and recorded else max_samples or MAX_SAMPLES)
                  for d in DTYPES}
        work[key] = (limits, recorded)
    for key, measured in _measured(work, dtype_names, jobs):
        limits, recorded = work[key]
        results["entries"][key] = {**results["entries"].get(key, {}), **measured}
        if dtypes is None and (max_samples is not None or not recorded):  # every dtype ran at this limit
            results.setdefault("max_samples_of", {})[key] = max_samples or MAX_SAMPLES
        results["summary"] = summarize(results)
        write_text_atomic(path, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return results


def _measured(work: dict[str, tuple[dict[str, int], bool]], dtypes: list[str] | None,
              jobs: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, the entry's results) for every entry of `work`, as they finish."""
    if jobs <= 1:
        for key, (limits, _) in work.items():
            yield key, measure_entry(key, limits, dtypes)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(measure_entry, key, limits, dtypes): key for key, (limits, _) in work.items()}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:  # an entry that raised stops the sweep now, not after every other entry has run
        pool.shutdown(wait=True, cancel_futures=True)


def measure_entry(key: str, limits: Mapping[str, int], dtypes: Sequence[str] | None = None) -> dict[str, Any]:
    """One results key's rows in each of its dtypes (`dtypes` names, or all), `limits[dtype]`
    samples each (see `sweep_entry`)."""
    entry, claimed = entries_for(registered_targets())[key]
    _, call = resolve(key)
    logger.info("%s (%s)", key, ", ".join(sorted(claimed)))
    chosen = [d for d in DTYPES if str(d).removeprefix("torch.") in dtypes] if dtypes is not None else None
    return sweep_entry(entry, claimed, lambda dtype: limits[dtype], call, chosen)
