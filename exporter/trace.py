"""Capture a module as an ExportedProgram whose ops are the ones the registry translates.

The module is exported with `torch.export.export(strict=False)` in eval mode, then decomposed
with torch's default table minus every op that has a symbolic, so conv, batch_norm, linear,
pooling and the recurrent layers reach the symbolics whole instead of as core-ATen pieces.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch.export.graph_signature import OutputKind

from exporter.errors import ExportError
from exporter.registry import CAPTURE_HOOKS

logger = logging.getLogger(__name__)


@contextmanager
def eval_mode(model: torch.nn.Module):
    """Put every submodule in eval mode and restore each one's flag afterwards."""
    flags = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield model
    finally:
        for module, training in flags.items():
            module.training = training


def dynamic_shapes_for(
    args: Sequence[Any],
    input_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str] | Sequence[int]] | None,
    output_names: Sequence[str] = (),
) -> tuple[Any, ...] | None:
    """torch.export dynamic_shapes from the seed-style `dynamic_axes={name: {axis: dim_name}}`.

    Entries for outputs are accepted and need nothing: their dynamic axes follow from the inputs'.
    """
    if not dynamic_axes:
        return None
    unknown = sorted(set(dynamic_axes) - set(input_names) - set(output_names))
    if unknown:
        raise ExportError(
            f"dynamic_axes names {unknown}, which are neither inputs {list(input_names)} nor "
            f"outputs {list(output_names)} of the model"
        )
    dims: dict[str, torch.export.Dim] = {}
    specs: list[Any] = []
    for name, arg in zip(input_names, args):
        axes = dynamic_axes.get(name)
        if axes is None or not isinstance(arg, torch.Tensor):
            specs.append(None)
            continue
        if not isinstance(axes, Mapping):
            axes = {int(a): f"{name}_dim{int(a)}" for a in axes}
        spec = {}
        for axis, dim_name in axes.items():
            axis = int(axis) % arg.dim()
            dims.setdefault(dim_name, torch.export.Dim(_identifier(dim_name)))
            spec[axis] = dims[dim_name]
        specs.append(spec)
    return tuple(specs)


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"d_{cleaned}"


def capture(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: tuple[Any, ...] | None,
    keep: Iterable[str],
) -> torch.export.ExportedProgram:
    """Export `model` and decompose everything except the overloads named in `keep`."""
    keep_set = frozenset(keep)
    if dynamic_shapes is not None and _takes_only_var_positional(model):
        dynamic_shapes = (dynamic_shapes,)  # forward(*args): torch.export nests them under `args`
    with eval_mode(model), _capture_hooks(model, keep_set):
        try:
            program = torch.export.export(
                model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False
            )
        except ExportError:
            raise  # a capture hook's refusal, which already says what to do
        except Exception as error:  # torch raises many types; all mean "could not capture"
            raise ExportError(
                f"torch.export could not capture {type(model).__name__}: {type(error).__name__}: "
                f"{_first_lines(str(error))}\nWhat to do: make forward() traceable (no data-dependent "
                "Python control flow on tensor values), or check that dynamic_axes only marks axes "
                "the model really treats as dynamic."
            ) from error
        if _nothing_to_decompose(program, keep_set):
            # run_decompositions would re-trace the graph to return it unchanged, at ~0.3 s of
            # fixed cost (torch rescans every composite op); only its dead-code pass is left to do.
            program.graph_module.graph.eliminate_dead_code()
            program.graph_module.recompile()
            return program
        table = torch.export.default_decompositions()
        for op in list(table.keys()):
            if str(op) in keep_set:
                table.pop(op)
        try:
            return program.run_decompositions(table)
        except Exception as error:
            raise ExportError(
                f"decomposing the captured graph of {type(model).__name__} failed: "
                f"{type(error).__name__}: {_first_lines(str(error))}"
            ) from error


@contextmanager
def _capture_hooks(model: torch.nn.Module, keep: frozenset[str]):
    """Enter every registered capture hook (see `exporter.registry.capture_hook`)."""
    with ExitStack() as stack:
        for hook in CAPTURE_HOOKS:
            stack.enter_context(hook(model, keep))
        yield


def _nothing_to_decompose(program: torch.export.ExportedProgram, keep: frozenset[str]) -> bool:
    """Whether `run_decompositions` would keep every node as it is: each op is a kept,
    functional overload (or Python arithmetic on sizes) and the program mutates nothing."""
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in program.graph_signature.output_specs):
        return False
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            if str(target) not in keep or target._schema.is_mutable:
                return False
        elif getattr(target, "__module__", None) != "_operator":
            return False
    return True


def _takes_only_var_positional(model: torch.nn.Module) -> bool:
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL


def _first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count]) + ("\n..." if len(lines) > count else "")
