"""Rewrite rules of our own, where onnxscript's rule set has none: small, one pattern each."""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern
from onnxscript.rewriter._basics import MatchResult
from onnxscript.rewriter.rules.common._materialize_reshape_shape import MaterializeReshapeShape


def _static(shape: ir.Shape | None) -> tuple[int, ...] | None:
    if shape is None or not all(isinstance(d, int) for d in shape.dims):
        return None
    return tuple(shape.dims)


class NoOpReshape(pattern.RewriteRuleClassBase):
    """Reshape to the shape its input already has (both static) -> Identity."""

    def pattern(self, op, x, shape):
        return op.Reshape(x, shape, _allow_other_attributes=True, _outputs=["reshaped"])

    def check(self, context, x: ir.Value, shape: ir.Value, reshaped: ir.Value) -> MatchResult:
        result = MatchResult()
        before, after = _static(x.shape), _static(reshaped.shape)
        if before is None or before != after:
            return result.fail("input and output shapes are not the same static shape")
        return result

    def rewrite(self, op, x: ir.Value, shape: ir.Value, reshaped: ir.Value):
        return op.Identity(x)


no_op_reshape_rule = NoOpReshape.rule()


class StaticReshapeShape(MaterializeReshapeShape):
    """onnxscript's rule: a Reshape whose target shape is computed (Shape, Gather, Concat of a
    dynamic batch) but whose output shape is known, up to one symbolic dim, reads a constant
    shape instead (-1 for the symbolic dim). Not where a known dim is 0: ONNX forbids -1 beside
    0 with allowzero=1."""

    def check(self, context, data: ir.Value, shape: ir.Value) -> MatchResult:
        output = context.output_values[0]
        if output.shape is not None and 0 in [d for d in output.shape.dims if isinstance(d, int)]:
            return MatchResult().fail("a zero-size dim beside -1")
        return super().check(context, data, shape)


static_reshape_shape_rule = StaticReshapeShape.rule()

