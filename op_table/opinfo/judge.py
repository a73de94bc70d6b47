"""One sample's outputs judged as the harness judges an op: its tolerance rows and its verdict
against the fp64 truth (harness.metrics.verdict), not a table of the sweep's own.

Each floating output is decided, in order, by
- an explicit (rtol, atol) for the sample (a bounded expectation of tests/opinfo_expectations.py,
  torch_lib's `tolerance={dtype: (rtol, atol)}`): an override row, backend against torch;
- a row of the harness's tolerance table for one of the overloads the sample exercised: an
  override, as it is in a verification;
- the rule against the fp64 truth (the sample called in float64, `harness.analysis.truth.
  model_truth`), capped by the dtype's default row, with the program's reduction length and one
  rounding per ATen op it holds;
- without a truth (a random op, no float64 kernel, a truth of another shape): the dtype's default
  row, backend against torch.
Integer and boolean outputs must be equal; dtypes and shapes must be torch's.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
from harness.metrics.noise import dtype_key, load_noise_model, unit_roundoff
from harness.metrics.tolerances import Tolerance, ToleranceTable, is_override, load as load_tolerances
from harness.metrics.verdict import OVERRIDE, TOLERANCE, Verdict, VerdictRule, by_row, by_truth, load_rule

DEVICE = "cpu"  # the sweep runs onnxruntime's CPU provider (or onnx.reference) against torch on the CPU
EXPECTATION_SOURCE = "a bounded expectation of the sweep (tests/opinfo_expectations.py)"


@dataclass(frozen=True)
class ProgramFacts:
    """What the verdict needs from a sample's captured program: the longest reduction of its
    ops, the ATen ops that round on the way to an output, and why it has no fp64 truth ('' when
    it has one)."""

    reduction_length: int
    roundings: int
    no_truth: str = ""


def program_facts(program: torch.export.ExportedProgram) -> ProgramFacts:
    """The reduction length (the harness's rule per op, on the recorded shapes), the op count and
    the reason for no truth (a random op) of a captured sample."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    from harness.analysis.truth import no_truth_reason, reduction_length

    def recorded(value: Any) -> Any:
        return value.meta.get("val") if isinstance(value, torch.fx.Node) else value

    length, roundings, no_truth = 1, 0, ""
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        roundings += 1
        no_truth = no_truth or no_truth_reason(node)
        args = list(torch.fx.node.map_aggregate(node.args, recorded))
        try:
            length = max(length, reduction_length(node, args, node.meta.get("val")))
        except (AttributeError, TypeError, ValueError, GuardOnDataDependentSymNode):
            continue  # a symbolic or data-dependent size (bincount's, nonzero's): the rule's default
    return ProgramFacts(length, max(roundings, 1), no_truth)


@functools.cache
def harness_rules() -> tuple[ToleranceTable, VerdictRule]:
    """The harness's shipped tolerance table and verdict rule."""
    return load_tolerances(), load_rule(load_noise_model())


def sample_truth(module: torch.nn.Module, tensors: Sequence[torch.Tensor], facts: ProgramFacts) -> list[Any] | None:
    """The sample's outputs in float64 (its floating inputs and weights cast up exactly), or None
    when it has none: a random op, or torch refuses float64 for it."""
    from harness.analysis.truth import OpCallFailed, model_truth
    from harness.metrics.arrays import flatten_outputs

    if facts.no_truth:
        return None
    try:
        return flatten_outputs(model_truth(module, tuple(t.clone() for t in tensors)))
    except OpCallFailed:
        return None


def judge_output(got: np.ndarray, want: torch.Tensor, truth: Any, *, targets: Sequence[str], facts: ProgramFacts,
                 tolerance: tuple[float, float] | None = None) -> str:
    """'' when the backend's `got` passes against torch's `want` (and the fp64 `truth`, or None),
    else what differs. `tolerance`: the (rtol, atol) of a bounded expectation, an override."""
    want_array = as_array(want)  # bfloat16 as float32, complex as its (..., 2) real pairs, as the model gives them
    if want.dtype == torch.bfloat16:
        got = as_array(got)  # onnx.reference's bfloat16 arrays; onnxruntime's come back cast to float32
    if got.dtype != want_array.dtype:
        return f"dtype {got.dtype}, torch gives {want.dtype}"
    if tuple(got.shape) != tuple(want_array.shape):
        return f"shape {tuple(got.shape)}, torch gives {tuple(want_array.shape)}"
    dtype = dtype_key(want.dtype)
    if not unit_roundoff(dtype):
        return "" if np.array_equal(got, want_array) else "values differ (exact dtype)"
    verdict = float_verdict(got, want_array, truth, dtype=dtype, targets=targets, facts=facts, tolerance=tolerance)
    if verdict.passed:
        return ""
    finite = np.isfinite(got) & np.isfinite(want_array)
    worst = float(np.max(np.abs(got.astype(np.float64) - want_array)[finite])) if finite.any() else float("nan")
    return f"values differ: max abs {worst:.3g} against torch; {failure_text(verdict)}"


def float_verdict(got: np.ndarray, want: np.ndarray, truth: Any, *, dtype: str, targets: Sequence[str],
                  facts: ProgramFacts, tolerance: tuple[float, float] | None = None) -> Verdict:
    """The verdict on one floating output (see the module docstring for the order of the rows)."""
    table, rule = harness_rules()
    default = table.lookup("*", DEVICE, dtype)
    override = _override(table, targets, dtype, tolerance)
    row = override or default
    against_torch = compare(got, want, atol=row.atol, rtol=row.rtol, check_dtype=False)
    truth_array = as_array(truth) if truth is not None and hasattr(truth, "shape") else None
    backend_side = torch_side = None
    if truth_array is not None and truth_array.shape == want.shape:
        backend_side = _against_truth(got, truth_array, row)
        torch_side = _against_truth(want, truth_array, row)
    if override is not None:
        return by_row(against_torch, dtype=dtype, row=override, rule=OVERRIDE,
                      reason=f"the row for {override.aten} ({override.source}) overrides the rule",
                      backend=backend_side, torch_side=torch_side)
    if backend_side is None:
        why = facts.no_truth or "no fp64 truth for this output (torch refused float64, or gave another shape)"
        return by_row(against_torch, dtype=dtype, row=default, rule=TOLERANCE,
                      reason=f"{why}; judged by the {dtype} default row")
    return by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=facts.reduction_length,
                    rule=rule, row=default, roundings=facts.roundings)


def _override(table: ToleranceTable, targets: Sequence[str], dtype: str,
              tolerance: tuple[float, float] | None) -> Tolerance | None:
    if tolerance is not None:
        rtol, atol = tolerance
        return Tolerance(", ".join(targets), DEVICE, atol, rtol, EXPECTATION_SOURCE, dtype)
    rows = [table.lookup(target, DEVICE, dtype) for target in targets]
    return next((row for row in rows if is_override(row)), None)


def _against_truth(value: np.ndarray, truth: np.ndarray, row: Tolerance) -> Comparison:
    return compare(value, truth, atol=row.atol, rtol=row.rtol, check_dtype=False)


def failure_text(verdict: Verdict) -> str:
    """One line on a failed verdict: the rule that decided and its numbers."""
    if verdict.rule == TOLERANCE or verdict.rule == OVERRIDE:
        row = verdict.tolerance
        return (f"{verdict.tolerance_ratio:.3g}x the (rtol {row['rtol']:.3g}, atol {row['atol']:.3g}) row against "
                f"torch ({verdict.rule}: {verdict.reason})")
    return f"{verdict.rule} rule: {verdict.reason}"
