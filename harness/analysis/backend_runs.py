"""The backends of one verification: which ones (`resolve_backends`), and the run of each
further backend beside the first (`BackendRun`): its production run, its outputs judged like the
first one's, its per-op rows, gathered into a `BackendResult`.

The first backend's results are the Verification's own (`outputs`, `ops`, `passed`), so every
reader of a one-backend verification reads what it always read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

import harness.runtime as runtime
from harness.analysis.rows import FAILS, BackendResult, OpAnalysis, OpRecord
from harness.runtime.backends import DEFAULT_BACKEND, Backend, get_backend

__all__ = ["DEFAULT_BACKEND", "BackendRun", "annotate_node_rows", "resolve_backends"]


def resolve_backends(backends: Sequence[Any] | str | None, device: str = "cpu") -> list[Backend]:
    """The Backends for `backends` (spec strings, BackendSpecs or Backends; one string alone is
    one backend; None or empty: onnxruntime). The first must be able to run on `device`: a
    verification cannot stand on a backend that is not there (BackendUnavailableError saying
    why); the others are checked when they run, and skipped by name."""
    if backends is None or (not isinstance(backends, str) and not list(backends)):
        backends = (DEFAULT_BACKEND,)
    if isinstance(backends, str) or isinstance(backends, Backend):
        backends = (backends,)
    chosen = [get_backend(backend) for backend in backends]
    names = [str(backend.spec) for backend in chosen]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"backends {repeated} given more than once")
    chosen[0].require(runtime.DeviceSpec.parse(device).backend_device)
    return chosen


@dataclass
class JudgedOutputs:
    """Where an output judge writes: the comparisons with torch and their verdicts."""

    outputs: list[Any] = field(default_factory=list)
    output_verdicts: list[Any] = field(default_factory=list)


@dataclass
class BackendRun:
    """One further backend's part of a verification, filled as the verification goes."""

    backend: Backend
    production: runtime.ProductionRun | None  # None when the backend cannot run here
    result: BackendResult

    @classmethod
    def start(cls, backend: Backend, model: onnx.ModelProto, spec: runtime.DeviceSpec, feeds: dict[str, np.ndarray],
              *, tf32: bool, shared: runtime.SharedWeights | None,
              ort_config: runtime.OrtConfig | None) -> BackendRun:
        """The production run on `backend`, or the reason it cannot run here."""
        result = BackendResult(str(backend.spec))
        reason = backend.unavailable_reason(spec.backend_device)
        if reason:
            result.skipped = reason
            result.settings = {"backend": str(backend.spec)}
            return cls(backend, None, result)
        started = time.perf_counter()
        try:
            production = runtime.run_production(model, spec, feeds, tf32=tf32, shared=shared, ort_config=ort_config,
                                                backend=backend)
        except runtime.BackendUnavailableError as error:  # a provider listed but failing to start
            result.skipped = runtime.first_line(error)
            result.settings = {"backend": str(backend.spec)}
            return cls(backend, None, result)
        result.timings["backend_s"] = time.perf_counter() - started
        result.settings = {**backend.settings(), **({"runtime": production.hints} if production.hints else {})}
        result.notes.extend(production.notes)
        return cls(backend, production, result)

    @property
    def ops(self) -> list[OpRecord]:
        return self.result.ops

    def judge(self, judge_outputs: Callable[[Any, list[np.ndarray], str | None], None]) -> None:
        """Judge this backend's outputs as the first backend's were: `judge_outputs(record,
        outputs, precision)` fills a scratch record's `outputs` and `output_verdicts`."""
        if self.production is None or self.production.outputs is None:
            return
        scratch = JudgedOutputs()
        judge_outputs(scratch, self.production.outputs, self.production.lowest_precision())
        self.result.outputs, self.result.output_verdicts = scratch.outputs, scratch.output_verdicts

    def add_analysis(self, analysis: OpAnalysis) -> None:
        """Take this backend's per-op rows, notes and timings."""
        self.result.ops = list(analysis.ops)
        self.result.notes.extend(analysis.notes)
        self.result.timings.update(analysis.timings)

    def finish(self, checker_passed: bool, expected_outputs: int) -> BackendResult:
        """The result, with its verdict: the model passes the checker, this backend ran it, and
        every output passes its verdict."""
        if self.production is None:
            return self.result
        outputs = self.production.outputs
        ran = outputs is not None and len(outputs) == expected_outputs
        verdicts = self.result.output_verdicts
        outputs_pass = (all(v.passed for v in verdicts) if len(verdicts) == len(self.result.outputs)
                        else all(c.passed for c in self.result.outputs))
        self.result.passed = checker_passed and ran and bool(self.result.outputs) and outputs_pass
        if not checker_passed:  # a failing verdict names what fails: here the model itself
            self.result.notes.append(f"{FAILS}the ONNX checker refused the model")
        if not ran:
            made = "no outputs" if outputs is None else f"{len(outputs)} outputs"
            self.result.notes.append(f"{FAILS}the backend made {made}, torch {expected_outputs}")
        return self.result


def annotate_node_rows(rows: Sequence[OpRecord], backend: str, precisions: dict[str, Any], declared_only: bool) -> None:
    """Put the backend and the runtime precision on ONNX-level rows (one row per ONNX node,
    verified against onnx's reference): the node's own precision, or its dtype for a backend
    that runs what the model declares; a node run below its dtype is named in the row's notes
    (these rows are judged by their tolerance rows, not by the precision's rule)."""
    from harness.runtime.backends import DECLARED, RuntimePrecision, is_lower

    for row in rows:
        row.backend = backend
        node = row.onnx_nodes[0] if row.onnx_nodes else row.fx_node
        precision = precisions.get(node)
        if precision is None and declared_only and row.dtype:
            precision = RuntimePrecision(row.dtype, DECLARED)
        row.runtime_precision = precision
        if precision is not None and row.dtype and is_lower(precision.precision, row.dtype):
            row.notes.append(f"{precision.describe()}, below the declared {row.dtype}")
