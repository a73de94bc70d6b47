"""Backends that run ONNX models, with the seed's `prepare(model, device).run(inputs)` usage.

`device` is "CPU", "CUDA" or "CUDA:<n>" (onnxruntime), or "reference" (onnx's
ReferenceEvaluator). A CUDA request runs on CUDA or raises `BackendUnavailableError` with the
reason: it never falls back to the CPU quietly.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

logger = logging.getLogger(__name__)


class BackendUnavailableError(RuntimeError):
    """The requested backend or device cannot run here; the message says why."""


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # "cpu" | "cuda" | "reference"
    index: int = 0

    @classmethod
    def parse(cls, device: str) -> DeviceSpec:
        text = device.strip().lower()
        if text in ("cpu", "reference"):
            return cls(text)
        if text == "cuda" or text.startswith("cuda:"):
            index = int(text.split(":", 1)[1]) if ":" in text else 0
            return cls("cuda", index)
        raise ValueError(f"unknown device {device!r}; use 'CPU', 'CUDA', 'CUDA:<n>' or 'reference'")

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.index}" if self.kind == "cuda" else "cpu"


def cuda_unavailable_reason() -> str | None:
    """Why onnxruntime's CUDA provider cannot be used here, or None when it can."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return (
            f"onnxruntime {ort.__version__} has no CUDAExecutionProvider "
            f"(available: {', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
        )
    try:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA GPU is visible (torch.cuda.is_available() is False)"
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return None


@dataclass
class BackendRep:
    """A prepared model: `run(inputs)` returns the outputs as numpy arrays."""

    model: onnx.ModelProto
    device: DeviceSpec
    session: Any
    input_names: list[str]
    output_names: list[str]
    providers: list[str] = field(default_factory=list)

    def run(self, inputs: Any) -> list[np.ndarray]:
        """Run on one array, a tuple/list of arrays (in input order), or a {name: array} dict."""
        feeds = self._feeds(inputs)
        if self.device.kind == "reference":
            return [np.asarray(o) for o in self.session.run(None, feeds)]
        return self.session.run(None, feeds)

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            return {k: _as_array(v) for k, v in inputs.items()}
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        if len(inputs) != len(self.input_names):
            raise ValueError(
                f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(inputs)}"
            )
        return {name: _as_array(v) for name, v in zip(self.input_names, inputs)}


def _as_array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(value)


def prepare(model: onnx.ModelProto | str | os.PathLike, device: str = "CPU", **options: Any) -> BackendRep:
    """Load `model` for `device`. Options: `profile=True` records node placement,
    `graph_optimization_level` (an onnxruntime GraphOptimizationLevel),
    `intra_op_num_threads`, `tf32` (CUDA: allow TF32 math; default False)."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(os.fspath(model))
    spec = DeviceSpec.parse(device)
    inputs = _real_inputs(model)
    outputs = [o.name for o in model.graph.output]
    if spec.kind == "reference":
        from onnx.reference import ReferenceEvaluator

        return BackendRep(model, spec, ReferenceEvaluator(model), inputs, outputs, ["reference"])
    return _prepare_onnxruntime(model, spec, inputs, outputs, **options)


def _real_inputs(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def session_options(profile: bool = False, graph_optimization_level: Any = None,
                    intra_op_num_threads: int | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if graph_optimization_level is not None:
        options.graph_optimization_level = graph_optimization_level
    if intra_op_num_threads:
        options.intra_op_num_threads = intra_op_num_threads
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="roundtrip-prof-"), "ort")
    return options


def _prepare_onnxruntime(model, spec: DeviceSpec, inputs, outputs, *, tf32: bool = False,
                         profile: bool = False, **options: Any) -> BackendRep:
    import onnxruntime as ort

    sess_options = session_options(profile=profile, **options)
    if spec.kind == "cuda":
        reason = cuda_unavailable_reason()
        if reason:
            raise BackendUnavailableError(f"CUDA was requested but cannot be used: {reason}")
        providers: list[Any] = [
            ("CUDAExecutionProvider", {"device_id": spec.index, "use_tf32": int(tf32)}),
            "CPUExecutionProvider",
        ]
    else:
        providers = ["CPUExecutionProvider"]
    try:
        session = ort.InferenceSession(model.SerializeToString(), sess_options, providers=providers)
    except Exception as error:
        raise BackendUnavailableError(
            f"onnxruntime could not load the model on {spec.kind.upper()}: {error}"
        ) from error
    active = session.get_providers()
    if spec.kind == "cuda" and (not active or active[0] != "CUDAExecutionProvider"):
        raise BackendUnavailableError(
            f"CUDA was requested but onnxruntime loaded only {active}: the CUDA provider failed to "
            "initialise (check the CUDA 13 / cuDNN libraries that onnxruntime-gpu 1.31 needs)"
        )
    return BackendRep(model, spec, session, inputs, outputs, list(active))


def node_placement(rep: BackendRep, inputs: Any) -> dict[str, str]:
    """Run once with profiling and return {node name: execution provider} as onnxruntime placed it.

    The rep must have been prepared with `profile=True`.
    """
    rep.run(inputs)
    path = rep.session.end_profiling()
    try:
        with open(path) as handle:
            events = json.load(handle)
    finally:
        os.unlink(path)
    placement: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") == "Node" and "provider" in args:
            name = event.get("name", "").removesuffix("_kernel_time")
            placement[name] = args["provider"]
    return placement


def cpu_placed_nodes(placement: Mapping[str, str]) -> list[str]:
    """Nodes a CUDA session ran on the CPU provider."""
    return sorted(name for name, provider in placement.items() if provider == "CPUExecutionProvider")
