"""Run model variants on the device under test: the production run and the analysis runner.

`run_production` runs the model as given and reports a model the backend refuses or fails to
run as a finding (a note), never as an exception; on CUDA it also reads back which nodes
onnxruntime placed on the CPU, and on every backend the precision each node ran at. `model_runner`
loads and runs the variants the per-op analysis builds (the instrumented model, the isolation
batch), and with `inspect` also returns what the backend made of one (its optimised graph or
runtime layers) from the same load. Both run on onnxruntime by default, or on any `backend`
(harness.runtime.backends): every backend's `prepare` takes the same options and uses those it
knows.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from harness.runtime.backends.base import Backend
from harness.runtime.backends.precision import DECLARED, RuntimeFusion, RuntimeGraph, RuntimePrecision, is_lower
from harness.runtime.devices import DeviceSpec
from harness.runtime.errors import BackendRunError, ModelLoadError, first_line
from harness.runtime.memory import release_freed_memory
from harness.runtime.ort_config import OrtConfig
from harness.runtime.ortvalues import widened
from harness.runtime.placement import cpu_placed_nodes, node_placement
from harness.runtime.sessions import harness_session_options, prepare
from harness.runtime.shared_weights import SharedWeights

ModelRunner = Callable[[onnx.ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]
"""Run a model on feeds and return {output name: array}; raises one of errors.BACKEND_ERRORS when
the backend cannot load or run it, and lets any other error (the harness's own) through."""


@dataclass
class ProductionRun:
    """The production run's outputs (None when the backend could not run the model) and findings."""

    outputs: list[np.ndarray] | None
    providers: list[str] = field(default_factory=list)
    cpu_placed_nodes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runtime_precisions: dict[str, RuntimePrecision] = field(default_factory=dict)  # ONNX node -> as it ran
    hints: dict[str, str] = field(default_factory=dict)  # the precision settings the backend reports
    runtime_fusions: list[RuntimeFusion] = field(default_factory=list)  # layers standing for several ONNX nodes

    def lowest_precision(self) -> str | None:
        """The lowest floating precision any node ran at (None: every node as declared)."""
        floating = [p.precision for p in self.runtime_precisions.values() if p.source != DECLARED
                    and p.precision in ("float64", "float32", "float16", "bfloat16")]
        lowest = None
        for precision in floating:
            if lowest is None or is_lower(precision, lowest):
                lowest = precision
        return lowest


def run_production(model: onnx.ModelProto, spec: DeviceSpec, feeds: dict[str, np.ndarray], *,
                   tf32: bool, shared: SharedWeights | None = None,
                   ort_config: OrtConfig | None = None, backend: Backend | None = None) -> ProductionRun:
    """Run `model` as given on the device under test.

    With `shared` the session gets the weight arrays directly instead of parsing them out of the
    serialised model (the same graph and the same bytes, and loading is several times faster).
    The session runs with `ort_config` (onnxruntime's defaults without one): what users deploy.
    The session is released, and its memory returned, before this returns.
    """
    loaded = shared.stubbed(model) if shared is not None else model
    try:
        rep = _prepare(backend, loaded, spec, tf32=tf32, profile=spec.kind == "cuda", shared_weights=shared,
                       **_session_options(spec, ort_config))
    except ModelLoadError as error:
        return ProductionRun(None, notes=[f"the backend refused the model: {first_line(error)}"])
    run = ProductionRun(None, providers=list(getattr(rep, "providers", [])))
    try:
        try:
            run.outputs = [widened(output) for output in rep.run(feeds)]  # bfloat16 compared as float32
        except BackendRunError as error:  # onnxruntime's (or the reference's) own error, nothing else
            run.notes.append(f"the backend failed to run the model: {first_line(error)}")
            return run
        if backend is not None and not backend.RUNS_DECLARED:  # else every node runs what the model declares
            run.runtime_precisions = rep.runtime_precisions()
            run.hints = rep.hints() if hasattr(rep, "hints") else {}
        if backend is not None and backend.judges_fusions():
            run.runtime_fusions = list(rep.runtime_fusions())
        if spec.kind == "cuda" and hasattr(rep, "session"):
            run.cpu_placed_nodes = cpu_placed_nodes(node_placement(rep))
            if run.cpu_placed_nodes:
                run.notes.append(
                    f"onnxruntime ran {len(run.cpu_placed_nodes)} node(s) on the CPU inside the CUDA session; "
                    "see cpu_placed_nodes"
                )
        return run
    finally:
        del rep  # the session goes before torch or the next session runs
        release_freed_memory()


@dataclass(frozen=True)
class BackendRunner:
    """A ModelRunner: loads a model variant on the device under test and runs it once, with the
    production run's session configuration (so that its values are the production run's), on
    `backend` (onnxruntime by default). `inspect` also returns what the backend made of the
    model (its RuntimeGraph), from the same load."""

    spec: DeviceSpec
    tf32: bool
    shared: SharedWeights | None
    ort_config: OrtConfig | None = None
    backend: Backend | None = None

    def __call__(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._run(model, feeds, {})[0]

    def inspect(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RuntimeGraph]:
        """The outputs by name and the backend's RuntimeGraph of `model`, from one load
        (onnxruntime writes its optimised graph to a scratch file as it loads)."""
        with tempfile.TemporaryDirectory(prefix="roundtrip-runtime-graph-") as folder:
            return self._run(model, feeds, {"optimized_model_path": os.path.join(folder, "optimised.onnx")},
                             inspect=True)

    def _run(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], extra: dict[str, Any], *,
             inspect: bool = False) -> tuple[dict[str, np.ndarray], RuntimeGraph]:
        rep = _prepare(self.backend, model, self.spec, tf32=self.tf32, shared_weights=self.shared,
                       **_session_options(self.spec, self.ort_config), **extra)
        try:
            values = dict(zip(rep.output_names, (widened(output) for output in rep.run(feeds))))
            return values, rep.runtime_graph() if inspect else RuntimeGraph()
        finally:
            del rep  # the session goes before torch or the next session runs
            release_freed_memory()


def model_runner(spec: DeviceSpec, tf32: bool, shared: SharedWeights | None,
                 ort_config: OrtConfig | None = None, backend: Backend | None = None) -> BackendRunner:
    """The BackendRunner (a ModelRunner) of `backend` (onnxruntime by default) on `spec`."""
    return BackendRunner(spec, tf32, shared, ort_config, backend)


def _prepare(backend: Backend | None, model: onnx.ModelProto, spec: DeviceSpec, **options: Any) -> Any:
    """`model` prepared on `backend` (the seed's onnxruntime `prepare` when None)."""
    if backend is None:
        return prepare(model, spec.backend_device, **options)
    return backend.prepare(model, spec.backend_device, **options)


def _session_options(spec: DeviceSpec, ort_config: OrtConfig | None) -> dict[str, Any]:
    """Session options of the verification's sessions (none for the reference evaluator)."""
    return {} if spec.kind == "reference" else harness_session_options(ort_config)
