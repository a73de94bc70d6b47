"""Who is wrong at an op, across backends: the export, one runtime, or a runtime's precision.

Every backend's rows for one model were judged against the same torch values and fp64 truth.
For one op (one FX node, or one ONNX node without an FX mapping):

* `export`: every backend that judged it fails it: they all disagree with torch there, so the
  ONNX model itself computes something else;
* `runtime`: this backend fails it while another passes it: the model is right, this runtime
  computes it wrongly;
* `runtime-precision` (set while judging): the backend ran the op below its declared precision,
  and only that lower precision's rule lets it pass.

With one backend there is no one to compare with: only `runtime-precision` can be said.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.rows import BLAME_EXPORT, BLAME_RUNTIME, OpRecord


def assign_blame(row_sets: Sequence[Sequence[OpRecord]]) -> None:
    """Set `blame` on the failing rows of each backend's rows (`row_sets`, one per backend that
    ran), by the op's name; rows already blamed on a runtime's precision keep that."""
    if len(row_sets) < 2:
        return
    by_op: dict[str, list[OpRecord]] = {}
    for rows in row_sets:
        for row in rows:
            by_op.setdefault(row.name, []).append(row)
    for rows in by_op.values():
        judged = [row for row in rows if row.passed is not None]
        if len(judged) < 2:
            continue
        failing = [row for row in judged if row.passed is False]
        if not failing:
            continue
        blame = BLAME_EXPORT if len(failing) == len(judged) else BLAME_RUNTIME
        others = sorted(row.backend for row in judged if row.passed)
        for row in failing:
            row.blame = blame
            if blame == BLAME_EXPORT:
                row.notes.append(f"every backend verified ({len(judged)}) fails this op: the export is wrong here")
            else:
                row.notes.append(f"{row.backend} fails this op where {', '.join(others)} pass(es) it against the "
                                 "same truth: this runtime is wrong here, not the export")
