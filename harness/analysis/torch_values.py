"""Torch's own value for every FX node of an ExportedProgram, from one interpreted run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.export._tree_utils import reorder_kwargs
from torch.export.graph_signature import InputKind


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
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """Run the program's graph once on `args` (and `kwargs`, any pytree of inputs the program
    was captured with) and return {FX node name: value} for every node.

    `dtype` (e.g. torch.float64) converts every floating-point parameter and input first,
    which is how the fp64 reference of a whole model is computed.
    """
    def prepare(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            value = value.to(device)
            if dtype is not None and value.is_floating_point():
                value = value.to(dtype)
        return value

    flat = [prepare(v) for v in program_inputs(program, args, kwargs)]
    recorder = _Recorder(program.graph_module)
    with torch.no_grad():
        recorder.run(*flat)
    return recorder.values


def output_values(program: torch.export.ExportedProgram, values: dict[str, Any]) -> list[Any]:
    """The program's user outputs, picked out of recorded values (the new values of buffers and
    inputs the program updates in place are not outputs: the ONNX model has no state)."""
    from exporter.capturing.signature import user_outputs

    return [values[a.name] if isinstance(a, torch.fx.Node) else a for a in user_outputs(program)]
