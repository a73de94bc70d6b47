"""Assertions for any test suite: verify a model (or an ONNX file) and fail with the per-op table.

    from harness.testing import assert_roundtrip

    def test_my_model():
        assert_roundtrip(MyModel().eval(), (torch.randn(2, 8),), atol=1e-5)

A failing verification raises `RoundtripAssertionError` (an AssertionError) whose message is
harness.report.failure's table: the worst ops by tolerance ratio with their FX node, ONNX ops,
isolated and accumulated errors, tolerance, attribution, scope and source line, ending with the
folder of a reproducer of the worst op that can be isolated (`harness.write_reproducer`). The
pytest plugin's `roundtrip` fixture raises the same error.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from harness.onnx_verification import verify_onnx
from harness.records import OpRecord, Verification
from harness.report.failure import failure_message
from harness.reproducer import write_reproducer
from harness.verification import verify

__all__ = ["RoundtripAssertionError", "assert_roundtrip", "assert_roundtrip_onnx", "assert_verified",
           "reproducer_op"]


class RoundtripAssertionError(AssertionError):
    """A verification that failed; `verification` and `reproducer` (a folder or None) ride along."""

    def __init__(self, verification: Verification, reproducer: str | None, message: str) -> None:
        super().__init__(message)
        self.verification = verification
        self.reproducer = reproducer


def reproducer_op(verification: Verification) -> OpRecord | None:
    """The op a reproducer should show: the worst failing op that was isolated, else the worst
    isolated op (the model failed through accumulation), else None."""
    isolated = [op for op in verification.ops if op.artifacts is not None and op.isolated is not None]
    failing = [op for op in isolated if op.passed is False] or isolated
    return max(failing, key=lambda op: op.error_ratio, default=None)


def write_failure_reproducer(verification: Verification, directory: str | os.PathLike | None
                             ) -> tuple[str | None, str]:
    """(folder of the reproducer written under `directory` (a new temporary folder when None),
    "") or (None, why there is none)."""
    op = reproducer_op(verification)
    if op is None:
        reasons = sorted({op.not_isolable for op in verification.ops if op.not_isolable})
        why = "no op was isolated" + (f" ({reasons[0]})" if reasons else
                                      " (per-op analysis was off, or the model never ran)")
        return None, why
    folder = os.fspath(directory) if directory is not None else tempfile.mkdtemp(prefix="roundtrip-reproducer-")
    try:
        return write_reproducer(op, folder), ""
    except (OSError, ValueError) as error:
        return None, f"writing it under {folder} failed: {type(error).__name__}: {error}"


def assert_verified(verification: Verification, *, reproducer_dir: str | os.PathLike | None = None
                    ) -> Verification:
    """Return `verification` when it passed; else write a reproducer under `reproducer_dir` and
    raise RoundtripAssertionError with the per-op failure table."""
    __tracebackhide__ = True
    if verification.passed:
        return verification
    reproducer, why = write_failure_reproducer(verification, reproducer_dir)
    message = failure_message(verification, reproducer=reproducer, reproducer_note=why)
    raise RoundtripAssertionError(verification, reproducer, message)


def assert_roundtrip(model: Any, args: Any, *, device: str = "cpu", exporter: str = "roundtrip",
                     opset: int | None = None, atol: float | None = None, rtol: float | None = None,
                     tolerances: Any = None, reproducer_dir: str | os.PathLike | None = None,
                     **verify_options: Any) -> Verification:
    """`harness.verify(model, args, ...)`, then `assert_verified`. `atol`/`rtol`, given, judge the
    model's outputs instead of the verdict rule; `tolerances` (a ToleranceTable or a path) the ops; `verify_options` go to
    harness.verify (dynamic_axes, input_names, onnx_model, allowed_mismatch, per_op, tf32,
    model_name). Returns the Verification when it passed."""
    __tracebackhide__ = True
    verification = verify(model, args, device=device, exporter=exporter, opset_version=opset,
                          output_atol=atol, output_rtol=rtol, tolerances=tolerances, **verify_options)
    return assert_verified(verification, reproducer_dir=reproducer_dir)


def assert_roundtrip_onnx(model_or_path: Any, inputs: Any, expected: Any = None, *, device: str = "cpu",
                          atol: float | None = None, rtol: float | None = None,
                          tolerances: Any = None, reproducer_dir: str | os.PathLike | None = None,
                          **verify_options: Any) -> Verification:
    """`harness.verify_onnx(model_or_path, inputs, expected, ...)`, then `assert_verified`."""
    __tracebackhide__ = True
    verification = verify_onnx(model_or_path, inputs, expected, device=device, output_atol=atol,
                               output_rtol=rtol, tolerances=tolerances, **verify_options)
    return assert_verified(verification, reproducer_dir=reproducer_dir)
