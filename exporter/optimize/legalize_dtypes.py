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
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache

import onnx
from onnx import TensorProto

from exporter.contract.keys import CAST_KEY, FX_NODE_KEY

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


def legalize_dtypes(model: onnx.ModelProto, *, onnxruntime_cpu: bool = True) -> list[Wrapped]:
    """Wrap, in place, every node of `model`'s main graph whose float16/bfloat16 values ONNX
    does not define at the model's opset, or (with `onnxruntime_cpu`) onnxruntime's CPU
    provider has no kernel for. Returns what was wrapped, in graph order."""
    if not _may_hold_low_precision(model):
        return []
    opsets = {entry.domain or "": entry.version for entry in model.opset_import}
    types = _value_types(model)
    wrapped: list[Wrapped] = []
    names = _NameSource(model)
    rebuilt: list[onnx.NodeProto] = []
    casts_up: set[int] = set()
    casts_back: set[int] = set()
    for node in model.graph.node:
        decision = _decide(node, types, opsets, model.ir_version, onnxruntime_cpu)
        if decision is None:
            rebuilt.append(node)
            continue
        low, reason = decision
        record = Wrapped(node.name, node.op_type, f"{TensorProto.DataType.Name(low).lower()}->float32", reason)
        before, after = _wrap(node, types, names, record)
        rebuilt.extend([*before, node, *after])
        casts_up.update(id(cast) for cast in before)
        casts_back.update(id(cast) for cast in after)
        wrapped.append(record)
    if wrapped:
        rebuilt = _round_once_per_op(rebuilt, casts_up, casts_back, model.graph)
        del model.graph.node[:]
        model.graph.node.extend(rebuilt)
        logger.info("cast-wrapped %d node(s): %s", len(wrapped), ", ".join(sorted({w.op_type for w in wrapped})))
    return wrapped


def _decide(node: onnx.NodeProto, types: dict[str, int], opsets: dict[str, int], ir_version: int,
            onnxruntime_cpu: bool) -> tuple[int, str] | None:
    """(the low-precision type, why) when `node` must be wrapped, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type == "Cast" or _has_subgraph(node):
        return None
    inputs = [types.get(name, 0) if name else 0 for name in node.input]
    outputs = [types.get(name, 0) for name in node.output]
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


def _refused_at_run_time(node: onnx.NodeProto) -> bool:
    """Whether `node`, with low-precision inputs, is one onnxruntime's CPU provider refuses to run."""
    attribute = _RUN_TIME_REFUSALS.get(node.op_type)
    if attribute is None:
        return False
    value = next((a.s.decode() for a in node.attribute if a.name == attribute), "none")
    return value != "none"


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


def _probe_model(node: onnx.NodeProto, inputs: list[int], outputs: list[int], opset: int,
                 ir_version: int) -> onnx.ModelProto:
    """`node` alone, its inputs fed, typed as in the model (no shapes: the kernel lookup needs
    only the operator, its version and the types). Named by position, so that nodes that
    differ only in names share the cached answer."""
    probe = onnx.NodeProto(op_type=node.op_type, domain=node.domain)
    probe.attribute.extend(node.attribute)
    fed = [(f"i{k}", t) for k, t in enumerate(inputs)]
    probe.input.extend(name if name_in else "" for (name, _), name_in in zip(fed, node.input))
    probe.output.extend(f"o{k}" for k in range(len(outputs)))
    graph = onnx.helper.make_graph(
        [probe], "probe",
        [onnx.helper.make_tensor_value_info(name, t or COMPUTE_TYPE, None)
         for (name, t), name_in in zip(fed, node.input) if name_in],
        [onnx.helper.make_tensor_value_info(f"o{k}", t, None) if t else onnx.ValueInfoProto(name=f"o{k}")
         for k, t in enumerate(outputs)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)],
                                  ir_version=ir_version)


def _wrap(node: onnx.NodeProto, types: dict[str, int], names: _NameSource, record: Wrapped
          ) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """Cast(inputs) -> node in float32 -> Cast(outputs) back, the node's names kept outside;
    returns the Casts before and after it."""
    provenance = [(p.key, p.value) for p in node.metadata_props]
    before: list[onnx.NodeProto] = []
    for index, name in enumerate(node.input):
        if name and types.get(name) in LOW_PRECISION:
            widened = names.value(name + _SUFFIX)
            before.append(_cast(name, widened, COMPUTE_TYPE, names.node(f"{node.name}::cast_in{index}"), provenance))
            node.input[index] = widened
    after: list[onnx.NodeProto] = []
    for index, name in enumerate(node.output):
        if name and types.get(name) in LOW_PRECISION:
            computed = names.value(name + _SUFFIX)
            after.append(_cast(computed, name, types[name], names.node(f"{node.name}::cast_out{index}"), provenance))
            node.output[index] = computed
    entry = node.metadata_props.add()
    entry.key, entry.value = CAST_KEY, record.note
    return before, after


def _round_once_per_op(nodes: list[onnx.NodeProto], casts_up: set[int], casts_back: set[int],
                       graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Drop the Cast back and Casts up between two wrapped nodes of one FX node (MatMul then
    Add for a linear, say): the value between them stays float32, so the op rounds to its
    dtype once, as torch's kernels do, not once per ONNX node. Values the harness joins to FX
    nodes (`n`, `n__1`) and graph outputs keep their Casts."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    rewired: dict[str, str] = {}
    dropped: set[int] = set()
    for node in nodes:
        if id(node) not in casts_back:
            continue
        value, op = node.output[0], _fx_node(node)
        users = consumers.get(value, [])
        if not op or value in outputs or not users or re.fullmatch(rf"{re.escape(op)}(__\d+)?", value):
            continue
        if all(id(user) in casts_up and _fx_node(user) == op for user in users):
            rewired.update((user.output[0], node.input[0]) for user in users)
            dropped.update(id(n) for n in (node, *users))
    kept = [node for node in nodes if id(node) not in dropped]
    for node in kept:
        node.input[:] = [rewired.get(name, name) for name in node.input]
    gone = {n.output[0] for n in nodes if id(n) in dropped}
    infos = [info for info in graph.value_info if info.name not in gone]
    if len(infos) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(infos)
    return kept


def _fx_node(node: onnx.NodeProto) -> str:
    return next((p.value for p in node.metadata_props if p.key == FX_NODE_KEY), "")


def _cast(source: str, target: str, to: int, name: str, provenance: list[tuple[str, str]]) -> onnx.NodeProto:
    cast = onnx.helper.make_node("Cast", [source], [target], name=name, to=to)
    for key, value in provenance:
        entry = cast.metadata_props.add()
        entry.key, entry.value = key, value
    return cast


class _NameSource:
    """Fresh value and node names that collide with nothing in the model."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self._values = {v for n in graph.node for v in (*n.input, *n.output)}
        self._values |= {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
        self._values |= {t.name for t in graph.initializer}
        self._nodes = {n.name for n in graph.node}

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


def _may_hold_low_precision(model: onnx.ModelProto) -> bool:
    """Whether any value of the main graph can be float16/bfloat16: one is declared so, or a
    node makes one (a Cast or a constant); a float32 model skips type inference."""
    graph = model.graph
    declared = [t.data_type for t in graph.initializer]
    declared += [i.type.tensor_type.elem_type for i in (*graph.input, *graph.output, *graph.value_info)]
    if any(t in LOW_PRECISION for t in declared):
        return True
    return any(
        (a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype") and a.i in LOW_PRECISION)
        or (a.type == onnx.AttributeProto.TENSOR and a.t.data_type in LOW_PRECISION)
        for node in graph.node for a in node.attribute
    )


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _value_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every value of the main graph: declared, or from onnx's type inference
    (run on a copy without the weight bytes, which inference does not need)."""
    graph = model.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for info in (*graph.input, *graph.output, *graph.value_info):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types.setdefault(info.name, info.type.tensor_type.elem_type)
    if all(name in types for node in graph.node for name in (*node.input, *node.output) if name):
        return types
    shell = onnx.ModelProto()
    shell.CopyFrom(model)  # a skeleton's stubs hold no bytes; inline ones are small
    declared = {i.name for i in graph.input}
    shell.graph.input.extend(  # initializers as typed inputs: inference needs no weight bytes
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in graph.initializer if t.name not in declared
    )
    del shell.graph.initializer[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(shell, strict_mode=False)
    except Exception as error:  # inference is best effort: undeclared values then stay unknown
        logger.info("type inference failed (%s); nodes with untyped values are left as they are", error)
        return types
    for info in inferred.graph.value_info:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types.setdefault(info.name, info.type.tensor_type.elem_type)
    return types
