"""The smoke tier and the CI detector over a shape sweep of 3 sizes (every CI run).

Each case is exported once with its swept axes dynamic (ModelCase.swept_axes: image sides too),
verified at its traced size (outputs only: per-op analysis is covered elsewhere) and swept over
3 sizes inside its declared ranges (the traced size, every axis moved to a distinct prime, the
ranges' lower bounds). A sweep failure runs the per-op analysis at the first failing size, so
its message names the first failing op. The nightly workflow sweeps the whole zoo at 8 sizes
(`roundtrip run --shapes 8`).

A case that fails because of a known exporter bug is an xfail naming that exact failure: the
test raises KnownFailure only when the failure is the recorded one (size and first failing op,
or the export's error), so another failure fails the test, and a fix makes it XPASS, which
strict=True turns into a failure until the entry is removed. DenseNet-121 and Inception v3, whose
exports with dynamic image sides take minutes, run with the nightly tests.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest

import model_zoo_cases
from exporter.errors import ExportError
from harness.exporters import export_for_verification
from harness.verification import sweep_shapes, verify_exported
from model_zoo_cases.registry import DETECTOR_SIDE_RANGE

CI_SIZES = 3


class KnownFailure(Exception):
    """The case failed exactly as its KNOWN entry records."""


@dataclass(frozen=True)
class Known:
    """A recorded exporter bug: the export's error text, or the first failing size and op."""

    reason: str
    export_error: str = ""
    size: str = ""
    op: str = ""


# No smoke case is a known failure today (adaptive pooling at run-time sizes exports since the
# exporter computes its windows in the graph); a new one is recorded here with its exact failure.
KNOWN: dict[str, Known] = {}
# Cases whose export with dynamic image sides takes minutes on a CI machine: swept nightly, at 8
# sizes, by `roundtrip run --shapes 8` (both pass all 8 there).
NIGHTLY = {"densenet121", "inception_v3"}


def _marks(name: str) -> list:
    marks = [pytest.mark.nightly] if name in NIGHTLY else []
    if name in KNOWN:
        marks.append(pytest.mark.xfail(raises=KnownFailure, strict=True, reason=KNOWN[name].reason))
    return marks


def _params(cases):
    return [pytest.param(case, id=case.name, marks=_marks(case.name)) for case in cases]


def sweep_case(module, args, *, name, input_names, axes, ranges, atol=None, rtol=None, allowed_mismatch=0.0):
    """Export with `axes` dynamic, verify at the traced size (outputs only), sweep CI_SIZES sizes."""
    known = KNOWN.get(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = export_for_verification("roundtrip", module, args, dynamic_axes=axes,
                                               input_names=list(input_names))
    except ExportError as error:
        if known and known.export_error and known.export_error in str(error):
            raise KnownFailure(str(error).splitlines()[0]) from error
        raise
    judged = dict(output_atol=atol, output_rtol=rtol, allowed_mismatch=allowed_mismatch)
    verification = verify_exported(exported, args, module=module, per_op=False, model_name=name, strict=True,
                                   **judged)
    sweep_shapes(verification, exported, module, args, CI_SIZES, dynamic_axes=axes, axis_ranges=ranges,
                 strict=True, **judged)
    sweep = verification.shape_sweep
    failing = sweep.first_failing
    if known and known.size and failing is not None and failing.point.label() == known.size and \
            (sweep.first_failing_op or {}).get("fx_node") == known.op:
        raise KnownFailure(sweep.diagnosis)
    return verification


def _describe(verification) -> str:
    sweep = verification.shape_sweep
    sizes = "; ".join(f"{s.point.label()}: {s.status}{f' ({s.error})' if s.error else ''}" for s in sweep.sizes)
    return f"{sizes}. {sweep.diagnosis}. notes: {verification.notes}"


@pytest.mark.parametrize("case", _params(model_zoo_cases.select(tier="smoke")))
def test_smoke_case_holds_over_a_sweep_of_three_sizes(case):
    verification = sweep_case(case.module(0), case.inputs(0), name=case.name, input_names=case.input_names,
                              axes=case.swept_axes(), ranges=case.axis_ranges, atol=case.atol, rtol=case.rtol,
                              allowed_mismatch=case.allowed_mismatch_fraction)
    sweep = verification.shape_sweep
    assert verification.passed and sweep.passed, _describe(verification)
    assert len(sweep.sizes) == CI_SIZES and sweep.sizes[0].point.reasons == ["traced"]
    assert {axis.name for axis in sweep.axes.axes} == {name for dims in case.swept_axes().values()
                                                       for name in dims.values()}


def test_the_ci_detector_holds_over_a_sweep_of_three_sizes():
    from tests.test_detection_models import CI_DETECTOR, _ci_model

    import torch

    images = CI_DETECTOR.images(torch.Generator().manual_seed(0), 1)
    ranges = {"height": DETECTOR_SIDE_RANGE, "width": DETECTOR_SIDE_RANGE}
    verification = sweep_case(_ci_model(), images, name=CI_DETECTOR.name, input_names=["images"],
                              axes={"images": {2: "height", 3: "width"}}, ranges=ranges, atol=1e-3, rtol=1e-3)
    sweep = verification.shape_sweep
    assert verification.passed and sweep.passed, _describe(verification)
    assert [s.point.label() for s in sweep.sizes] == ["height 128, width 128", "height 131, width 137",
                                                      "height 96, width 96"]
