"""Build parity.json documents (plain dicts, `schema_version` 3) from verifications.

A document records how the run was made (versions, device, providers, TF32, seed, command line,
host, start and end) and one entry per case. A verified case holds its `verification`: the
Verification's `to_dict()` with every comparison kept compact (the numbers a reader judges by,
rounded to four significant digits; histograms and agreeing shapes left out), so that a full
tier report stays a few megabytes. Each per-op row adds its output `dtype`, its `headroom`
(tolerance / observed: the isolated error's inverse tolerance ratio) and the ONNX nodes of the
op that onnxruntime placed on the CPU.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

SCHEMA_VERSION = 3
READABLE_VERSIONS = (2, 3)
"""Versions a reader takes: 3 added the backend axis (row fields `backend`, `runtime_precision`,
`quant_steps`, `blame`; a verification's `backend_results`), all optional, so a version 2
document is a valid version 3 one without them."""
SOURCES = ("roundtrip run", "pytest", "roundtrip verify", "merge")
STATUSES = ("running", "complete", "interrupted")
CASE_STATUSES = ("pass", "fail", "crashed", "error")
SIGNIFICANT_DIGITS = 4
# Comparison keys every compact comparison keeps; the others are kept only when they say
# something (a disagreement, a note).
_COMPARISON_KEYS = ("max_abs", "max_rel", "normalized", "tolerance_ratio", "min_atol", "mismatch_fraction",
                    "passed")
# Against the fp64 truth and the noise floor, attribution needs the normalised error only.
_TRUTH_KEYS = ("max_abs", "normalized", "passed")
_OUTPUT_KEYS = ("name", "atol", "rtol", "shape_expected", "dtype_expected", "scale", "allowed_mismatch")
_OP_COMPARISONS = ("accumulated", "isolated", "truth", "torch_truth", "noise_floor")


def now() -> str:
    """UTC time stamp of the reports."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def number(value: Any) -> Any:
    """A float for JSON: four significant digits; infinities and NaN as strings."""
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    if not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def as_float(value: Any) -> float | None:
    """A document number back as a float ("inf" strings included); None when absent."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return float(value)


def _host() -> dict[str, Any]:
    return {"name": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


def _versions() -> dict[str, str]:
    from importlib import metadata

    from harness.runtime import versions

    found = {key: value for key, value in versions().items() if key != "machine"}
    for package in ("roundtrip", "numpy", "onnxscript"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "unknown"
    return found


def _providers() -> list[str]:
    import onnxruntime

    return list(onnxruntime.get_available_providers())


def new_document(*, source: str, device: str, exporter: str, seed: int | None, command: str,
                 tolerances: str | None = None, opset: int | None = None, shard: str | None = None,
                 tf32: bool = False) -> dict[str, Any]:
    """An empty document for a run that starts now: versions, host, providers, TF32, seed."""
    if source not in SOURCES:
        raise ValueError(f"source={source!r}; expected one of {SOURCES}")
    return {
        "schema_version": SCHEMA_VERSION, "source": source, "status": "running", "command": command,
        "device": device, "exporter": exporter, "seed": seed, "opset": opset, "shard": shard,
        "tolerances": tolerances, "tf32": tf32, "versions": _versions(), "providers": _providers(),
        "host": _host(), "started": now(), "finished": None, "cases": [], "not_run": [],
        "internal_errors": [],
    }


def finish(document: dict[str, Any], *, status: str = "complete") -> dict[str, Any]:
    """Stamp the end time and the run's status ("complete" | "interrupted"); returns `document`."""
    if status not in STATUSES[1:]:
        raise ValueError(f"status={status!r}; expected 'complete' or 'interrupted'")
    document["status"] = status
    document["finished"] = now()
    return document


def compact_comparison(comparison: Mapping[str, Any] | None, *, output: bool = False,
                       against_fp64: bool = False) -> dict[str, Any] | None:
    """The numbers of a Comparison's `to_dict()` a report is judged by. `against_fp64`: a
    comparison with the float64 truth (or the noise floor), which attribution reads by its
    normalised error alone; a dtype difference there is by design, not a finding."""
    if comparison is None:
        return None
    keys = _TRUTH_KEYS if against_fp64 else _COMPARISON_KEYS + (_OUTPUT_KEYS if output else ())
    kept = {key: number(comparison[key]) for key in keys if key in comparison}
    note = comparison.get("note") or ""
    if against_fp64 and comparison.get("dtype_match") is False:
        note = "; ".join(part for part in note.split("; ") if not part.startswith("dtype "))
    if note:
        kept["note"] = note
    if comparison.get("nonfinite_mismatch"):
        kept["nonfinite_mismatch"] = comparison["nonfinite_mismatch"]
    if comparison.get("shape_match") is False:
        kept.update(shape_match=False, shape_actual=comparison.get("shape_actual"),
                    shape_expected=comparison.get("shape_expected"))
    if comparison.get("dtype_match") is False and not against_fp64:
        kept.update(dtype_match=False, dtype_actual=comparison.get("dtype_actual"),
                    dtype_expected=comparison.get("dtype_expected"))
    return kept


def headroom(row: Mapping[str, Any]) -> Any:
    """tolerance / observed for an op row (isolated error, accumulated without one); None when
    the op was not measured."""
    measured = row.get("isolated") or row.get("accumulated")
    if not measured:
        return None
    ratio = as_float(measured.get("tolerance_ratio"))
    if ratio is None or math.isnan(ratio):
        return None
    return number(math.inf if ratio == 0 else 1.0 / ratio)


def _op_dtype(row: Mapping[str, Any]) -> str:
    if row.get("dtype"):
        return str(row["dtype"])
    for key in ("isolated", "accumulated", "truth"):
        if row.get(key) and row[key].get("dtype_expected"):
            return str(row[key]["dtype_expected"])
    return "*"


def compact_op(row: Mapping[str, Any], cpu_placed: Sequence[str] = ()) -> dict[str, Any]:
    """One per-op row of a report from an OpRecord's `to_dict()`."""
    tolerance = {key: row.get("tolerance", {}).get(key) for key in ("aten", "device", "dtype", "atol", "rtol")}
    tolerance["dtype"] = tolerance["dtype"] or "*"
    out = {
        "fx_node": row["fx_node"], "aten": row["aten"], "dtype": _op_dtype(row),
        "onnx_ops": list(row.get("onnx_ops", [])), "scope": row.get("scope", ""), "source": row.get("source", ""),
        "attribution": row.get("attribution", ""), "passed": row.get("passed"),
        "not_isolable": row.get("not_isolable", ""), "noise_bound": number(row.get("noise_bound")),
        "reduction_length": row.get("reduction_length"), "truth_scale": number(row.get("truth_scale")),
        "tolerance": tolerance,
        "cpu_placed_nodes": [n for n in row.get("onnx_nodes", []) if n in set(cpu_placed)],
        "notes": list(row.get("notes", [])),
    }
    if row.get("region"):  # an optimised node standing for several FX nodes
        out["region"] = [dict(member) for member in row["region"]]
    out["backend"] = row.get("backend", "onnxruntime")
    out["runtime_precision"] = dict(row["runtime_precision"]) if row.get("runtime_precision") else None
    steps = row.get("quant_steps")
    out["quant_steps"] = {key: value if key == "kernel" else number(value) for key, value in steps.items()} \
        if steps else None
    out["blame"] = row.get("blame", "")
    if row.get("runtime_fusion"):
        out["runtime_fusion"] = _compact_fusion(row["runtime_fusion"])
    for key in _OP_COMPARISONS:
        out[key] = compact_comparison(row.get(key), against_fp64=key in ("truth", "torch_truth", "noise_floor"))
    out["headroom"] = headroom(out)
    out["verdict"] = compact_verdict(row.get("verdict"))
    return out


def _compact_fusion(fusion: Mapping[str, Any]) -> dict[str, Any]:
    """A row's runtime fusion with its region's comparison and verdict made compact."""
    out = {key: value for key, value in fusion.items() if key not in ("isolated", "verdict")}
    if "isolated" in fusion:
        out["isolated"] = compact_comparison(fusion["isolated"], against_fp64=False)
    if "verdict" in fusion:
        out["verdict"] = compact_verdict(fusion["verdict"])
    return out


_VERDICT_KEYS = ("rule", "passed", "dtype", "output", "e_backend", "e_torch", "ratio", "factor", "floor", "allowed",
                 "tolerance_ratio", "score", "decided_by", "reason")


def compact_verdict(verdict: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A Verdict's `to_dict()` as a report keeps it: the rule, the dtype, both errors against the
    truth, their ratio, what was allowed and the row that capped or decided (atol, rtol)."""
    if not verdict:
        return None
    kept = {key: number(verdict.get(key)) for key in _VERDICT_KEYS}
    tolerance = verdict.get("tolerance") or {}
    kept["tolerance"] = {"atol": number(tolerance.get("atol")), "rtol": number(tolerance.get("rtol"))}
    return kept


def compact_verification(record: Mapping[str, Any]) -> dict[str, Any]:
    """A Verification's `to_dict()` with compact comparisons and per-op rows."""
    cpu_placed = record.get("cpu_placed_nodes", [])
    environment = {k: v for k, v in record.get("environment", {}).items() if k not in ("noise_model", "verdict_rule")}
    return {
        "model_name": record.get("model_name", ""), "exporter": record.get("exporter", ""),
        "device": record.get("device", ""), "passed": bool(record.get("passed")),
        "checker": dict(record.get("checker", {"passed": False, "message": "not run"})),
        "outputs": [compact_comparison(o, output=True) for o in record.get("outputs", [])],
        "worst_op": record.get("worst_op"),
        "ops": [compact_op(op, cpu_placed) for op in record.get("ops", [])],
        "instrumented_vs_production": [compact_comparison(c) for c in record.get("instrumented_vs_production", [])],
        "cpu_placed_nodes": list(cpu_placed), "environment": environment,
        "noise_model": record.get("environment", {}).get("noise_model"),
        "timings": {k: number(v) for k, v in record.get("timings", {}).items()},
        "notes": list(record.get("notes", [])), "op_reference": record.get("op_reference", ""),
        "verdict_rule": record.get("environment", {}).get("verdict_rule"),
        "output_verdicts": [compact_verdict(v) for v in record.get("output_verdicts", [])],
        "first_nonfinite": record.get("first_nonfinite"), "overflows": list(record.get("overflows", [])),
        "backend": record.get("backend", "onnxruntime"), "backend_settings": dict(record.get("backend_settings", {})),
        "backend_results": [compact_backend_result(result, cpu_placed) for result in record.get("backend_results", [])],
        "quantization": record.get("quantization"),
    }


def compact_backend_result(result: Mapping[str, Any], cpu_placed: Sequence[str] = ()) -> dict[str, Any]:
    """A further backend's BackendResult `to_dict()` as a report keeps it."""
    return {
        "backend": result["backend"], "passed": result.get("passed"), "skipped": result.get("skipped", ""),
        "outputs": [compact_comparison(o, output=True) for o in result.get("outputs", [])],
        "output_verdicts": [compact_verdict(v) for v in result.get("output_verdicts", [])],
        "worst_op": result.get("worst_op"), "ops": [compact_op(op, cpu_placed) for op in result.get("ops", [])],
        "settings": dict(result.get("settings", {})), "notes": list(result.get("notes", [])),
        "timings": {k: number(v) for k, v in result.get("timings", {}).items()},
    }


def _as_record(verification: Any) -> dict[str, Any]:
    return verification.to_dict() if hasattr(verification, "to_dict") else dict(verification)


def _other_size(other: Any) -> dict[str, Any]:
    record = _as_record(other)
    outputs = [compact_comparison(o, output=True) for o in record.get("outputs", [])]
    max_abs = max((as_float(o.get("max_abs")) or 0.0 for o in outputs), default=0.0)
    return {"passed": bool(record.get("passed")), "max_abs": number(max_abs), "outputs": outputs,
            "notes": list(record.get("notes", []))}


def case_from_verification(verification: Any, *, name: str, other: Any = None, seconds: float | None = None,
                           test: str | None = None, reproducer: str | Mapping[str, str] | None = None,
                           family: str | None = None, sizes: Sequence[str] | None = None,
                           origin: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A verified case: its verdict over the traced size and (when `other` is given) the other
    size, and on every further backend that ran (a skipped one does not count), the compact
    verification, and links to reproducers.

    `verification`/`other`: Verification records or their `to_dict()`. `reproducer`: one folder
    (the worst op's) or {fx_node: folder}. `sizes`: labels of the two input sizes, e.g.
    ["batch 2", "batch 3"]. `origin`: where the case came from (zoo, ONNX file, factory).
    """
    full = _as_record(verification)
    record = compact_verification(full)
    other_entry = _other_size(other) if other is not None else None
    sweep = compact_sweep(full.get("shape_sweep"))
    backends_pass = all(result["passed"] is not False for result in record["backend_results"])  # skipped: None
    passed = (record["passed"] and (other_entry is None or other_entry["passed"]) and backends_pass
              and (sweep is None or sweep["passed"]))
    if isinstance(reproducer, str):
        reproducers = {record["worst_op"] or "model": reproducer}
    else:
        reproducers = dict(reproducer or {})
    return {
        "name": name, "status": "pass" if passed else "fail", "test": test,
        "seconds": number(seconds) if seconds is not None else None, "family": family,
        "sizes": list(sizes) if sizes else ["traced", "other"], "origin": dict(origin) if origin else None,
        "verification": record, "other": other_entry, "reproducers": reproducers, "shape_sweep": sweep,
    }


def compact_sweep(sweep: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A ShapeSweep's `to_dict()` as a report keeps it: its numbers at four significant digits."""
    if not sweep:
        return None
    def compact(sizes: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{**size, **{key: number(size.get(key)) for key in ("max_abs", "worst_ratio", "seconds")}}
                for size in sizes]

    others = {name: compact(sizes) for name, sizes in sweep.get("other_backends", {}).items()}
    return {**sweep, "sizes": compact(sweep.get("sizes", [])), "other_backends": others,
            "timings": {k: number(v) for k, v in sweep.get("timings", {}).items()}}


def crashed_case(name: str, *, reason: str, exit_code: int | None = None, signal: str | None = None,
                 log_tail: list[str] | None = None, test: str | None = None,
                 seconds: float | None = None, log: str | None = None) -> dict[str, Any]:
    """A case whose worker died: its exit code or signal and the last lines it logged."""
    return {
        "name": name, "status": "crashed", "test": test, "seconds": number(seconds) if seconds is not None else None,
        "crash": {"reason": reason, "exit_code": exit_code, "signal": signal, "log_tail": list(log_tail or []),
                  "log": log},
    }


def error_case(name: str, *, error: str, test: str | None = None, internal: bool = False,
               seconds: float | None = None) -> dict[str, Any]:
    """A case that could not be verified: an export refused, a backend unavailable (`internal`
    False), or a fault of the harness itself (`internal` True: the run exits 3)."""
    return {"name": name, "status": "error", "test": test, "seconds": number(seconds) if seconds is not None else None,
            "error": error, "internal": internal}
