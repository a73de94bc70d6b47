"""The backend interface: a `Backend` (a name, its options, why it cannot run here) prepares a
model into a `PreparedModel`, which runs it and gives what per-op analysis needs.

    rep = get_backend("openvino:precision=f32").prepare(model, "CPU")
    rep.run(inputs)                           # the seed's usage: outputs as numpy arrays
    rep.run_isolated(small_model, feeds)      # another (isolated) model, same settings
    for group in rep.values(feeds, names, group_size=64): ...   # intermediates, a group at a time
    rep.runtime_precisions()                  # {onnx node: RuntimePrecision}
    rep.runtime_fusions()                     # [RuntimeFusion]: runtime layer -> ONNX nodes
    rep.runtime_graph()                       # RuntimeGraph: its optimised graph or runtime layers

A backend that cannot run here (a package or device missing) says why in
`unavailable_reason()`: callers report that as a named skip, never as a failure.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import onnx

from harness.runtime.backends.precision import (
    DECLARED, RuntimeFusion, RuntimeGraph, RuntimePrecision, canonical_precision,
)
from harness.runtime.backends.spec import BackendOption, BackendSpec
from harness.runtime.errors import BackendUnavailableError
from harness.runtime.exposure import expose_values

DEFAULT_GROUP_SIZE = 256
"""How many intermediate values one instrumented run exposes by default (`values()`)."""


class PreparedModel(abc.ABC):
    """A model loaded on a backend. Subclasses implement `run` and `variant`; the rest has a
    default that holds for a backend running exactly what the model declares."""

    model: onnx.ModelProto
    input_names: list[str]
    output_names: list[str]

    @abc.abstractmethod
    def run(self, inputs: Any) -> list[np.ndarray]:
        """Outputs (graph order) for one array, a sequence in input order, or {name: array}."""

    @abc.abstractmethod
    def variant(self, model: onnx.ModelProto) -> PreparedModel:
        """`model` prepared on the same backend, device and settings."""

    def run_named(self, inputs: Any) -> dict[str, np.ndarray]:
        """`run` with the outputs by name."""
        return dict(zip(self.output_names, self.run(inputs)))

    def run_isolated(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run another (small, isolated) model once with this one's settings; outputs by name.
        The variant's session is released before this returns."""
        rep = self.variant(model)
        try:
            return rep.run_named(dict(feeds))
        finally:
            del rep

    def values(self, feeds: Mapping[str, np.ndarray], names: Iterable[str], *,
               group_size: int = DEFAULT_GROUP_SIZE) -> Iterator[dict[str, np.ndarray]]:
        """The named intermediate values, `group_size` at a time: one run of this model with
        the group exposed as outputs per group, each group's values yielded before the next
        runs (so at most one group is held)."""
        if group_size < 1:
            raise ValueError(f"group_size={group_size}: expose at least one value per run")
        wanted = list(dict.fromkeys(names))
        for start in range(0, len(wanted), group_size):
            group = wanted[start:start + group_size]
            outputs = self.run_isolated(expose_values(self.model, group), feeds)
            yield {name: outputs[name] for name in group if name in outputs}

    def runtime_precisions(self) -> dict[str, RuntimePrecision]:
        """{ONNX node name: the precision it ran at}; by default what the model declares."""
        return {node: RuntimePrecision(dtype, DECLARED) for node, dtype in declared_precisions(self.model).items()}

    def runtime_fusions(self) -> list[RuntimeFusion]:
        """The backend's layers that stand for several ONNX nodes; none by default."""
        return []

    def runtime_graph(self) -> RuntimeGraph:
        """What the backend made of the model in this load (onnxruntime: when prepared with an
        `optimized_model_path`); empty by default: the model runs as written."""
        return RuntimeGraph()


class Backend(abc.ABC):
    """One runtime behind the harness's interface. `OPTIONS` declares what a spec may set."""

    name: ClassVar[str] = ""
    OPTIONS: ClassVar[dict[str, BackendOption]] = {}
    RUNS_DECLARED: ClassVar[bool] = True
    """Whether the backend runs every node at the precision the model declares (onnxruntime,
    onnx.reference): its rows' runtime precision is then the op's dtype, read from nowhere else."""

    def __init__(self, spec: BackendSpec | str | None = None, **options: Any) -> None:
        if spec is not None and options:
            raise TypeError("give a spec or options, not both")
        self.spec = BackendSpec.parse(spec) if spec is not None else BackendSpec.of(self.name, options)
        if self.spec.name != self.name:
            raise ValueError(f"spec {self.spec} is not for backend {self.name!r}")

    def option(self, key: str) -> str | None:
        """The option's value in this spec, else its declared default."""
        return self.spec.option(key, self.OPTIONS[key].default)

    @abc.abstractmethod
    def unavailable_reason(self, device: str = "CPU") -> str | None:
        """Why this backend cannot run on `device` here (a package, provider or device missing),
        or None when it can."""

    def require(self, device: str = "CPU") -> None:
        """Raise BackendUnavailableError naming the backend and the reason when it cannot run."""
        reason = self.unavailable_reason(device)
        if reason:
            requested = "CUDA" if device.upper().startswith("CUDA") else device
            raise BackendUnavailableError(f"{requested} was requested but cannot be used: backend {self.spec}: {reason}")

    @abc.abstractmethod
    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        """Load `model` on `device`; raises runtime.ModelLoadError for a model it refuses."""

    def judges_fusions(self) -> bool:
        """Whether a verification reads this backend's own fusions (`runtime_fusions()`) into its
        rows and judges each fused layer as a region. False by default: a backend that fuses
        nothing, or whose fusions cost another compile to find."""
        return False

    def settings(self) -> dict[str, Any]:
        """What a report records of this backend: its spec, options with defaults filled, and
        the backend's version."""
        return {"backend": str(self.spec), "name": self.name,
                "options": {key: self.option(key) for key in self.OPTIONS}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.spec)!r})"


_FLOATING = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                       onnx.TensorProto.BFLOAT16})


def declared_precisions(model: onnx.ModelProto) -> dict[str, str]:
    """{ONNX node name (its first output's name when unnamed): the dtype of its first floating
    output after ONNX type inference (else of its first output)}; nodes whose types inference
    cannot tell are left out."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference refuses some models; precisions stay unknown
        inferred = model
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.value_info, *graph.output, *graph.input)
             if v.type.HasField("tensor_type")}
    types.update({t.name: t.data_type for t in graph.initializer})
    found = {}
    for node in graph.node:
        elems = [types.get(o) for o in node.output if o and types.get(o)]
        if not elems:
            continue
        elem = ([e for e in elems if e in _FLOATING] or elems)[0]
        found[node.name or node.output[0]] = canonical_precision(
            onnx.helper.tensor_dtype_to_string(elem).removeprefix("TensorProto."))
    return found
