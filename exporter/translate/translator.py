"""Translate an ExportedProgram's FX graph into a `Graph`, one symbolic call per FX node.

Naming contract, which the harness relies on to join ONNX values to FX nodes: the ONNX value
carrying FX node `n`'s output is named `n`, its second output `n__1`, and so on. `getitem` nodes
are aliases and emit nothing. Every node emitted for `n` carries `n`'s provenance, so the group
of nodes sharing `roundtrip.fx_node` is the op's subgraph. Unsupported operators are collected
over the whole graph and raised together.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind

from exporter.capturing.signature import (
    DynamicAxes, check_output_names, normalize_dynamic_axes, user_input_nodes, user_outputs,
)
from exporter.contract.keys import ATEN_KEY, FX_NODE_KEY, SCOPE_KEY, SOURCE_KEY
from exporter.errors import ExportError, SymbolicError, UnsupportedOperator, UnsupportedOperatorError
from exporter.translate.dtypes import unsupported_reason
from exporter.translate.graph import Dim, Graph, Value
from exporter.translate.provenance import scope_of, source_of
from exporter.translate.registry import Dispatcher, normalize_target

# Input kinds whose placeholders hold a tensor the ONNX graph carries as an initializer.
_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
EFFECT_HINT = (
    "hint: an op with a side effect (an error check such as torch.linalg.inv's, a print, a custom "
    "op that mutates state) is ordered by an effect token, which ONNX cannot express; compute the "
    "result without the side effect (e.g. torch.linalg.inv_ex, which returns its error code "
    "instead of raising)"
)
CONSTRUCT_HINT = (
    "hint: roundtrip translates ATen operator calls only; rewrite this part of forward() with "
    "tensor operations (torch.where instead of torch.cond, a fixed loop instead of while_loop)"
)


class _Missing:
    """Stands for the output of a node that could not be translated."""


MISSING = _Missing()


@dataclass
class Conversion:
    """The graph built from a program, and what it took to build it."""

    graph: Graph
    renamed: dict[str, str] = field(default_factory=dict)  # fx value name -> ONNX name
    user_input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)


class SymbolicContext:
    """What a symbolic may know about the FX node being translated (`g.ctx`)."""

    def __init__(self, node: torch.fx.Node, target: str) -> None:
        self.node = node
        self.target = target

    @property
    def output_meta(self) -> Any:
        """The FakeTensor (or tuple of them, or SymInt) the node produces."""
        return self.node.meta.get("val")

    @property
    def output_dtype(self) -> torch.dtype | None:
        val = self.output_meta
        if isinstance(val, (tuple, list)):
            val = val[0] if val else None
        return getattr(val, "dtype", None)


def translate(
    program: torch.export.ExportedProgram,
    *,
    root_name: str,
    opset_version: int,
    dispatcher: Dispatcher,
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    dim_names: Mapping[str, str],
) -> Conversion:
    """Build the ONNX graph for `program`; raise UnsupportedOperatorError listing every gap.

    `root_name` roots every node's scope; `dim_names` maps size symbols (e.g. 's77') to the
    user's dim names (see `dim_names_for`).
    """
    _check_dtypes(program, opset_version)
    graph = Graph(opset_version)
    conversion = Conversion(graph)
    shapes = _ShapeNamer(dim_names)
    env: dict[str, Any] = {}
    unsupported: list[UnsupportedOperator] = []

    _add_placeholders(program, graph, env, conversion, input_names, shapes, unsupported, root_name)

    for node in program.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "get_attr" and all(_is_higher_order(user) for user in node.users):
            env[node.name] = MISSING  # a nested graph of a higher-order op, reported with the op
            continue
        if node.op != "call_function":  # get_attr, call_module, call_method: not ATen calls
            unsupported.append(_unsupported(
                node, root_name, f"<{node.op} {node.target}>",
                f"a {node.op} node, which the capture left in the graph (a submodule or attribute "
                "read that torch.export did not lift into an ATen call)", CONSTRUCT_HINT))
            env[node.name] = MISSING
            continue
        if node.target is operator.getitem:
            source = env.get(node.args[0].name, MISSING)
            env[node.name] = source if source is MISSING else source[node.args[1]]
            continue
        target = normalize_target(node.target)
        found = dispatcher.lookup(node.target)
        provenance = {
            FX_NODE_KEY: node.name,
            ATEN_KEY: target,
            SCOPE_KEY: scope_of(node, root_name),
            SOURCE_KEY: source_of(node),
        }
        if not isinstance(found, str) and not found.takes_complex:
            # complex values are (..., 2) pairs: only some ops read them, or make them (a Cast of reals)
            if _complex_operands(node):
                found = dispatcher.lookup_complex(target)
            elif _complex_result(node):
                found = dispatcher.lookup_complex(target, "makes")
        if isinstance(found, str):
            unsupported.append(_unsupported(node, root_name, target, *_capture_construct(node, found)))
            env[node.name] = MISSING
            continue
        args, kwargs = _symbolic_arguments(node, env)
        if any(a is MISSING for a in _flatten(args + list(kwargs.values()))):
            env[node.name] = MISSING
            continue
        start = len(graph.nodes)
        with graph.node_context(provenance, temp_prefix=node.name):
            graph.ctx = SymbolicContext(node, target)
            try:
                result = found.fn(graph, *args, **kwargs)
            except Exception as error:
                raise SymbolicError(
                    f"the symbolic for {target} failed on node {node.name!r} "
                    f"({provenance[SCOPE_KEY]}, {provenance[SOURCE_KEY]}): "
                    f"{type(error).__name__}: {error}\n  symbolic: {found.location} ({found.origin})"
                ) from error
            env[node.name] = _name_outputs(graph, node, result, start, shapes)

    if unsupported:
        raise UnsupportedOperatorError(unsupported, opset_version)
    _add_outputs(program, graph, env, conversion, output_names)
    return conversion


def _complex_operands(node: torch.fx.Node) -> bool:
    """Whether the node reads a complex tensor."""
    return any(isinstance(arg.meta.get("val"), torch.Tensor) and arg.meta["val"].dtype.is_complex
               for arg in node.all_input_nodes)


def _complex_result(node: torch.fx.Node) -> bool:
    """Whether the node's (first) value is a complex tensor."""
    meta = node.meta.get("val")
    meta = meta[0] if isinstance(meta, (tuple, list)) and meta else meta
    return isinstance(meta, torch.Tensor) and meta.dtype.is_complex


def dim_names_for(
    program: torch.export.ExportedProgram, input_names: Sequence[str], dynamic_axes: DynamicAxes | None
) -> dict[str, str]:
    """Symbol (e.g. 's77') -> the user's dim name, read off the user inputs' fake shapes.

    `input_names[i]` names the i-th user input, as `dynamic_axes`' keys do.
    """
    mapping: dict[str, str] = {}
    axes_by_name = normalize_dynamic_axes(dynamic_axes)
    for name, node in zip(input_names, user_input_nodes(program)):
        axes = axes_by_name.get(name)
        val = node.meta.get("val")
        if axes is None or not isinstance(val, torch.Tensor):
            continue
        for axis, dim_name in axes.items():
            size = val.shape[axis]
            if hasattr(size, "node"):
                mapping.setdefault(str(size.node.expr), dim_name)
    return mapping


def _unsupported(node: torch.fx.Node, root_name: str, target: str, reason: str, hint: str = "") -> UnsupportedOperator:
    return UnsupportedOperator(node.name, target, scope_of(node, root_name), _user_source(node), reason, hint)


_GENERATED_FRAME = re.compile(r'File "<[^"]*", line \d+, in [^\n]*(\n {4}[^\n]*)?')


def _user_source(node: torch.fx.Node) -> str:
    """The node's source line, skipping frames of code torch generates while tracing (a
    higher-order op's `<eval_with_key>` graph), which are no line of the user's."""
    trace = node.meta.get("stack_trace") or ""
    if '"<' not in trace:
        return source_of(node)
    return source_of(SimpleNamespace(meta={"stack_trace": _GENERATED_FRAME.sub("", trace)}))


def _is_higher_order(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator)


def _capture_construct(node: torch.fx.Node, reason: str) -> tuple[str, str]:
    """The reason and hint for an untranslatable node: plain ATen ops get the registry's reason
    (and the register_symbolic hint); higher-order ops and effect tokens say what they are."""
    if not _is_higher_order(node):
        return reason, ""
    name = node.target.name()
    if name == "with_effects":
        wrapped = node.args[1] if len(node.args) > 1 else "?"
        return f"it runs {wrapped} for its side effect, ordered by an effect token", EFFECT_HINT
    return f"the higher-order operator {name} (control flow or a nested graph) has no ONNX translation", CONSTRUCT_HINT


def _check_dtypes(program: torch.export.ExportedProgram, opset_version: int) -> None:
    """ExportError listing every value whose dtype cannot be exported at `opset_version`."""
    problems: dict[torch.dtype, list[str]] = {}
    for node in program.graph.nodes:
        val = node.meta.get("val")
        for item in val if isinstance(val, (tuple, list)) else [val]:
            if not isinstance(item, torch.Tensor):
                continue
            # a complex value travels as (..., 2) pairs of its real dtype (symbolics/fft.py): complex32 too
            stored = item.dtype.to_real() if item.dtype.is_complex else item.dtype
            if unsupported_reason(stored, opset_version):
                problems.setdefault(item.dtype, []).append(node.name)
    if problems:
        lines = [
            f"  {str(dtype).removeprefix('torch.')} (values {', '.join(names[:6])}"
            f"{', ...' if len(names) > 6 else ''}): {unsupported_reason(dtype, opset_version)}"
            for dtype, names in sorted(problems.items(), key=lambda item: str(item[0]))
        ]
        raise ExportError(f"the model uses dtypes that cannot be exported at opset {opset_version}:\n" + "\n".join(lines))


def _add_placeholders(program, graph, env, conversion, input_names, shapes, unsupported, root_name) -> None:
    specs = {spec.arg.name: spec for spec in program.graph_signature.input_specs}
    constants = {**program.constants, **program.state_dict}
    user_index = 0
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs[node.name]
        if spec.kind == InputKind.TOKEN:
            env[node.name] = MISSING  # an effect token: only with_effects reads it (reported there)
            continue
        if spec.kind not in (InputKind.USER_INPUT, *_STATE_KINDS):
            unsupported.append(_unsupported(
                node, root_name, f"<{str(spec.kind).rsplit('.', 1)[-1].lower()} input {node.name}>",
                f"an input of kind {spec.kind.name} (e.g. a TorchScript object), which ONNX cannot carry",
                CONSTRUCT_HINT))
            env[node.name] = MISSING
            continue
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                env[node.name] = val  # a Python scalar input, specialised by torch.export
                continue
            name = input_names[user_index] if input_names and user_index < len(input_names) else node.name
            user_index += 1
            env[node.name] = graph.add_input(name, val.dtype, shapes.shape(val))
            conversion.user_input_names.append(name)
            if name != node.name:
                conversion.renamed[node.name] = name
        else:
            if not node.users:
                continue
            tensor = constants[spec.target]
            if isinstance(tensor, torch.nn.Parameter):
                tensor = tensor.data
            env[node.name] = graph.add_initializer(spec.target, tensor)


def _symbolic_arguments(node: torch.fx.Node, env: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional arguments in schema order (defaults filled); keyword-only ones by name."""
    def lookup(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env.get(a.name, MISSING)
        if isinstance(a, (list, tuple)):
            return type(a)(lookup(x) for x in a)
        return a

    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return [lookup(a) for a in node.args], {k: lookup(v) for k, v in node.kwargs.items()}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):
        if index < len(node.args) and not argument.kwarg_only:
            value = node.args[index]
        elif argument.name in node.kwargs:
            value = node.kwargs[argument.name]
        elif argument.has_default_value():
            value = argument.default_value
        else:
            value = None
        if argument.kwarg_only:
            kwargs[argument.name] = lookup(value)
        else:
            args.append(lookup(value))
    return args, kwargs


def _flatten(items: Sequence[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            flat.extend(_flatten(item))
        else:
            flat.append(item)
    return flat


def _name_outputs(graph: Graph, node: torch.fx.Node, result: Any, start: int, shapes) -> Any:
    """Give the symbolic's outputs the FX node's name (`n`, `n__1`, ...) and its types."""
    meta = node.meta.get("val")
    if isinstance(result, (tuple, list)):
        metas = meta if isinstance(meta, (tuple, list)) else [meta] * len(result)
        named = []
        for index, (value, value_meta) in enumerate(zip(result, metas)):
            if isinstance(value, (tuple, list)):  # e.g. a list of tensors in one output
                named.append(type(value)(
                    _name_one(graph, v, f"{node.name}__{index}_{j}" if (index or j) else node.name,
                              m, start, shapes)
                    for j, (v, m) in enumerate(zip(value, value_meta))
                ))
            else:
                name = node.name if index == 0 else f"{node.name}__{index}"
                named.append(_name_one(graph, value, name, value_meta, start, shapes))
        return type(result)(named) if isinstance(result, tuple) else named
    return _name_one(graph, result, node.name, meta, start, shapes)


def _name_one(graph: Graph, value: Any, name: str, meta: Any, start: int, shapes) -> Any:
    if not isinstance(value, Value):
        return value  # None, or a Python scalar the symbolic folded
    emitted = graph.nodes[start:]
    owned = value.producer is not None and any(value.producer is n for n in emitted)
    if not owned or "::" not in value.name:
        value = graph.op("Identity", value)
    value.name = name
    if isinstance(meta, torch.Tensor):
        value.dtype = meta.dtype
        value.shape = shapes.shape(meta)
        if meta.dtype.is_complex:  # a complex value travels as (..., 2) real pairs (symbolics/fft.py)
            value.dtype, value.shape = meta.dtype.to_real(), (*value.shape, 2)
    elif isinstance(meta, (torch.SymInt, int)) and not isinstance(meta, bool):
        value.dtype = torch.int64
        value.shape = ()
    return value


def _add_outputs(program, graph, env, conversion, output_names) -> None:
    """The user outputs, in order. An output that is a graph input or initializer, or a value
    already output (returned twice, or under two names), gets its own Identity node: every
    graph output is then a distinct node output, as the checker's SSA rule requires."""
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    user_items = user_outputs(program)  # buffer and input updates are state: exporter.capturing.trace warns
    check_output_names(output_names, len(user_items))
    taken = _value_names(graph)
    used: set[str] = set()
    for index, item in enumerate(user_items):
        if not isinstance(item, torch.fx.Node):
            raise ExportError(
                f"output {index} is the constant {item!r}; only tensor outputs can be exported "
                "(return it as a tensor, or leave it out of forward()'s outputs)"
            )
        value = env[item.name]
        if not isinstance(value, Value):
            raise SymbolicError(f"output {index} ({item.name}) did not produce an ONNX value")
        wanted = output_names[index] if output_names and index < len(output_names) else None
        is_graph_input = any(value is v for v in graph.inputs) or value.name in graph.initializers
        needs_copy = is_graph_input or value.name in used
        if wanted is not None and wanted in taken and (needs_copy or wanted != value.name):
            raise ExportError(
                f"output_names[{index}]={wanted!r} is already the name of another value of the graph "
                "(an input, a weight, another output, or an intermediate: roundtrip names those after "
                "the FX nodes that compute them); choose another name"
            )
        if needs_copy:
            with graph.node_context({FX_NODE_KEY: output_node.name, ATEN_KEY: "output"}, "output"):
                copy = graph.op("Identity", value)
            copy.dtype, copy.shape = value.dtype, value.shape
            copy.name = wanted or _fresh_name(f"{item.name}_output{index}", taken)
            value = copy
        elif wanted is not None and wanted != value.name:
            conversion.renamed[value.name] = wanted
            value.name = wanted
        taken.add(value.name)
        used.add(value.name)
        graph.outputs.append(value)
        conversion.output_names.append(value.name)


def _value_names(graph: Graph) -> set[str]:
    names = {v.name for v in graph.inputs} | set(graph.initializers)
    return names | {out.name for node in graph.nodes for out in node.outputs}


def _fresh_name(base: str, taken: set[str]) -> str:
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    return name


class _ShapeNamer:
    """Turns FakeTensor shapes into ONNX dims, naming symbolic sizes after the user's axes."""

    def __init__(self, dim_names: Mapping[str, str]) -> None:
        self.dim_names = dict(dim_names)

    def shape(self, val: torch.Tensor) -> tuple[Dim, ...]:
        return tuple(self.dim(d) for d in val.shape)

    def dim(self, size: Any) -> Dim:
        if isinstance(size, int):
            return size
        expr = str(size.node.expr) if hasattr(size, "node") else str(size)
        if expr.lstrip("-").isdigit():
            return int(expr)
        for symbol, name in sorted(self.dim_names.items(), key=lambda kv: -len(kv[0])):
            expr = _replace_symbol(expr, symbol, name)
        return expr


def _replace_symbol(expr: str, symbol: str, name: str) -> str:
    return re.sub(rf"\b{re.escape(symbol)}\b", name, expr)
