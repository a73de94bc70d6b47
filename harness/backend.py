"""Backends that run ONNX models, with the seed's `prepare(model, device).run(inputs)` usage.

`device` is "CPU", "CUDA" or "CUDA:<n>" (onnxruntime), or "reference" (onnx's
ReferenceEvaluator). A CUDA request runs on CUDA or raises `BackendUnavailableError` with the
reason: it never falls back to the CPU quietly. Nodes onnxruntime itself assigns to the CPU
inside a CUDA session are found by profiling one run (`node_placement`).

`SharedWeights` lets several onnxruntime sessions of variants of one model (the production
model, the instrumented one, the isolation model) use the same weight arrays: the variants
carry stub initializers marked external, and the sessions receive the arrays themselves, so
the weights are neither copied into each variant nor serialised for each session.
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


class ModelLoadError(BackendUnavailableError):
    """The backend is there but refuses this model (invalid graph, unsupported op, bad types)."""


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

    @property
    def backend_device(self) -> str:
        """The `prepare()` device string for this spec."""
        return {"cuda": f"CUDA:{self.index}", "reference": "reference"}.get(self.kind, "CPU")


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
    array = np.asarray(value)
    # np.ascontiguousarray would turn a 0-d array into shape (1,); only copy when needed.
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def prepare(model: onnx.ModelProto | str | os.PathLike, device: str = "CPU", **options: Any) -> BackendRep:
    """Load `model` for `device`. Options: `profile=True` records node placement,
    `graph_optimization_level` (an onnxruntime GraphOptimizationLevel),
    `intra_op_num_threads`, `tf32` (CUDA: allow TF32 math; default False),
    `shared_weights` (a SharedWeights whose stubs `model` carries; onnxruntime only),
    `serialized` (`model` already serialised, to skip doing it again), `spinning`."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(os.fspath(model))
    spec = DeviceSpec.parse(device)
    inputs = _real_inputs(model)
    outputs = [o.name for o in model.graph.output]
    if spec.kind == "reference":
        from onnx.reference import ReferenceEvaluator

        shared = options.get("shared_weights")
        options.pop("serialized", None)
        if shared is not None:
            model = shared.restore(model)
        try:
            evaluator = ReferenceEvaluator(model)
        except Exception as error:
            raise ModelLoadError(f"onnx's ReferenceEvaluator could not load the model: {error}") from error
        return BackendRep(model, spec, evaluator, inputs, outputs, ["reference"])
    return _prepare_onnxruntime(model, spec, inputs, outputs, **options)


_STUB_LOCATION = "roundtrip-shared-weight"


@dataclass
class SharedWeights:
    """A model's large initializers as numpy arrays, handed to onnxruntime sessions directly."""

    arrays: dict[str, np.ndarray]
    protos: dict[str, onnx.TensorProto] = field(repr=False)

    @classmethod
    def of(cls, model: onnx.ModelProto, min_bytes: int = 1024) -> SharedWeights:
        """Share every initializer of at least `min_bytes` with inline data."""
        from onnx import numpy_helper

        arrays: dict[str, np.ndarray] = {}
        protos: dict[str, onnx.TensorProto] = {}
        for tensor in model.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL or not _large(tensor, min_bytes):
                continue
            try:
                arrays[tensor.name] = numpy_helper.to_array(tensor)
            except Exception:  # dtypes numpy cannot hold (e.g. float8) stay inline
                continue
            protos[tensor.name] = tensor
        return cls(arrays, protos)

    def stub(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """`tensor` itself, or a data-less stand-in marked external when it is shared."""
        if tensor.name not in self.arrays:
            return tensor
        stub = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        stub.data_location = onnx.TensorProto.EXTERNAL
        entry = stub.external_data.add()
        entry.key, entry.value = "location", _STUB_LOCATION
        return stub

    def stubbed(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A copy of `model` whose shared initializers are stubs (cheap: no weight bytes copied)."""
        return _copy_model(model, [self.stub(t) for t in model.graph.initializer])

    def restore(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A copy of `model` with the real initializers back (for backends that need them)."""
        if not any(t.name in self.protos and _is_stub(t) for t in model.graph.initializer):
            return model
        return _copy_model(model, [self.protos[t.name] if _is_stub(t) and t.name in self.protos else t
                                   for t in model.graph.initializer])

    def used_by(self, model: onnx.ModelProto) -> dict[str, np.ndarray]:
        return {t.name: self.arrays[t.name] for t in model.graph.initializer if _is_stub(t) and t.name in self.arrays}


def _large(tensor: onnx.TensorProto, min_bytes: int) -> bool:
    return tensor.ByteSize() >= min_bytes


def _is_stub(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL and any(
        e.key == "location" and e.value == _STUB_LOCATION for e in tensor.external_data
    )


def _copy_model(model: onnx.ModelProto, initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """`model` with its graph's initializers replaced, copying nothing else that is large."""
    graph = onnx.GraphProto()
    for descriptor, value in model.graph.ListFields():
        if descriptor.name != "initializer":
            _copy_field(graph, descriptor, value)
    graph.initializer.extend(initializers)
    copy = onnx.ModelProto()
    for descriptor, value in model.ListFields():
        if descriptor.name != "graph":
            _copy_field(copy, descriptor, value)
    copy.graph.CopyFrom(graph)
    return copy


def _copy_field(target: Any, descriptor: Any, value: Any) -> None:
    if descriptor.is_repeated:
        getattr(target, descriptor.name).extend(value)
    elif descriptor.type == descriptor.TYPE_MESSAGE:
        getattr(target, descriptor.name).CopyFrom(value)
    else:
        setattr(target, descriptor.name, value)


def real_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that are not initializers: what a run must feed."""
    return _real_inputs(model)


def _real_inputs(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def session_options(profile: bool = False, graph_optimization_level: Any = None,
                    intra_op_num_threads: int | None = None, spinning: bool = True):
    """onnxruntime SessionOptions. `spinning=False` makes idle intra-op threads sleep instead of
    spin (no effect on results; it helps on a CPU shared with other work)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if graph_optimization_level is not None:
        options.graph_optimization_level = graph_optimization_level
    if intra_op_num_threads:
        options.intra_op_num_threads = intra_op_num_threads
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="roundtrip-prof-"), "ort")
    return options


def _prepare_onnxruntime(model, spec: DeviceSpec, inputs, outputs, *, tf32: bool = False,
                         profile: bool = False, shared_weights: SharedWeights | None = None,
                         serialized: bytes | None = None, **options: Any) -> BackendRep:
    import onnxruntime as ort

    sess_options = session_options(profile=profile, **options)
    if shared_weights is not None:
        used = shared_weights.used_by(model)
        if used:
            sess_options.add_external_initializers(
                list(used), [ort.OrtValue.ortvalue_from_numpy(a) for a in used.values()]
            )
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
        session = ort.InferenceSession(serialized or model.SerializeToString(), sess_options, providers=providers)
    except Exception as error:
        raise ModelLoadError(
            f"onnxruntime could not load the model on {spec.kind.upper()}: {error}"
        ) from error
    active = session.get_providers()
    if spec.kind == "cuda" and (not active or active[0] != "CUDAExecutionProvider"):
        raise BackendUnavailableError(
            f"CUDA was requested but onnxruntime loaded only {active}: the CUDA provider failed to "
            "initialise (check the CUDA 13 / cuDNN libraries that onnxruntime-gpu 1.31 needs)"
        )
    return BackendRep(model, spec, session, inputs, outputs, list(active))


def node_placement(rep: BackendRep, inputs: Any = None) -> dict[str, str]:
    """{node name: execution provider} as onnxruntime placed the nodes of the optimised graph.

    The rep must have been prepared with `profile=True`. `inputs` are run once first; pass None
    when the rep has already run (the profile of those runs is read).
    """
    if rep.device.kind == "reference":
        raise ValueError("node placement is an onnxruntime notion; the reference evaluator has none")
    if not rep.session.get_session_options().enable_profiling:
        raise ValueError("node_placement needs a rep prepared with profile=True")
    if inputs is not None:
        rep.run(inputs)
    path = rep.session.end_profiling()
    try:
        with open(path) as handle:
            events = json.load(handle)
    finally:
        os.unlink(path)
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
    return parse_profile(events)


def parse_profile(events: list[dict[str, Any]]) -> dict[str, str]:
    """{node name: provider} from onnxruntime's profile events (Chrome trace format): one
    `cat == "Node"` event named `<node>_kernel_time` (also `_fence_before/_after`) per node run,
    whose args carry `provider` and `op_name`."""
    placement: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") != "Node" or "provider" not in args:
            continue
        name = event.get("name", "")
        for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
            name = name.removesuffix(suffix)
        placement[name] = args["provider"]
    return placement


def cpu_placed_nodes(placement: Mapping[str, str]) -> list[str]:
    """Nodes a CUDA session ran on the CPU provider."""
    return sorted(name for name, provider in placement.items() if provider == "CPUExecutionProvider")
