"""Recurrent layers against torch, from the rows of op_table/cases_rnn.py.

Every row, at every opset of its table: the model passes onnx.checker's full check, runs on
onnxruntime CPU, contains the fused ATen op, and its output and returned hidden (and cell) states
are within RNN_ATOL absolute of torch's. Rows with dynamic axes are also run at other batch and
sequence sizes than the export's. Refused forms raise ExportError saying what to do.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import exporter
from exporter.capturing.hooks import CAPTURE_HOOKS
from op_table.cases_rnn import CASES, RNN_ATOL
from op_table.schema import OpCase

INPUT_SEED = 0
# Sizes the dynamic rows are re-run at: longer and shorter than the export's, other batches.
OTHER_SIZES = ({"seq": 8, "batch": 2}, {"seq": 1, "batch": 5})

EXPORTED = [c for c in CASES if c.refused is None]
REFUSED = [c for c in CASES if c.refused is not None]
DYNAMIC = [c for c in EXPORTED if c.dynamic_axes]


def _inputs(case: OpCase) -> tuple[torch.Tensor, ...]:
    return case.inputs(torch.Generator().manual_seed(INPUT_SEED))


def _flat(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _flat(item)] if isinstance(value, (tuple, list)) else []


def _torch_outputs(module: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in _flat(module(*inputs))]


def _onnx_outputs(session: ort.InferenceSession, inputs: Sequence[torch.Tensor]) -> list[np.ndarray]:
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)


def _assert_close(actual: list[np.ndarray], expected: list[np.ndarray], what: str) -> None:
    names = ["output", "h_n", "c_n"]
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, torch returns {len(expected)}"
    for name, got, want in zip(names, actual, expected):
        assert got.shape == want.shape, f"{what}: {name} has shape {got.shape}, torch {want.shape}"
        error = float(np.abs(got.astype(np.float64) - want).max())
        assert error <= RNN_ATOL, f"{what}: {name} max abs error {error:.3g} > {RNN_ATOL}"


def _resized(case: OpCase, inputs: Sequence[torch.Tensor], sizes: Mapping[str, int], names: Sequence[str]):
    """Fresh inputs with every dynamic axis at `sizes[dim_name]`, seeded."""
    gen = torch.Generator().manual_seed(INPUT_SEED + 1)
    resized = []
    for name, tensor in zip(names, inputs):
        shape = list(tensor.shape)
        for axis, dim_name in (case.dynamic_axes or {}).get(name, {}).items():
            shape[axis] = sizes[dim_name]
        resized.append(torch.randn(shape, generator=gen))
    return resized


@functools.lru_cache(maxsize=2)  # a row's opsets are adjacent in collection order
def _row(case_name: str) -> dict:
    """A row's module and inputs, and (once captured) its program, shared by its opsets."""
    case = next(c for c in EXPORTED if c.name == case_name)
    return {"module": case.module().eval(), "inputs": _inputs(case), "program": None}


@pytest.fixture
def row(request: pytest.FixtureRequest) -> dict:
    """The row's shared state; torch.export's capture (opset-independent, most of an export's
    time) runs once per row and each opset converts that program, as in tests/test_ops.py."""
    case = request.node.callspec.params["case"]
    state = _row(case.name)
    if state["program"] is None:
        state["program"] = exporter.capture(state["module"], state["inputs"], dynamic_axes=case.dynamic_axes)
    return state


@pytest.mark.parametrize(
    ("case", "opset"),
    [pytest.param(c, opset, id=f"{c.name}-opset{opset}") for c in EXPORTED for opset in c.opsets],
)
def test_recurrent_layer_matches_torch(case: OpCase, opset: int, row: dict) -> None:
    module, inputs = row["module"], row["inputs"]
    model = exporter.convert(row["program"], opset_version=opset, dynamic_axes=case.dynamic_axes)
    onnx.checker.check_model(model, full_check=True)
    atens = {p.value for node in model.graph.node for p in node.metadata_props if p.key == "roundtrip.aten"}
    assert set(case.targets) <= atens, f"{case.targets} not among the model's ops {sorted(atens)}"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    _assert_close(_onnx_outputs(session, inputs), _torch_outputs(module, inputs), f"{case.name}@{opset}")
    if case.dynamic_axes:
        names = [i.name for i in session.get_inputs()]
        for sizes in OTHER_SIZES:
            other = _resized(case, inputs, sizes, names)
            _assert_close(_onnx_outputs(session, other), _torch_outputs(module, other), f"{case.name}@{opset} {sizes}")


def test_dynamic_rows_cover_every_kind() -> None:
    kinds = {tag for case in DYNAMIC for tag in case.tags if tag != "rnn"}
    assert kinds == {"lstm", "gru", "rnn_tanh", "rnn_relu"}


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_refused_forms_say_why(case: OpCase) -> None:
    with pytest.raises(exporter.ExportError, match=case.refused):
        exporter.export(case.module().eval(), _inputs(case))


def test_capture_restores_torch() -> None:
    """The shape-only kernels used while capturing are gone afterwards; torch is as it was."""
    import torch._decomp as decomp

    aten = torch.ops.aten
    ops = [aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input]
    before = [(dict(op.py_kernels), decomp.decomposition_table.get(op)) for op in ops]
    case = next(c for c in DYNAMIC if "lstm" in c.tags)
    exporter.export(case.module().eval(), _inputs(case), dynamic_axes=case.dynamic_axes)
    assert [(dict(op.py_kernels), decomp.decomposition_table.get(op)) for op in ops] == before
    assert CAPTURE_HOOKS, "the recurrent layers register a capture hook"
