"""Capture a module as an ExportedProgram whose ops are the ones the registry translates.

The module is exported with `torch.export.export(strict=False)` in eval mode, then decomposed
with torch's default table minus every op that has a symbolic, so conv, batch_norm, linear,
pooling and the recurrent layers reach the symbolics whole instead of as core-ATen pieces.

The kept ops are those with a symbolic at any opset (`Dispatcher.known_targets`), so one
capture serves every opset: `exporter.convert(program, opset_version=...)` may translate it
again at each. `capture` records what it was given on the program (`CaptureRecord`), so the
conversion names inputs, outputs and dynamic dims as a one-step export would.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import OutputKind

from exporter.errors import ExportError
from exporter.registry import CAPTURE_HOOKS, Dispatcher, check_opset

DynamicAxes = Mapping[str, Mapping[int, str] | Sequence[int]]
CAPTURE_KEY = "roundtrip.capture"  # where `capture` keeps its CaptureRecord: graph_module.meta

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


def dynamic_shapes_for(
    args: Sequence[Any],
    input_names: Sequence[str],
    dynamic_axes: DynamicAxes | None,
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
    axes_by_name = normalize_dynamic_axes(dynamic_axes)
    dims: dict[str, torch.export.Dim] = {}
    specs: list[Any] = []
    for name, arg in zip(input_names, args):
        axes = axes_by_name.get(name)
        if axes is None or not isinstance(arg, torch.Tensor):
            specs.append(None)
            continue
        spec = {}
        for axis, dim_name in axes.items():
            axis = axis % arg.dim()
            dims.setdefault(dim_name, torch.export.Dim(_identifier(dim_name)))
            spec[axis] = dims[dim_name]
        specs.append(spec)
    return tuple(specs)


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"d_{cleaned}"


def with_input_names(default_names: Sequence[str], input_names: Sequence[str] | None) -> list[str]:
    """The inputs' names: the given `input_names` first, `default_names` for the rest."""
    given = list(input_names or [])
    return [*given, *default_names[len(given):]]


def forward_input_names(model: torch.nn.Module, args: Sequence[Any]) -> list[str]:
    """The names `dynamic_axes` may use for the positional inputs: forward()'s parameter names."""
    params = _forward_parameters(model)
    names = []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    for index in range(len(args)):
        if index < len(params) and params[index].kind in positional:
            names.append(params[index].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}_{index}")
        else:
            names.append(f"input_{index}")
    return names


@dataclass(frozen=True)
class CaptureRecord:
    """What `capture` was given, kept on the program for the conversions that follow."""

    root_name: str  # the module's class name: the graph's name and the root of every scope
    forward_names: tuple[str, ...]  # forward()'s names for the positional inputs
    input_names: tuple[str, ...] | None
    output_names: tuple[str, ...] | None
    dynamic_axes: dict[str, dict[int, str]] | None
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None
    opset_version: int


def capture_record(program: torch.export.ExportedProgram) -> CaptureRecord | None:
    """The record `capture` left on `program`; None for a program captured some other way."""
    record = program.graph_module.meta.get(CAPTURE_KEY)
    return record if isinstance(record, CaptureRecord) else None


def capture(
    model: torch.nn.Module,
    args: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: DynamicAxes | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    opset_version: int | None = None,
) -> torch.export.ExportedProgram:
    """Capture `model` run on `args` once, for `exporter.convert` at one or more opsets.

    The arguments mean what they mean to `exporter.export`; `input_names` here only say which
    names `dynamic_axes` uses. The program keeps every op that has a symbolic at any opset (or
    in `custom_symbolics`), so it may be converted at any supported opset. `opset_version` is
    checked and recorded as the conversion's default; it does not change what is captured.
    """
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"export() takes a torch.nn.Module, got {type(model).__name__}")
    opset = check_opset(opset_version)
    args = args if isinstance(args, tuple) else (args,)
    if input_names is not None and len(input_names) > len(args):
        raise ExportError(
            f"input_names has {len(input_names)} names but the model takes {len(args)} input(s); "
            "parameters are initializers and are named after the state_dict, so name only the inputs"
        )
    forward_names = forward_input_names(model, args)
    names = with_input_names(forward_names, input_names)
    dynamic_shapes = dynamic_shapes_for(args, names, dynamic_axes, output_names or ())
    keep = Dispatcher(opset, custom_symbolics).known_targets()
    program = capture_program(model, args, kwargs, dynamic_shapes, keep)
    program.graph_module.meta[CAPTURE_KEY] = CaptureRecord(
        root_name=type(model).__name__,
        forward_names=tuple(forward_names),
        input_names=None if input_names is None else tuple(input_names),
        output_names=None if output_names is None else tuple(output_names),
        dynamic_axes=normalize_dynamic_axes(dynamic_axes) if dynamic_axes else None,
        custom_symbolics=dict(custom_symbolics) if custom_symbolics else None,
        opset_version=opset,
    )
    return program


def capture_program(
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


def _forward_parameters(model: torch.nn.Module) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []


def _takes_only_var_positional(model: torch.nn.Module) -> bool:
    params = _forward_parameters(model)
    return len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL


def _first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count]) + ("\n..." if len(lines) > count else "")
