"""Per-op verification on several backends against one fp64 truth: planted faults are found at
their op and blamed on the backend that has them, a backend running below the declared
precision is judged at that precision and named, and a backend that cannot run is skipped."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch

import harness
from harness.runtime.backends import Backend, BackendSpec, PreparedModel, get_backend


class Net(torch.nn.Module):
    """Three layers: conv, relu, conv, relu, a residual add, a mean and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y
        return self.fc(y.mean((2, 3)))


def net_and_input():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 3, 12, 12)


class PlantedFault(Backend):
    """A test-only backend: `inner`, with the value `target` pushed off by 5% of its largest
    magnitude wherever a run returns it (the production, instrumented and isolation runs)."""

    name = "planted"

    def __init__(self, inner: str, target: str) -> None:
        self.inner = get_backend(inner)
        self.target = target
        self.spec = BackendSpec("planted", (("inner", str(self.inner.spec)), ("target", target)))
        self.RUNS_DECLARED = self.inner.RUNS_DECLARED

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        return self.inner.unavailable_reason(device)

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        return PlantedRep(self.inner.prepare(model, device, **options), self.target)


class PlantedRep(PreparedModel):
    def __init__(self, inner: PreparedModel, target: str) -> None:
        self.inner, self.target = inner, target
        self.model, self.input_names, self.output_names = inner.model, inner.input_names, inner.output_names

    def run(self, inputs: Any) -> list[np.ndarray]:
        outputs = self.inner.run(inputs)
        return [self._plant(o) if self._targeted(name) else o for name, o in zip(self.output_names, outputs)]

    def _targeted(self, name: str) -> bool:
        """Whether output `name` is the target's value: its own name, or a copy's in a model that
        holds it twice (`target::k` in an isolation batch, `target::joint` beside the instrumented
        model), as a faulty kernel gets every copy wrong."""
        return name.split("::")[0] == self.target

    def _plant(self, value: np.ndarray) -> np.ndarray:
        value = np.asarray(value)
        shift = 0.05 * float(np.max(np.abs(value.astype(np.float64)))) + 1e-3
        return (value.astype(np.float64) + shift).astype(value.dtype)

    def variant(self, model: onnx.ModelProto) -> PreparedModel:
        return PlantedRep(self.inner.variant(model), self.target)

    def runtime_precisions(self):
        return self.inner.runtime_precisions()


def available(spec: str) -> str:
    reason = get_backend(spec).unavailable_reason("CPU")
    if reason:
        pytest.skip(f"{spec}: {reason}")
    return spec


PLANTED = [
    # (faulty backend's inner, the op whose value it gets wrong, the clean backend, dtype, faulty first)
    ("onnxruntime", "conv2d", "openvino:precision=f32", None, True),
    ("openvino:precision=f32", "conv2d_1", "onnxruntime", None, False),
    ("onnx.reference", "linear", "onnxruntime", None, False),
    ("onnxruntime:level=disabled", "mean", "onnx.reference", None, True),
    ("onnxruntime", "add", "onnx.reference", "float16", True),
    ("openvino:precision=f32", "relu", "onnxruntime:level=basic", None, False),
    ("onnx.reference", "conv2d", "openvino:precision=f32", "bfloat16", False),
]


@pytest.mark.parametrize("inner, target, clean, dtype, faulty_first", PLANTED,
                         ids=[f"{p[1]}-{p[0]}-{p[3] or 'float32'}" for p in PLANTED])
def test_a_planted_fault_is_found_at_its_op_and_blamed_on_its_backend(inner, target, clean, dtype, faulty_first):
    faulty = PlantedFault(available(inner), target)
    backends = (faulty, available(clean)) if faulty_first else (available(clean), faulty)
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=backends, dtype=dtype)
    result = verification.backend_results[0]
    rows = {"first": verification.ops, "second": result.ops}
    faulty_rows = {r.fx_node: r for r in rows["first" if faulty_first else "second"]}
    clean_rows = {r.fx_node: r for r in rows["second" if faulty_first else "first"]}

    assert target in faulty_rows, sorted(faulty_rows)
    assert faulty_rows[target].passed is False and faulty_rows[target].blame == "runtime"
    assert faulty_rows[target].backend == str(faulty.spec)
    assert [name for name, r in faulty_rows.items() if r.passed is False] == [target]  # localised
    assert not [name for name, r in clean_rows.items() if r.passed is False or r.blame]  # the clean one is clean
    worst = verification.worst_op if faulty_first else result.worst_op
    assert worst.fx_node == target


class ProductionFault(PlantedFault):
    """A test-only backend whose production run alone (the model as given, its outputs exactly
    `target`) gets `target` wrong: its rows, from the instrumented and isolation runs, stay clean,
    so only its output verdict fails (as OpenVINO's inception_v3 output failed the output row's
    cap with every row passing)."""

    name = "production-fault"

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        rep = self.inner.prepare(model, device, **options)
        return PlantedRep(rep, self.target) if [o.name for o in model.graph.output] == [self.target] else rep


def test_a_backend_failing_only_at_an_output_names_the_output_in_its_results_and_reports():
    from harness.report import markdown
    from harness.report.document import case_from_verification
    from harness.report.summary import BackendEntry
    from tests.test_report_document import document

    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=("onnxruntime", ProductionFault("onnxruntime", "linear")))
    result = verification.backend_results[0]
    assert result.passed is False and verification.passed
    assert not [op.fx_node for op in result.ops if op.passed is False]  # no row fails: the output does
    (failure,) = BackendEntry.of(result.to_dict()).failures
    assert failure.startswith("output `linear` (rule: e_backend ")
    case = case_from_verification(verification.to_dict(), name="net", seconds=1.0)
    row = next(line for line in markdown.render(document([case])).splitlines() if line.startswith("| net | FAIL"))
    assert "output `linear` (rule: e_backend" in row


@pytest.mark.parametrize("checker, outputs, named", [
    (False, [np.zeros(5, np.float32)], "the run: the ONNX checker refused the model"),
    (True, [], "the run: the backend made 0 outputs, torch 1"),
    (True, None, "the run: the backend made no outputs, torch 1"),
])
def test_a_backend_failing_with_no_output_verdict_names_the_run(checker, outputs, named):
    from harness.analysis.backend_runs import BackendRun
    from harness.analysis.rows import BackendResult
    from harness.metrics.comparison import compare
    from harness.report.summary import BackendEntry

    production = harness.runtime.ProductionRun(outputs)
    result = BackendResult("planted")
    result.outputs = [compare(np.zeros(5, np.float32), np.zeros(5, np.float32), atol=1e-5, rtol=1e-4, name="y")]
    finished = BackendRun(get_backend("onnxruntime"), production, result).finish(checker, expected_outputs=1)
    assert finished.passed is False
    assert named in BackendEntry.of(finished.to_dict()).failures


def test_every_backend_failing_an_op_blames_the_export():
    model, x = net_and_input()
    backends = (PlantedFault("onnxruntime", "linear"), PlantedFault(available("onnx.reference"), "linear"))
    verification = harness.verify(model, (x,), backends=backends)
    row = next(r for r in verification.ops if r.fx_node == "linear")
    other = next(r for r in verification.backend_results[0].ops if r.fx_node == "linear")
    assert (row.blame, other.blame) == ("export", "export")


def test_openvino_in_bfloat16_is_judged_in_bfloat16_and_named_not_blamed_on_the_export():
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=("onnxruntime", available("openvino:precision=bf16")))
    result = verification.backend_results[0]
    assert result.settings["runtime"]["precision"] == "bfloat16"
    convs = [r for r in result.ops if r.aten.startswith("aten.conv2d")]
    assert convs and all(r.runtime_precision.precision == "bfloat16" for r in convs)
    assert all(r.runtime_precision.source == "runtime model" for r in convs)
    assert all(r.passed and r.verdict.dtype == "bfloat16" for r in convs)
    assert any(r.blame == "runtime-precision" for r in convs)  # float32's rule would fail them
    assert all("runtime precision bfloat16 (runtime model)" in " ".join(r.notes) for r in convs)
    assert not any(r.blame == "export" for r in result.ops + verification.ops)
    assert result.passed and verification.passed
    assert all(r.runtime_precision.precision == "float32" for r in verification.ops if r.dtype == "float32")


def test_openvino_default_names_the_precision_its_compiled_model_reports():
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=(available("openvino"),))
    hinted = verification.backend_settings["runtime"]["precision"]
    conv = next(r for r in verification.ops if r.aten.startswith("aten.conv2d"))
    assert conv.runtime_precision.precision == hinted and conv.runtime_precision.source == "runtime model"
    assert verification.passed and not any(r.blame == "export" for r in verification.ops)


def test_a_backend_that_cannot_run_is_a_named_skip():
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=("onnxruntime", "onnxruntime:provider=tensorrt"),
                                  per_op=False)
    skipped = verification.backend_results[0]
    if not skipped.skipped:
        pytest.skip("TensorRT runs here")
    assert "TensorrtExecutionProvider" in skipped.skipped and skipped.passed is None and verification.passed
    assert verification.to_dict()["backend_results"][0]["skipped"] == skipped.skipped


def test_the_first_backend_must_run():
    model, x = net_and_input()
    with pytest.raises(harness.runtime.BackendUnavailableError, match="TensorrtExecutionProvider"):
        harness.verify(model, (x,), backends=("onnxruntime:provider=tensorrt",))


def test_verify_onnx_on_a_backend_names_the_precision_of_each_node():
    from test_backends import INPUT, MODEL

    verification = harness.verify_onnx(MODEL, [INPUT], backend=available("openvino:precision=bf16"))
    assert verification.backend == "openvino:precision=bf16"
    rows = {row.fx_node: row for row in verification.ops}
    assert rows["conv1"].backend == "openvino:precision=bf16"
    assert rows["conv1"].runtime_precision.precision == "bfloat16"
    assert "runtime precision bfloat16 (runtime model), below the declared float32" in rows["conv1"].notes
    plain = harness.verify_onnx(MODEL, [INPUT])
    assert {row.runtime_precision.source for row in plain.ops} == {"declared"} and plain.passed


def test_output_tolerances_given_for_float32_do_not_hold_a_backend_running_bfloat16():
    model, x = net_and_input()
    verification = harness.verify(model, (x,), output_atol=1e-5, output_rtol=1e-4,
                                  backends=("onnxruntime", available("openvino:precision=bf16")))
    assert [v.rule for v in verification.output_verdicts] == ["override"]  # the given tolerances decide
    (verdict,) = verification.backend_results[0].output_verdicts
    assert verdict.rule == "truth" and verdict.dtype == "bfloat16" and verdict.passed
    assert verdict.reason.startswith("the backend ran below the declared float32: judged as bfloat16")
    assert verification.backend_results[0].passed


@pytest.mark.nightly
def test_resnet18_on_openvino_in_bfloat16_is_judged_in_bfloat16_with_no_export_blame():
    import model_zoo_cases

    case = model_zoo_cases.get("resnet18")
    verification = harness.verify(case.module(), case.inputs(),
                                  backends=("onnxruntime", available("openvino:precision=bf16")))
    result = verification.backend_results[0]
    convs = [r for r in result.ops if "Conv" in r.onnx_ops]  # batch norms folded into their convolutions
    assert len(convs) == 20 and all(r.runtime_precision.precision == "bfloat16" for r in convs)
    assert result.passed and verification.passed
    assert not [r.fx_node for r in result.ops if r.blame in ("export", "runtime")]
