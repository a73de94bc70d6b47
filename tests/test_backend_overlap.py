"""A further backend's steps on a worker thread (harness.analysis.overlap) change nothing that is
judged: every backend's rows, scores, verdicts and notes equal those of the sequential run; a model
the backend refuses on the worker is the same clear note or row as before, and an error of the
harness's own raised there reaches the caller with nothing left running."""

from __future__ import annotations

import json
import threading
from typing import Any

import onnx
import pytest
import torch
from onnx import helper

import harness
from harness.analysis import fx_rows, overlap
from harness.analysis.backend_runs import BackendRun
from harness.onnxgraph.isolation import INPUT_PREFIX
from harness.runtime.backends import Backend, BackendSpec, PreparedModel, get_backend
from tests.test_backend_verification import Net  # conv, relu, conv, relu, a residual add: fused layers on OpenVINO


class Softmaxed(torch.nn.Module):
    """A linear layer, a softmax and a top-k: a reduction and an index output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 12)

    def forward(self, x):
        probabilities = torch.softmax(self.fc(x), dim=-1)
        return probabilities, torch.topk(probabilities, 3).indices


def available(spec: str) -> str:
    reason = get_backend(spec).unavailable_reason("CPU")
    if reason:
        pytest.skip(f"{spec}: {reason}")
    return spec


def case(module: type[torch.nn.Module], shape: tuple[int, ...]) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return module().eval(), (torch.randn(*shape),)


def digest(verification: Any) -> list[Any]:
    """Everything judged, per backend: the verdict, each output's comparison and each row's
    errors, verdict, score, blame, runtime precision, fused layer and notes."""
    records = [(verification.backend, verification.passed, verification.ops, verification.outputs,
                verification.output_verdicts)]
    records += [(r.backend, r.passed, r.ops, r.outputs, r.output_verdicts) for r in verification.backend_results]
    found = []
    for backend, passed, ops, outputs, verdicts in records:
        rows = [json.dumps(op.to_dict(), sort_keys=True, default=str) for op in ops]
        found.append((backend, passed, rows, [json.dumps(c.to_dict(), sort_keys=True, default=str) for c in outputs],
                      [json.dumps(v.to_dict(), sort_keys=True, default=str) for v in verdicts]))
    return [found, sorted(verification.notes), [sorted(r.notes) for r in verification.backend_results],
            [r.skipped for r in verification.backend_results]]


def verify_both_ways(monkeypatch, module, args, backends) -> tuple[Any, Any]:
    """The verification run sequentially, then with the further backends on the worker (where
    their production runs and rows were measured is checked)."""
    threads: dict[str, set[str]] = {"production": set(), "rows": set()}

    def on_thread(step: str, function: Any) -> Any:
        def run(*arguments: Any, **keywords: Any) -> Any:
            threads[step].add(threading.current_thread().name.split("_")[0])
            return function(*arguments, **keywords)
        return run

    monkeypatch.setattr(BackendRun, "start", on_thread("production", BackendRun.start))
    monkeypatch.setattr(fx_rows, "_measure", on_thread("rows", fx_rows._measure))
    monkeypatch.setattr(overlap, "OVERLAP", False)
    sequential = harness.verify(module, args, backends=backends)
    assert threads == {"production": {"MainThread"}, "rows": {"MainThread"}}
    monkeypatch.setattr(overlap, "OVERLAP", True)
    overlapped = harness.verify(module, args, backends=backends)
    assert threads == {"production": {"MainThread", "roundtrip-backend"}, "rows": {"MainThread", "roundtrip-backend"}}
    return sequential, overlapped


SAME = [
    # (model, input shape, backends)
    (Net, (2, 3, 12, 12), ("onnxruntime", "openvino:precision=f32")),
    (Net, (2, 3, 12, 12), ("openvino:precision=f32", "onnxruntime")),
    (Net, (2, 3, 12, 12), ("onnxruntime", "openvino")),  # the plugin's default: bfloat16 where the CPU has it
    (Net, (2, 3, 12, 12), ("onnxruntime", "onnx.reference")),
    (Net, (2, 3, 12, 12), ("onnxruntime", "openvino:precision=f32", "onnxruntime:level=disabled")),
    (Softmaxed, (4, 16), ("onnxruntime", "openvino:precision=f32")),
]


@pytest.mark.parametrize("module, shape, backends", SAME,
                         ids=[f"{m.__name__}-{'+'.join(b)}" for m, _, b in SAME])
def test_the_rows_on_the_worker_equal_the_sequential_rows(monkeypatch, module, shape, backends):
    backends = tuple(available(spec) for spec in backends)
    model, args = case(module, shape)
    sequential, overlapped = verify_both_ways(monkeypatch, model, args, backends)
    assert len(sequential.backend_results) == len(backends) - 1
    assert all(r.ops for r in sequential.backend_results)  # every further backend has its rows
    assert digest(overlapped) == digest(sequential)


class Refusing(Backend):
    """A test-only backend: OpenVINO given, where `refuse` says, a model with a node of an
    operator no domain defines, so that OpenVINO's own load error is what the harness reports:
    the production model (Net's, with its one output) or its variants (the instrumented model,
    with more, and the isolation models, fed torch's values); or raising an error of the
    harness's own (`harness_bug`)."""

    name = "refusing"

    def __init__(self, refuse: str) -> None:
        self.inner = get_backend("openvino:precision=f32")
        self.refuse = refuse
        self.spec = BackendSpec("refusing", (("refuse", refuse),))
        self.RUNS_DECLARED = self.inner.RUNS_DECLARED

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        return self.inner.unavailable_reason(device)

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        if self.refuse == "harness_bug":
            raise ZeroDivisionError("a planted error of the harness's own code")
        variant = len(model.graph.output) > 1 or any(i.name.startswith(INPUT_PREFIX) for i in model.graph.input)
        if (self.refuse == "variants") == variant:
            model = unknown_operator(model)
        return self.inner.prepare(model, device, **options)


def unknown_operator(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with one more node and output, of an operator no domain defines, on its first input."""
    refused = onnx.ModelProto()
    refused.CopyFrom(model)
    first = refused.graph.input[0].name
    refused.graph.node.append(helper.make_node("NoSuchOperator", [first], ["refused::out"], domain="no.such.domain"))
    refused.graph.output.append(helper.make_tensor_value_info("refused::out", onnx.TensorProto.FLOAT, None))
    refused.opset_import.append(helper.make_opsetid("no.such.domain", 1))
    return refused


def test_a_production_model_openvino_refuses_on_the_worker_is_the_same_clear_note(monkeypatch):
    available("openvino:precision=f32")
    model, args = case(Net, (2, 3, 12, 12))
    sequential, overlapped = verify_both_ways(monkeypatch, model, args, ("onnxruntime", Refusing("production")))
    assert digest(overlapped) == digest(sequential)
    result = overlapped.backend_results[0]
    assert overlapped.passed and overlapped.ops  # the first backend's verdict stands alone
    assert result.passed is False and not result.outputs
    assert any(note.startswith("the backend refused the model: ModelLoadError: OpenVINO could not load the model:")
               for note in result.notes), result.notes


def test_variants_openvino_refuses_on_the_worker_are_failing_rows_with_its_message(monkeypatch):
    available("openvino:precision=f32")
    model, args = case(Net, (2, 3, 12, 12))
    sequential, overlapped = verify_both_ways(monkeypatch, model, args, ("onnxruntime", Refusing("variants")))
    assert digest(overlapped) == digest(sequential)
    rows = overlapped.backend_results[0].ops
    isolated = [row for row in rows if row.not_isolable]
    assert isolated and all(row.passed is False and "OpenVINO could not load the model" in row.not_isolable
                            for row in isolated)
    assert not [row for row in overlapped.ops if row.passed is False]  # onnxruntime's rows are clean


def test_an_error_of_the_harness_on_the_worker_reaches_the_caller_and_nothing_keeps_running(monkeypatch):
    available("openvino:precision=f32")
    monkeypatch.setattr(overlap, "OVERLAP", True)
    model, args = case(Net, (2, 3, 12, 12))
    with pytest.raises(ZeroDivisionError, match="a planted error of the harness's own code"):
        harness.verify(model, args, backends=("onnxruntime", Refusing("harness_bug")))
    assert not [t for t in threading.enumerate() if t.name.startswith("roundtrip-backend")]


@pytest.mark.parametrize("overlapping", [False, True], ids=["sequential", "worker"])
def test_a_step_deferred_runs_once_and_raises_where_its_result_is_taken(monkeypatch, overlapping):
    monkeypatch.setattr(overlap, "OVERLAP", overlapping)
    calls: list[int] = []

    def step(value: int) -> int:
        calls.append(value)
        if value < 0:
            raise ValueError(f"negative: {value}")
        return 2 * value

    with overlap.worker() as worker:
        good, bad = worker.submit(step, 3), worker.submit(step, -1)
        assert worker.overlapping is overlapping
        assert (good.result(), good.result()) == (6, 6)
        with pytest.raises(ValueError, match="negative: -1"):
            bad.result()
    assert sorted(calls) == [-1, 3]
