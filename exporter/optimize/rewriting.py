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
from onnxscript.rewriter._pattern_ir import StringConstantPattern

from exporter.optimize.regions import carry


def root_ops(rule: pattern.RewriteRule) -> frozenset[tuple[str, str]] | None:
    """The (domain, op type) a node must have for `rule` to match there (its pattern's output
    nodes' ops), or None when the pattern does not fix it."""
    outputs = rule._target_pattern.output_nodes  # onnxscript's pattern, read only
    if len(outputs) != 1:
        return None  # a multi-output pattern: onnxscript's generic matcher may start elsewhere
    op, domain = outputs[0].op, outputs[0].domain
    if not (isinstance(op, StringConstantPattern) and isinstance(domain, StringConstantPattern)):
        return None
    return frozenset({(_domain(domain.value()), op.value())})


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


class RuleIndex:
    """Rules by the op type a node needs for each to match there, in their given order: a
    node is tried only against the rules that can match it."""

    def __init__(self, rules: Sequence[pattern.RewriteRule]) -> None:
        self.rules = tuple(rules)
        self._any: list[int] = []
        self._by_op: dict[tuple[str, str], list[int]] = {}
        for index, rule in enumerate(self.rules):
            ops = root_ops(rule)
            if ops is None:
                self._any.append(index)
            for op in ops or ():
                self._by_op.setdefault(op, []).append(index)
        self._cache: dict[tuple[str, str], tuple[pattern.RewriteRule, ...]] = {}

    def for_node(self, node: ir.Node) -> tuple[pattern.RewriteRule, ...]:
        key = (_domain(node.domain), node.op_type)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = tuple(self.rules[i] for i in sorted({*self._any, *self._by_op.get(key, ())}))
        return found

    def can_match(self, graph: ir.Graph) -> bool:
        """Whether any node of `graph` has an op some rule needs."""
        return bool(self._any) or any((_domain(n.domain), n.op_type) in self._by_op for n in graph)


def apply_rules(model: ir.Model, rules: Sequence[pattern.RewriteRule] | RuleIndex) -> Counter[str]:
    """Rewrite `model`'s main graph with `rules` until none matches; count rewrites per rule.

    Each sweep visits the graph's nodes in order, a node against the rules that can match it
    (RuleIndex), and goes on after a rewrite; sweeps repeat until one rewrites nothing (the
    nodes a rewrite adds are visited by the next sweep)."""
    index = rules if isinstance(rules, RuleIndex) else RuleIndex(rules)
    counts: Counter[str] = Counter()
    graph = model.graph
    if not index.can_match(graph):
        return counts
    optimizer.basic_constant_propagation(graph)  # rules read Constant nodes' values off their outputs
    changed = True
    while changed:
        changed = False
        for node in list(graph):
            if node.graph is not graph:  # removed by an earlier rewrite of this sweep
                continue
            for rule in index.for_node(node):
                delta = rule.try_rewrite(model, graph, node)
                if delta is None:
                    continue
                for initializer in delta.new_initializers:
                    _register(graph, initializer, delta.match.nodes)
                optimizer.basic_constant_propagation(delta.new_nodes)
                carry(graph, _stands_for(rule, delta.match), delta.match.outputs, delta.new_nodes)
                ir.convenience.replace_nodes_and_values(
                    graph, node, delta.match.nodes if rule.remove_nodes else [], delta.new_nodes,
                    delta.match.outputs, delta.new_outputs,
                )
                if not rule.remove_nodes:
                    _remove_unread(graph, delta.match.nodes)
                for new in delta.new_nodes:  # named as the exporter names nodes: after their output
                    new.name = next((v.name for v in new.outputs if v.name), None)
                counts[rule.name or type(rule).__name__] += 1
                changed = True
                break
    if counts:
        ir.passes.common.RemoveUnusedNodesPass()(model)
    return counts


def _stands_for(rule: pattern.RewriteRule, match) -> list[ir.Node]:
    """The nodes a rewrite's new nodes stand for: every matched node, which the rewrite
    removes; or, for a rule that keeps its matched nodes (they may have other readers), only
    the producers of the values it replaces: the rest is not fused, it stays or dies unused."""
    if rule.remove_nodes:
        return list(match.nodes)
    return [value.producer() for value in match.outputs if value.producer() is not None]


def _remove_unread(graph: ir.Graph, nodes: Sequence[ir.Node]) -> None:
    """Remove those of `nodes` (a kept match) that nothing reads any more, readers before what
    they read, so the next sweep does not match them again."""
    pending = [node for node in nodes if node.graph is graph]
    removed = True
    while removed:
        removed = False
        for node in list(pending):
            if not any(out.uses() or out.is_graph_output() for out in node.outputs):
                graph.remove(node, safe=True)
                pending.remove(node)
                removed = True


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
