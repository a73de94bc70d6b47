"""Torch's own value for every FX node of an ExportedProgram, from one interpreted run.

A model whose values fit a byte budget keeps them all (a plain dict). Past the budget, the
values are streamed (`TorchValues`): the run keeps only what is needed whole afterwards (the
placeholders, the user outputs, random draws and their inputs, small values) and a storage-free
description of the rest (meta tensors: dtype and shape); the per-op analysis reads a value
that was not kept from a second run that advances in graph order as it is asked, and releases
each value once every op reading it has been measured.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.export._tree_utils import reorder_kwargs
from torch.export.graph_signature import InputKind

logger = logging.getLogger(__name__)

VALUES_BUDGET: int | None = None
"""Bytes of torch's values `harness.verify` keeps whole; past it they are streamed (TorchValues).
None: sized from the memory available (harness.analysis.budget.values_budget)."""

SMALL_BYTES = 64 * 1024
"""Values up to this size are always kept whole (scalars, sizes, shape tensors, biases)."""


def flat_user_inputs(
    program: torch.export.ExportedProgram, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
) -> list[Any]:
    """The user's inputs as the program's user placeholders take them: `(args, kwargs)`
    flattened by torch's pytree (dicts, lists, tuples, nested), keyword arguments in the order
    the program was captured with. ValueError when the structure is not the captured one."""
    in_spec = program.call_spec.in_spec
    kwargs = dict(kwargs or {})
    if in_spec is not None and kwargs:
        try:
            kwargs = reorder_kwargs(kwargs, in_spec)
        except (AssertionError, ValueError, KeyError) as error:
            raise ValueError(f"the keyword arguments {sorted(kwargs)} are not those the program was captured with: {error}") from None
    flat, spec = pytree.tree_flatten((tuple(args), kwargs))
    if in_spec is not None and spec != in_spec:
        raise ValueError(
            f"the inputs are structured as {spec}, but the program was captured with inputs structured as "
            f"{in_spec}; pass args (and kwargs) of the captured structure"
        )
    return flat


def program_inputs(
    program: torch.export.ExportedProgram, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
) -> list[Any]:
    """The flat placeholder values (parameters, buffers, constants, user inputs) in graph order."""
    tensors = {**program.state_dict, **program.constants}
    user = iter(flat_user_inputs(program, args, kwargs))
    flat: list[Any] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            flat.append(next(user))
        elif spec.kind == InputKind.TOKEN:
            flat.append(torch.empty(0))  # effect tokens are empty tensors
        else:
            value = tensors[spec.target]
            flat.append(value.data if isinstance(value, torch.nn.Parameter) else value)
    return flat


class _Recorder(torch.fx.Interpreter):
    """Records every node's value, or, past `budget` bytes of computed values (the inputs,
    parameters and buffers are the caller's and do not count), only those `keep` names and a
    description of the others; the interpreter frees its own copy after each value's last use."""

    def __init__(self, module: torch.fx.GraphModule, budget: int | None, keep: set[str]) -> None:
        super().__init__(module, garbage_collect_values=True)
        self.values: dict[str, Any] = {}
        self.described: dict[str, Any] = {}
        self.budget = budget
        self.keep = keep
        self.held = 0
        self.streaming = False

    def run_node(self, node: torch.fx.Node) -> Any:
        result = super().run_node(node)
        if self.budget is None:
            self.values[node.name] = result
            return result
        self.described[node.name] = describe(result)
        if self.streaming:
            if not _droppable(node.name, result, self.keep):
                self.values[node.name] = result
            return result
        self.values[node.name] = result
        if node.op != "placeholder":  # inputs, parameters and buffers: the caller's own, not held here
            self.held += _nbytes(result)
        if self.held > self.budget:
            self.streaming = True
            logger.info("torch's values pass %d bytes: streamed from here on", self.budget)
            for name in [n for n, value in self.values.items() if _droppable(n, value, self.keep)]:
                del self.values[name]
        return result


def _droppable(name: str, value: Any, keep: set[str]) -> bool:
    return name not in keep and _nbytes(value) > SMALL_BYTES


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size() if value.layout == torch.strided else 0
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def describe(value: Any) -> Any:
    """`value` with each dense tensor replaced by a meta tensor of its dtype and shape (no
    storage); other values as they are."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized:
            return value
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, (tuple, list)):
        return type(value)(describe(v) for v in value)
    return value


def kept_whole(program: torch.export.ExportedProgram) -> set[str]:
    """The nodes whose values a streamed record keeps: placeholders, user outputs, random
    draws and what they read (their values must be the first run's: a second run would draw
    others), and the nodes that are no op of their own (getitem reads its op's value)."""
    from exporter.capturing.signature import user_outputs

    keep = {n.name for n in program.graph.nodes if n.op != "call_function"}
    keep.update(a.name for a in user_outputs(program) if isinstance(a, torch.fx.Node))
    for node in program.graph.nodes:
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            keep.add(node.name)
            keep.update(n.name for n in node.all_input_nodes)
    return keep


class TorchValues(Mapping):
    """Torch's value of every FX node of `program`, held within a byte budget.

    `values[name]` (and `get`) returns a node's value: one kept by the first run, else computed
    by a second run of the graph that advances in graph order as values are asked for (and
    starts over in the rare case of a value asked for again after its release). `describe(name)`
    gives a node's value without computing it (meta tensors: dtype and shape). `release(done)`
    drops every value of the second run that no op outside `done` reads any more. Iterating
    lists every node's name; `streaming` says whether any value was left to the second run.
    `measured_by(rows)` says which row measures each node: a node no row measures (a view, a
    size computation, an op the export folded away) waits for nobody once computed, so what it
    reads is released with the rows that read it.
    """

    def __init__(self, program: torch.export.ExportedProgram, kept: dict[str, Any], described: dict[str, Any],
                 streaming: bool) -> None:
        self.program = program
        self.kept = kept
        self.described = described
        self.streaming = streaming
        self._nodes = list(program.graph.nodes)
        self._index = {node.name: position for position, node in enumerate(self._nodes)}
        self._computed: dict[str, Any] = {}
        self._position = 0
        self._done: set[str] = set()
        self._row_of: dict[str, str] | None = None  # node -> the row measuring it (None: every op its own)
        self._interpreter = torch.fx.Interpreter(program.graph_module)
        self.passes = 1  # runs of the graph made, the first one included

    def __getitem__(self, name: str) -> Any:
        if name in self.kept:
            return self.kept[name]
        if name in self._computed:
            return self._computed[name]
        if name not in self._index:
            raise KeyError(name)
        if self._index[name] < self._position:  # released, then asked for again: run again
            logger.info("torch's value of %s was released and is asked for again: the graph runs again", name)
            self._computed.clear()
            self._position = 0
        self._advance_to(self._index[name])
        return self._computed[name] if name in self._computed else self.kept[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.described)

    def __len__(self) -> int:
        return len(self.described)

    def __contains__(self, name: object) -> bool:
        return name in self.described

    def describe(self, name: str) -> Any:
        """The node's value if kept, else its description (meta tensors); None if unknown."""
        return self.kept[name] if name in self.kept else self.described.get(name)

    def measured_by(self, rows: Mapping[str, str]) -> None:
        """Declare which row measures each node ({node: row}; a region's members map to its
        row); nodes left out are measured by no row. Without it every op is its own row."""
        self._row_of = dict(rows)

    def _waits(self, name: str) -> bool:
        """Whether the op `name` still waits for its row to be measured."""
        row = name if self._row_of is None else self._row_of.get(name)
        return row is not None and row not in self._done

    def release(self, done: Iterable[str]) -> None:
        """Mark the ops in `done` measured, and drop the second run's values that no op still
        to be measured reads (nor the second run itself)."""
        self._done.update(done)
        for name in list(self._computed):
            if self._finished(self._nodes[self._index[name]]):
                del self._computed[name]

    def _finished(self, node: torch.fx.Node) -> bool:
        """Whether nothing still needs `node`'s value: its own op is measured, and every node
        reading it has run and is measured (a getitem reading it: whatever reads that)."""
        if _is_op(node) and self._waits(node.name):
            return False
        for user in node.users:
            if user.op == "output":
                continue
            if self._index[user.name] >= self._position:
                return False
            if self._waits(user.name) if _is_op(user) else not self._finished(user):
                return False
        return True

    def _advance_to(self, target: int) -> None:
        """Compute the nodes up to position `target`, dropping on the way each value that
        nothing needs any more (`_finished`: its row measured, every reader run and measured).
        Between releases that drops nothing in graph order; but a run started over (a value
        asked for after its release) passes every row already measured, and would otherwise
        hold all of their values at once (Faster R-CNN at 800 px: 4.2 GiB)."""
        if self._position == 0:
            self.passes += 1
        with torch.no_grad():
            while self._position <= target:
                node = self._nodes[self._position]
                self._position += 1
                if node.name in self.kept or node.op in ("placeholder", "output"):
                    continue
                args = torch.fx.node.map_arg(node.args, lambda n: self[n.name])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self[n.name])
                self._computed[node.name] = getattr(self._interpreter, node.op)(node.target, args, kwargs)
                del args, kwargs
                self._drop_finished(node.all_input_nodes)

    def _drop_finished(self, nodes: Iterable[torch.fx.Node]) -> None:
        """Drop the values of `nodes` that nothing needs any more, and then what a dropped
        node read (a getitem's op: its tuple waits for the getitem's readers)."""
        pending = list(nodes)
        while pending:
            read = pending.pop()
            if read.name in self._computed and self._finished(read):
                del self._computed[read.name]
                pending.extend(read.all_input_nodes)


def _is_op(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is not operator.getitem


def describe_value(values: Mapping[str, Any], name: str) -> Any:
    """A node's value, or (streamed values) its description without computing it."""
    return values.describe(name) if isinstance(values, TorchValues) else values.get(name)


def record_values(
    program: torch.export.ExportedProgram,
    args: Sequence[Any],
    *,
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    budget: int | None = None,
) -> dict[str, Any] | TorchValues:
    """Run the program's graph once on `args` (and `kwargs`, any pytree of inputs the program
    was captured with) and return {FX node name: value} for every node.

    `dtype` (e.g. torch.float64) converts every floating-point parameter and input first,
    which is how the fp64 reference of a whole model is computed. With a `budget` (bytes) the
    result is a TorchValues: every value held while they fit, streamed past it.
    """
    def prepare(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            value = value.to(device)
            if dtype is not None and value.is_floating_point():
                value = value.to(dtype)
        return value

    flat = [prepare(v) for v in program_inputs(program, args, kwargs)]
    recorder = _Recorder(program.graph_module, budget, kept_whole(program) if budget is not None else set())
    with torch.no_grad():
        recorder.run(*flat)
    if budget is None:
        return recorder.values
    return TorchValues(program, recorder.values, recorder.described, recorder.streaming)


def output_values(program: torch.export.ExportedProgram, values: dict[str, Any]) -> list[Any]:
    """The program's user outputs, picked out of recorded values (the new values of buffers and
    inputs the program updates in place are not outputs: the ONNX model has no state)."""
    from exporter.capturing.signature import user_outputs

    return [values[a.name] if isinstance(a, torch.fx.Node) else a for a in user_outputs(program)]
