"""`VerifyOptions`: how a verification judges, documented once.

`harness.verify`, `verify_exported`, `verify_onnx` and the shape sweep keep their keyword
arguments for users; each builds one `VerifyOptions` from them and hands it to its steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from harness.analysis.backend_runs import DEFAULT_BACKEND


@dataclass(frozen=True)
class VerifyOptions:
    """How to run and judge a verification (the defaults are `harness.verify`'s).

    * `device`: "cpu", "cuda[:n]" or "reference" (onnx's ReferenceEvaluator). A CUDA request
      that cannot run on CUDA raises `runtime.BackendUnavailableError` with the reason.
    * `tolerances`: a ToleranceTable, the path of one, or None for the shipped table.
    * `per_op`: add the per-op rows (accumulated, isolated, fp64 truth) to the outputs' verdicts.
      Without it, rows are still computed where a dequantized output fails the float rule: only
      the quantized regions' rows can judge it (a note says so).
    * `output_atol`, `output_rtol`: given, they override the rule for the outputs (every output
      inside `output_atol + output_rtol*|expected|`, up to `allowed_mismatch` of the elements);
      by default each output is judged against the fp64 truth, capped by the table's output row
      for its dtype (harness.metrics.verdict).
    * `tf32`: let both torch and the backend use TF32 on CUDA (pinned the same on both sides).
    * `model_name`: the record's name (default: the module's class, or the file's folder).
    * `strict`: raise the harness's own errors instead of recording them as notes (default:
      the ROUNDTRIP_STRICT environment variable; harness.analysis.strictness).
    * `session_options`: the onnxruntime configuration to verify (an onnxruntime.SessionOptions,
      a mapping or a JSON file; runtime.OrtConfig), default onnxruntime's own.
    * `backends`: the backends to verify on ("onnxruntime", "openvino:precision=f32", BackendSpecs
      or Backends; harness.runtime.backends). The first one's outputs and rows are the record's
      own; each further one gets a BackendResult, judged against the same torch values and fp64
      truth (one that cannot run here is a named skip).
    """

    device: str = "cpu"
    tolerances: Any = None
    per_op: bool = True
    output_atol: float | None = None
    output_rtol: float | None = None
    allowed_mismatch: float = 0.0
    tf32: bool = False
    model_name: str | None = None
    strict: bool | None = None
    session_options: Any = None
    backends: Sequence[Any] = (DEFAULT_BACKEND,)

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], **overrides: Any) -> VerifyOptions:
        """The options among a public function's arguments (its `locals()`), the rest ignored."""
        return cls(**{**{f.name: arguments[f.name] for f in fields(cls) if f.name in arguments}, **overrides})

    @property
    def given_output_tolerances(self) -> bool:
        """Whether output tolerances were given, which then decide the outputs alone."""
        return self.output_atol is not None or self.output_rtol is not None
