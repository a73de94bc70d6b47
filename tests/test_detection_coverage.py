"""tools/gen_coverage.py's reason for a failed export names the data-dependent guard that stopped
torch.export, wherever it sits in the chain of causes (torch.onnx's own message says only that
step 1 failed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("gen_coverage", Path(__file__).parents[1] / "tools" / "gen_coverage.py")
gen_coverage = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gen_coverage)

GUARD = ("Could not guard on data-dependent expression Eq(4*u1, 0) (unhinted: Eq(4*u1, 0)).  (Size-like symbols: u1)"
         "\n\nconsider using data-dependent friendly APIs\nCaused by: (torchvision/ops/boxes.py:92 in batched_nms)\n"
         "For more information, run with TORCH_LOGS=\"dynamic\"")


def _chained(inner: BaseException, outer: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except type(inner) as error:
            raise outer from error
    except type(outer) as error:
        return error


def test_the_guard_behind_torch_onnx_step_one_is_named() -> None:
    error = _chained(RuntimeError(GUARD), ValueError("Failed to export the model with torch.export. This is step 1/3"))
    assert gen_coverage._first_line(error).startswith(
        "RuntimeError: Could not guard on data-dependent expression Eq(4*u1, 0) at torchvision/ops/boxes.py:92; "
        "ValueError: Failed to export")


def test_the_op_behind_torch_onnx_step_three_is_named() -> None:
    missing = ("No ONNX function found for <OpOverload(op='quantized_decomposed.choose_qparams', overload='tensor')>. "
               "Failure message: No decompositions registered for the real-valued input")
    error = _chained(RuntimeError(missing), ValueError("Failed to convert the exported program. This is step 3/3"))
    assert gen_coverage._first_line(error).startswith(
        "RuntimeError: no ONNX function for quantized_decomposed.choose_qparams.tensor; ValueError: Failed to convert")


@pytest.mark.parametrize("message", ["Expected more than 1 value per channel", "x\x1b[31m red\x1b[0m\n  y"])
def test_other_errors_keep_their_first_line(message: str) -> None:
    line = gen_coverage._first_line(ValueError(message))
    assert line.startswith("ValueError: ") and "\x1b" not in line and "\n" not in line


@pytest.mark.parametrize("kind, seconds", [("zoo", 1800), ("detection", 1800), ("huggingface", 1800),
                                           ("quantized", 3600)])
def test_a_quantized_case_has_the_limit_once_per_level(kind: str, seconds: int) -> None:
    assert gen_coverage.model_timeout({"name": "m", "kind": kind}, 1800) == seconds
