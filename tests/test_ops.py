"""The operator table's runner: every row of op_table/cases_*.py at each of its opsets.

A row passes when its module exports, the model passes the full ONNX checker, onnxruntime
(CPU) reproduces every torch output (same dtype and shape; integers and bools exactly, floats
within the row's atol/rtol), and the node provenance names each ATen overload the row targets.
A row with dynamic axes is run again, on the same exported model, with every dynamic axis at
other sizes (table.resized_samples). A dropout row's export must leave no dropout in the graph.
`refused` rows must raise ExportError with the given text; an `xfail` row must fail with the
failure it names (`fails_with`), and is then reported as an xfail; any other outcome fails.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import onnx
import pytest
import torch

import exporter
from harness.backend import prepare
from harness.runtime.errors import first_line
from op_table.schema import OpCase
from op_table.table import (
    Sample,
    all_cases,
    build_sample,
    capture_case,
    check_outputs,
    checked_targets,
    convert_case,
    dropout_left,
    emits_no_nodes,
    expected_outputs,
    is_dropout_row,
    program_targets,
    provenance_targets,
    resized_samples,
)

CASES = all_cases()
_BY_NAME = {case.name: case for case in CASES}


def _params() -> list:
    params = []
    for case in CASES:
        params += [pytest.param(case, opset, id=f"{case.name}-opset{opset}") for opset in case.opsets]
    return params


@dataclass
class _Prepared:
    """A row's sample, its captured program and torch's outputs, shared by the row's opsets.

    torch.export's capture does not depend on the opset and is most of an export's time, so
    the runner captures once per row (per worker) and every opset converts that program
    (`exporter.convert_program`: validation, conversion, serialisation).
    """

    sample: Sample
    program: torch.export.ExportedProgram | None = None
    expected: list[torch.Tensor] | None = None
    resized: list[tuple[Sample, list[torch.Tensor]]] | None = None  # other sizes, torch's outputs


@functools.lru_cache(maxsize=2)  # a row's opsets are adjacent in collection order
def _prepared(case_name: str) -> _Prepared:
    return _Prepared(build_sample(_BY_NAME[case_name]))


@pytest.fixture
def prepared(request: pytest.FixtureRequest) -> _Prepared:
    """The row's shared state."""
    return _prepared(request.node.callspec.params["case"].name)


def _export(case: OpCase, prepared: _Prepared, opset: int) -> exporter.ExportResult:
    """The row at `opset`, converting the row's program (captured on first use)."""
    if prepared.program is None:
        prepared.program = capture_case(case, prepared.sample)
    return convert_case(case, prepared.program, opset)


@pytest.mark.parametrize(("case", "opset"), _params())
def test_op(case: OpCase, opset: int, prepared: _Prepared) -> None:
    sample = prepared.sample
    reproduce = f"row {case.name!r} at opset {opset}, seed {sample.seed} (pytest tests/test_ops.py -k '{case.name}-opset{opset}')"
    if case.refused:
        with pytest.raises(exporter.ExportError, match=re.escape(case.refused)):
            _export(case, prepared, opset)
        return
    if case.xfail:
        with pytest.raises(Exception, match=case.fails_with):
            _check_row(case, prepared, opset, reproduce)
        pytest.xfail(case.xfail)
    _check_row(case, prepared, opset, reproduce)


def _check_row(case: OpCase, prepared: _Prepared, opset: int, reproduce: str) -> None:
    """Export the row at `opset`, check the model and its targets, and compare onnxruntime's
    outputs with torch's at the sample's sizes and at the other sizes of its dynamic axes."""
    sample = prepared.sample
    result = _export(case, prepared, opset)
    onnx.checker.check_model(result.model, full_check=True)
    _check_targets(case, result)
    if is_dropout_row(case, sample):
        left = dropout_left(case, result.program, result.model)
        assert not left, f"{reproduce}: the eval-mode export left dropout in the graph: {left}"

    if prepared.expected is None:
        prepared.expected = expected_outputs(case, sample)
        prepared.resized = [(other, expected_outputs(case, other)) for other in resized_samples(case, sample)]
    backend = prepare(result.model, "CPU")
    check_outputs(case, backend.run(sample.tensor_args), prepared.expected, reproduce, sample.args)
    for other, expected in prepared.resized:  # the same model at other sizes of its dynamic axes
        where = f"{reproduce}, inputs of shapes {[tuple(t.shape) for t in other.tensor_args]}"
        try:
            actual = backend.run(other.tensor_args)
        except Exception as error:  # e.g. a Reshape to a size baked in at export
            pytest.fail(f"{where}: onnxruntime cannot run the model: {first_line(error)}")
        check_outputs(case, actual, expected, where, other.args)


def _check_targets(case: OpCase, result: exporter.ExportResult) -> None:
    """The row covers what it claims: each target is in the FX graph and, unless its symbolic
    emits nothing by design, in the ONNX nodes' provenance."""
    in_program = program_targets(result.program)
    in_model = provenance_targets(result.model)
    for target in checked_targets(case):
        assert target in in_program, f"{case.name}: torch.export produced no {target} (it has {sorted(in_program)})"
        if not emits_no_nodes(target):
            assert target in in_model, f"{case.name}: no ONNX node carries {target} (they carry {sorted(in_model)})"
