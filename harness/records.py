"""The records a verification produces: plain dataclasses with `to_dict()`.

OpRecord (one row per op) comes from harness.analysis; Verification holds a model's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.rows import OpAnalysis, OpArtifacts, OpRecord
from harness.metrics.comparison import Comparison

__all__ = ["CheckerResult", "OpArtifacts", "OpRecord", "Verification"]


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
    onnx_model: Any = field(default=None, repr=False, compare=False)  # the model verified; not serialised

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
        """The model-level verdict: the checker passes, the backend ran, and every output is
        inside its tolerance."""
        return (
            self.checker.passed
            and backend_ran
            and bool(self.outputs)
            and output_counts_match
            and all(c.passed for c in self.outputs)
        )

    @property
    def worst_op(self) -> OpRecord | None:
        """The op that fails worst: first an op that fails outright (the backend cannot run its
        subgraph, or its isolated output has the wrong shape or dtype or disagrees on NaN/Inf),
        then the largest isolated error relative to its tolerance.

        Only isolated errors compete when any op has one: an accumulated error carries every
        error before it, so it would blame a downstream op. Without isolation (per-op
        analysis off or impossible) the largest accumulated error stands in.
        """
        judged = [op for op in self.ops if op.isolated is not None or op.passed is False]
        if judged:
            return max(judged, key=lambda op: (
                op.failure not in ("", "tolerance"),
                op.isolated.tolerance_ratio if op.isolated is not None else math.inf,
            ))
        measured = [op for op in self.ops if op.accumulated is not None]
        return max(measured, key=lambda op: op.accumulated.tolerance_ratio, default=None)

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
        }
