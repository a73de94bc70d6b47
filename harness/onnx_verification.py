"""`harness.verify_onnx`: verify any ONNX model on its own, without the module it came from.

checker -> backend run vs `expected` outputs (or vs onnx's ReferenceEvaluator when none are
given) -> per ONNX node, accumulated and isolated error against the ReferenceEvaluator
(harness.analysis.onnx_rows; isolated runs batched into one backend run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from harness import runtime
from harness.metrics.arrays import as_array, contiguous
from harness.metrics.tolerances import ToleranceTable
from harness.verification.options import VerifyOptions
from harness.records import Verification
from harness.runtime.model_files import load_model_file
from harness.analysis.backend_runs import annotate_node_rows, resolve_backends
from harness.verification import judge_outputs, new_verification, run_production, tolerance_table


def verify_onnx(
    model_or_path: onnx.ModelProto | str | os.PathLike,
    inputs: Any,
    expected: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    device: str = "cpu",
    tolerances: ToleranceTable | str | None = None,
    per_op: bool = True,
    output_atol: float | None = None,
    output_rtol: float | None = None,
    allowed_mismatch: float = 0.0,
    tf32: bool = False,
    model_name: str | None = None,
    strict: bool | None = None,
    session_options: Any = None,
    backend: Any = "onnxruntime",
) -> Verification:
    """Verify an ONNX model (a proto or a path; external data is read from beside the file,
    once its locations are checked: `ModelFileError` names a bad file or a refused location).

    A file's external initializers are memory-mapped once and handed to onnxruntime as they lie,
    and the checker runs on the path, so models past protobuf's 2 GB limit verify too (the whole
    proto is never serialised); onnx's ReferenceEvaluator, when used, is fed the same mapped
    arrays as inputs, and the reproducers restore them from there: no weight is copied into a
    protobuf.

    `inputs`: arrays in graph-input order, or {name: array}. `expected`: the outputs in graph
    order (or by name); without them the ReferenceEvaluator's outputs are expected. The model
    passes when the checker passes and every output is inside `output_atol + output_rtol*|e|`
    (by default the table's output row for the output's dtype: there is no module, so no fp64
    truth). `backend`: the one backend to verify on (default onnxruntime). The other keyword
    arguments are `VerifyOptions` (harness.verification.options). An error of the ReferenceEvaluator other
    than an op it lacks is raised in strict mode (harness.analysis.onnx_rows.reference_or_reason).
    """
    options = VerifyOptions.from_arguments(locals(), backends=(backend,))
    chosen = resolve_backends(options.backends, options.device)[0]
    path = base_dir = None
    if isinstance(model_or_path, onnx.ModelProto):
        model, name = model_or_path, model_or_path.graph.name
    else:
        path = os.fspath(model_or_path)
        model = load_model_file(path, keep_initializers_external=True)
        name = os.path.basename(os.path.dirname(path)) or path
        base_dir = os.path.dirname(os.path.abspath(path))
    table = tolerance_table(options.tolerances)
    spec = runtime.DeviceSpec.parse(options.device)
    ort_config = runtime.OrtConfig.of(options.session_options)
    verification = new_verification(model, spec, model_name=options.model_name or name, exporter="given", path=path)
    verification.backend = str(chosen.spec)
    timings = verification.timings
    output_names = [o.name for o in model.graph.output]
    tf32, per_op, strict = options.tf32, options.per_op, options.strict
    with runtime.device_context(spec, tf32=tf32) as environment:
        verification.environment = {**environment, **runtime.versions(),
                                    "onnxruntime_session": runtime.session_record(ort_config)}
        started = time.perf_counter()
        shared = runtime.SharedWeights.of(model, base_dir=base_dir)
        loaded = shared.stubbed(model)
        feeds = _feeds(inputs, runtime.real_inputs(model))
        production = run_production(verification, model, spec, feeds, tf32=tf32, shared=shared,
                                    ort_config=ort_config, backend=chosen)
        actual = production.outputs
        timings["backend_s"] = time.perf_counter() - started

        reference = None
        if expected is None or per_op:
            started = time.perf_counter()
            from harness.analysis.onnx_rows import reference_or_reason

            reference_model, reference_feeds = _reference_form(model, loaded, shared, feeds)
            reference, reason = reference_or_reason(reference_model, reference_feeds, strict)
            if reference is None:
                verification.notes.append(f"onnx's ReferenceEvaluator cannot run the model: {reason[:300]}")
            timings["reference_s"] = time.perf_counter() - started
        if expected is None:
            if reference is None:
                verification.notes.append("no expected outputs and no reference: the outputs are unverified")
                return verification
            expected_list = [reference[n] for n in output_names]
        elif isinstance(expected, Mapping):
            expected_list = [expected[n] for n in output_names]
        else:
            expected_list = list(expected)
        if actual is not None:  # no module, so no fp64 truth: each output's row (or the given tolerances) decides
            judge_outputs(verification, actual, expected_list, None, output_names, table=table, device=spec.kind,
                          atol=options.output_atol, rtol=options.output_rtol, allowed_mismatch=options.allowed_mismatch)
        if len(expected_list) != len(output_names):
            verification.notes.append(f"{len(expected_list)} expected outputs for {len(output_names)} model outputs")
        if per_op and reference is not None:
            from harness.analysis.onnx_rows import analyse_nodes

            started = time.perf_counter()
            analysis = analyse_nodes(
                loaded, loaded, feeds, spec.kind, table, runtime.model_runner(spec, tf32, shared, ort_config, chosen),
                shared.stub,
                reference=reference, production=actual, environment=verification.environment, strict=strict,
                weights=shared,
            )
            annotate_node_rows(analysis.ops, str(chosen.spec), production.runtime_precisions, chosen.RUNS_DECLARED)
            verification.add_analysis(analysis)
            timings["per_op_s"] = time.perf_counter() - started
            if expected is not None and _only_the_outputs_differ(verification):
                verification.notes.append(MODEL_DIFFERS)
    verification.passed = verification.verdict(
        backend_ran=actual is not None, output_counts_match=len(expected_list) == len(output_names),
    )
    return verification


MODEL_DIFFERS = (
    "the outputs differ from the expected ones while every op agrees with onnx.reference: the backend computes "
    "this graph as the reference does, op by op, so the difference is in the model itself (it computes something "
    "else than what made the expected outputs, e.g. HardSigmoid where the module has Sigmoid), which a per-op "
    "analysis of the file alone cannot see; verify the module it came from (harness.verify, or roundtrip verify "
    "package.module:factory) to localise the op"
)


def _only_the_outputs_differ(verification: Verification) -> bool:
    """Outputs outside their tolerance while every op analysed agrees with its reference."""
    return (any(not c.passed for c in verification.outputs) and bool(verification.ops)
            and all(op.passed is not False for op in verification.ops))


def _reference_form(model: onnx.ModelProto, loaded: onnx.ModelProto, shared: runtime.SharedWeights,
                    feeds: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """`model` and `feeds` for onnx's ReferenceEvaluator: itself, or, with external initializers,
    the stubbed model with those declared as inputs fed their memory-mapped arrays
    (SharedWeights.reference_form at no size limit: nothing copied into the proto)."""
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        return model, feeds
    return shared.reference_form(loaded, feeds, limit=0)


def _feeds(inputs: Any, names: list[str]) -> dict[str, np.ndarray]:
    if isinstance(inputs, Mapping):
        return {k: contiguous(v) for k, v in inputs.items()}  # a bfloat16 array stays one
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    if len(inputs) != len(names):
        raise ValueError(f"the model takes {len(names)} input(s) {names}, got {len(inputs)}")
    return {n: contiguous(v) for n, v in zip(names, inputs)}
