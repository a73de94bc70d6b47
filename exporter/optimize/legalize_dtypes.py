"""Wrap in Casts the nodes that cannot run in their low-precision float type.

A bfloat16 module exports ops that ONNX does not define in bfloat16 at the target opset (Conv,
ConvTranspose, the pooling ops, ...), which no runtime may load, and ops that ONNX defines but
onnxruntime's CPU provider has no bfloat16 kernel for (Gemm, Add, Softmax, ...), which
onnxruntime refuses to load. Each such node gets its float16/bfloat16 inputs cast up to
float32, computes in float32, and has its outputs cast back to their own type under their own
names: every op still rounds its result to the module's dtype, as torch does, and the values
the harness joins to FX nodes keep their names and types.

The first set is derived from onnx's operator schemas (the type constraints of the schema in
force at the target opset); the second from onnxruntime itself, by loading the node alone in a
CPU session (a missing kernel is reported as NOT_IMPLEMENTED), once per operator, version and
input/output types. float16 is rarely affected: onnxruntime's CPU provider casts float16 nodes
without a float16 kernel to float32 by itself.

The wrapped node carries `roundtrip.cast` ("bfloat16->float32: <why>"); the Casts carry the
node's provenance, so they belong to the same FX node's subgraph.

`LegalizeDtypes` is an onnx_ir pass, the last one the export runs (exporter.optimize);
`legalize_dtypes` applies it to a ModelProto. Values whose type the model does not declare are
typed by onnx's type inference; where that fails, the nodes it would have typed are named in an
ExportWarning (they may hold float16/bfloat16 values that no runtime loads), never skipped in
silence.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import onnx
import onnx_ir as ir
from onnx import TensorProto

from exporter.contract.keys import CAST_KEY, FX_NODE_KEY
from exporter.errors import ExportWarning
from exporter.translate.ir_model import to_skeleton

logger = logging.getLogger(__name__)

LOW_PRECISION = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})
"""Element types a node may be cast out of."""

COMPUTE_TYPE = TensorProto.FLOAT
"""The type a wrapped node computes in."""

_SUFFIX = "::float32"


def type_string(elem_type: int) -> str:
    """ONNX's spelling of a tensor type in schemas and onnxruntime: `tensor(bfloat16)`."""
    return f"tensor({TensorProto.DataType.Name(elem_type).lower()})"


@dataclass(frozen=True)
class Wrapped:
    """One node the pass wrapped: its name, operator, the types cast and why."""

    node: str
    op_type: str
    cast: str  # "bfloat16->float32"
    reason: str

    @property
    def note(self) -> str:
        """The node's `roundtrip.cast` entry."""
        return f"{self.cast}: {self.reason}"


class LegalizeDtypes(ir.passes.InPlacePass):
    """The onnx_ir pass: wrap every node of the main graph whose float16/bfloat16 values ONNX
    does not define at the model's opset, or (with `onnxruntime_cpu`) onnxruntime's CPU
    provider has no kernel for. `modified` when a node was wrapped."""

    def __init__(self, *, onnxruntime_cpu: bool = True) -> None:
        super().__init__()
        self.onnxruntime_cpu = onnxruntime_cpu

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, modified=bool(wrap_nodes(model, onnxruntime_cpu=self.onnxruntime_cpu)))


def legalize_dtypes(model: onnx.ModelProto, *, onnxruntime_cpu: bool = True) -> list[Wrapped]:
    """`LegalizeDtypes` on a ModelProto (one with its weights inline), in place. Returns what was
    wrapped, in graph order. An export runs the pass on its onnx_ir model instead."""
    from exporter.optimize.bridge import to_ir

    ir_model = to_ir(model, {})
    wrapped = wrap_nodes(ir_model, onnxruntime_cpu=onnxruntime_cpu)
    if wrapped:
        model.CopyFrom(ir.serde.serialize_model(ir_model))
    return wrapped


def wrap_nodes(model: ir.Model, *, onnxruntime_cpu: bool = True) -> list[Wrapped]:
    """Wrap, in place, the nodes of `model`'s main graph that cannot run in their float16/bfloat16
    types (see `LegalizeDtypes`). Returns what was wrapped, in graph order."""
    if not _may_hold_low_precision(model.graph):
        return []
    graph = model.graph
    opsets = dict(model.opset_imports)
    types = _value_types(model)
    wrapped: list[Wrapped] = []
    names = _NameSource(graph)
    casts_up: set[int] = set()
    casts_back: set[int] = set()
    for node in list(graph):
        decision = _decide(node, types, opsets, model.ir_version, onnxruntime_cpu)
        if decision is None:
            continue
        low, reason = decision
        record = Wrapped(node.name or "", node.op_type, f"{TensorProto.DataType.Name(low).lower()}->float32", reason)
        before, after = _wrap(node, types, names, record)
        graph.insert_before(node, before)
        graph.insert_after(node, after)
        casts_up.update(id(cast) for cast in before)
        casts_back.update(id(cast) for cast in after)
        wrapped.append(record)
    if wrapped:
        nodes = list(graph)
        kept = {id(node) for node in _round_once_per_op(nodes, casts_up, casts_back, graph)}
        dropped = [node for node in nodes if id(node) not in kept]
        if dropped:
            graph.remove(dropped, safe=True)
        logger.info("cast-wrapped %d node(s): %s", len(wrapped), ", ".join(sorted({w.op_type for w in wrapped})))
    return wrapped


def _decide(node: ir.Node, types: dict[str, int], opsets: dict[str, int], ir_version: int,
            onnxruntime_cpu: bool) -> tuple[int, str] | None:
    """(the low-precision type, why) when `node` must be wrapped, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type == "Cast" or _has_subgraph(node):
        return None
    inputs = [types.get(v.name, 0) if v is not None and v.name else 0 for v in node.inputs]
    outputs = [types.get(v.name, 0) if v.name else 0 for v in node.outputs]
    low = [t for t in inputs if t in LOW_PRECISION]
    if not low:  # a node that only produces low-precision values (ConstantOfShape, Cast) is defined
        return None
    opset = opsets.get("", 0)
    widened_inputs = [COMPUTE_TYPE if t in LOW_PRECISION else t for t in inputs]
    widened_outputs = [COMPUTE_TYPE if t in LOW_PRECISION else t for t in outputs]
    undefined = undefined_types(node.op_type, opset, inputs, outputs)
    if undefined:
        reason = f"ONNX {node.op_type} (opset {opset}) does not define {undefined}"
    elif onnxruntime_cpu and _refused_at_run_time(node):
        reason = (f"onnxruntime's CPU provider loads {node.op_type} with a reduction in {type_string(low[0])} "
                  "but refuses to run it")
    elif onnxruntime_cpu and not onnxruntime_cpu_runs(_probe_model(node, inputs, outputs, opset, ir_version)):
        reason = f"onnxruntime's CPU provider has no {type_string(low[0])} kernel for {node.op_type} (opset {opset})"
    else:
        return None
    if undefined_types(node.op_type, opset, widened_inputs, widened_outputs):
        logger.warning("%s %r: %s, and float32 is not defined either; left as it is", node.op_type, node.name, reason)
        return None
    return low[0], reason


# Nodes onnxruntime's CPU provider loads in float16/bfloat16 (so the load probe passes) but
# refuses when run: "MLFloat16 data type is not supported with ScatterElements opset 16 when
# reduction is 'add'" (onnxruntime 1.31); the same for ScatterND.
_RUN_TIME_REFUSALS = {"ScatterElements": "reduction", "ScatterND": "reduction"}


def _refused_at_run_time(node: ir.Node) -> bool:
    """Whether `node`, with low-precision inputs, is one onnxruntime's CPU provider refuses to run."""
    attribute = _RUN_TIME_REFUSALS.get(node.op_type)
    if attribute is None:
        return False
    return node.attributes.get_string(attribute, "none") != "none"


def undefined_types(op_type: str, opset: int, inputs: list[int], outputs: list[int]) -> str:
    """The first of the given element types (0: unknown) that the schema of `op_type` in force
    at `opset` does not allow for its formal parameter, spelled `tensor(bfloat16) for input X`;
    '' when all are allowed or there is no schema."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return ""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for formals, actual, kind in ((schema.inputs, inputs, "input"), (schema.outputs, outputs, "output")):
        for index, elem_type in enumerate(actual):
            if not elem_type or not formals:
                continue
            formal = formals[min(index, len(formals) - 1)]  # the last formal may be variadic
            spelled = type_string(elem_type)
            permitted = allowed.get(formal.type_str, {formal.type_str})
            if spelled not in permitted:
                return f"{spelled} for {kind} {formal.name}"
    return ""


def onnxruntime_cpu_runs(probe: onnx.ModelProto) -> bool:
    """Whether onnxruntime's CPU provider has a kernel for the single node of `probe` (False
    only for NOT_IMPLEMENTED: any other load failure is not a missing kernel)."""
    return _loads(probe.SerializeToString())


@lru_cache(maxsize=512)
def _loads(serialized: bytes) -> bool:
    try:
        import onnxruntime as ort
    except ImportError:  # no onnxruntime to ask: trust the schemas
        return True
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    status_errors = tuple(v for v in vars(state).values() if isinstance(v, type) and issubclass(v, Exception))
    try:
        ort.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
    except status_errors as error:  # onnxruntime's status exceptions; a bug of the probe propagates
        text = str(error)
        return "NOT_IMPLEMENTED" not in text and "Could not find an implementation" not in text
    return True


def _probe_model(node: ir.Node, inputs: list[int], outputs: list[int], opset: int,
                 ir_version: int) -> onnx.ModelProto:
    """`node` alone, its inputs fed, typed as in the model (no shapes: the kernel lookup needs
    only the operator, its version and the types). Named by position, so that nodes that
    differ only in names share the cached answer."""
    probe = onnx.NodeProto(op_type=node.op_type, domain=node.domain)
    probe.attribute.extend(ir.serde.serialize_attribute(attr) for attr in node.attributes.values())
    fed = [(f"i{k}", t) for k, t in enumerate(inputs)]
    probe.input.extend(name if value is not None else "" for (name, _), value in zip(fed, node.inputs))
    probe.output.extend(f"o{k}" for k in range(len(outputs)))
    graph = onnx.helper.make_graph(
        [probe], "probe",
        [onnx.helper.make_tensor_value_info(name, t or COMPUTE_TYPE, None)
         for (name, t), value in zip(fed, node.inputs) if value is not None],
        [onnx.helper.make_tensor_value_info(f"o{k}", t, None) if t else onnx.ValueInfoProto(name=f"o{k}")
         for k, t in enumerate(outputs)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)],
                                  ir_version=ir_version)


def _wrap(node: ir.Node, types: dict[str, int], names: _NameSource, record: Wrapped
          ) -> tuple[list[ir.Node], list[ir.Node]]:
    """Cast(inputs) -> node in float32 -> Cast(outputs) back, the node's names kept outside;
    returns the Casts before and after it (not yet in the graph)."""
    provenance = dict(node.metadata_props)
    before: list[ir.Node] = []
    for index, value in enumerate(node.inputs):
        if value is not None and value.name and types.get(value.name) in LOW_PRECISION:
            widened = ir.Value(name=names.value(value.name + _SUFFIX))
            before.append(_cast(value, widened, COMPUTE_TYPE, names.node(f"{node.name}::cast_in{index}"), provenance))
            node.replace_input_with(index, widened)
    after: list[ir.Node] = []
    for index, value in enumerate(node.outputs):
        if value.name and types.get(value.name) in LOW_PRECISION:
            # The node's output becomes an untyped float32 value; a Cast gives back the value
            # its readers (and the graph outputs) read, under its name, type and shape.
            kept = ir.Value(name=value.name, type=value.type, shape=value.shape, doc_string=value.doc_string)
            value.replace_all_uses_with(kept, replace_graph_outputs=True)
            value.name = names.value(kept.name + _SUFFIX)
            value.type, value.shape = None, None
            after.append(_cast(value, kept, types[kept.name], names.node(f"{node.name}::cast_out{index}"), provenance))
    node.metadata_props[CAST_KEY] = record.note
    return before, after


def _round_once_per_op(nodes: list[ir.Node], casts_up: set[int], casts_back: set[int],
                       graph: ir.Graph) -> list[ir.Node]:
    """Drop the Cast back and Casts up between two wrapped nodes of one FX node (MatMul then
    Add for a linear, say): the value between them stays float32, so the op rounds to its
    dtype once, as torch's kernels do, not once per ONNX node. Values the harness joins to FX
    nodes (`n`, `n__1`) and graph outputs keep their Casts. Returns the nodes kept (the
    readers of the dropped Casts are rewired; removing the dropped nodes is the caller's)."""
    dropped: set[int] = set()
    for node in nodes:
        if id(node) not in casts_back:
            continue
        value, op = node.outputs[0], _fx_node(node)
        users = [user for user, _ in value.uses()]
        if not op or value.is_graph_output() or not users or re.fullmatch(rf"{re.escape(op)}(__\d+)?", value.name or ""):
            continue
        if all(id(user) in casts_up and _fx_node(user) == op for user in users):
            for user in users:
                user.outputs[0].replace_all_uses_with(node.inputs[0])
            dropped.update(id(n) for n in (node, *users))
    return [node for node in nodes if id(node) not in dropped]


def _fx_node(node: ir.Node) -> str:
    return node.metadata_props.get(FX_NODE_KEY, "")


def _cast(source: ir.Value, target: ir.Value, to: int, name: str, provenance: dict[str, str]) -> ir.Node:
    return ir.Node("", "Cast", [source], attributes=[ir.AttrInt64("to", to)], outputs=[target], name=name,
                   metadata_props=dict(provenance))


class _NameSource:
    """Fresh value and node names that collide with nothing in the graph."""

    def __init__(self, graph: ir.Graph) -> None:
        self._values = {v.name for v in _values(graph) if v.name}
        self._nodes = {n.name for n in graph if n.name}

    def value(self, wanted: str) -> str:
        return self._fresh(wanted, self._values)

    def node(self, wanted: str) -> str:
        return self._fresh(wanted, self._nodes)

    @staticmethod
    def _fresh(wanted: str, taken: set[str]) -> str:
        name, count = wanted, 1
        while name in taken:
            name, count = f"{wanted}_{count}", count + 1
        taken.add(name)
        return name


def _values(graph: ir.Graph) -> Iterable[ir.Value]:
    """Every value of the main graph: initializers, inputs, node inputs and outputs, outputs."""
    yield from graph.initializers.values()
    yield from graph.inputs
    for node in graph:
        yield from (v for v in node.inputs if v is not None)
        yield from node.outputs
    yield from graph.outputs


def _elem_type(value: ir.Value) -> int:
    """The value's element type (0: unknown), from its type or its constant."""
    if value.dtype is not None:
        return int(value.dtype)
    return int(value.const_value.dtype) if value.const_value is not None else 0


def _may_hold_low_precision(graph: ir.Graph) -> bool:
    """Whether any value of the main graph can be float16/bfloat16: one is declared so, or a
    node makes one (a Cast or a constant); a float32 model skips type inference."""
    if any(_elem_type(value) in LOW_PRECISION for value in _values(graph)):
        return True
    return any(
        (attr.type == ir.AttributeType.INT and attr.name in ("to", "dtype") and attr.value in LOW_PRECISION)
        or (attr.type == ir.AttributeType.TENSOR and int(attr.value.dtype) in LOW_PRECISION)
        for node in graph for attr in node.attributes.values()
    )


def _has_subgraph(node: ir.Node) -> bool:
    return any(attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for attr in node.attributes.values())


def _value_types(model: ir.Model) -> dict[str, int]:
    """Element type of every value of the main graph: declared, or from onnx's type inference
    (run on the model's skeleton, without the weight bytes, which inference does not need).
    Where inference fails, an ExportWarning names the nodes left as they are."""
    graph = model.graph
    types: dict[str, int] = {}
    for value in _values(graph):
        if value.name and _elem_type(value):
            types.setdefault(value.name, _elem_type(value))
    untyped = [node for node in graph
               if any(v is not None and v.name and v.name not in types for v in (*node.inputs, *node.outputs))]
    if not untyped:
        return types
    shell, _ = to_skeleton(model)  # large initializers as data-less stubs; small ones inline
    declared = {i.name for i in shell.graph.input}
    shell.graph.input.extend(  # initializers as typed inputs: inference needs no weight bytes
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in shell.graph.initializer if t.name not in declared
    )
    del shell.graph.initializer[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(shell, strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        left = [f"{node.op_type} {node.name!r}" for node in untyped
                if node.domain in ("", "ai.onnx") and node.op_type != "Cast"]
        warnings.warn(ExportWarning(
            f"onnx's type inference failed ({error}); {len(left)} node(s) with values of unknown type are "
            f"left without Casts, and may not load in a runtime if they compute in float16/bfloat16: "
            f"{', '.join(left[:10])}{' ...' if len(left) > 10 else ''}"), stacklevel=2)
        return types
    for info in inferred.graph.value_info:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types.setdefault(info.name, info.type.tensor_type.elem_type)
    return types
