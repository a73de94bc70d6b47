"""The planner of local rewrites that spare a captured program torch's decomposition pass.

`torch.export.export` returns training IR: in-place ops (`relu_`, `add_`), and a few composite
ops the registry does not translate (`batch_norm`, `dropout`, `flatten`). `run_decompositions`
turns those into functional ATen ops by tracing the whole graph again, which costs as much as
the capture itself (more on DenseNet or Inception). Most captured graphs need only what is
rewritten locally, node by node, into exactly the ops the decomposition would have produced:

* an in-place op on a freshly computed tensor that nothing reads afterwards (and that no view
  aliases) becomes its functional twin: `relu_(x)` -> `relu(x)`;
* a composite op with a local decomposition (the catalogue in
  `exporter.capturing.decompositions`) becomes what that decomposition makes;
* an in-place form of one of those (`silu_`) is rewritten like its functional form when the
  mutation is unobservable, as above; `dropout_` in eval mode mutates nothing and is its input.

`rewrite(program, keep)` applies them when every node of the graph is then a kept, functional
op, and reports whether it did; otherwise it changes nothing and the caller decomposes.
"""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

from exporter.capturing import list_decompositions  # noqa: F401  (registers the tensor-list ops)
from exporter.capturing.decompositions import LOCAL_DECOMPOSITIONS, Rewrite, replace_with

logger = logging.getLogger(__name__)

aten = torch.ops.aten

def rewrite(program: torch.export.ExportedProgram, keep: frozenset[str]) -> bool:
    """Rewrite `program` in place into kept functional ops, or leave it alone and return False.

    True means the graph now holds only ops in `keep` (or Python arithmetic on sizes), none of
    them mutating, so `run_decompositions` would have nothing left to do.
    """
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in program.graph_signature.output_specs):
        return False  # the program mutates a buffer or an input: that needs functionalization
    graph = program.graph_module.graph
    plan = _plan(graph, keep, program)
    if plan is None:
        return False
    before = [getattr(node, "name", None) for node in _output_args(graph)]
    for step in plan:
        step.apply(graph, step.node)
    graph.eliminate_dead_code()
    program.graph_module.recompile()
    _rename_outputs(program, dict(zip(before, [getattr(node, "name", None) for node in _output_args(graph)])))
    return True


def _rename_outputs(program: torch.export.ExportedProgram, renamed: dict[str, str]) -> None:
    """Point the program's output specs (and its module call signature) at the nodes that
    replaced the ones they named."""
    renamed = {old: new for old, new in renamed.items() if old != new}
    if not renamed:
        return
    for spec in program.graph_signature.output_specs:
        if isinstance(spec.arg, TensorArgument) and spec.arg.name in renamed:
            spec.arg = TensorArgument(name=renamed[spec.arg.name])
    for entry in program.module_call_graph:
        outputs = entry.signature.outputs if entry.signature is not None else []
        for index, arg in enumerate(outputs):
            if isinstance(arg, TensorArgument) and arg.name in renamed:
                outputs[index] = TensorArgument(name=renamed[arg.name])


def _plan(graph: torch.fx.Graph, keep: frozenset[str], program: torch.export.ExportedProgram
          ) -> list[Rewrite] | None:
    """The rewrites that make every node kept and functional, or None when one cannot be made."""
    order = {node: index for index, node in enumerate(graph.nodes)}
    user_inputs = {s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    forwarded: dict[torch.fx.Node, torch.fx.Node] = {}  # dropout node -> the node its users will read
    fresh: set[torch.fx.Node] = set()  # in-place nodes that become functional (so alias nothing)
    plan: list[Rewrite] = []
    twin_keep = keep | frozenset(LOCAL_DECOMPOSITIONS)  # silu_ -> silu, rewritten below like silu
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            if is_size_arithmetic(target, keep):
                continue
            return _refuse(node, "not an ATen op")
        name = str(target)
        if name in keep and not target._schema.is_mutable:
            continue
        local = LOCAL_DECOMPOSITIONS.get(name)
        if local is not None:
            step = local.plan(node, keep)
            if step is None:
                return _refuse(node, "its arguments need torch's decomposition")
            if step.forwards:
                forwarded[node] = _resolve(node.args[0], forwarded)
            elif local.fresh_result:
                fresh.add(node)
            plan.append(step)
            continue
        functional = _functional_twin(target, twin_keep)
        if functional is None:
            return _refuse(node, "no kept functional equivalent")
        mutated = _resolve(node.args[0], forwarded) if node.args else None
        twin_rewrite = LOCAL_DECOMPOSITIONS.get(str(functional))
        step = twin_rewrite.plan(node, keep) if twin_rewrite is not None else None
        if step is not None and step.forwards:  # dropout_ in eval mode changes nothing it is given
            forwarded[node] = mutated
            plan.append(step)
            continue
        reason = _mutation_problem(node, mutated, forwarded, order, user_inputs, fresh)
        if reason:
            return _refuse(node, reason)
        fresh.add(node)  # its functional twin computes a new tensor
        if twin_rewrite is None:
            plan.append(Rewrite(node, replace_with(functional)))
        elif step is None:
            return _refuse(node, "its functional form needs torch's decomposition")
        else:
            plan.append(step)  # silu_ rewritten as silu would be: same arguments
    return plan


def is_size_arithmetic(target: Any, keep: frozenset[str]) -> bool:
    """Whether `target` (a call_function target that is not an ATen overload) is Python
    arithmetic on sizes that the translation keeps as it is: `operator.*`, and the functions the
    registry names in `keep` (`torch.sym_min`, `torch.sym_float`, `math.floor`, ...), which
    `run_decompositions` would leave unchanged too."""
    module = getattr(target, "__module__", None)
    if module == "_operator" or target is operator.getitem:
        return True
    return f"{module}.{getattr(target, '__name__', '')}" in keep


def _refuse(node: torch.fx.Node, why: str) -> None:
    logger.debug("decomposing the captured graph: %s (%s) is %s", node.name, node.target, why)
    return None


def _output_args(graph: torch.fx.Graph) -> list[Any]:
    """The output node's values in order (nodes, or constants)."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    return [a if isinstance(a, torch.fx.Node) else None for a in output.args[0]]


def _resolve(node: Any, forwarded: dict[torch.fx.Node, torch.fx.Node]) -> Any:
    while node in forwarded:
        node = forwarded[node]
    return node


# --- in-place ops ----------------------------------------------------------------------------


def _functional_twin(target: torch._ops.OpOverload, keep: frozenset[str]) -> torch._ops.OpOverload | None:
    """`aten.relu.default` for `aten.relu_.default`: same overload, same arguments, kept; None
    when the op is not a plain in-place op (one mutated `self`, returning it)."""
    schema = target._schema
    packet = target.overloadpacket.__name__
    if not packet.endswith("_") or packet.startswith("_") or not schema.arguments:
        return None
    first = schema.arguments[0]
    if first.alias_info is None or not first.alias_info.is_write:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments[1:]):
        return None
    twin_packet = getattr(aten, packet[:-1], None)
    twin = getattr(twin_packet, target._overloadname, None) if twin_packet is not None else None
    if twin is None or str(twin) not in keep or twin._schema.is_mutable:
        return None
    names = [a.name for a in twin._schema.arguments] != [a.name for a in schema.arguments]
    if names and str(twin) not in LOCAL_DECOMPOSITIONS:  # a local rewrite reads arguments by position
        return None
    return twin


def _returns_alias(node: torch.fx.Node) -> bool:
    """Whether `node`'s value may share memory with one of its inputs (a view, an in-place op)."""
    if node.op != "call_function":
        return node.op != "placeholder"
    target = node.target
    if target is operator.getitem:
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and _returns_alias(source)
    if isinstance(target, torch._ops.OpOverload):
        return any(r.alias_info is not None for r in target._schema.returns)
    return False


def _mutation_problem(node: torch.fx.Node, mutated: Any, forwarded: dict[torch.fx.Node, torch.fx.Node],
                      order: dict[torch.fx.Node, int], user_inputs: set[str], fresh: set[torch.fx.Node]) -> str:
    """Why `node` mutating `mutated` cannot be replaced by its functional twin ('' when it can):
    the mutated tensor must be computed in the graph, alias nothing, and be read by nothing
    after the mutation (so no one can observe that it happened)."""
    if not isinstance(mutated, torch.fx.Node):
        return "mutating something that is not a node"
    if mutated.op == "placeholder":
        kind = "an input" if mutated.name in user_inputs else "a parameter, buffer or constant"
        return f"mutating {kind}"
    if mutated not in fresh and _returns_alias(mutated):
        return "mutating a view or an alias"
    readers = [u for u in mutated.users if u is not node]
    readers += [u for d, s in forwarded.items() if s is mutated for u in d.users if u is not node]
    for reader in readers:
        if order[reader] > order[node]:
            return f"mutating a value that {reader.name} reads afterwards"
        if reader not in fresh and _returns_alias(reader):
            return f"mutating a value that {reader.name} aliases"
    return ""
