"""The backend axis of rows and reports: OpRecord's and Verification's backend fields with their
defaults (every existing producer keeps working), the compact report rows, schema version 3,
and a version 2 parity.json (the committed baseline) still loading and validating."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from harness.metrics.comparison import compare
from harness.metrics.quant_steps import quant_steps
from harness.records import BackendResult, CheckerResult, OpRecord, Verification
from harness.report.document import SCHEMA_VERSION, case_from_verification, finish, new_document
from harness.report.files import load_report, read_json_text
from harness.report.schema import validate
from harness.runtime.backends import RuntimePrecision

BASELINE = Path(__file__).resolve().parent.parent / "reports" / "baseline"


def row(name: str, **fields) -> OpRecord:
    measured = compare(np.ones(3, np.float32), np.ones(3, np.float32), atol=1e-5, rtol=1e-4)
    return OpRecord(fx_node=name, aten="aten.conv2d.default", onnx_nodes=[name], onnx_ops=["Conv"], scope="Net",
                    source="net.py:3", accumulated=measured, isolated=measured, passed=True, dtype="float32",
                    **fields)


def test_defaults_keep_every_existing_producer_working():
    out = row("conv").to_dict()
    assert out["backend"] == "onnxruntime" and out["runtime_precision"] is None
    assert out["quant_steps"] is None and out["blame"] == ""
    record = Verification("m", "roundtrip", "cpu", True, CheckerResult(True), outputs=[])
    assert record.to_dict()["backend"] == "onnxruntime" and record.to_dict()["backend_results"] == []


def verification_with_backends() -> Verification:
    steps = quant_steps(np.array([1, 3], np.int8), np.array([0.5, 2.0]), scale=0.5)
    primary = row("conv", backend="onnxruntime", runtime_precision=RuntimePrecision("float32"))
    other = row("conv", backend="openvino:precision=bf16", runtime_precision=RuntimePrecision("bf16", "runtime model"),
                quant_steps=steps, blame="runtime-precision")
    record = Verification("m", "roundtrip", "cpu", True, CheckerResult(True), outputs=[], ops=[primary],
                          backend="onnxruntime", backend_settings={"backend": "onnxruntime"})
    record.backend_results = [
        BackendResult("openvino:precision=bf16", passed=True, ops=[other], settings={"config": {"X": "bf16"}}),
        BackendResult("onnxruntime:provider=tensorrt", skipped="onnxruntime has no TensorrtExecutionProvider"),
    ]
    return record


def test_rows_carry_backend_precision_steps_and_blame_into_a_valid_report():
    record = verification_with_backends()
    doc = new_document(source="roundtrip run", device="cpu", exporter="roundtrip", seed=0, command="roundtrip run")
    doc["backends"] = ["onnxruntime", "openvino:precision=bf16"]
    doc["cases"] = [case_from_verification(record, name="net")]
    finish(doc)
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    validate(doc)
    verification = doc["cases"][0]["verification"]
    assert verification["backend"] == "onnxruntime"
    assert verification["ops"][0]["runtime_precision"] == {"precision": "float32", "source": "declared"}
    other, skipped = verification["backend_results"]
    assert other["ops"][0]["runtime_precision"] == {"precision": "bfloat16", "source": "runtime model"}
    assert other["ops"][0]["quant_steps"]["off_by_one_or_more"] == 1 and other["ops"][0]["blame"] == "runtime-precision"
    assert other["worst_op"] == "conv" and skipped["skipped"].startswith("onnxruntime has no")


@pytest.mark.parametrize("mutate, where", [
    (lambda v: v["ops"][0].update(blame="gremlins"), "blame"),
    (lambda v: v["ops"][0].update(runtime_precision={"precision": "bfloat16", "source": "guess"}), "source"),
    (lambda v: v["backend_results"][0]["ops"][0]["quant_steps"].pop("at_ties"), "at_ties"),
    (lambda v: v["backend_results"][1].pop("skipped"), "skipped"),
])
def test_schema_rejects_broken_backend_fields(mutate, where):
    doc = new_document(source="roundtrip run", device="cpu", exporter="roundtrip", seed=0, command="roundtrip run")
    doc["cases"] = [case_from_verification(verification_with_backends(), name="net")]
    finish(doc)
    mutate(doc["cases"][0]["verification"])
    with pytest.raises(jsonschema.ValidationError) as caught:
        validate(doc)
    assert where in str(caught.value)


def test_a_version_2_report_still_loads_and_validates(tmp_path):
    """The committed baseline (version 2), cut to its first verified case and a few rows so the
    test stays quick (validating all of it takes a minute)."""
    document = json.loads(read_json_text(BASELINE / "parity.json.gz"))
    assert document["schema_version"] == 2
    case = copy.deepcopy(next(case for case in document["cases"] if case.get("verification")))
    case["verification"]["ops"] = case["verification"]["ops"][:8]
    document["cases"] = [case]
    (tmp_path / "parity.json").write_text(json.dumps(document))
    loaded = load_report(tmp_path)
    assert loaded["cases"][0]["verification"]["ops"] and "backend" not in loaded["cases"][0]["verification"]["ops"][0]
