"""tril / triu as one ONNX Trilu: a causal mask kept whole at capture, and its graph.

The op table (op_table/cases_trilu.py) checks values at opsets 17, 18 and 26 over dtypes,
diagonals and dynamic sizes; here: the Llama block's mask no longer sends the whole captured
graph through torch's decomposition, the mask is Trilu with a 0-d int64 `k`, and an in-place
form on an input (which capture cannot rewrite locally) still reaches Trilu.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

import exporter
from exporter.errors import ExportWarning
from op_table.cases_transformer import CASES as BLOCKS
from op_table.table import build_sample

LLAMA = "llama_block_rotary_rmsnorm_swiglu_kv_cache"


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == op_type]


def _run(model: onnx.ModelProto, *inputs: torch.Tensor) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)})


def test_llama_block_mask_is_kept_whole_at_capture(monkeypatch) -> None:
    case = next(case for case in BLOCKS if case.name == LLAMA)
    sample = build_sample(case)

    def refuse(*args, **kwargs):
        raise AssertionError("the capture re-traced the whole graph with run_decompositions")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", refuse)
    result = exporter.export_program(sample.module, sample.args, dynamic_axes=case.dynamic_axes)
    model = result.model
    (trilu,) = _nodes(model, "Trilu")
    assert [a.i for a in trilu.attribute if a.name == "upper"] == [0]
    # the decomposed mask's pieces are gone: no position ranges compared element-wise
    assert not _nodes(model, "Range") and not _nodes(model, "LessOrEqual")


@pytest.mark.parametrize("opset", [17, 26])
def test_trilu_k_is_a_0d_int64(opset: int) -> None:
    class Band(torch.nn.Module):
        def forward(self, x):
            return x.triu(x.shape[0] - x.shape[1])

    x = torch.randn(3, 5)
    model = exporter.export(Band(), (x,), opset_version=opset, dynamic_axes={"x": {0: "rows", 1: "cols"}},
                            optimize=False)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    (trilu,) = _nodes(model, "Trilu")
    k = types[trilu.input[1]]
    assert k.elem_type == onnx.TensorProto.INT64 and len(k.shape.dim) == 0
    for shape in [(3, 5), (6, 2), (4, 4)]:
        other = torch.randn(*shape)
        np.testing.assert_array_equal(_run(model, other)[0], Band()(other).numpy())


def test_inplace_tril_of_an_input_reaches_trilu() -> None:
    class MaskInPlace(torch.nn.Module):
        def forward(self, x):
            return x.tril_(-1) * 2

    x = torch.randn(2, 4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)  # the input update cannot be carried
        model = exporter.export(MaskInPlace(), (x.clone(),), optimize=False)
    assert len(_nodes(model, "Trilu")) == 1
    np.testing.assert_array_equal(_run(model, x)[0], x.clone().tril(-1).numpy() * 2)
