"""The operator table's checks can fail: dynamic rows run at other sizes (a size baked into the
graph fails them), the half_to_float softmax is compared with torch, coverage counts only rows
the runner checks, and dropout rows hold their exports to having no dropout left."""

from __future__ import annotations

import onnx
import pytest
import torch
from onnx import helper
from torch.fx.experimental.symbolic_shapes import optimization_hint

import exporter
from exporter.capturing.signature import normalize_dynamic_axes
from harness.backend import prepare
from op_table.table import all_cases, build_sample

CASES = all_cases()
BY_NAME = {case.name: case for case in CASES}
DYNAMIC = [case for case in CASES if case.dynamic_axes and not (case.xfail or case.refused)]


def _baked_view(g, x, size):
    """aten.view with the traced sizes baked into the graph: the bug dynamic rows must catch."""
    static = [optimization_hint(d) for d in g.ctx.output_meta.shape]
    return g.op("Reshape", x, g.constant(static))


def _outcome(case, backend, sample, expected, label) -> str:
    """'' when the backend reproduces torch on `sample`, else what went wrong."""
    from op_table.table import check_outputs

    try:
        check_outputs(case, backend.run(sample.tensor_args), expected, label)
    except AssertionError as failed:
        return str(failed)
    except Exception as error:  # onnxruntime refusing the baked shape fails the row too
        return f"{type(error).__name__}: {error}"
    return ""


@pytest.mark.parametrize("name", ["view_dynamic_product"])
def test_a_size_baked_into_a_view_fails_the_row_at_other_sizes(name):
    from op_table.table import expected_outputs, resized_samples

    case = BY_NAME[name]
    sample = build_sample(case)
    program = exporter.capture(sample.module, sample.args, dynamic_axes=case.dynamic_axes,
                               custom_symbolics={"aten.view.default": _baked_view})
    model = exporter.convert(program, dynamic_axes=case.dynamic_axes)
    assert "Reshape" in {node.op_type for node in model.graph.node}
    backend = prepare(model, "CPU")
    assert _outcome(case, backend, sample, expected_outputs(case, sample), "traced") == ""  # unnoticed here
    others = resized_samples(case, sample)
    outcomes = [_outcome(case, backend, other, expected_outputs(case, other), "other sizes") for other in others]
    assert others and all(outcomes), outcomes


@pytest.mark.parametrize("case", DYNAMIC, ids=lambda case: case.name)
def test_every_dynamic_row_has_samples_at_other_sizes(case):
    from exporter.capturing.trace import forward_input_names
    from op_table.table import resized_samples

    sample = build_sample(case)
    others = resized_samples(case, sample)
    assert len(others) >= 2
    axes = normalize_dynamic_axes(case.dynamic_axes)
    names = forward_input_names(sample.module, sample.args)
    assert set(axes) <= set(names), f"dynamic_axes names {sorted(axes)}, the inputs are {names}"
    for other in others:
        for name, traced, resized in zip(names, sample.args, other.args):
            if not isinstance(traced, torch.Tensor):
                continue
            dynamic = axes.get(name, {})
            assert traced.dtype == resized.dtype and traced.dim() == resized.dim()
            for axis in range(traced.dim()):
                changed = traced.shape[axis] != resized.shape[axis]
                assert changed == (axis in dynamic), (name, axis, traced.shape, resized.shape)


def test_the_half_to_float_softmax_row_is_checked_against_torch_on_the_upcast_input():
    from op_table.table import expected_outputs

    case = BY_NAME["_softmax_half_to_float"]
    assert case.xfail is None and case.reference is not None
    sample = build_sample(case)
    (expected,) = expected_outputs(case, sample)
    assert sample.args[0].dtype == torch.float16 and expected.dtype == torch.float32
    torch.testing.assert_close(expected.sum(1), torch.ones(2))


def test_xfail_and_refused_rows_cover_nothing():
    from op_table.table import checked_targets

    uncounted = [case for case in CASES if case.xfail or case.refused]
    assert uncounted, "the table has refused rows (packed sequences, LSTM projections)"
    assert all(checked_targets(case) == () for case in uncounted)
    assert all(checked_targets(case) == case.targets for case in CASES if not (case.xfail or case.refused))


DROPOUT_ROWS = ["dropout_eval", "feature_dropout2d_eval", "feature_dropout1d_3d_eval", "native_dropout_eval",
                "alpha_dropout_eval"]


@pytest.mark.parametrize("name", DROPOUT_ROWS)
def test_dropout_rows_are_held_to_leaving_no_dropout(name):
    from op_table.table import capture_case, convert_case, dropout_left, is_dropout_row

    case = BY_NAME[name]
    sample = build_sample(case)
    assert is_dropout_row(case, sample)
    result = convert_case(case, capture_case(case, sample), 18)
    assert dropout_left(case, result.program, result.model) == []
    planted = onnx.ModelProto()
    planted.CopyFrom(result.model)
    first = planted.graph.node[0]
    planted.graph.node.insert(1, helper.make_node("Dropout", [first.output[0]], ["dropped"], name="planted"))
    assert dropout_left(case, result.program, planted) == ["ONNX node planted"]
