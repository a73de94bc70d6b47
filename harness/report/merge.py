"""Merge shard reports into one: `roundtrip merge DIR... --out DIR`.

Shards of one run share the library versions, the device, the exporter, the dtype and the seed; a merge
refuses reports that differ in any of them (a comparison across them would mislead) unless
asked to allow it, and always refuses a case that appears twice (overlapping shards).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from harness.report.document import SCHEMA_VERSION, now
from harness.report.files import ReportError

LIBRARIES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy", "roundtrip")
MUST_AGREE = ("device", "exporter", "seed", "opset", "tolerances", "tf32", "dtype", "onnxruntime_session")


def _mixed(reports: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the reports disagree on, one phrase each."""
    (first_path, first), rest = reports[0], reports[1:]
    found = []
    for path, document in rest:
        for key in MUST_AGREE:
            if document.get(key) != first.get(key):
                found.append(f"{key} {first.get(key)!r} in {first_path} but {document.get(key)!r} in {path}")
        for library in LIBRARIES:
            if document["versions"].get(library) != first["versions"].get(library):
                found.append(f"{library} {first['versions'].get(library)} in {first_path} but "
                             f"{document['versions'].get(library)} in {path}")
    return found


def _status(documents: Sequence[dict[str, Any]]) -> str:
    statuses = {d["status"] for d in documents}
    return next((s for s in ("interrupted", "running") if s in statuses), "complete")


def merge(reports: Sequence[tuple[str, dict[str, Any]]], *, allow_mixed: bool = False,
          command: str = "roundtrip merge") -> dict[str, Any]:
    """One document holding every case of the (path, document) reports, in selection order."""
    if not reports:
        raise ReportError("nothing to merge: give at least one report directory")
    mixed = _mixed(reports)
    if mixed and not allow_mixed:
        raise ReportError(f"refusing to merge reports made differently: {mixed[0]}"
                          + (f" (and {len(mixed) - 1} more)" if len(mixed) > 1 else "")
                          + "; pass --allow-mixed to merge them anyway")
    owner: dict[str, str] = {}
    cases: list[dict[str, Any]] = []
    for path, document in reports:
        for case in document["cases"]:
            if case["name"] in owner:
                raise ReportError(f"case {case['name']!r} is in both {owner[case['name']]} and {path}: "
                                  "the shards overlap")
            owner[case["name"]] = path
            cases.append(case)
    cases.sort(key=lambda c: (c.get("position") is None, c.get("position") or 0, c["name"]))
    documents = [d for _, d in reports]
    first = documents[0]
    finished = [d["finished"] for d in documents if d["finished"]]
    merged = {key: first.get(key) for key in ("device", "exporter", "seed", "opset", "tolerances", "tf32", "dtype",
                                              "versions", "providers")}
    if first.get("onnxruntime_session") is not None:
        merged["onnxruntime_session"] = first["onnxruntime_session"]
    merged.update(
        schema_version=SCHEMA_VERSION, source="merge", status=_status(documents), command=command, shard=None,
        host={"name": socket.gethostname(), "cpus": os.cpu_count()},
        started=min(d["started"] for d in documents),
        finished=max(finished) if len(finished) == len(documents) else None,
        cases=cases, not_run=sorted({n for d in documents for n in d.get("not_run", [])}),
        internal_errors=[e for d in documents for e in d.get("internal_errors", [])],
        shards=[{"path": path, "shard": d.get("shard") or "1/1", "host": d["host"], "started": d["started"],
                 "finished": d["finished"], "status": d["status"], "command": d["command"],
                 "cases": len(d["cases"])} for path, d in reports],
        mixed=mixed,
    )
    if not merged["finished"] and merged["status"] == "complete":
        merged["finished"] = now()
    return merged
