"""The per-op row every analysis returns: an OpRecord (what the op is, how far the backend is),
with the OpArtifacts a reproducer of it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.metrics.comparison import Comparison
from harness.metrics.quant_steps import QuantSteps
from harness.runtime.backends.precision import RuntimePrecision

BLAME_EXPORT = "export"
"""Every backend verified disagrees with torch at the op beyond its verdict: the export is wrong."""
BLAME_RUNTIME = "runtime"
"""This backend disagrees with the fp64 truth at the op while another backend agrees with it."""
BLAME_RUNTIME_PRECISION = "runtime-precision"
"""This backend ran the op below the precision the model declares (judged at that precision)."""
BLAMES = ("", BLAME_EXPORT, BLAME_RUNTIME, BLAME_RUNTIME_PRECISION)


@dataclass
class OpArtifacts:
    """What a reproducer of one op needs: its subgraph, inputs and expected outputs."""

    source: Any  # onnx.ModelProto holding the nodes' initializers
    nodes: list[Any]  # onnx.NodeProto
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    reference: str  # what `expected` is: "torch" or "onnx.reference"
    device: str
    tolerance: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)
    isolated_outputs: dict[str, np.ndarray] = field(default_factory=dict)  # the backend's, isolated
    weights: Any = None  # runtime.SharedWeights restoring `source`'s in-memory initializers (else None)
    spill_folder: Any = None  # analysis.spilled.SpillFolder holding mapped arrays (kept alive with them)


@dataclass(frozen=True)
class RegionMember:
    """One FX node inside an optimised region, with its provenance."""

    fx_node: str
    aten: str
    scope: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"fx_node": self.fx_node, "aten": self.aten, "scope": self.scope, "source": self.source}


@dataclass
class OpRecord:
    """One op: where it came from, what it became, and how far the backend is from torch.

    An op is an FX node (`fx_node`, `aten` its ATen overload) when the ONNX model maps onto the
    FX graph. Without such a mapping (torchscript models, `verify_onnx`) an op is one ONNX node:
    `fx_node` then holds the ONNX node's name and `aten` reads `onnx::<OpType>`, and the
    reference is onnx's ReferenceEvaluator instead of torch.

    accumulated: backend vs reference in one run from the model inputs (errors add up).
    isolated:    the op's subgraph alone fed the reference's inputs (the op's own error);
                 `passed` is decided by it against `tolerance`. `not_isolable` says why not.
    truth:       backend (isolated) vs the op in float64 on the same inputs; torch_truth: torch
                 fp32 vs the same; `attribution` names who diverged (harness.truth), with
                 `noise_bound` the normalised error fp32 noise alone can explain.
    noise_floor: torch CPU vs torch CUDA on the op's inputs (CUDA runs only).
    region:      the FX nodes one optimised ONNX node (or group) stands for, in graph order, when
                 it stands for more than one (BatchNorm folded into its Conv, a fused HardSwish);
                 `fx_node` is then the region's last member, whose output the region is compared
                 against. Empty for an op of its own.
    dtype:       the op's own output dtype (torch's value), the key of its tolerance row.
    verdict:     how `passed` was decided (harness.metrics' verdict record: the rule, both errors
                 against the truth, their ratio); None before judging.
    computed_by: which backend computed the row's values: "onnxruntime" or "onnx.reference".
    backend:     the backend verified, as its spec reads ("onnxruntime", "openvino:precision=f32");
                 computed_by differs from it only where the reference evaluator stood in.
    runtime_precision: the precision the backend really ran the op at, and how the harness
                 knows (declared, the backend's hint, or its runtime model); None when unknown.
    quant_steps: for an op that writes a quantized tensor, its error in quantization steps.
    blame:       across backends: "export" (every backend disagrees with torch), "runtime" (this
                 backend alone disagrees with the truth), "runtime-precision" (this backend ran the
                 op below its declared precision); "" with one backend, or when all agree.
    runtime_fusion: the backend's own fused layer that ran the op's ONNX nodes with others, when
                 it did: the layer, its type and precision, the ONNX nodes and FX nodes it covers,
                 the FX node whose value it outputs, and (on that output's row) the region's own
                 isolated error and verdict: the runtime gives only the layer's output, so the
                 layer is judged as one region; None when no fused layer covers the op.
    check:       what the row compares: "values"; "distribution" for random ops (shape, dtype and
                 statistics); "matched" for data-dependent detections matched box to box.
    """

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
    attribution: str = ""  # "backend", "torch", "both", "both-noise"; "" when unknown
    noise_floor: Comparison | None = None  # torch CPU vs torch CUDA
    tolerance: dict[str, Any] = field(default_factory=dict)
    passed: bool | None = None
    not_isolable: str = ""  # why the op has no isolated error ("" when it has one)
    noise_bound: float | None = None  # normalised fp noise bound used for attribution
    truth_scale: float | None = None  # largest finite |value| of the fp64 truth (overflow checks)
    reduction_length: int | None = None
    notes: list[str] = field(default_factory=list)
    region: list[RegionMember] = field(default_factory=list)
    dtype: str = ""
    verdict: Any = None  # a verdict record with to_dict(); None when not judged
    computed_by: str = "onnxruntime"
    check: str = "values"
    backend: str = "onnxruntime"
    runtime_precision: RuntimePrecision | None = None
    quant_steps: QuantSteps | None = None
    blame: str = ""
    runtime_fusion: dict[str, Any] | None = None
    artifacts: Any = field(default=None, repr=False, compare=False)  # reproducer inputs; not serialised

    @property
    def fx_nodes(self) -> list[str]:
        """Every FX node the row stands for: the region's members, or the op alone."""
        return [member.fx_node for member in self.region] or [self.fx_node]

    @property
    def name(self) -> str:
        """The row's key: the FX node, or the ONNX node for ONNX-level rows."""
        return self.fx_node

    @property
    def failure(self) -> str:
        """How the op fails: "" when it does not fail (or was not judged); "did not run" when the
        backend cannot run its subgraph; "shape", "dtype" or "non-finite" when its isolated
        output has the wrong shape or dtype, or NaN/Inf where the reference has none (or the
        reverse); "tolerance" for a numeric divergence past its tolerance."""
        if self.passed is not False:
            return ""
        measured = self.isolated
        if measured is None:
            return "did not run"
        if not measured.shape_match:
            return "shape"
        if not measured.dtype_match:
            return "dtype"
        if measured.nonfinite_mismatch:
            return "non-finite"
        return "tolerance"

    @property
    def error_ratio(self) -> float:
        """The error relative to what the op's verdict allowed (its score: > 1 fails); without
        a verdict, the isolated error relative to its tolerance (accumulated when not isolated)."""
        if self.verdict is not None:
            return self.verdict.score
        measured = self.isolated or self.accumulated
        return measured.tolerance_ratio if measured is not None else 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fx_node": self.fx_node, "aten": self.aten, "onnx_nodes": self.onnx_nodes,
            "onnx_ops": self.onnx_ops, "scope": self.scope, "source": self.source,
            "attribution": self.attribution, "tolerance": self.tolerance, "passed": self.passed,
            "not_isolable": self.not_isolable, "noise_bound": self.noise_bound,
            "reduction_length": self.reduction_length, "truth_scale": self.truth_scale, "notes": list(self.notes),
            "region": [member.to_dict() for member in self.region], "dtype": self.dtype,
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
            "computed_by": self.computed_by, "check": self.check, "backend": self.backend,
            "runtime_precision": self.runtime_precision.to_dict() if self.runtime_precision is not None else None,
            "quant_steps": self.quant_steps.to_dict() if self.quant_steps is not None else None,
            "blame": self.blame, "runtime_fusion": self.runtime_fusion,
        }
        for key in ("accumulated", "isolated", "truth", "torch_truth", "noise_floor"):
            value = getattr(self, key)
            out[key] = value.to_dict() if value is not None else None
        return out


def worst_comparison(comparisons: list[Comparison]) -> Comparison | None:
    """The comparison that fails, or comes closest to failing, relative to its tolerance."""
    return max(comparisons, key=lambda c: (not c.passed, c.tolerance_ratio), default=None)


def judge(record: OpRecord, comparisons: list[Comparison]) -> bool | None:
    """An isolated op's verdict: every compared output inside its tolerance. None, with the
    reason in the row's notes, when the op has no output to compare."""
    if not comparisons:
        record.notes.append("not judged: none of its outputs is a tensor or number the reference also has")
        return None
    return all(c.passed for c in comparisons)


FAILS = "fails: "  # the note that names why a backend's verdict fails where no output fails (the run itself)


@dataclass
class BackendResult:
    """Another backend's verification of the same model, against the same torch values and fp64
    truth: its outputs, per-op rows and settings, or why it did not run (`skipped`)."""

    backend: str
    passed: bool | None = None
    outputs: list[Comparison] = field(default_factory=list)
    output_verdicts: list[Any] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    skipped: str = ""  # why the backend did not run here ("" when it ran)

    @property
    def worst_op(self) -> OpRecord | None:
        """The row that fails, or comes closest to failing (as Verification.worst_op)."""
        judged = [op for op in self.ops if op.isolated is not None or op.passed is False]
        return max(judged, key=lambda op: (op.failure not in ("", "tolerance"), op.error_ratio), default=None)

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst_op
        return {
            "backend": self.backend, "passed": self.passed, "skipped": self.skipped,
            "outputs": [c.to_dict() for c in self.outputs],
            "output_verdicts": [v.to_dict() for v in self.output_verdicts],
            "worst_op": worst.fx_node if worst else None, "ops": [op.to_dict() for op in self.ops],
            "settings": self.settings, "notes": list(self.notes), "timings": dict(self.timings),
        }


@dataclass
class OpAnalysis:
    """What a per-op analysis returns: the rows, and what the model-level record needs beside them."""

    ops: list[OpRecord]
    reference: str  # what the per-op errors are measured against: "torch" | "onnx.reference"
    instrumented_vs_production: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)  # entries for the record's environment
    selections: dict[str, Any] = field(default_factory=dict)  # index rows tied with torch's (analysis.selections)
