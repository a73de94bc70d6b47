"""Per-op rows of the smallest smoke cases on OpenVINO, held to float32 and at the machine's
default precision, beside onnxruntime and against the same fp64 truth: every backend passes,
no row fails or is blamed on the export or a runtime, and each OpenVINO row names the precision
its runtime layer ran at (the runtime model). Where the CPU has bfloat16 instructions OpenVINO's
default runs convolutions, matrix products and the LSTM in bfloat16: a row whose error only that
precision's rule admits says so (blame `runtime-precision`), and only such a row. The rest of the smoke tier runs on OpenVINO outputs-only in
tests/test_zoo_roundtrip.py."""

from __future__ import annotations

import pytest

import harness
import model_zoo_cases
from harness.analysis.rows import BLAME_RUNTIME_PRECISION as LOWER
from harness.runtime.backends import get_backend, is_lower

BACKENDS = ("onnxruntime", "openvino:precision=f32", "openvino")
SMALLEST = ("dcgan_generator", "dcgan_discriminator", "word_language_model_lstm")


@pytest.mark.parametrize("name", SMALLEST)
def test_smallest_smoke_cases_have_clean_rows_on_openvino(name):
    reason = get_backend("openvino").unavailable_reason("CPU")
    if reason:
        pytest.skip(f"openvino: {reason}")
    case = model_zoo_cases.get(name)
    verification = harness.verify(case.module(0), case.inputs(0), input_names=list(case.input_names),
                                  output_atol=case.atol, output_rtol=case.rtol, model_name=name,
                                  backends=BACKENDS)
    assert verification.passed and [r.backend for r in verification.backend_results] == list(BACKENDS[1:])
    for result in verification.backend_results:
        assert result.passed, (result.backend, [c.to_dict() for c in result.outputs if not c.passed])
        runtime = result.settings["runtime"]["precision"]
        if result.backend.endswith("f32"):
            assert runtime == "float32"
        rows = result.ops
        assert len(rows) == len(verification.ops) and rows
        assert not [(r.fx_node, r.blame, r.notes) for r in rows if r.passed is False or r.blame not in ("", LOWER)]
        lowered = [r for r in rows if r.runtime_precision is not None and is_lower(r.runtime_precision.precision, r.dtype)]
        assert all(r in lowered for r in rows if r.blame == LOWER)  # named on rows the runtime ran lower only
        measured = [r for r in rows if r.runtime_precision is not None and r.runtime_precision.source == "runtime model"]
        assert measured, "no row carries the precision OpenVINO's runtime model reports"
        assert all(r.runtime_precision.precision in ("float32", runtime) for r in measured)
