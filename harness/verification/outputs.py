"""The outputs' verdicts: each output of the backend against torch's, under its tolerance row,
judged by the rule against the fp64 truth (harness.metrics.verdict) unless tolerances are given;
a detector's outputs matched box to box; a dequantized output judged in steps of its grid."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from harness.analysis.nearest_rows import nearest_picks_of, settle_ties
from harness.analysis.quant_rows import DEQUANTIZE_OPS, qparams_of
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare, dtype_name
from harness.metrics.detections import MatchSettings, compare_detection_outputs
from harness.metrics.noise import dtype_key, load_noise_model, unit_roundoff
from harness.metrics.tolerances import OUTPUT, Tolerance, ToleranceTable, load as load_tolerances
from harness.metrics.verdict import (
    OVERRIDE, TOLERANCE, Verdict, VerdictRule, by_row, by_truth, load_rule, output_unit,
)
from harness.records import Verification
from harness.runtime.backends import is_lower

GIVEN = "given to verify (output_atol/output_rtol)"


def output_dtype(value: Any) -> str:
    """The dtype name of an output as torch computed it (bfloat16 included)."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and type(dtype).__module__ == "torch":
        return dtype_key(dtype)
    return dtype_name(as_array(value).dtype)


def judge_outputs(verification: Verification, actual: Sequence[Any], expected: Sequence[Any],
                  truth: Sequence[Any] | None, names: Sequence[str], *, table: ToleranceTable, device: str,
                  atol: float | None, rtol: float | None, allowed_mismatch: float, rounding_steps: int = 1,
                  precision: str | None = None, quantized: Sequence[Any] = (), nearest: Sequence[Any] = ()) -> None:
    """Fill `verification.outputs` (each output against torch's, under its row) and
    `verification.output_verdicts`; the rule's floor for an output is `floor_ulps` times
    u(dtype) * sqrt(rounding_steps), the ops that rounded on the way to it. `precision`: the
    lowest precision the backend ran a node at; a floating output declared above it is judged
    by its rule and row (a backend running convolutions in bfloat16 makes bfloat16 outputs).
    `quantized[i]`, when given, holds the quantization parameters of output i, a dequantized
    value: it is judged by the rule alone (the float32 row's cap does not apply to a value on a
    grid of steps), its distance from torch in steps named in the verdict. `nearest[i]`, when
    given, holds the pixels a nearest grid sample writing output i may pick: its picks on .5
    ties are settled to the truth's on both sides before it is judged (analysis.nearest_rows)."""
    rule = load_rule(load_noise_model())
    given = atol is not None or rtol is not None
    comparisons, verdicts = [], []
    for index, (backend_value, torch_value, name) in enumerate(zip(actual, expected, names)):
        dtype = output_dtype(torch_value)
        lowered = bool(precision and unit_roundoff(dtype) and is_lower(precision, dtype))
        if lowered:  # tolerances given for the declared dtype do not hold the lower precision
            dtype = precision
        row = table.lookup(OUTPUT, device, dtype)
        if given and not lowered:
            row = Tolerance(OUTPUT, device, row.atol if atol is None else atol, row.rtol if rtol is None else rtol,
                            GIVEN, dtype)
        torch_array = as_array(torch_value)
        reference = truth[index] if truth is not None and index < len(truth) else None
        picks = nearest[index] if index < len(nearest) else None
        tie_note = ""
        if picks is not None and reference is not None and hasattr(reference, "shape"):
            torch_array, backend_value, tie_note = settle_ties(torch_array, as_array(backend_value),
                                                               as_array(reference), picks)
        against_torch = compare(backend_value, torch_array, atol=row.atol, rtol=row.rtol, name=name,
                                allowed_mismatch=allowed_mismatch)
        against_torch.note = "; ".join(part for part in (tie_note, against_torch.note) if part)
        comparisons.append(against_torch)
        backend_side = torch_side = None
        if reference is not None and hasattr(reference, "shape") and tuple(reference.shape) == torch_array.shape:
            reference_array = as_array(reference)
            backend_side = compare(backend_value, reference_array, atol=row.atol, rtol=row.rtol, name=name,
                                   check_dtype=False, allowed_mismatch=allowed_mismatch)
            torch_side = compare(torch_array, reference_array, atol=row.atol, rtol=row.rtol, name=name,
                                 check_dtype=False)
        qparams = quantized[index] if index < len(quantized) else None
        if qparams is not None and backend_side is not None and not given:
            verdicts.append(quantized_output_verdict(backend_value, torch_array, backend_side, torch_side, against_torch,
                                                     qparams, dtype, row, rule, rounding_steps))
            continue
        verdict = _verdict(against_torch, backend_side, torch_side, dtype, row, rule, given and not lowered,
                           rounding_steps)
        if lowered:
            verdict = replace(verdict, reason=f"the backend ran below the declared {output_dtype(torch_value)}: "
                                              f"judged as {precision}; " + verdict.reason)
        verdicts.append(verdict)
    verification.outputs = comparisons
    verification.output_verdicts = verdicts


def judge_detections(verification: Verification, actual: Sequence[Any], expected: Sequence[Any],
                     layout: Sequence[Any], names: Sequence[str], *, table: ToleranceTable, device: str,
                     atol: float | None, rtol: float | None, truth: Sequence[Any] | None = None,
                     detector: torch.nn.Module | None = None) -> None:
    """A detector's outputs: detections matched box to box by label and IoU (harness.metrics.
    detections), each field judged by the float32 output row (or the tolerances given): the
    number and order of detections may legitimately differ, so there is no element-wise truth;
    `truth` (the outputs in float64) lets torch's own error set a continuous field's atol;
    `detector`, the module that made them, says its NMS threshold (`MatchSettings.load`)."""
    row = table.lookup(OUTPUT, device, "float32")
    given = atol is not None or rtol is not None
    if given:
        row = Tolerance(OUTPUT, device, row.atol if atol is None else atol, row.rtol if rtol is None else rtol,
                        GIVEN, "float32")
    verification.outputs = compare_detection_outputs(
        actual, [as_array(e) for e in expected], layout, atol=row.atol, rtol=row.rtol, names=names,
        truth=truth if truth is not None and len(truth) == len(expected) else None,
        settings=MatchSettings.load(detector=detector))
    reason = "detections matched box to box by label and IoU; judged by the output row"
    verification.output_verdicts = [
        by_row(c, dtype=c.dtype_expected, row=row, rule=OVERRIDE if given else TOLERANCE, reason=reason)
        for c in verification.outputs
    ]


def _verdict(against_torch: Comparison, backend_side: Comparison | None, torch_side: Comparison | None, dtype: str,
             row: Tolerance, rule: VerdictRule, given: bool, rounding_steps: int) -> Verdict:
    if given:
        return by_row(against_torch, dtype=dtype, row=row, rule=OVERRIDE, reason="output tolerances " + GIVEN,
                      backend=backend_side, torch_side=torch_side)
    if backend_side is None or not unit_roundoff(dtype):
        why = ("no fp64 truth for the outputs" if backend_side is None
               else f"{dtype} output: compared exactly with torch (no rounding to judge)")
        return by_row(against_torch, dtype=dtype, row=row, rule=TOLERANCE, reason=why + "; judged by the output row")
    return by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=1, rule=rule, row=row,
                    cap_factor=1.0, unit=output_unit(dtype, rounding_steps))


def nearest_outputs(program: torch.export.ExportedProgram | None, values: Mapping[str, Any]) -> list[Any]:
    """Per user output, the pixels the nearest grid sample that writes it may pick
    (analysis.nearest_rows.nearest_picks_of, from torch's values of its input and grid), else None."""
    if program is None:
        return []
    from exporter.capturing.signature import user_outputs

    return [nearest_picks_of(item, values) if isinstance(item, torch.fx.Node) else None
            for item in user_outputs(program)]


def quantized_outputs(program: torch.export.ExportedProgram | None, values: Mapping[str, Any]) -> list[Any]:
    """Per user output, the quantization parameters (analysis.quant_rows.QParams) of the
    dequantize that writes it, else None."""
    if program is None:
        return []
    from exporter.capturing.signature import user_outputs

    return [qparams_of(item, values) if isinstance(item, torch.fx.Node) and str(item.target) in DEQUANTIZE_OPS
            else None for item in user_outputs(program)]


def quantized_output_verdict(backend: Any, torch_value: np.ndarray, backend_side: Comparison, torch_side: Comparison,
                             against_torch: Comparison, qparams: Any, dtype: str, row: Tolerance, rule: VerdictRule,
                             rounding_steps: int) -> Verdict:
    """A dequantized output: the rule against the fp64 truth decides (uncapped: one step of a
    coarse grid is far beyond the float32 row), with its distance from torch in steps."""
    verdict = by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=1, rule=rule, row=row,
                       cap_factor=math.inf, unit=output_unit(dtype, rounding_steps))
    steps = np.abs(np.rint(qparams.positions(as_array(backend))) - np.rint(qparams.positions(torch_value)))
    off = int((steps >= 1).sum())
    return replace(verdict, decided_by="rule", tolerance={}, tolerance_ratio=None,
                   score=verdict.e_backend / verdict.allowed if verdict.allowed else 0.0,
                   reason=(f"{verdict.reason.split(';')[0]}; a dequantized output (scale {qparams.largest_scale:.4g}): "
                           f"max {float(steps.max(initial=0)):g} step(s) from torch, {off} of {steps.size} elements off, "
                           "judged by the rule alone"))


def tolerance_table(tolerances: ToleranceTable | str | None) -> ToleranceTable:
    """The table given, the table at a path, or the shipped one (None)."""
    return tolerances if isinstance(tolerances, ToleranceTable) else load_tolerances(tolerances)


def run_eager(module: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any], device: str) -> Any:
    """`module(*args, **kwargs)` in eval mode on `device`, leaving the module as it was found."""
    from exporter.capturing.trace import eval_mode

    parameter = next(module.parameters(), None)
    original = parameter.device if parameter is not None else None
    try:
        with torch.no_grad(), eval_mode(module):
            return module.to(device)(*args, **kwargs)
    finally:
        if original is not None:
            module.to(original)
