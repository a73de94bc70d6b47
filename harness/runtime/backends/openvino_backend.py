"""OpenVINO's runtime (the `openvino` package, CPU plugin) as a backend.

    openvino                                  the plugin's defaults for this CPU
    openvino:precision=f32                    INFERENCE_PRECISION_HINT f32 (also bf16, f16)
    openvino:precision=bf16,mode=accuracy     ... EXECUTION_MODE_HINT ACCURACY (or performance)

The CPU plugin may run a node below the precision the model declares: where the CPU has
bfloat16 instructions its default precision hint can be bf16, so convolutions and matrix
products run in bfloat16. `runtime_precisions()` reads what really ran from the compiled
model's runtime graph (`get_runtime_model()`: each layer's rt_info `runtimePrecision` and
`originalLayersNames`), mapped back to the ONNX nodes the layers came from; `settings()`
records the hints the compiled model reports.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from harness.metrics.arrays import contiguous
from harness.runtime.backends.base import Backend, PreparedModel, declared_precisions
from harness.runtime.backends.precision import (
    DECLARED, RUNTIME_MODEL, RuntimeFusion, RuntimeGraph, RuntimePrecision, canonical_precision, is_lower,
)
from harness.runtime.backends.registry import register_backend
from harness.runtime.backends.spec import BackendOption
from harness.runtime.errors import BackendRunError, ModelLoadError

PRECISIONS = {"f32": "f32", "fp32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16",
              "f16": "f16", "fp16": "f16", "float16": "f16"}
MODES = {"accuracy": "ACCURACY", "performance": "PERFORMANCE"}
_NOT_COMPUTING = frozenset({"Input", "Output", "Const", "Reorder"})  # layers that compute no ONNX node


@functools.cache
def _core() -> Any:
    import openvino

    return openvino.Core()


@functools.cache
def _devices() -> tuple[str, ...]:
    """The devices OpenVINO finds here (asked once a process: each query costs milliseconds,
    and a verification asks at every step that may run the backend)."""
    return tuple(_core().available_devices)


@functools.cache
def _cpu_name() -> str:
    return str(_core().get_property("CPU", "FULL_DEVICE_NAME"))


@register_backend
class OpenVinoBackend(Backend):
    """OpenVINO runtime, CPU plugin, with its precision and execution-mode hints."""

    name = "openvino"
    RUNS_DECLARED = False  # the CPU plugin's precision hint may lower it

    def judges_fusions(self) -> bool:
        """Always: the compiled model already names each layer's source operations."""
        return True
    OPTIONS = {
        "precision": BackendOption("precision", "INFERENCE_PRECISION_HINT: f32, bf16 or f16", PRECISIONS, None),
        "mode": BackendOption("mode", "EXECUTION_MODE_HINT: accuracy or performance",
                              {key: key for key in MODES}, None),
    }

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        try:
            import openvino  # noqa: F401
        except ImportError:
            return "the openvino package is not installed (pip install 'roundtrip[openvino]')"
        if device.strip().lower() != "cpu":
            return f"the harness runs OpenVINO on its CPU plugin only, not {device}"
        if "CPU" not in _devices():
            return f"OpenVINO has no CPU device here (devices: {list(_devices())})"
        return None

    def config(self) -> dict[str, str]:
        """The compile configuration this spec sets (the plugin's defaults for the rest)."""
        config = {}
        if self.option("precision"):
            config["INFERENCE_PRECISION_HINT"] = self.option("precision")
        if self.option("mode"):
            config["EXECUTION_MODE_HINT"] = MODES[self.option("mode")]
        return config

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> OpenVinoModel:
        self.require(device)
        shared = options.get("shared_weights")
        try:
            if shared is not None and shared.used_by(model):
                # the skeleton written beside the shared data file (each array written once per
                # verification), which OpenVINO maps: no weight is copied into a proto or parsed
                path = shared.session_file(model)
                try:
                    read = _core().read_model(path)
                finally:
                    os.unlink(path)
            else:
                read = _core().read_model(options.get("serialized") or model.SerializeToString(), b"")
            compiled = _core().compile_model(read, "CPU", self.config())
        except RuntimeError as error:
            raise ModelLoadError(f"OpenVINO could not load the model: {str(error).strip()[:800]}") from error
        kept = {"shared_weights": shared} if shared is not None else {}
        initializers = {t.name for t in model.graph.initializer}
        return OpenVinoModel(model, self, compiled, kept, [i.name for i in model.graph.input if i.name not in initializers],
                             [o.name for o in model.graph.output])

    def settings(self) -> dict[str, Any]:
        import openvino

        return {**super().settings(), "version": openvino.__version__, "config": self.config(),
                "device": "CPU", "cpu": _cpu_name()}


@dataclass
class OpenVinoModel(PreparedModel):
    """A model compiled by OpenVINO's CPU plugin."""

    model: onnx.ModelProto
    backend: OpenVinoBackend
    compiled: Any
    options: dict[str, Any]  # what variants are prepared with (the shared weights)
    input_names: list[str]
    output_names: list[str]
    _layers: list[dict[str, Any]] | None = field(default=None, repr=False)

    def run(self, inputs: Any) -> list[np.ndarray]:
        types = {name: port.get_element_type() for port in self.compiled.inputs for name in port.get_names()}
        # an input no node reads is gone from the compiled model (OpenVINO prunes it): not fed
        feeds = {name: _to_tensor(array, types[name]) for name, array in self._feeds(inputs).items() if name in types}
        try:
            request = self.compiled.create_infer_request()
            # the arrays are read in place, not copied into the request's tensors (they are
            # contiguous and of the input's type already): 0.2 s of CPU less on densenet121's
            # joint instrumented and isolation run, whose inputs are every op's torch values
            request.infer(feeds, share_inputs=True)
            return [_from_tensor(request.get_output_tensor(i)) for i in range(len(self.compiled.outputs))]
        except RuntimeError as error:
            raise BackendRunError(f"OpenVINO failed to run the model: {str(error).strip()[:800]}") from error

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            return {k: contiguous(v) for k, v in inputs.items() if k in self.input_names}
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        if len(inputs) != len(self.input_names):
            raise ValueError(f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(inputs)}")
        return {name: contiguous(v) for name, v in zip(self.input_names, inputs)}

    def variant(self, model: onnx.ModelProto) -> OpenVinoModel:
        return self.backend.prepare(model, "CPU", **self.options)

    def hints(self) -> dict[str, str]:
        """The precision and execution-mode hints the compiled model reports (its defaults
        filled in by the plugin for this CPU)."""
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        mode = self.compiled.get_property("EXECUTION_MODE_HINT")
        return {"precision": canonical_precision(precision), "mode": str(mode).rsplit(".", 1)[-1].lower()}

    def layers(self) -> list[dict[str, Any]]:
        """The runtime graph's computing layers: name, type, precision, and the ONNX nodes
        (by name) each one came from."""
        if self._layers is None:
            resolve = _onnx_names(self.model)
            layers = []
            for op in self.compiled.get_runtime_model().get_ordered_ops():
                info = op.get_rt_info()
                kind = info["layerType"].astype(str)
                if kind in _NOT_COMPUTING:
                    continue
                originals = [n for n in info["originalLayersNames"].astype(str).split(",") if n]
                nodes = list(dict.fromkeys(filter(None, (resolve(name) for name in originals))))
                layers.append({"layer": op.get_friendly_name(), "type": kind, "onnx_nodes": nodes,
                               "precision": canonical_precision(info["runtimePrecision"].astype(str))})
            self._layers = layers
        return self._layers

    def dynamic_quantization_group(self) -> int:
        """The CPU plugin's DYNAMIC_QUANTIZATION_GROUP_SIZE: a FullyConnected layer with int8 or
        smaller weights quantizes its float activations to int8 at run time in groups of that
        many along K (0: it computes them in float)."""
        try:
            return int(self.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE"))
        except RuntimeError:  # a plugin (or an OpenVINO release) without the property
            return 0

    def runtime_precisions(self) -> dict[str, RuntimePrecision]:
        """Each ONNX node at the lowest precision of the runtime layers it went into; a node no
        layer names (folded, or only moved data) at its declared precision."""
        declared = declared_precisions(self.model)
        found = {node: RuntimePrecision(dtype, DECLARED) for node, dtype in declared.items()}
        for layer in self.layers():
            for node in layer["onnx_nodes"]:
                current = found.get(node)
                if current is None or current.source != RUNTIME_MODEL or is_lower(layer["precision"], current.precision):
                    if layer["precision"] in ("float32", "float16", "bfloat16", "float64") or current is None:
                        found[node] = RuntimePrecision(layer["precision"], RUNTIME_MODEL)
        return found

    def runtime_graph(self) -> RuntimeGraph:
        """The compiled model's computing layers and its activation quantization group."""
        return RuntimeGraph(layers=tuple(self.layers()), dynamic_quantization_group=self.dynamic_quantization_group())

    def runtime_fusions(self) -> list[RuntimeFusion]:
        """The runtime layers that stand for more than one ONNX node."""
        return [RuntimeFusion(layer["layer"], layer["type"], tuple(layer["onnx_nodes"]), layer["precision"])
                for layer in self.layers() if len(layer["onnx_nodes"]) > 1]


def _is_bfloat16(dtype: np.dtype) -> bool:
    return dtype.name == "bfloat16"  # ml_dtypes' bfloat16, as the harness passes bfloat16 values


def _to_tensor(array: np.ndarray, element_type: Any) -> Any:
    """An input for OpenVINO in the input's own element type (the harness may hand a float32
    array to a bfloat16 input when bfloat16 holds its values exactly); a bfloat16 one as an
    OpenVINO bf16 tensor holding the bits (OpenVINO's numpy bridge has no bfloat16 type and
    would read the array by value as another type)."""
    if element_type is None or not element_type.is_static():
        return array
    if element_type.get_type_name() != "bf16":
        return contiguous(array.astype(element_type.to_dtype(), copy=False))  # a 0-d input stays 0-d
    import ml_dtypes
    import openvino

    if not _is_bfloat16(array.dtype):
        array = array.astype(ml_dtypes.bfloat16)
    tensor = openvino.Tensor(openvino.Type.bf16, list(array.shape))
    tensor.data.view(np.uint16)[...] = np.ascontiguousarray(array).view(np.uint16)
    return tensor


def _from_tensor(tensor: Any) -> np.ndarray:
    """An output as a numpy array over the output tensor's own memory, not a copy: the array
    keeps the tensor (its `base`), and so that memory, alive after the request and the compiled
    model are gone (each request runs once); copying every value of a joint instrumented and
    isolation run took 0.3 s of CPU on densenet121. bf16 as ml_dtypes' bfloat16 (a copy: OpenVINO
    hands out the bits under another 16-bit dtype)."""
    if tensor.get_element_type().get_type_name() == "bf16":
        import ml_dtypes

        return np.array(tensor.data.view(np.uint16).view(ml_dtypes.bfloat16), copy=True)
    return tensor.data


def _onnx_names(model: onnx.ModelProto) -> Any:
    """A function from an OpenVINO layer name to the ONNX node it came from (None: none).
    OpenVINO's ONNX front end names an operation after the node's output (or the node), and
    the parts it splits a node into as `<name>/<part>` (`linear/WithoutBiases`) or
    `<name>::<part>`."""
    by_name: dict[str, str] = {}
    for node in model.graph.node:
        key = node.name or node.output[0]
        by_name.setdefault(key, key)
        for output in node.output:
            if output:
                by_name.setdefault(output, key)

    def resolve(name: str) -> str | None:
        for candidate in (name, name.split("/", 1)[0], name.split("::", 1)[0]):
            if candidate in by_name:
                return by_name[candidate]
        return None

    return resolve
