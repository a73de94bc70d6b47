"""What an ExportedProgram's signature says about the user's side of the graph: the user's
input placeholders and outputs, and the seed-style names for them (`dynamic_axes`,
`output_names`) checked against it. Capture and translation both read the program this way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from exporter.errors import ExportError

DynamicAxes = Mapping[str, Mapping[int, str] | Sequence[int]]


def normalize_dynamic_axes(dynamic_axes: DynamicAxes | None) -> dict[str, dict[int, str]]:
    """`{name: {axis: dim_name}}` from the seed-style `dynamic_axes`, whose values may also
    list axes (`{"x": [0]}`): a listed axis is named `<name>_dim<axis>`. None entries are dropped."""
    normalized: dict[str, dict[int, str]] = {}
    for name, axes in (dynamic_axes or {}).items():
        if axes is None:
            continue
        if isinstance(axes, Mapping):
            normalized[name] = {int(axis): dim_name for axis, dim_name in axes.items()}
        else:
            normalized[name] = {int(axis): f"{name}_dim{int(axis)}" for axis in axes}
    return normalized


def user_input_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    """The placeholders of the user's inputs (not parameters, buffers or constants), in order."""
    users = {spec.arg.name for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT}
    return [node for node in program.graph.nodes if node.op == "placeholder" and node.name in users]


def check_output_names(output_names: Sequence[str] | None, count: int) -> None:
    """ExportError unless `output_names` names at most the model's `count` outputs."""
    if output_names is not None and len(output_names) > count:
        raise ExportError(
            f"output_names has {len(output_names)} names but the model returns {count} output(s); "
            "give one name per output, in the order forward() returns them (fewer names leave the "
            "rest named after their FX nodes)"
        )


def user_outputs(program: torch.export.ExportedProgram) -> list[Any]:
    """The output node's arguments that are user outputs (not buffer or input updates), in order.
    A None forward() returns is no output: the ONNX model's outputs are the others, in order
    (as torch.onnx exports them)."""
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    kinds = [spec.kind for spec in program.graph_signature.output_specs]
    return [item for item, kind in zip(output_node.args[0], kinds) if kind == OutputKind.USER_OUTPUT and item is not None]

