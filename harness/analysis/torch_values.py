"""Torch's own value for every FX node of an ExportedProgram, from one interpreted run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind


def program_inputs(program: torch.export.ExportedProgram, args: Sequence[Any]) -> list[Any]:
    """The flat placeholder values (parameters, buffers, constants, user inputs) in graph order."""
    tensors = {**program.state_dict, **program.constants}
    user = iter(args)
    flat: list[Any] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            flat.append(next(user))
        else:
            value = tensors[spec.target]
            flat.append(value.data if isinstance(value, torch.nn.Parameter) else value)
    return flat


class _Recorder(torch.fx.Interpreter):
    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.values: dict[str, Any] = {}

    def run_node(self, node: torch.fx.Node) -> Any:
        result = super().run_node(node)
        self.values[node.name] = result
        return result


def record_values(
    program: torch.export.ExportedProgram,
    args: Sequence[Any],
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """Run the program's graph once and return {FX node name: value} for every node.

    `dtype` (e.g. torch.float64) converts every floating-point parameter and input first,
    which is how the fp64 reference of a whole model is computed.
    """
    def prepare(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            value = value.to(device)
            if dtype is not None and value.is_floating_point():
                value = value.to(dtype)
        return value

    flat = [prepare(v) for v in program_inputs(program, args)]
    recorder = _Recorder(program.graph_module)
    with torch.no_grad():
        recorder.run(*flat)
    return recorder.values


def output_values(program: torch.export.ExportedProgram, values: dict[str, Any]) -> list[Any]:
    """The program's user outputs, picked out of recorded values."""
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    return [values[a.name] if isinstance(a, torch.fx.Node) else a for a in output_node.args[0]]
