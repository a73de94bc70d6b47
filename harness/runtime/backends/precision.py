"""The precision a node really ran at, and the runtime's own fusions, as backends report them.

A backend may run a node at a lower precision than the ONNX model declares (OpenVINO's CPU
plugin runs convolutions and matrix products in bfloat16 under its `INFERENCE_PRECISION_HINT`).
`RuntimePrecision.source` says how the harness knows:

* `declared`: the backend runs what the model declares (onnxruntime, onnx.reference): the
  node's output dtype after ONNX type inference;
* `hint`: the backend's precision setting says so, but it reports nothing per node;
* `runtime model`: the backend's compiled graph names the precision of the layer that ran it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DECLARED = "declared"
HINT = "hint"
RUNTIME_MODEL = "runtime model"
SOURCES = (DECLARED, HINT, RUNTIME_MODEL)

_CANONICAL = {
    "f64": "float64", "fp64": "float64", "double": "float64", "float64": "float64",
    "f32": "float32", "fp32": "float32", "float": "float32", "float32": "float32",
    "f16": "float16", "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "i8": "int8", "int8": "int8", "u8": "uint8", "uint8": "uint8", "i32": "int32", "int32": "int32",
    "i64": "int64", "int64": "int64", "boolean": "bool", "bool": "bool",
}
_FLOAT_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}
_MANTISSA_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def canonical_precision(name: Any) -> str:
    """A precision name as the reports spell dtypes ("bf16", "BF16", <Type: 'bfloat16'> ->
    "bfloat16"); an unknown name is returned lower-cased."""
    text = str(name).strip().lower()
    if text.startswith("<type:"):  # openvino's Type repr
        text = text.split("'")[1] if "'" in text else text
    return _CANONICAL.get(text, text)


def is_lower(ran: str, declared: str) -> bool:
    """Whether floating precision `ran` keeps fewer significand bits than `declared`."""
    ran, declared = canonical_precision(ran), canonical_precision(declared)
    if ran not in _MANTISSA_BITS or declared not in _MANTISSA_BITS:
        return False
    return _MANTISSA_BITS[ran] < _MANTISSA_BITS[declared]


@dataclass(frozen=True)
class RuntimePrecision:
    """The precision one ONNX node ran at, and how the harness knows (one of SOURCES)."""

    precision: str
    source: str = DECLARED

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"RuntimePrecision source {self.source!r}: one of {', '.join(SOURCES)}")
        object.__setattr__(self, "precision", canonical_precision(self.precision))

    def describe(self) -> str:
        """'runtime precision bfloat16 (hint)': how a row names it."""
        return f"runtime precision {self.precision} ({self.source})"

    def to_dict(self) -> dict[str, str]:
        return {"precision": self.precision, "source": self.source}


@dataclass(frozen=True)
class RuntimeFusion:
    """One layer of the backend's compiled graph that stands for several ONNX nodes (or replaces
    one with another kernel): its name and type, the ONNX nodes it covers, its precision."""

    layer: str
    layer_type: str
    onnx_nodes: tuple[str, ...]
    precision: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "layer_type": self.layer_type, "onnx_nodes": list(self.onnx_nodes),
                "precision": self.precision}


@dataclass(frozen=True)
class RuntimeGraph:
    """What a backend made of a model, read from the load that ran it: onnxruntime's optimised
    graph (`optimised`, written as the session loads; its weights not read back), or OpenVINO's
    computing layers (each {"layer", "type", "precision", "onnx_nodes"}) and the group size in
    which its FullyConnected layers with integer weights quantize their activations (0: they
    compute them in float). Empty for a backend that runs the model as written."""

    optimised: Any = None
    layers: tuple[dict[str, Any], ...] = ()
    dynamic_quantization_group: int = 0
