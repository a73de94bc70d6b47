"""onnxruntime sessions with the seed's `prepare(model, device).run(inputs)` usage.

`device` is "CPU", "CUDA" or "CUDA:<n>" (onnxruntime), or "reference" (onnx's
ReferenceEvaluator). A CUDA request runs on CUDA or raises `BackendUnavailableError` with the
reason: it never falls back to the CPU quietly.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from harness.metrics.arrays import contiguous
from harness.runtime.backends.base import PreparedModel
from harness.runtime.backends.precision import RuntimeFusion, RuntimeGraph
from harness.runtime.devices import (
    GPU_PROVIDERS, DeviceSpec, cuda_preload_report, load_cuda_libraries, require_cuda, require_provider,
)
from harness.runtime.errors import (
    BackendRunError, BackendUnavailableError, ModelLoadError, load_failure, onnxruntime_errors,
)
from harness.runtime.model_files import load_model_file
from harness.runtime.ort_config import OrtConfig
from harness.runtime.ortvalues import fed_as, from_ortvalue, needs_ortvalues, to_ortvalue, type_string
from harness.runtime.shared_weights import SharedWeights


@dataclass
class BackendRep(PreparedModel):
    """A model prepared on onnxruntime (or onnx's ReferenceEvaluator): `run(inputs)` returns
    the outputs as numpy arrays; `prepare_options` are what `prepare()` was given, so that
    `variant()` prepares another model (an isolated or instrumented one) the same way."""

    model: onnx.ModelProto
    device: DeviceSpec
    session: Any
    input_names: list[str]
    output_names: list[str]
    providers: list[str] = field(default_factory=list)
    value_types: dict[str, str] = field(default_factory=dict)  # graph input/output -> "tensor(bfloat16)"
    prepare_options: dict[str, Any] = field(default_factory=dict, repr=False)

    def variant(self, model: onnx.ModelProto) -> BackendRep:
        options = {k: v for k, v in self.prepare_options.items()
                   if k not in ("serialized", "profile", "optimized_model_path")}
        return prepare(model, self.device.backend_device, **options)

    def runtime_graph(self) -> RuntimeGraph:
        """The optimised graph this session wrote as it loaded, when prepared with an
        `optimized_model_path` (its weights not read back); else empty."""
        path = self.prepare_options.get("optimized_model_path")
        if self.device.kind == "reference" or not path or not os.path.exists(path):
            return RuntimeGraph()
        return RuntimeGraph(optimised=onnx.load(path, load_external_data=False))

    def runtime_fusions(self) -> list[RuntimeFusion]:
        """onnxruntime's own fusions: the graph its optimisers made (saved through
        `optimized_model_filepath`), each node that stands for more than one ONNX node, or
        replaced one by another operator, with the ONNX nodes it covers."""
        if self.device.kind == "reference":
            return []
        from harness.runtime.backends.fusions import onnxruntime_fusions

        return onnxruntime_fusions(self, prepare)

    def run(self, inputs: Any) -> list[np.ndarray]:
        """Run on one array, a tuple/list of arrays (in input order), or a {name: array} dict.
        bfloat16 and float8 values travel as ml_dtypes arrays (runtime.ortvalues); a float32
        array fed to a bfloat16 input is taken when bfloat16 holds its values exactly."""
        feeds = {name: fed_as(v, self.value_types.get(name), name) for name, v in self._feeds(inputs).items()}
        if self.device.kind == "reference":
            try:
                return [np.asarray(o) for o in self.session.run(None, feeds)]
            except Exception as error:  # noqa: BLE001 - the evaluator's kernels raise any type
                raise BackendRunError(f"onnx's ReferenceEvaluator failed to run the model: {error}") from error
        try:
            if needs_ortvalues(feeds, list(self.value_types.values())):
                return self._run_ortvalues(feeds)
            return self.session.run(None, feeds)
        except onnxruntime_errors() as error:
            raise BackendRunError(f"onnxruntime failed to run the model: {load_failure(error, self.model)}") from error

    def _run_ortvalues(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The run with inputs and outputs as OrtValues, the outputs bound to the CPU."""
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_ortvalue_input(name, to_ortvalue(array))
        for name in self.output_names:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        return [from_ortvalue(value) for value in binding.get_outputs()]

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            return {k: contiguous(v) for k, v in inputs.items()}
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        if len(inputs) != len(self.input_names):
            raise ValueError(
                f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(inputs)}"
            )
        return {name: contiguous(v) for name, v in zip(self.input_names, inputs)}


def prepare(model: onnx.ModelProto | str | os.PathLike, device: str = "CPU", **options: Any) -> BackendRep:
    """Load `model` for `device`. Options: `profile=True` records node placement,
    `graph_optimization_level` (an onnxruntime GraphOptimizationLevel),
    `intra_op_num_threads`, `tf32` (CUDA: allow TF32 math; default False),
    `shared_weights` (a SharedWeights whose stubs `model` carries; onnxruntime only),
    `serialized` (`model` already serialised, to skip doing it again), `spinning`,
    `ort_config` (an OrtConfig: the user's session settings; default onnxruntime's),
    `cuda_mem_limit` (bytes; caps the CUDA arena, default: `set_cuda_mem_limit`'s),
    `execution_provider` (an onnxruntime provider name that must run the model first, e.g.
    "TensorrtExecutionProvider"; the CPU provider takes what it does not),
    `optimized_model_path` (onnxruntime writes its optimised graph there)."""
    given = dict(options)
    if not isinstance(model, onnx.ModelProto):
        model = load_model_file(model)  # ModelFileError naming the path for a bad file
    spec = DeviceSpec.parse(device)
    inputs = real_inputs(model)
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
        return BackendRep(model, spec, evaluator, inputs, outputs, ["reference"], declared_types(model), given)
    rep = _prepare_onnxruntime(model, spec, inputs, outputs, **options)
    rep.prepare_options = given
    return rep


def declared_types(model: onnx.ModelProto) -> dict[str, str]:
    """The graph's inputs and outputs with their tensor types as onnxruntime spells them."""
    return {
        value.name: type_string(value.type.tensor_type.elem_type)
        for value in (*model.graph.input, *model.graph.output) if value.type.tensor_type.elem_type
    }


def real_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that are not initializers: what a run must feed."""
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def session_options(profile: bool = False, graph_optimization_level: Any = None,
                    intra_op_num_threads: int | None = None, spinning: bool = True, prepacking: bool = True,
                    ort_config: OrtConfig | None = None, optimized_model_path: str | None = None,
                    arena: bool = True):
    """onnxruntime SessionOptions: `ort_config`'s settings (onnxruntime's defaults without one),
    then the arguments. `spinning=False` makes idle intra-op and inter-op threads sleep instead
    of spin (no effect on results; it helps on a CPU shared with other work).
    `intra_op_num_threads` fills a thread count the configuration leaves open.
    `prepacking=False` keeps matrix-product weights as they are instead of adding a packed copy
    of each (the last bits of a product may differ: not what users deploy). `arena=False` turns
    onnxruntime's CPU memory arena off unless the configuration sets it (no effect on results)."""
    options = (ort_config or OrtConfig()).session_options(threads=intra_op_num_threads, spinning=spinning,
                                                          arena=arena)
    if not prepacking:
        options.add_session_config_entry("session.disable_prepacking", "1")
    if graph_optimization_level is not None:
        options.graph_optimization_level = graph_optimization_level
    if optimized_model_path:
        options.optimized_model_filepath = optimized_model_path
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="roundtrip-prof-"), "ort")
    return options


def harness_session_options(ort_config: OrtConfig | None = None) -> dict[str, Any]:
    """`prepare()` options for the sessions a verification creates: `ort_config` (onnxruntime's
    defaults without one: what users deploy), and what cannot change a result. torch and
    onnxruntime take turns (a session runs, returns and is released before torch computes
    again), so a session gets as many intra-op threads as torch uses unless the configuration
    says otherwise, and its threads sleep when idle: a spinning onnxruntime pool, or one larger
    than the cores, steals the cores torch's OpenMP threads wait on at every barrier, which
    slows torch several-fold on a busy machine. The CPU memory arena is off unless the
    configuration sets it: every numpy array a session returns from its arena keeps the whole
    arena (the high-water mark of every intermediate of that run) alive for as long as the array
    lives, after the session is gone, and the verification keeps some outputs (the values that
    cross a segment's cut, a failing op's reproducer) while the next sessions run; measured on
    Faster R-CNN at 800 px, each kept array pinned hundreds of MB. Without the arena each output
    is its own allocation, freed with the array. Prepacking stays on (onnxruntime's default): it
    changes the last bits of matrix products; its packed weight copies exist one session at a
    time (bench/bench_memory.py measures the peak)."""
    import torch

    return {"spinning": False, "arena": False, "intra_op_num_threads": max(1, torch.get_num_threads()),
            "ort_config": ort_config or OrtConfig()}


def session_record(ort_config: OrtConfig | None = None) -> dict[str, Any]:
    """What a report records of the verification's sessions: the configuration verified, and
    the settings the harness added (which do not change a result)."""
    options = harness_session_options(ort_config)
    config = options.pop("ort_config")
    return {**config.to_dict(), "harness": options}


_cuda_mem_limit: int | None = None


def set_cuda_mem_limit(limit_bytes: int | None) -> None:
    """Cap onnxruntime's CUDA arena (the provider's `gpu_mem_limit`) for every CUDA session this
    process creates from now on; None removes the cap. The pytest plugin sets it per xdist
    worker when several share a GPU."""
    global _cuda_mem_limit
    _cuda_mem_limit = limit_bytes


def cuda_provider_options(device_id: int, tf32: bool, mem_limit: int | None = None) -> dict[str, Any]:
    """The CUDAExecutionProvider's options: device, TF32, and the arena cap (`mem_limit`, else
    `set_cuda_mem_limit`'s; none when both are None)."""
    options: dict[str, Any] = {"device_id": device_id, "use_tf32": int(tf32)}
    limit = mem_limit or _cuda_mem_limit
    if limit:
        options["gpu_mem_limit"] = int(limit)
    return options


WEIGHT_CONSUMERS = frozenset({
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Gather", "LSTM", "GRU", "RNN", "BatchNormalization",
    "LayerNormalization", "InstanceNormalization", "GroupNormalization", "Einsum",
})
"""Operators whose weight inputs onnxruntime's optimisers only read (into new initializers)."""


def in_place_safe(model: onnx.ModelProto, used: Mapping[str, Any]) -> list[str]:
    """The shared initializers a CPU session may take in place (`add_initializer`): those only
    WEIGHT_CONSUMERS read. onnxruntime applies such an initializer after its graph optimisers
    ran, and its transpose optimiser rewrites a constant under the same name when it moves a
    Transpose across an element-wise op (ConvNeXt's layer scale, (C, 1, 1) times an NHWC
    block): the original array would then replace the rewritten one, and the Mul fails to
    broadcast. The others load from the session file's data, where the optimisers may rewrite
    them (they are small: scales, biases, masks)."""
    consumers: dict[str, set[str]] = {}
    for node in model.graph.node:
        subgraph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        for name in node.input:
            consumers.setdefault(name, set()).add("<subgraph>" if subgraph else node.op_type)
    return [name for name in used if consumers.get(name) and consumers[name] <= WEIGHT_CONSUMERS]


def _prepare_onnxruntime(model, spec: DeviceSpec, inputs, outputs, *, tf32: bool = False,
                         profile: bool = False, shared_weights: SharedWeights | None = None,
                         serialized: bytes | None = None, cuda_mem_limit: int | None = None,
                         ort_config: OrtConfig | None = None, execution_provider: str | None = None,
                         **options: Any) -> BackendRep:
    import onnxruntime as ort

    config = ort_config or OrtConfig()
    sess_options = session_options(profile=profile, ort_config=config, **options)
    source: Any = serialized
    if shared_weights is not None:
        used = shared_weights.used_by(model)
        if used and spec.kind == "cpu":  # used in place (see runtime.shared_weights)
            for name, value in shared_weights.ortvalues(in_place_safe(model, used)).items():
                sess_options.add_initializer(name, value)
            source = shared_weights.session_file(model)
        elif used:  # copied to the device while the session loads
            values = shared_weights.ortvalues(list(used))
            sess_options.add_external_initializers(list(values), list(values.values()))
    if spec.kind == "cuda":
        require_cuda()
        providers: list[Any] = [
            ("CUDAExecutionProvider", config.provider_options_for(
                "CUDAExecutionProvider", cuda_provider_options(spec.index, tf32, cuda_mem_limit))),
            ("CPUExecutionProvider", config.provider_options_for("CPUExecutionProvider", {})),
        ]
    else:
        providers = [("CPUExecutionProvider", config.provider_options_for("CPUExecutionProvider", {}))]
    if execution_provider and execution_provider != providers[0][0]:
        require_provider(execution_provider)
        providers.insert(0, (execution_provider, config.provider_options_for(execution_provider, {})))
    if spec.kind == "cuda" or execution_provider in GPU_PROVIDERS:
        load_cuda_libraries()
    try:
        session = ort.InferenceSession(source or model.SerializeToString(), sess_options, providers=providers)
    except onnxruntime_errors() as error:
        raise ModelLoadError(
            f"onnxruntime could not load the model on {spec.kind.upper()}: {load_failure(error, model)}"
        ) from error
    finally:
        if isinstance(source, str):
            os.unlink(source)  # onnxruntime has read it
    active = session.get_providers()
    if execution_provider and (not active or active[0] != execution_provider):
        preload = cuda_preload_report() if execution_provider in GPU_PROVIDERS else ""
        raise BackendUnavailableError(f"{execution_provider} was requested but onnxruntime loaded only {active}: "
                                      "the provider failed to initialise"
                                      + (f" (loading the CUDA libraries said: {preload})" if preload else ""))
    if spec.kind == "cuda" and (not active or active[0] != "CUDAExecutionProvider"):
        preload = cuda_preload_report()
        raise BackendUnavailableError(
            f"CUDA was requested but onnxruntime loaded only {active}: the CUDA provider failed to "
            "initialise (check the CUDA 13 / cuDNN libraries that onnxruntime-gpu 1.31 needs"
            + (f"; loading them said: {preload}" if preload else "") + ")"
        )
    types = {arg.name: arg.type for arg in (*session.get_inputs(), *session.get_outputs())}  # inferred too
    return BackendRep(model, spec, session, inputs, outputs, list(active), types)
