"""The optimisation passes, each a small named onnx_ir pass (`ir.passes.InPlacePass`).

`exporter.optimize` runs them in order under onnx_ir's `PassManager`. Every pass is idempotent (a second run changes nothing) and returns what it changed: the op
types it removed (`-Op`) and added (`+Op`), and for rewrites the count per rule. Rewrites
carry the provenance of the nodes they replace (exporter.optimize.rewriting); the passes that
only delete nodes (no-op removal, unused nodes, shared sub-expressions) leave nothing that
stands for them, and the FX values they drop get no row of their own in the harness.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir
import onnx_ir.passes.common as ir_passes
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnxscript import optimizer
from onnxscript.rewriter import pattern
from onnxscript.rewriter.rules import common as onnxscript_rules

from exporter.contract.keys import FX_NODE_KEY, LEDGER_META
from exporter.optimize import aliases
from exporter.optimize.rewriting import RuleIndex, apply_rules
from exporter.optimize.rules import (
    erf_gelu_rules,
    fill_like_operand_rules,
    neutral_operand_rules,
    no_op_reshape_rule,
    scalar_round_trip_rules,
    static_reshape_shape_rule,
)

FOLD_INPUT_LIMIT = 1 << 24
"""Elements: the largest constant input folded (onnxscript's default, 8192, leaves the
recurrent layers' weight reordering, which the exporter has always folded, to the runtime)."""

FOLD_OUTPUT_LIMIT = 1 << 24
"""Elements: the largest folded result; larger ones stay computed at run time."""

FOLD_FILL_LIMIT = 1024
"""Elements: a ConstantOfShape of a known shape up to this size is stored as its value (a 0-d
`full` or `ones` feeding a mask), larger fills stay computed at run time."""

DEDUP_LIMIT = 1 << 16
"""Elements: initializers up to this size are compared for duplicates (hashing every weight of
a large model costs more export time than the rare duplicate weight saves)."""

DATA_MOVEMENT = frozenset({"Transpose", "Gather", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Flatten",
                           "Slice", "Cast"})


logger = logging.getLogger(__name__)


@dataclass
class Ledger:
    """What the passes run on one model did: the changes per pass, the FX values merged into
    other values (exporter.optimize.aliases) and each pass's process CPU time. `watched`: the
    FX-named values (value name -> FX node) whose rows must survive the passes."""

    watched: dict[str, str]
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # pass name -> change -> count
    merged: dict[str, str] = field(default_factory=dict)  # merged value -> value carrying it
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # pass name -> process CPU time


def fx_values(graph: ir.Graph) -> dict[str, str]:
    """The values `graph`'s nodes compute for FX nodes (not the '::' temporaries) -> FX node."""
    return {value.name: node.metadata_props[FX_NODE_KEY]
            for node in graph if FX_NODE_KEY in node.metadata_props
            for value in node.outputs if value.name and "::" not in value.name}


def ledger_of(model: ir.Model) -> Ledger:
    """The ledger of `model`'s pass run (a fresh one, kept on the model, for a pass run alone)."""
    ledger = model.meta.get(LEDGER_META)
    if ledger is None:
        ledger = model.meta[LEDGER_META] = Ledger(fx_values(model.graph))
    return ledger


class Pass(ir.passes.InPlacePass):
    """One named step: `rewrite(model)` changes the model in place and returns the changes it
    made. Run as an onnx_ir pass, it reports `modified` and writes its changes, the FX values it
    merged into others and its CPU time to the model's `Ledger`."""

    def __init__(self, name: str, doc: str, rewrite: Callable[[ir.Model], Counter[str]]) -> None:
        super().__init__()
        self.name = name
        self.doc = doc
        self.rewrite = rewrite

    def __repr__(self) -> str:
        return f"Pass({self.name!r})"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        ledger = ledger_of(model)
        started = time.process_time()
        before = aliases.readers(model.graph, ledger.watched)
        counts = self.rewrite(model)
        ledger.merged.update(aliases.merged_values(before, model.graph))
        ledger.cpu_seconds[self.name] = time.process_time() - started
        if counts:
            ledger.changes[self.name] = dict(counts)
            logger.debug("%s: %s", self.name, dict(counts))
        return ir.passes.PassResult(model, modified=bool(counts))


def op_delta(model: ir.Model, step: Callable[[ir.Model], object]) -> Counter[str]:
    """Run `step` and report the change in node counts per op type (`-Op` removed, `+Op` added)."""
    before = Counter(node.op_type for node in model.graph)
    step(model)
    after = Counter(node.op_type for node in model.graph)
    changes: Counter[str] = Counter()
    for op in before | after:
        if after[op] < before[op]:
            changes[f"-{op}"] = before[op] - after[op]
        elif after[op] > before[op]:
            changes[f"+{op}"] = after[op] - before[op]
    return changes


def _rules(*sources: pattern.RewriteRule | pattern.RewriteRuleSet | Sequence[pattern.RewriteRule]
           ) -> list[pattern.RewriteRule]:
    rules: list[pattern.RewriteRule] = []
    for source in sources:
        if isinstance(source, pattern.RewriteRule):
            rules.append(source)
        elif isinstance(source, pattern.RewriteRuleSet):
            rules.extend(source.rules)
        else:
            rules.extend(source)
    return rules


def _rule_pass(name: str, doc: str, *sources, then: Sequence[Callable[[ir.Model], object]] = ()) -> Pass:
    """A pass of rewrite rules (`then`: steps run after them, in order)."""
    rules = RuleIndex(_rules(*sources))

    def step(model: ir.Model, applied: Counter[str]) -> None:
        applied.update(apply_rules(model, rules))
        for follow in then:
            follow(model)

    def run(model: ir.Model) -> Counter[str]:
        applied: Counter[str] = Counter()
        changes = op_delta(model, lambda m: step(m, applied))
        return changes + applied

    return Pass(name, doc, run)


def _should_fold(node: ir.Node) -> bool | None:
    """Weight preprocessing that moves data without growing it folds at any size; a
    ConstantOfShape of a known small shape folds (onnxscript keeps every ConstantOfShape, to
    keep large fills out of the file); the rest follows onnxscript's limits. A graph output
    stays computed by a node (an output that is a weight, returned as it is, stays an Identity
    of it)."""
    if any(out.is_graph_output() for out in node.outputs):
        return False
    if node.op_type == "ConstantOfShape" and not node.domain:
        shape = node.inputs[0].const_value if node.inputs and node.inputs[0] is not None else None
        return True if shape is not None and int(np.prod(shape.numpy(), dtype=np.int64)) <= FOLD_FILL_LIMIT else None
    if node.domain or node.op_type not in DATA_MOVEMENT:
        return None
    sizes = [v.const_value.size for v in node.inputs if v is not None and v.const_value is not None]
    return True if sizes and len(sizes) == sum(v is not None for v in node.inputs) else None


def _needs_types(graph: ir.Graph) -> bool:
    """Whether a Cast reads a value of unknown type (an intermediate of a symbolic: Range then
    Cast to int64): only ONNX's type inference tells whether it is a no-op. Inference costs
    about as much as the folding itself, so a graph without such a Cast does without it."""
    return any(node.op_type == "Cast" and not node.domain and node.inputs and node.inputs[0] is not None
               and node.inputs[0].dtype is None for node in graph)


def _fold_constants(model: ir.Model) -> Counter[str]:
    return op_delta(model, lambda m: (
        optimizer.fold_constants_ir(m, onnx_shape_inference=_needs_types(m.graph), input_size_limit=FOLD_INPUT_LIMIT,
                                    output_size_limit=FOLD_OUTPUT_LIMIT, should_fold=_should_fold),
        ir_passes.RemoveUnusedNodesPass()(m),
    ))


def _is_weight(value: ir.Value | None) -> bool:
    """An initializer, or a value already folded from one."""
    return value is not None and (value.is_initializer() or optimizer.FOLDED_FROM_KEY in value.meta)


def _grows(node: ir.Node) -> bool:
    """Whether folding `node` would store more bytes than its inputs: a Gather that repeats
    rows, a Cast to a wider type (the other data-movement ops keep or shrink the data)."""
    if node.op_type == "Gather":
        data, indices = (v.const_value for v in node.inputs[:2])
        if data is None or indices is None or not data.shape.dims:
            return True
        axis = node.attributes.get_int("axis", 0) % len(data.shape)
        return indices.size > data.shape[axis]
    if node.op_type == "Cast":
        source = node.inputs[0].const_value
        return source is None or ir.DataType(node.attributes.get_int("to", 1)).itemsize > source.dtype.itemsize
    return False


def _fold_weights_only(node: ir.Node) -> bool:
    """Data movement reading at least one weight, every input known, not growing the data and
    not a graph output: the preprocessing of weights that `optimize=False` still folds."""
    return (not node.domain and node.op_type in DATA_MOVEMENT and any(_is_weight(v) for v in node.inputs)
            and all(v is None or v.const_value is not None for v in node.inputs)
            and not any(v.is_graph_output() for v in node.outputs) and not _grows(node))


def _evaluate(node: ir.Node) -> list[np.ndarray]:
    """`node`'s outputs on its constant inputs, computed by onnx's ReferenceEvaluator."""
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(node.inputs)]
    proto = ir.serde.serialize_node(node)
    proto.ClearField("metadata_props")
    del proto.input[:]
    proto.input.extend(names)
    evaluator = ReferenceEvaluator(helper.make_model(
        helper.make_graph([proto], "fold", [helper.make_tensor_value_info(n, v.const_value.dtype.value, None)
                                            for n, v in zip(names, node.inputs) if n],
                          [helper.make_value_info(o, onnx.TypeProto()) for o in proto.output]),
        opset_imports=[helper.make_opsetid("", node.version or node.graph.opset_imports.get("", 18))]))
    return evaluator.run(None, {n: v.const_value.numpy() for n, v in zip(names, node.inputs) if n})


def _fold_weight_nodes(model: ir.Model) -> None:
    """Each node of weight preprocessing (`_fold_weights_only`), in graph order, becomes the
    initializer of its output, named as its output was; chains fold through."""
    graph = model.graph
    optimizer.basic_constant_propagation(graph)  # Constant nodes' values onto their outputs
    for node in list(graph):
        if not _fold_weights_only(node):
            continue
        for value, array in zip(node.outputs, _evaluate(node)):  # np.require keeps a 0-d array 0-d
            folded = ir.Value(name=value.name, shape=ir.Shape(array.shape), type=value.type,
                              const_value=ir.Tensor(np.require(array, requirements="C"), name=value.name))
            folded.meta[optimizer.FOLDED_FROM_KEY] = {v.name for v in node.inputs if v is not None}
            value.replace_all_uses_with(folded)
            value.name = None
            graph.register_initializer(folded)
        graph.remove(node, safe=True)


def _fold_weights(model: ir.Model) -> Counter[str]:
    return op_delta(model, lambda m: (_fold_weight_nodes(m), ir_passes.RemoveUnusedNodesPass()(m)))


def _drop_identities(model: ir.Model) -> None:
    """Readers of an Identity read its input instead. An Identity that gives a graph output
    stays: it is how two outputs that alias one value (or an input) stay two values."""
    graph = model.graph
    for node in list(graph):
        if node.op_type != "Identity" or node.domain or node.inputs[0] is None:
            continue
        if any(out.is_graph_output() for out in node.outputs):
            continue
        aliases.record(graph, node.outputs[0].name, node.inputs[0].name)
        node.outputs[0].replace_all_uses_with(node.inputs[0])
        graph.remove(node, safe=True)


def _remove_identities(model: ir.Model) -> Counter[str]:
    return op_delta(model, _drop_identities)


def _constants_to_initializers(model: ir.Model) -> Counter[str]:
    return op_delta(model, lambda m: (
        ir_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(m),
        ir_passes.DeduplicateInitializersPass(size_limit=DEDUP_LIMIT)(m),
        ir_passes.CommonSubexpressionEliminationPass()(m),
        ir_passes.RemoveUnusedNodesPass()(m),
    ))


PASSES: tuple[Pass, ...] = (
    _rule_pass("no_op_rewrites", "Cast to its own type, Expand to its own shape, Reshape to its own "
               "shape, identity Transpose, and integer x + 0, x - 0, x * 1, x / 1 become Identity",
               onnxscript_rules.no_op_cast_rule, onnxscript_rules.no_op_expand_rule, no_op_reshape_rule,
               onnxscript_rules.no_op_transpose_rule, neutral_operand_rules),
    Pass("remove_identities", "Identity nodes removed (a graph output keeps its name)", _remove_identities),
    Pass("fold_constants", "nodes whose inputs are all known at export computed into constants, static "
         "shape sub-graphs (Shape, Size of static shapes and what follows) included", _fold_constants),
    _rule_pass("simplify_shapes", "Reshape of Reshape, Unsqueeze of Unsqueeze, Transpose of Transpose, "
               "Cast of Cast and Slices that cover their input merged; a Reshape to a computed shape "
               "that is known (up to one dynamic dim) reads a constant shape; a size squeezed to a "
               "scalar and made 1-D again (with arithmetic between) stays 1-D; an elementwise op "
               "with a fill of its other operand's shape reads the 0-d fill value", static_reshape_shape_rule,
               onnxscript_rules.reshape_reshape_rule, onnxscript_rules.transpose_transpose_rule,
               scalar_round_trip_rules, fill_like_operand_rules,
               onnxscript_rules.unsqueeze_unsqueeze_rule, onnxscript_rules.cast_cast_rule,
               onnxscript_rules.collapse_slice_rule, onnxscript_rules.collapse_slice2_rule,
               then=(_drop_identities,)),
    _rule_pass("fold_batchnorm", "BatchNormalization folded into the Conv, ConvTranspose or Gemm before "
               "it (weights and bias rescaled at export)", onnxscript_rules.fuse_batchnorm_into_conv_rule,
               onnxscript_rules.fuse_batchnorm_into_conv_transpose_rule,
               onnxscript_rules.fuse_batchnorm_into_gemm_rule),
    _rule_pass("merge_clips", "Clip of Clip (clamp_min then clamp_max) and Clip of Relu as one Clip",
               onnxscript_rules.successive_clip_rule, onnxscript_rules.successive_clip_relu_rule,
               onnxscript_rules.successive_relu_clip_rule, onnxscript_rules.successive_relu_rule),
    _rule_pass("fuse_activations", "Add+Clip+Div as HardSigmoid, with the Mul as HardSwish; the exact "
               "GELU as Gelu from opset 20, below it in the form onnxruntime fuses",
               onnxscript_rules.fuse_hardswish_rules(), erf_gelu_rules),
    Pass("constants_to_initializers", "Constant nodes become initializers; equal initializers are "
         "stored once; nodes computing the same op on the same inputs are computed once (last: merging "
         "shared sub-expressions earlier would stop the fusions above)", _constants_to_initializers),
)
"""The passes in the order `optimize` runs them."""

WEIGHT_FOLDING: tuple[Pass, ...] = (
    Pass("fold_weights", "data movement on weights (the recurrent layers' gate reordering, a "
         "transposed Linear weight) computed at export; everything else left one node per op", _fold_weights),
)
"""What `optimize=False` still runs when constant folding is on."""
