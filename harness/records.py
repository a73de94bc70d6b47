"""The records a verification produces: plain dataclasses with `to_dict()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.compare import Comparison


@dataclass
class CheckerResult:
    passed: bool
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "message": self.message}


@dataclass
class OpRecord:
    """One FX node: where it came from, what it became, and how far the backend is from torch."""

    fx_node: str
    aten: str
    onnx_nodes: list[str]
    onnx_ops: list[str]
    scope: str
    source: str
    accumulated: Comparison | None = None
    isolated: Comparison | None = None
    truth: Comparison | None = None  # backend vs fp64 reference
    torch_truth: Comparison | None = None  # torch fp32 vs fp64 reference
    attribution: str = ""  # "backend", "torch", "both-noise", ...
    noise_floor: Comparison | None = None  # torch CPU vs torch CUDA
    tolerance: dict[str, Any] = field(default_factory=dict)
    passed: bool | None = None

    @property
    def error_ratio(self) -> float:
        """Isolated error relative to the op's tolerance (accumulated when not isolated)."""
        measured = self.isolated or self.accumulated
        return measured.tolerance_ratio if measured is not None else 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fx_node": self.fx_node, "aten": self.aten, "onnx_nodes": self.onnx_nodes,
            "onnx_ops": self.onnx_ops, "scope": self.scope, "source": self.source,
            "attribution": self.attribution, "tolerance": self.tolerance, "passed": self.passed,
        }
        for key in ("accumulated", "isolated", "truth", "torch_truth", "noise_floor"):
            value = getattr(self, key)
            out[key] = value.to_dict() if value is not None else None
        return out


@dataclass
class Verification:
    """Everything one verification found; `passed` is the model-level verdict."""

    model_name: str
    exporter: str
    device: str
    passed: bool
    checker: CheckerResult
    outputs: list[Comparison]
    ops: list[OpRecord] = field(default_factory=list)
    instrumented_vs_production: list[Comparison] = field(default_factory=list)
    cpu_placed_nodes: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    onnx_model: Any = field(default=None, repr=False, compare=False)  # the model verified; not serialised

    @property
    def worst_op(self) -> OpRecord | None:
        """The op with the largest isolated error relative to its tolerance."""
        measured = [op for op in self.ops if (op.isolated or op.accumulated) is not None]
        return max(measured, key=lambda op: op.error_ratio, default=None)

    @property
    def max_output_error(self) -> float:
        return max((c.max_abs for c in self.outputs), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst_op
        return {
            "model_name": self.model_name, "exporter": self.exporter, "device": self.device,
            "passed": self.passed, "checker": self.checker.to_dict(),
            "outputs": [c.to_dict() for c in self.outputs],
            "worst_op": worst.fx_node if worst else None,
            "ops": [op.to_dict() for op in self.ops],
            "instrumented_vs_production": [c.to_dict() for c in self.instrumented_vs_production],
            "cpu_placed_nodes": self.cpu_placed_nodes, "environment": self.environment,
            "timings": self.timings, "notes": self.notes,
        }
