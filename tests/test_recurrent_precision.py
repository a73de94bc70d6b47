"""A recurrent op run below its declared precision is judged with its cell's roundings: a runtime
computing an LSTM in bfloat16 rounds each result of a cell step there (OpenVINO's default on a
CPU with bfloat16 instructions), while torch, at float32, holds none of those roundings in its
error. At the declared precision nothing changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.analysis.judging import TruthPair, verdicts_for
from harness.analysis.rows import OpRecord
from harness.analysis.truth import cell_roundings
from harness.metrics.comparison import compare
from harness.metrics.tolerances import Tolerance
from harness.metrics.verdict import load_rule

BF16_UNIT = 2.0**-8  # bfloat16's unit roundoff: errors below are in these units of the truth's scale


def node(target):
    return torch.fx.Graph().call_function(target, ())


@pytest.mark.parametrize("target, roundings", [
    (torch.ops.aten.lstm.input, 6),
    (torch.ops.aten.gru.input, 7),
    (torch.ops.aten.rnn_tanh.input, 2),
    (torch.ops.aten.rnn_relu.input, 2),
    (torch.ops.aten.linear.default, 1),
    (torch.ops.aten.tanh.default, 1),
])
def test_cell_roundings(target, roundings):
    assert cell_roundings(node(target)) == roundings


def judged(units: float, *, cells: int, precision: str | None):
    """The verdict of an LSTM-like row whose backend is `units` bfloat16 units off a truth of scale
    1 (torch 1e-7 off), its cell counted `cells` roundings, the backend run at `precision`."""
    truth = np.linspace(-1.0, 1.0, 64)
    backend = (truth + units * BF16_UNIT * (truth == 1.0)).astype(np.float32)
    torch_value = (truth + 1e-7).astype(np.float32)
    row = Tolerance("*", "cpu", 1e-5, 1e-5, dtype="float32")  # the float32 default row
    record = OpRecord("lstm", "aten.lstm.input", ["lstm"], ["LSTM"], "", "", tolerance=row.to_dict(),
                      dtype="float32")
    pair = TruthPair(compare(backend, truth, atol=1e-5, rtol=1e-5, check_dtype=False),
                     compare(torch_value, truth, atol=1e-5, rtol=1e-5, check_dtype=False),
                     reduction_length=20, dtype="float32", roundings=1, cell_roundings=cells)
    against_torch = compare(backend, torch_value, atol=1e-5, rtol=1e-5)
    [verdict] = verdicts_for(record, {"y": against_torch}, {"y": pair}, load_rule(), row, precision)
    return verdict


@pytest.mark.parametrize("units, cells, passed", [
    (1.55, 1, False),  # OpenVINO's bfloat16 LSTM on word_language_model_lstm, judged as one rounding
    (1.55, 6, True),  # ... with its cell's six: what rounding each of them to bfloat16 gives
    (1.4, 1, True),  # within one rounding: passes either way
    (10.0, 6, False),  # past six roundings' allowance: the runtime is wrong, whatever the precision
])
def test_a_recurrent_op_below_its_precision_counts_its_cell(units, cells, passed):
    verdict = judged(units, cells=cells, precision="bfloat16")
    assert verdict.dtype == "bfloat16" and verdict.passed is passed, verdict.reason


def test_the_declared_precision_ignores_the_cell():
    """At float32 torch's error already holds the cell's roundings: six or one, the same verdict."""
    one, six = judged(0.0, cells=1, precision=None), judged(0.0, cells=6, precision=None)
    assert one.dtype == six.dtype == "float32" and one.allowed == six.allowed
    failing = judged(1.0, cells=6, precision=None)  # a bfloat16 unit off, at float32: fails
    assert failing.passed is False
