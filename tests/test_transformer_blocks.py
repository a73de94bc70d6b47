"""Transformer building blocks verified per op through the harness, at the traced sizes and at
another batch and sequence length with the same ONNX model.

The blocks are the `cases_transformer.py` rows of the op table (which checks them at opsets
17, 18 and 26); here each goes through `harness.verify`: every op's isolated error inside its
tolerance row, outputs inside the default tolerance, dynamic axes honoured. The CI runs three
blocks that between them hold every op of the others; the rest are nightly.
"""

from __future__ import annotations

import pytest
import torch

import harness
from op_table.cases_transformer import CASES as BLOCKS
from op_table.table import build_sample

CI_BLOCKS = (
    "transformer_encoder_prenorm_batch_first",
    "multihead_attention_weights_bool_mask",
    "llama_block_rotary_rmsnorm_swiglu_kv_cache",
)
OTHER_SIZES = {"batch": 3, "seq": 4, "memory": 3}


def _params() -> list:
    return [
        pytest.param(case, id=case.name, marks=() if case.name in CI_BLOCKS else (pytest.mark.nightly,))
        for case in BLOCKS
    ]


def test_ci_blocks_are_rows() -> None:
    assert set(CI_BLOCKS) <= {case.name for case in BLOCKS}


@pytest.mark.parametrize("case", _params())
def test_block_verifies_per_op(case) -> None:
    sample = build_sample(case)
    traced = harness.verify(sample.module, sample.args, dynamic_axes=case.dynamic_axes, model_name=case.name)
    assert traced.checker.passed, traced.checker.message
    failing_ops = [op.to_dict() for op in traced.ops if op.passed is False]
    assert not failing_ops, failing_ops
    assert traced.passed, [c.to_dict() for c in traced.outputs if not c.passed] or traced.notes
    verified_targets = {op.aten for op in traced.ops if op.passed}
    missing = [t for t in case.targets if t not in verified_targets]
    assert not missing, f"no verified op row for {missing}"

    other_args = case.inputs(torch.Generator().manual_seed(sample.seed + 1), **OTHER_SIZES)
    other = harness.verify(sample.module, other_args, dynamic_axes=case.dynamic_axes, onnx_model=traced.onnx_model,
                           per_op=False, model_name=case.name)
    assert other.passed, [c.to_dict() for c in other.outputs if not c.passed] or other.notes
    assert other.outputs[0].shape_actual != traced.outputs[0].shape_actual
