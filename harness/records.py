"""The records a verification produces: plain dataclasses with `to_dict()`.

OpRecord (one row per op) comes from harness.analysis; Verification holds a model's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.rows import BackendResult, OpAnalysis, OpArtifacts, OpRecord
from harness.metrics.comparison import Comparison
from harness.metrics.verdict import overflow_limit

__all__ = ["BackendResult", "CheckerResult", "OpArtifacts", "OpRecord", "Verification"]


@dataclass
class CheckerResult:
    passed: bool
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "message": self.message}


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
    op_reference: str = ""  # what per-op errors are measured against: "torch" | "onnx.reference"
    output_verdicts: list[Any] = field(default_factory=list)  # metrics.verdict.Verdict per output
    backend: str = "onnxruntime"  # the backend `outputs` and `ops` come from, as its spec reads
    backend_settings: dict[str, Any] = field(default_factory=dict)  # what that backend ran with
    backend_results: list[BackendResult] = field(default_factory=list)  # every further backend asked for
    # a quantized module's cost of quantizing per op, float module against quantized torch module
    # (harness.analysis.quant_cost), apart from the export's rows; None for a float model
    quantization: dict[str, Any] | None = None
    onnx_model: Any = field(default=None, repr=False, compare=False)  # the model verified; not serialised
    shape_sweep: Any = None  # harness.shapes.ShapeSweep when verified over a sweep of sizes (shapes=)

    def add_analysis(self, analysis: OpAnalysis) -> None:
        """Take a per-op analysis's rows, notes, timings and environment entries."""
        self.ops = list(analysis.ops)
        self.op_reference = analysis.reference
        self.instrumented_vs_production = list(analysis.instrumented_vs_production)
        self.notes.extend(analysis.notes)
        self.timings.update(analysis.timings)
        for key, value in analysis.environment.items():
            self.environment.setdefault(key, value)

    def verdict(self, *, backend_ran: bool, output_counts_match: bool) -> bool:
        """The model-level verdict: the checker passes, the backend ran, and every output passes
        its verdict (inside its tolerance where it has none)."""
        outputs_pass = (all(v.passed for v in self.output_verdicts) if len(self.output_verdicts) == len(self.outputs)
                        else all(c.passed for c in self.outputs))
        return self.checker.passed and backend_ran and bool(self.outputs) and output_counts_match and outputs_pass

    @property
    def worst_op(self) -> OpRecord | None:
        """The op that fails worst: first an op that fails outright (the backend cannot run its
        subgraph, or its isolated output has the wrong shape or dtype or disagrees on NaN/Inf),
        then the largest isolated error relative to what its verdict allowed (OpRecord.error_ratio).

        Only isolated errors compete when any op has one: an accumulated error carries every
        error before it, so it would blame a downstream op. Without isolation (per-op
        analysis off or impossible) the largest accumulated error stands in.
        """
        judged = [op for op in self.ops if op.isolated is not None or op.passed is False]
        if judged:
            return max(judged, key=lambda op: (
                op.failure not in ("", "tolerance"),
                op.error_ratio if op.isolated is not None else math.inf,
            ))
        measured = [op for op in self.ops if op.accumulated is not None]
        return max(measured, key=lambda op: op.accumulated.tolerance_ratio, default=None)

    @property
    def first_nonfinite(self) -> dict[str, Any] | None:
        """The first op in graph order whose value disagrees on NaN/Inf: the backend's isolated
        value against the fp64 truth (inf or NaN where the truth is finite, or the reverse),
        else against torch, else its accumulated value against torch; None when none does."""
        for measured in ("truth", "isolated", "accumulated"):
            for op in self.ops:
                comparison = getattr(op, measured)
                if comparison is not None and comparison.nonfinite_mismatch:
                    return {"fx_node": op.fx_node, "aten": op.aten, "scope": op.scope, "source": op.source,
                            "against": measured, "elements": comparison.nonfinite_mismatch}
        return None

    @property
    def overflows(self) -> list[dict[str, Any]]:
        """Ops whose fp64 truth lies beyond their dtype's largest finite value, in graph order."""
        found = []
        for op in self.ops:
            limit = overflow_limit(op.dtype)
            if limit is not None and op.truth_scale is not None and op.truth_scale > limit:
                found.append({"fx_node": op.fx_node, "dtype": op.dtype, "scope": op.scope, "source": op.source,
                              "truth_max": op.truth_scale, "limit": limit})
        return found

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
            "timings": self.timings, "notes": self.notes, "op_reference": self.op_reference,
            "output_verdicts": [v.to_dict() for v in self.output_verdicts],
            "first_nonfinite": self.first_nonfinite, "overflows": self.overflows,
            "backend": self.backend, "backend_settings": self.backend_settings,
            "backend_results": [result.to_dict() for result in self.backend_results],
            "quantization": self.quantization,
            "shape_sweep": self.shape_sweep.to_dict() if self.shape_sweep is not None else None,
        }
