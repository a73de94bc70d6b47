"""The verdicts of a model's outputs: the rule against the model's fp64 truth (harness.metrics.verdict),
capped by the table's `output` row for each output's dtype; explicit output tolerances override it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.metrics.arrays import as_array
from harness.metrics.comparison import compare, dtype_name
from harness.metrics.noise import dtype_key, load_noise_model, unit_roundoff
from harness.metrics.tolerances import OUTPUT, Tolerance, ToleranceTable
from harness.metrics.verdict import OVERRIDE, TOLERANCE, Verdict, by_row, by_truth, load_rule
from harness.records import Verification

GIVEN = "given to verify (output_atol/output_rtol)"


def output_dtype(value: Any) -> str:
    """The dtype name of an output as torch computed it (bfloat16 included)."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and type(dtype).__module__ == "torch":
        return dtype_key(dtype)
    return dtype_name(as_array(value).dtype)


def judge_outputs(verification: Verification, actual: Sequence[Any], expected: Sequence[Any],
                  truth: Sequence[Any] | None, names: Sequence[str], *, table: ToleranceTable, device: str,
                  atol: float | None, rtol: float | None, allowed_mismatch: float) -> None:
    """Fill `verification.outputs` (each output against torch's, under its row) and
    `verification.output_verdicts`."""
    rule = load_rule(load_noise_model())
    given = atol is not None or rtol is not None
    comparisons, verdicts = [], []
    for index, (backend_value, torch_value, name) in enumerate(zip(actual, expected, names)):
        dtype = output_dtype(torch_value)
        row = table.lookup(OUTPUT, device, dtype)
        if given:
            row = Tolerance(OUTPUT, device, row.atol if atol is None else atol, row.rtol if rtol is None else rtol,
                            GIVEN, dtype)
        torch_array = as_array(torch_value)
        against_torch = compare(backend_value, torch_array, atol=row.atol, rtol=row.rtol, name=name,
                                allowed_mismatch=allowed_mismatch)
        comparisons.append(against_torch)
        reference = truth[index] if truth is not None and index < len(truth) else None
        backend_side = torch_side = None
        if reference is not None and hasattr(reference, "shape") and tuple(reference.shape) == torch_array.shape:
            reference_array = as_array(reference)
            backend_side = compare(backend_value, reference_array, atol=0.0, rtol=0.0, name=name, check_dtype=False)
            torch_side = compare(torch_array, reference_array, atol=0.0, rtol=0.0, name=name, check_dtype=False)
        verdicts.append(_verdict(against_torch, backend_side, torch_side, dtype, row, rule, given))
    verification.outputs = comparisons
    verification.output_verdicts = verdicts


def _verdict(against_torch, backend_side, torch_side, dtype: str, row: Tolerance, rule, given: bool) -> Verdict:
    if given:
        return by_row(against_torch, dtype=dtype, row=row, rule=OVERRIDE, reason="output tolerances " + GIVEN,
                      backend=backend_side, torch_side=torch_side)
    if backend_side is None or not unit_roundoff(dtype):
        why = ("no fp64 truth for the outputs" if backend_side is None
               else f"{dtype} output: compared exactly with torch (no rounding to judge)")
        return by_row(against_torch, dtype=dtype, row=row, rule=TOLERANCE, reason=why + "; judged by the output row")
    return by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=1, rule=rule, row=row)
