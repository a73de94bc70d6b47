"""Apply onnxscript rewrite rules with the exporter's provenance carried by each rewrite.

onnxscript's own driver (`RewriteRuleSet.apply_to_model`) merges node metadata key by key,
keeping the first value, which would name the region's first FX node where the contract wants
its last. `apply_rules` drives the same rules (`RewriteRule.try_rewrite`, then onnx_ir's
`replace_nodes_and_values`) and writes the region itself (exporter.optimize.regions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import onnx_ir as ir
from onnxscript import optimizer
from onnxscript.rewriter import pattern

from exporter.optimize.regions import carry


def apply_rules(model: ir.Model, rules: Sequence[pattern.RewriteRule]) -> Counter[str]:
    """Rewrite `model`'s main graph with `rules` until none matches; count rewrites per rule."""
    counts: Counter[str] = Counter()
    graph = model.graph
    optimizer.basic_constant_propagation(graph)  # rules read Constant nodes' values off their outputs
    changed = True
    while changed:
        changed = False
        for node in graph:
            for rule in rules:
                delta = rule.try_rewrite(model, graph, node)
                if delta is None:
                    continue
                for initializer in delta.new_initializers:
                    _register(graph, initializer, delta.match.nodes)
                optimizer.basic_constant_propagation(delta.new_nodes)
                carry(graph, delta.match.nodes, delta.match.outputs, delta.new_nodes)
                ir.convenience.replace_nodes_and_values(
                    graph, node, delta.match.nodes if rule.remove_nodes else [], delta.new_nodes,
                    delta.match.outputs, delta.new_outputs,
                )
                for new in delta.new_nodes:  # named as the exporter names nodes: after their output
                    new.name = next((v.name for v in new.outputs if v.name), None)
                counts[rule.name or type(rule).__name__] += 1
                changed = True
                break
    if counts:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return counts


def _register(graph: ir.Graph, initializer: ir.Value, matched: Sequence[ir.Node]) -> None:
    """Add a rewrite's new initializer. One that takes the name of an initializer only the
    matched nodes read (a Conv weight rescaled by a folded BatchNorm) replaces it; otherwise
    the new one gets a name of its own."""
    old = graph.initializers.get(initializer.name)
    if old is initializer:
        return
    if old is not None:
        if all(user in matched for user, _ in old.uses()) and not old.is_graph_output():
            graph.initializers.pop(old.name)  # the matched nodes still read it until they go
        else:
            base, suffix = initializer.name, 1
            while f"{base}_{suffix}" in graph.initializers:
                suffix += 1
            initializer.name = f"{base}_{suffix}"
    graph.register_initializer(initializer)
