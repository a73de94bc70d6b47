"""The cost of quantizing, per op: the float module against its PT2E-quantized torch module.

This is the other end of a quantized model's verification, kept apart from the export's: the
quantized torch module against the float one says what quantization itself changed, op by op
(the export's rows say what the ONNX model and its runtime changed on top). Ops are joined by
torchao's numeric debug handles (`generate_numeric_debug_handle` before `prepare_pt2e`, which
model_zoo_cases.quantized does): the float op and the quantized module's float op with the same
handle compute the same thing, the latter on dequantized inputs. Where the quantized op's output
is quantized next, its cost is also given in steps of that quantization's scale.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx

from harness.analysis.quant_rows import DEQUANTIZE_OPS, QUANTIZE_OPS, qparams_of

CUSTOM_KEY = "custom"  # torchao's node.meta key holding the numeric debug handle
DEBUG_HANDLE_KEY = "numeric_debug_handle"


@dataclass(frozen=True)
class CostRow:
    """One op's quantization cost: the quantized module's value against the float module's."""

    fx_node: str  # the op in the quantized module
    aten: str
    max_abs: float
    max_rel: float  # max |q - f| / max |f|
    elements: int
    scale: float | None = None  # of the quantization that reads the op's output, if any
    max_steps: float | None = None
    off_by_one_or_more: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"fx_node": self.fx_node, "aten": self.aten, "max_abs": self.max_abs, "max_rel": self.max_rel,
                "elements": self.elements, "scale": self.scale, "max_steps": self.max_steps,
                "off_by_one_or_more": self.off_by_one_or_more}


@dataclass
class QuantizationCost:
    """Float module against quantized module: every joined op, and the outputs."""

    rows: list[CostRow] = field(default_factory=list)
    outputs: list[dict[str, float]] = field(default_factory=list)  # max_abs and max_rel per output
    note: str = ""

    @property
    def worst(self) -> CostRow | None:
        """The op quantization moves most, relative to its float value's scale."""
        return max(self.rows, key=lambda row: row.max_rel, default=None)

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst
        return {"rows": [row.to_dict() for row in self.rows], "outputs": list(self.outputs), "note": self.note,
                "worst": worst.fx_node if worst is not None else None}


def debug_handle(node: torch.fx.Node) -> int | None:
    handle = node.meta.get(CUSTOM_KEY, {}).get(DEBUG_HANDLE_KEY)
    return int(handle) if isinstance(handle, int) else None


def _values_by_node(module: torch.fx.GraphModule, args: tuple[Any, ...]) -> tuple[dict[str, Any], Any]:
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            if isinstance(result, torch.Tensor):  # a copy: a later in-place op (relu_, add_) changes it
                values[node.name] = result.detach().clone()
            return result

    with torch.no_grad():
        output = Recorder(module).run(*args)
    return values, output


def _last_by_handle(graph: torch.fx.Graph, skip: frozenset[str]) -> dict[int, torch.fx.Node]:
    """Per debug handle, the last call_function node carrying it (the op's output)."""
    found: dict[int, torch.fx.Node] = {}
    for node in graph.nodes:
        handle = debug_handle(node)
        if node.op == "call_function" and handle is not None and str(node.target) not in skip:
            found[handle] = node
    return found


def quantization_cost(float_module: torch.nn.Module, quantized: torch.fx.GraphModule,
                      args: tuple[Any, ...]) -> QuantizationCost:
    """Every op of `quantized` that has a float twin in `float_module` (captured again here,
    its debug handles assigned as torchao assigns them), compared on `args`."""
    from torchao.quantization.pt2e import generate_numeric_debug_handle

    program = torch.export.export(float_module.eval(), tuple(args), strict=False)
    generate_numeric_debug_handle(program)
    float_graph = program.module()
    float_values, float_out = _values_by_node(float_graph, args)
    quant_values, quant_out = _values_by_node(quantized, args)
    cost = QuantizationCost(outputs=[_distance(q, f) for q, f in zip(_leaves(quant_out), _leaves(float_out))])
    quantized_ops = _last_by_handle(quantized.graph, QUANTIZE_OPS | DEQUANTIZE_OPS)
    if not quantized_ops:
        cost.note = ("the quantized module carries no numeric debug handles: call torchao's "
                     "generate_numeric_debug_handle(program) before prepare_pt2e to join its ops to the float ones")
        return cost
    float_ops = _last_by_handle(float_graph.graph, frozenset())
    present = {debug_handle(node) for node in quantized_ops.values()}
    for handle, node in quantized_ops.items():
        twin = _folded_forward(float_ops.get(handle), present)
        if twin is None or node.name not in quant_values or twin.name not in float_values:
            continue
        quant_value, float_value = quant_values[node.name], float_values[twin.name]
        if quant_value.shape != float_value.shape or not quant_value.is_floating_point():
            continue
        distance = _distance(quant_value, float_value)
        row = CostRow(node.name, str(node.target), distance["max_abs"], distance["max_rel"], quant_value.numel())
        reader = next((user for user in node.users if str(user.target) in QUANTIZE_OPS), None)
        qparams = qparams_of(reader, quant_values) if reader is not None else None
        if qparams is not None:
            steps = np.abs(np.rint(qparams.positions(quant_value.double().numpy()))
                           - np.rint(qparams.positions(float_value.double().numpy())))
            row = CostRow(row.fx_node, row.aten, row.max_abs, row.max_rel, row.elements, qparams.largest_scale,
                          float(steps.max(initial=0.0)), int((steps >= 1).sum()))
        cost.rows.append(row)
    order = {node.name: index for index, node in enumerate(quantized.graph.nodes)}
    cost.rows.sort(key=lambda row: order[row.fx_node])
    return cost


def _folded_forward(node: torch.fx.Node | None, present: set[int]) -> torch.fx.Node | None:
    """The float node whose value the quantized op computes: `node`, or the op after it that
    quantization folded into it (a batch norm folded into its convolution by prepare_pt2e: its
    handle is gone from the quantized module), followed through getitem."""
    while node is not None:
        users = [user for user in node.users if user.op == "call_function"]
        if len(users) != 1:
            return node
        follower = users[0]
        if follower.target is not operator.getitem and (debug_handle(follower) in present
                                                        or debug_handle(follower) is None):
            return node
        if follower.target is operator.getitem and node.target is not None and debug_handle(node) in present:
            return node
        node = follower
    return node


def _leaves(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in torch.utils._pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _distance(quantized: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    difference = (quantized.double() - reference.double()).abs()
    largest = float(reference.double().abs().max()) if reference.numel() else 0.0
    max_abs = float(difference.max()) if difference.numel() else 0.0
    return {"max_abs": max_abs, "max_rel": max_abs / largest if largest > 0 else (0.0 if max_abs == 0 else math.inf)}


def cost_summary(cost: Mapping[str, Any]) -> str:
    """One line: the outputs' relative cost and the op quantization moves most."""
    outputs = ", ".join(f"{o['max_rel']:.3g}" for o in cost.get("outputs", []))
    worst = next((r for r in cost.get("rows", []) if r["fx_node"] == cost.get("worst")), None)
    text = f"quantization moves the outputs by {outputs or '-'} (max |q - f| / max |f|)"
    if worst is not None:
        text += f"; most at {worst['fx_node']} ({worst['max_rel']:.3g}"
        text += f", {worst['max_steps']:g} steps)" if worst.get("max_steps") is not None else ")"
    return text
