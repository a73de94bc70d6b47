"""The verdict rule: e_backend <= factor * max(e_torch, floor) against the fp64 truth, the
tolerance rows as override and cap, per-dtype lookup, and whole models in float16."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torchvision

import harness
from harness.metrics import tolerances
from harness.metrics.comparison import compare
from harness.metrics.noise import NoiseModel, attribute, load_noise_model, rounding_unit, unit_roundoff
from harness.metrics.tolerances import OUTPUT, Tolerance
from harness.metrics.verdict import (
    OVERRIDE, TOLERANCE, TRUTH, VerdictRule, by_row, by_truth, check_consistent, load_rule,
)

RULE = load_rule(load_noise_model())
FP16_ROW = tolerances.load().lookup("*", "cpu", "float16")


def _against_truth(error: float, scale: float = 1.0, name: str = "y"):
    """A comparison with the truth (under the float16 default row, as the analysis makes it)
    whose normalised error is `error` (truth: `scale` * ones)."""
    truth = np.full(64, scale, dtype=np.float64)
    value = truth.copy()
    value[3] += error * scale
    return compare(value, truth, atol=FP16_ROW.atol, rtol=FP16_ROW.rtol, name=name, check_dtype=False)


def _against_torch(ratio: float):
    """A comparison with torch under the float16 default row at `ratio` of it."""
    torch_value = np.ones(8, dtype=np.float32)
    allowed = FP16_ROW.atol + FP16_ROW.rtol
    return compare(torch_value + np.float32(ratio * allowed), torch_value, atol=FP16_ROW.atol, rtol=FP16_ROW.rtol)


def test_rounding_unit_is_the_final_rounding_or_the_float32_accumulation_in_half_types():
    assert unit_roundoff("float16") == 2.0**-11 and unit_roundoff(torch.bfloat16) == 2.0**-8
    assert unit_roundoff(np.float32) == 2.0**-24 and unit_roundoff("int64") == 0.0
    assert rounding_unit("float16", 4608) == 2.0**-11  # u32 * sqrt(4608) = 4e-6, far below u16
    assert rounding_unit("float16", 2**40) == pytest.approx(2.0**-24 * 2**20)
    assert rounding_unit("float32", 400) == pytest.approx(20 * 2.0**-24)  # unchanged for fp32


@pytest.mark.parametrize("e_backend, e_torch, dtype, K, passed, why", [
    (4e-4, 4e-4, "float16", 2304, True, "as good as torch"),
    (7.5e-4, 4e-4, "float16", 1, True, "under twice torch's error"),
    (7.0e-4, 1e-4, "float16", 1, True, "under factor x floor = 2 x 0.75 x u16 = 7.3e-4 (1.5 rounding units)"),
    (9.0e-4, 1e-4, "float16", 1, False, "over factor x floor: 1.8 rounding units, more than one rounding"),
    (3.5e-3, 3.5e-3, "bfloat16", 1152, True, "one bfloat16 rounding, as torch's"),
    (7.4e-3, 2.6e-3, "bfloat16", 16, False, "5% on one weight of a bfloat16 Linear: 1.9 units against torch's 0.67"),
    (1.2e-2, 8e-3, "float16", 1, True, "torch itself is 8e-3 off: factor x e_torch"),
    (1.4e-2, 6e-3, "float16", 1, False, "worse than factor x e_torch"),
    (4e-7, 3e-7, "float32", 1, True, "within the float32 floor"),
    (1e-5, 3e-7, "float32", 4608, True, "float32 with K: floor 4 x u32 x sqrt(4608) = 1.6e-5, x 2 > 1e-5"),
    (4e-5, 3e-7, "float32", 4608, False, "over 2 x floor"),
    (math.inf, 1e-4, "float16", 1, False, "NaN/Inf where the truth is finite"),
])
def test_the_rule_against_the_truth(e_backend, e_torch, dtype, K, passed, why):
    backend = _against_truth(e_backend) if math.isfinite(e_backend) else compare(
        np.array([np.inf, 1.0]), np.array([1.0, 1.0]), atol=0.0, rtol=0.0, check_dtype=False)
    torch_side = _against_truth(e_torch) if math.isfinite(e_backend) else compare(
        np.array([1.0 + e_torch, 1.0]), np.array([1.0, 1.0]), atol=0.0, rtol=0.0, check_dtype=False)
    verdict = by_truth(backend, torch_side, None, dtype=dtype, reduction_length=K, rule=RULE, row=FP16_ROW)
    assert verdict.passed is passed, (why, verdict.reason)
    assert verdict.rule == TRUTH and verdict.decided_by == "rule"
    assert verdict.allowed == pytest.approx(RULE.factor * max(verdict.e_torch, RULE.floor(dtype, K)))
    assert (verdict.score <= 1) is passed
    if math.isfinite(e_backend):
        assert verdict.ratio == pytest.approx(e_backend / e_torch, rel=1e-6)


@pytest.mark.parametrize("roundings, passed", [(1, False), (2, True)])
def test_a_region_of_several_ops_has_a_floor_of_as_many_roundings(roundings, passed):
    """inception_v3's folded BatchNorm in bfloat16 sits 2.3 units off the truth (torch 1.4, after
    two roundings): inside a two-member region's floor, outside one op's when torch was lucky."""
    unit = 2.0**-8
    verdict = by_truth(_against_truth(2.3 * unit), _against_truth(0.5 * unit), None, dtype="bfloat16",
                       reduction_length=1, rule=RULE, row=FP16_ROW, roundings=roundings)
    assert verdict.passed is passed, verdict.reason
    assert verdict.floor == pytest.approx(RULE.floor_ulps_for("bfloat16") * unit * roundings)


def test_the_cap_bounds_the_rule_by_the_dtypes_default_row_times_its_cap_factor():
    factor = RULE.cap_factor("float16")
    allowed = FP16_ROW.atol + FP16_ROW.rtol  # the row at a truth of 1
    inside, outside = (by_truth(_against_truth(share * factor * allowed), _against_truth(share * factor * allowed),
                                _against_torch(0.0), dtype="float16", reduction_length=1, rule=RULE, row=FP16_ROW)
                       for share in (0.9, 1.1))  # torch as far off as the backend: the rule alone would pass
    assert inside.passed and inside.tolerance_ratio == pytest.approx(0.9, rel=1e-3)
    assert not outside.passed and outside.decided_by == "cap" and "against the truth" in outside.reason
    assert outside.tolerance["atol"] == FP16_ROW.atol * factor


FP32_ROW = tolerances.load().lookup("*", "cpu", "float32")


def _float32_row(e_backend: float, e_torch: float):
    """A float32 verdict where the backend is `e_backend` above the truth and torch `e_torch`
    below it, both at a truth value of 0 (of a truth whose scale is 1), so the two sides are
    `e_backend + e_torch` apart where only the row's atol admits a difference."""
    truth = np.zeros(64)
    truth[0] = 1.0
    backend, torch_side = truth.copy(), truth.copy()
    backend[2], torch_side[2] = e_backend, -e_torch
    return by_truth(compare(backend, truth, atol=FP32_ROW.atol, rtol=FP32_ROW.rtol, check_dtype=False),
                    compare(torch_side, truth, atol=FP32_ROW.atol, rtol=FP32_ROW.rtol, check_dtype=False),
                    compare(backend.astype(np.float32), torch_side.astype(np.float32), atol=FP32_ROW.atol,
                            rtol=FP32_ROW.rtol),
                    dtype="float32", reduction_length=1, rule=RULE, row=FP32_ROW)


@pytest.mark.parametrize("e_backend, e_torch, passed, decided_by, why", [
    (1.5e-5, 1e-5, False, "cap", "inside the rule, but 2.5x the row's atol from torch, and the farther from the truth"),
    (3e-6, 4e-6, True, "rule", "both near the truth and within the row of each other"),
    (3e-5, 4e-5, True, "rule",
     "a bilinear resize's coordinates: 7x the row's atol from torch, but the backend is the nearer the truth"),
    (4e-5, 3e-5, False, "cap", "as far apart, but the backend is the farther from the truth"),
    (2e-4, 3e-4, False, "cap", "the backend nearer the truth than torch, but 2x the row's rtol off it"),
])
def test_float32_caps_by_its_rows_check_against_torch_unless_torch_is_the_farther_from_the_truth(
        e_backend, e_torch, passed, decided_by, why):
    verdict = _float32_row(e_backend, e_torch)
    assert RULE.cap_factor("float32") == 1
    assert (verdict.passed, verdict.decided_by) == (passed, decided_by), (why, verdict.reason)
    assert ("against torch" in verdict.reason) is (e_backend + e_torch > FP32_ROW.atol)


def test_float32_cap_is_never_waived_for_a_wrong_dtype():
    """A backend output in float64 where torch gives float32: exact values, but the row's check
    against torch fails on the dtype, however near the truth the values are."""
    truth = np.linspace(0.5, 1.0, 16)
    backend = compare(truth, truth, atol=FP32_ROW.atol, rtol=FP32_ROW.rtol, check_dtype=False)
    torch_side = compare(truth.astype(np.float32), truth, atol=FP32_ROW.atol, rtol=FP32_ROW.rtol, check_dtype=False)
    against_torch = compare(truth, truth.astype(np.float32), atol=FP32_ROW.atol, rtol=FP32_ROW.rtol)
    assert not against_torch.dtype_match
    verdict = by_truth(backend, torch_side, against_torch, dtype="float32", reduction_length=1, rule=RULE, row=FP32_ROW)
    assert not verdict.passed and verdict.decided_by == "cap", verdict.reason


def test_a_row_for_the_op_overrides_and_values_without_truth_fall_back_to_the_dtype_row():
    against_torch = _against_torch(2.0)
    row = Tolerance("aten.conv2d.default", "cpu", FP16_ROW.atol, FP16_ROW.rtol, "hand-written", "float16")
    override = by_row(against_torch, dtype="float16", row=row, rule=OVERRIDE, reason="row",
                      backend=_against_truth(1e-4), torch_side=_against_truth(1e-4))
    fallback = by_row(against_torch, dtype="float16", row=FP16_ROW, rule=TOLERANCE, reason="no fp64 truth")
    assert not override.passed and override.decided_by == OVERRIDE and override.ratio == pytest.approx(1.0)
    assert not fallback.passed and fallback.decided_by == TOLERANCE and fallback.e_backend is None
    assert override.to_dict()["tolerance"]["source"] == "hand-written"


@pytest.mark.parametrize("dtype, K, roundings", [("float16", 1, 1), ("float16", 4608, 1), ("float32", 1, 1),
                                                 ("float32", 4608, 1), ("bfloat16", 64, 1), ("bfloat16", 64, 2),
                                                 ("float32", 9, 3)])
def test_an_op_attributed_to_noise_never_fails_the_rule_and_a_failure_is_the_backends(dtype, K, roundings):
    model = load_noise_model()
    noise = model.bound(dtype, K, roundings)
    for e_backend in np.geomspace(noise / 100, noise * 100, 25):
        for e_torch in np.geomspace(noise / 100, noise * 100, 25):
            backend, torch_side = _against_truth(float(e_backend)), _against_truth(float(e_torch))
            verdict = by_truth(backend, torch_side, None, dtype=dtype, reduction_length=K, rule=RULE, row=FP16_ROW,
                               roundings=roundings)
            attribution = attribute(backend, torch_side, noise, model)
            if attribution == "both-noise":
                assert verdict.passed, (attribution, verdict.reason)
            if attribution == "torch":  # only the cap may still fail it: torch's error admits no more
                assert verdict.passed or verdict.decided_by == "cap", (attribution, verdict.reason)
            if verdict.decided_by == "rule" and not verdict.passed:
                assert attribution in ("backend", "both"), (attribution, verdict.reason)


def test_constants_that_would_fail_noise_are_refused():
    with pytest.raises(ValueError, match="both-noise"):
        check_consistent(VerdictRule(2.0, 1.0, {"*": 1.0}), NoiseModel(4, 10))
    with pytest.raises(ValueError, match="bfloat16"):  # a dtype's own floor is held to that dtype's noise
        check_consistent(VerdictRule(2.0, 4.0, {"*": 1.0}, {}, {"bfloat16": 0.5}),
                         NoiseModel(4, 10, ulps_by_dtype={"bfloat16": 1.5}))
    check_consistent(RULE, load_noise_model())
    assert RULE.sources["factor"] and RULE.sources["floor_ulps"] and RULE.sources["cap_factors"]
    assert RULE.sources["floor_ulps_by_dtype"] and load_noise_model().ulps_for("bfloat16") <= RULE.factor * RULE.floor_ulps_for("bfloat16")


def test_tolerance_rows_are_looked_up_by_dtype_and_start_from_torch_testing():
    table = tolerances.load()
    assert (table.lookup("*", "cpu", "float16").rtol, table.lookup("*", "cpu", "bfloat16").rtol) == (1e-3, 1.6e-2)
    assert "torch.testing" in table.lookup("*", "cpu", "float16").source
    assert table.lookup("aten.conv2d.default", "cpu", "float32") == table.lookup("*", "cpu", "float32")
    assert (table.lookup(OUTPUT, "cpu", "float32").atol, table.lookup(OUTPUT, "cpu", "float32").rtol) == (1e-4, 1e-3)
    assert table.lookup(OUTPUT, "cuda", "float16").dtype == "float16"


# --- whole models in float16, judged with the defaults ---------------------------------------------


def test_resnet18_in_float16_passes_with_defaults_and_records_both_errors():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().half().eval()
    x = torch.randn(1, 3, 64, 64).half()

    verification = harness.verify(model, (x,))

    assert verification.passed, harness.report.failure.failure_message(verification)
    (output,) = verification.output_verdicts
    assert output.rule == TRUTH and output.dtype == "float16" and output.passed
    assert output.e_torch > 0 and output.e_backend is not None and output.ratio is not None
    row = tolerances.load().lookup(OUTPUT, "cpu", "float16")  # the output's cap: the float16 output row
    assert verification.outputs[0].atol == row.atol and verification.outputs[0].rtol == row.rtol
    # a conv of its own, or the region its BatchNorm was folded into (the optimised default)
    convs = [op for op in verification.ops
             if op.aten == "aten.conv2d.default" or any(m.aten == "aten.conv2d.default" for m in op.region)]
    assert convs and all(op.dtype == "float16" and op.tolerance["dtype"] == "float16" for op in convs)
    assert all(op.verdict.rule == TRUTH and op.passed for op in convs)
    assert all(op.passed for op in verification.ops if op.attribution == "both-noise")
    record = verification.to_dict()
    assert record["output_verdicts"][0]["rule"] == TRUTH and record["ops"][0]["verdict"]["dtype"] == "float16"


@pytest.mark.parametrize("dtype", [
    pytest.param(torch.float16, id="float16"),
    pytest.param(torch.bfloat16, id="bfloat16"),
])
def test_a_transformer_encoder_in_half_precision_passes_with_defaults(dtype):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(dtype).eval()
    x = torch.randn(2, 6, 32).to(dtype)

    verification = harness.verify(model, (x,))

    assert verification.passed, harness.report.failure.failure_message(verification)
    attention = [op for op in verification.ops if "scaled_dot_product_attention" in op.aten]
    assert attention and all(op.verdict.rule == TRUTH and op.passed for op in attention)


def test_given_output_tolerances_override_the_rule():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()).half().eval()
    x = torch.randn(4, 16).half()
    tight = harness.verify(model, (x,), output_atol=1e-9, output_rtol=0.0, per_op=False)
    default = harness.verify(model, (x,), per_op=False)
    assert tight.output_verdicts[0].rule == OVERRIDE and tight.output_verdicts[0].e_torch is None  # no fp64 run
    assert default.output_verdicts[0].rule == TRUTH and default.passed
    assert tight.passed is tight.outputs[0].passed


# --- reports -----------------------------------------------------------------------------------


def test_reports_show_the_verdict_and_dtype_beside_every_tolerance():
    from harness.report import html, markdown
    from harness.report.document import case_from_verification, finish, new_document
    from harness.report.failure import failure_message
    from harness.report.schema import validate

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4)).half().eval()
    verification = harness.verify(model, (torch.randn(3, 8).half(),))
    doc = new_document(source="roundtrip run", device="cpu", exporter="roundtrip", seed=0, command="roundtrip run")
    doc["cases"] = [{**case_from_verification(verification, name="mlp"), "position": 0}]
    finish(doc)
    validate(doc)

    record = doc["cases"][0]["verification"]
    op = next(op for op in record["ops"] if op["aten"] == "aten.linear.default")
    assert op["dtype"] == "float16" and op["verdict"]["rule"] == TRUTH and op["verdict"]["dtype"] == "float16"
    assert {"e_backend", "e_torch", "ratio", "allowed", "score"} <= set(op["verdict"])
    assert record["output_verdicts"][0]["rule"] == TRUTH and record["verdict_rule"]["factor"] == RULE.factor
    text = markdown.render(doc)
    assert "| float16 |" in text and "| truth |" in text and "e_backend" in text
    page = html.render(doc)
    assert "e_backend (fp64 truth)" in page and ">float16<" in page
    assert "float16" in failure_message(verification) and "e_backend" in failure_message(verification)
