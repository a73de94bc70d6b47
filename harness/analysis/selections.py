"""Index rows whose selection differs from torch's by ties, and the values computed from them.

An index row (TopK, sort, argmax, NMS; harness.metrics.ties) whose backend indices differ from
torch's only among tied values passes, saying "tie". What is computed from those indices differs
too, for the same reason: the boxes a TopK picked, the values gathered at its indices. Such values
(accumulated rows downstream, and the model outputs) are compared where the selections agree:
each of torch's picks paired with the backend's pick of the same index (`ties.matched_comparison`).
A value not laid out by the selection keeps its plain comparison, with a note naming the tie.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.analysis.fx_mapping import NodeGroup, output_at
from harness.analysis.rows import OpRecord
from harness.metrics import ties
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison


@dataclass(frozen=True)
class TiedSelection:
    """The backend's and torch's indices of one index row where they differ only by ties, and
    how one row of picks lies in them: along `axis` (the op's dimension: TopK along dim 0 picks
    down each column), or one pick per position where the op drops that dimension or selects
    over the flattened tensor (`axis` None: argmax, max.dim)."""

    fx_node: str
    actual: np.ndarray
    expected: np.ndarray
    axis: int | None = -1

    def matched(self, actual: Any, expected: Any, atol: float, rtol: float, name: str) -> Comparison | None:
        """A value computed from this selection compared where the selections agree
        (ties.matched_comparison); None when it is not laid out by the selection."""
        picked, wanted, actual, expected = self.actual, self.expected, as_array(actual), as_array(expected)
        axis = self.axis
        if axis is None:  # one pick per position: a unit row after the indices' own dimensions
            if actual.shape[:picked.ndim] != picked.shape:
                return None
            axis = picked.ndim
            picked, wanted = np.expand_dims(picked, axis), np.expand_dims(wanted, axis)
            actual, expected = np.expand_dims(actual, axis), np.expand_dims(expected, axis)
        return ties.matched_comparison(actual, expected, picked, wanted, atol=atol, rtol=rtol, name=name,
                                       selected_by=self.fx_node, axis=axis)


def selection_axis(node: torch.fx.Node, torch_values: Mapping[str, Any]) -> int | None:
    """The axis of `node`'s indices along which one row of its picks lies (None: one pick per
    position, for an op that drops the dimension it selects along or flattens its input; 0 for
    NMS, whose keeps are one row)."""
    spec = ties.index_output(str(node.target))
    if spec is None or spec.selection:
        return 0 if spec is not None else None
    args = list(node.args)
    source = args[spec.source] if len(args) > spec.source else None
    value = torch_values.get(source.name) if isinstance(source, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        return None
    axis = ties.dim_of(spec, args, value.ndim)
    return axis if axis is not None and ties.keeps_dim(spec, args) else None


def tied_selection(record: OpRecord, group: NodeGroup, backend_values: Mapping[str, Any],
                   torch_values: Mapping[str, Any], node: torch.fx.Node | None = None) -> TiedSelection | None:
    """The row's selection in the backend's run (`backend_values`), when its indices differ from
    torch's and the row's comparison called that a tie; else None. `node`: the row's FX node,
    whose arguments say along which axis its picks lie (the last without it)."""
    spec = ties.index_output(record.aten)
    if spec is None or record.check != "selection" or record.accumulated is None or not record.accumulated.passed:
        return None
    name = group.outputs.get(spec.output)
    if name is None or name not in backend_values:
        return None
    expected = output_at(torch_values.get(record.fx_node), spec.output)
    if not isinstance(expected, torch.Tensor):
        return None
    actual, wanted = as_array(backend_values[name]), as_array(expected)
    if actual.shape == wanted.shape and np.array_equal(actual, wanted):
        return None
    return TiedSelection(record.fx_node, actual, wanted, selection_axis(node, torch_values) if node is not None else -1)


def downstream(program: torch.export.ExportedProgram, sources: Sequence[str]) -> dict[str, str]:
    """FX node -> the tied source it is computed from (the first in graph order), for every
    node computed from one of `sources`."""
    found: dict[str, str] = {}
    for node in program.graph.nodes:
        if node.name in sources:
            found[node.name] = node.name
            continue
        origin = next((found[arg.name] for arg in node.all_input_nodes if arg.name in found), None)
        if origin is not None:
            found[node.name] = origin
    return found


def match_rows(records: Mapping[str, OpRecord], groups: Mapping[str, NodeGroup], backend_values: Mapping[str, Any],
               torch_values: Mapping[str, Any], program: torch.export.ExportedProgram,
               selections: dict[str, TiedSelection]) -> None:
    """Record the tied selections among `records` (into `selections`, kept for the outputs), and
    recompare the failing accumulated values of rows downstream of one where the selections agree."""
    nodes = {node.name: node for node in program.graph.nodes}
    for fx, record in records.items():
        if record.check == "selection" and record.accumulated is not None and record.accumulated.note:
            record.notes.append(f"in the accumulated run (indices picked on the backend's own inputs): "
                                f"{record.accumulated.note}")
        found = tied_selection(record, groups[fx], backend_values, torch_values, nodes.get(fx))
        if found is not None:
            selections[fx] = found
    if not selections:
        return
    origins = downstream(program, list(selections))
    for fx, record in records.items():
        origin = origins.get(fx)
        if origin is None or origin == fx or record.accumulated is None or record.accumulated.passed:
            continue
        selection = selections[origin]
        tolerance = record.tolerance
        matched = [
            selection.matched(backend_values[name], output_at(torch_values.get(fx), index), tolerance["atol"],
                              tolerance["rtol"], name)
            for index, name in sorted(groups[fx].outputs.items()) if name in backend_values
        ]
        if matched and all(m is not None for m in matched):
            record.accumulated = max(matched, key=lambda c: (not c.passed, c.tolerance_ratio))
            record.notes.append(record.accumulated.note)
        else:
            record.notes.append(f"computed from {origin}'s tied selection: its accumulated value differs where the "
                                "selections differ (not laid out by the selection, so compared as a whole)")


def match_outputs(program: torch.export.ExportedProgram, torch_values: Mapping[str, Any],
                  selections: Mapping[str, TiedSelection], comparisons: list[Comparison], actual: Sequence[Any],
                  expected: Sequence[Any]) -> list[Comparison]:
    """The model outputs' comparisons, each failing one computed from a tied selection compared
    where the selections agree (an output that is the indices themselves, through the values
    they select)."""
    if not selections:
        return comparisons
    from exporter.capturing.signature import user_outputs

    origins = downstream(program, list(selections))
    items = [item for item in user_outputs(program) if isinstance(item, torch.fx.Node)]
    result = list(comparisons)
    for index, (item, comparison) in enumerate(zip(items, comparisons)):
        origin = origins.get(item.name)
        if origin is None or comparison.passed or index >= len(actual):
            continue
        selection = selections[origin]
        replaced = _indices_output(item, selection, torch_values, actual[index], expected[index], comparison.name)
        if replaced is None:
            replaced = selection.matched(actual[index], expected[index], comparison.atol, comparison.rtol,
                                         comparison.name)
        if replaced is not None:
            result[index] = replaced
    return result


def _indices_output(item: torch.fx.Node, selection: TiedSelection, torch_values: Mapping[str, Any], actual: Any,
                    expected: Any, name: str) -> Comparison | None:
    """The output that is the tied row's indices (the row itself, or its getitem), judged through
    the values they select; None for any other output."""
    source_node = item
    index = 0
    if item.target is operator.getitem and item.args and isinstance(item.args[0], torch.fx.Node):
        source_node, index = item.args[0], int(item.args[1])
    if source_node.name != selection.fx_node:
        return None
    spec = ties.index_output(str(source_node.target))
    if spec is None or index != spec.output or not isinstance(source_node.args[spec.source], torch.fx.Node):
        return None
    values = as_array(torch_values.get(source_node.args[spec.source].name))
    args = list(source_node.args)
    axis = None if spec.selection else ties.dim_of(spec, args, values.ndim)
    return ties.compare_selection(as_array(actual), as_array(expected), values, axis=axis,
                                  keeps_dim=ties.keeps_dim(spec, args), selection=spec.selection, name=name)


def judged_again(verdicts: list[Any], before: Sequence[Comparison], after: Sequence[Comparison]) -> list[Any]:
    """Output verdicts with each output compared again (`after` differs from `before`) decided
    by its new comparison."""
    return [verdict if new is old or verdict is None else dataclasses.replace(
        verdict, passed=new.passed, score=new.tolerance_ratio, tolerance_ratio=new.tolerance_ratio,
        decided_by="tolerance", reason=new.note or "compared where the selections agree")
        for verdict, old, new in zip(verdicts, before, after)]
