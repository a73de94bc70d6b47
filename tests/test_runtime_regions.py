"""A backend's own fusions on the rows: each row whose ONNX nodes a runtime layer fused says
which layer, and a layer that ran several FX nodes is judged as one region on its output's row
(the runtime gives only the layer's output)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

import harness
from harness.runtime.backends import Backend, BackendSpec, PreparedModel, get_backend
from tests.test_backend_verification import PlantedRep, available, net_and_input

OV_F32, ORT_ALL = "openvino:precision=f32", "onnxruntime:level=all"


@pytest.fixture(scope="module")
def verified():
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=("onnxruntime", available(ORT_ALL), available(OV_F32)))
    rows = {str(verification.backend): verification.ops}
    rows.update({r.backend: r.ops for r in verification.backend_results})
    return verification, {backend: {op.fx_node: op for op in ops} for backend, ops in rows.items()}


@pytest.mark.parametrize("backend, layers", [
    ("onnxruntime", {}),  # its default level: fusions are not read (another session would find them)
    (OV_F32, {"relu": ("conv2d", "relu"), "relu_1": ("conv2d_1", "relu_1")}),  # Convolution with its Relu
    (ORT_ALL, {"add": ("conv2d_1", "relu_1", "add")}),  # NCHWc Conv with its Relu and the residual Add
])
def test_fused_layers_are_written_into_rows_and_judged_as_regions(verified, backend, layers):
    verification, rows = verified
    assert verification.passed
    by_output = {op.fx_node: op.runtime_fusion for op in rows[backend].values()
                 if op.runtime_fusion and op.runtime_fusion["output"] == op.fx_node and len(op.runtime_fusion["fx_nodes"]) > 1}
    assert {fx: tuple(f["fx_nodes"]) for fx, f in by_output.items()} == layers
    for output, members in layers.items():
        fusion = rows[backend][output].runtime_fusion
        assert fusion["passed"] is True and fusion["isolated"] is not None
        assert fusion["verdict"]["rule"] == "truth" and 0 <= fusion["verdict"]["score"] <= 1
        for inner in members[:-1]:  # the covered ops say which layer, and where it is judged
            assert rows[backend][inner].runtime_fusion["layer"] == fusion["layer"]
            assert "passed" not in rows[backend][inner].runtime_fusion
            assert any(f"judged as a region on {output}'s row" in note for note in rows[backend][inner].notes)
    if not layers:
        assert not any(op.runtime_fusion for op in rows[backend].values())


class FusedOnlyFault(Backend):
    """A test-only backend: `inner`, with `target`'s value pushed off only where its node reads a
    Conv's output inside the same model: a fault of the fused Conv+activation kernel, which the
    op isolated alone (fed torch's value at its input) never shows."""

    name = "fused-fault"

    def __init__(self, inner: str, target: str, *, judge_fusions: bool = True) -> None:
        self.inner = get_backend(inner)
        self.target, self.judge_fusions = target, judge_fusions
        self.spec = BackendSpec("fused-fault", (("inner", str(self.inner.spec)), ("target", target)))
        self.RUNS_DECLARED = self.inner.RUNS_DECLARED

    def unavailable_reason(self, device: str = "CPU") -> str | None:
        return self.inner.unavailable_reason(device)

    def judges_fusions(self) -> bool:
        return self.judge_fusions

    def prepare(self, model: onnx.ModelProto, device: str = "CPU", **options: Any) -> PreparedModel:
        return FusedOnlyRep(self.inner.prepare(model, device, **options), self.target)


class FusedOnlyRep(PlantedRep):
    def run(self, inputs: Any) -> list[np.ndarray]:
        outputs = self.inner.run(inputs)
        return [self._plant(o) if self._fused(name) else o for name, o in zip(self.output_names, outputs)]

    def _fused(self, name: str) -> bool:
        """Whether output `name` is the target's value (renamed `target::k` in a batched isolation
        model) computed by a node reading a Conv's output in this model."""
        if name.split("::")[0] != self.target:
            return False
        producer = {out: node for node in self.model.graph.node for out in node.output}
        node = producer.get(name)
        return node is not None and any(producer.get(i) is not None and producer[i].op_type == "Conv"
                                        for i in node.input)

    def variant(self, model: onnx.ModelProto) -> PreparedModel:
        return FusedOnlyRep(self.inner.variant(model), self.target)

    def runtime_fusions(self):
        return self.inner.runtime_fusions()


@pytest.mark.parametrize("judge_fusions", [True, False], ids=["regions", "ops-alone"])
def test_a_fault_of_a_fused_kernel_is_found_only_by_its_region(judge_fusions):
    faulty = FusedOnlyFault(available(OV_F32), "relu", judge_fusions=judge_fusions)
    model, x = net_and_input()
    verification = harness.verify(model, (x,), backends=("onnxruntime", faulty))
    rows = {op.fx_node: op for op in verification.backend_results[0].ops}
    failing = sorted(fx for fx, op in rows.items() if op.passed is False)
    assert not [op for op in verification.ops if op.passed is False]  # the clean backend is clean
    assert rows["relu"].isolated.passed  # relu alone, fed torch's input, is right
    if not judge_fusions:
        assert failing == []  # alone, every op passes: the fused kernel's fault goes unseen
        return
    assert failing == ["relu"] and rows["relu"].blame == "runtime"
    fusion = rows["relu"].runtime_fusion
    assert fusion["fx_nodes"] == ["conv2d", "relu"] and fusion["passed"] is False
    assert "as a region (conv2d + relu)" in rows["relu"].verdict.reason and rows["relu"].verdict.score > 1
