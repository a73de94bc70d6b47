"""Random ops in a verification: their rows and the model outputs that depend on them.

A random op (ATen's `nondeterministic_seeded` tag) draws other values in torch than in the
backend, so its row is checked by distribution (harness.metrics.distribution: shape, dtype,
support and moments against the law its arguments define) and says so (`check="distribution"`).
Ops downstream of it are isolated on torch's values as every op is, so their rows compare values.
A model output that is a draw is checked by distribution too; one computed from a draw cannot
be compared by value, so it is held to torch's shape and dtype and its ops answer for its values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from harness.analysis.rows import OpRecord
from harness.metrics import distribution
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare


def random_op(aten: str) -> bool:
    """Whether the ATen overload named `aten` ("aten.rand.default") draws random values: it is
    tagged `nondeterministic_seeded` and has a law. Other tagged overloads (lstm, gru,
    native_dropout, scaled_dot_product_attention) draw only for their dropout, which an
    eval-mode export turns off, so they are compared by value."""
    return aten in distribution.LAWS and tagged_random(aten)


def tagged_random(aten: str) -> bool:
    """Whether ATen tags the overload named `aten` `nondeterministic_seeded`."""
    namespace, _, rest = aten.partition(".")
    name, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())


def draws_here(node: torch.fx.Node) -> bool:
    """Whether FX `node` is a random op that draws in this call (rrelu in eval does not)."""
    target = str(node.target)
    return random_op(target) and distribution.draws(target, node.args, node.kwargs)


def law_of_node(node: torch.fx.Node, values: Mapping[str, Any], index: int = 0) -> distribution.Law | None:
    """The law of output `index` of random FX `node`, its tensor arguments read from torch's `values`."""
    def value(arg: Any) -> Any:
        return as_array(values[arg.name]) if isinstance(arg, torch.fx.Node) else arg

    law = distribution.law_of(str(node.target), [value(a) for a in node.args],
                              {key: value(a) for key, a in node.kwargs.items()})
    return law[index] if isinstance(law, tuple) else law


def compare_draws(record: OpRecord, node: torch.fx.Node, values: Mapping[str, Any], actual: Mapping[str, Any],
                  expected: Callable[[int], Any], outputs: Mapping[int, str]) -> list[Comparison]:
    """The random op's outputs (`outputs`: index -> ONNX value name, found in `actual`) against
    its law; `expected(index)` is torch's draw, for shape and dtype. Sets the row's check."""
    record.check = distribution.CHECK
    if law_of_node(node, values) is None:
        record.notes.append(f"random op with no law in harness.metrics.distribution: {record.aten} is not verified")
        return []
    return [distribution.compare_distribution(actual[name], as_array(expected(index)), law_of_node(node, values, index),
                                              name=name)
            for index, name in sorted(outputs.items()) if name in actual]


def random_ancestors(program: torch.export.ExportedProgram) -> dict[str, list[str]]:
    """FX node name -> the random nodes it is computed from (itself included), for nodes that have any."""
    found: dict[str, list[str]] = {}
    for node in program.graph.nodes:
        sources = [name for arg in node.all_input_nodes for name in found.get(arg.name, [])]
        if node.op == "call_function" and draws_here(node):
            sources.append(node.name)
        if sources:
            found[node.name] = list(dict.fromkeys(sources))
    return found


def output_comparisons(program: torch.export.ExportedProgram, values: Mapping[str, Any],
                       comparisons: list[Comparison], actual: list[np.ndarray],
                       expected: list[Any], rows: Sequence[OpRecord] = ()) -> list[Comparison]:
    """`comparisons` of the model outputs, with those of outputs that are (or come from) draws
    replaced: a draw by its distribution; a value computed from one by shape and dtype, and by
    the rows of the draws it comes from (`rows`, the per-op analysis: empty without one)."""
    failed = {row.fx_node for row in rows if row.passed is False}
    ancestors = random_ancestors(program)
    if not ancestors:
        return comparisons
    from exporter.capturing.signature import user_outputs

    items = [item for item in user_outputs(program) if isinstance(item, torch.fx.Node)]
    result = list(comparisons)
    for index, (item, comparison) in enumerate(zip(items, comparisons)):
        if item.name not in ancestors or index >= len(actual):
            continue
        if draws_here(item) and (law := law_of_node(item, values)) is not None:
            result[index] = distribution.compare_distribution(actual[index], as_array(expected[index]), law,
                                                              name=comparison.name)
            continue
        shaped = compare(np.zeros_like(actual[index]), np.zeros_like(as_array(expected[index])), atol=0.0, rtol=0.0,
                         name=comparison.name)
        sources = ancestors[item.name]
        shaped.note = (f"computed from the random op(s) {', '.join(sources[:3])}: its values are draws, so it is "
                       "held to torch's shape and dtype, and its ops' rows check the values")
        wrong = [name for name in sources if name in failed]
        if wrong:
            shaped.passed = False
            shaped.note += f"; the draws of {', '.join(wrong[:3])} fail their distribution check"
        result[index] = shaped
    return result
