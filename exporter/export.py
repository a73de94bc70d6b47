"""`exporter.export`: torch.nn.Module -> onnx.ModelProto, with provenance on every node."""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import onnx
import torch

from exporter import symbolics  # noqa: F401  (registers the built-in symbolics)
from exporter.convert import convert
from exporter.errors import ExportError
from exporter.fileio import write_bytes_atomic
from exporter.printer import format_model
from exporter.registry import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, Dispatcher
from exporter.serialize import PRODUCER, to_model
from exporter.trace import capture, dynamic_shapes_for

__version__ = "0.1.0"


@dataclass
class ExportResult:
    """An exported model with the program it was translated from (the harness needs both)."""

    model: onnx.ModelProto
    program: torch.export.ExportedProgram
    opset_version: int
    input_names: list[str]
    output_names: list[str]
    renamed: dict[str, str] = field(default_factory=dict)
    capture_seconds: float = 0.0
    convert_seconds: float = 0.0


def export(
    model: torch.nn.Module,
    args: Any,
    f: str | os.PathLike | IO[bytes] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str] | Sequence[int]] | None = None,
    verbose: bool = False,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
) -> onnx.ModelProto:
    """Export `model` run on `args` to ONNX; also write it to `f` when given.

    `input_names`/`output_names` name the graph's inputs and outputs, `dynamic_axes` marks
    axes as dynamic (`{"x": {0: "batch"}}`), `custom_symbolics` maps overload names to
    symbolic functions for this call only. `verbose=True` prints the graph with scopes.
    """
    result = export_program(
        model, args, kwargs=kwargs, input_names=input_names, output_names=output_names,
        opset_version=opset_version, dynamic_axes=dynamic_axes, custom_symbolics=custom_symbolics,
    )
    if f is not None:
        save(result.model, f)
    if verbose:
        sys.stdout.write(format_model(result.model) + "\n")  # the seed's documented behaviour
    return result.model


def export_program(
    model: torch.nn.Module,
    args: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str] | Sequence[int]] | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
) -> ExportResult:
    """Like `export`, but return the ExportedProgram and naming alongside the model."""
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"export() takes a torch.nn.Module, got {type(model).__name__}")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(
            f"opset_version={opset} is outside the supported range {MIN_OPSET}..{MAX_OPSET} "
            f"(onnxruntime 1.31 runs up to {MAX_OPSET}); pick one inside it"
        )
    args = args if isinstance(args, tuple) else (args,)
    names = _forward_input_names(model, args)
    if input_names is not None and len(input_names) > len(args):
        raise ExportError(
            f"input_names has {len(input_names)} names but the model takes {len(args)} input(s); "
            "parameters are initializers and are named after the state_dict, so name only the inputs"
        )
    names = [*(input_names or []), *names[len(input_names or []):]]
    dispatcher = Dispatcher(opset, custom_symbolics)

    started = time.perf_counter()
    program = capture(model, args, kwargs, dynamic_shapes_for(args, names, dynamic_axes, output_names or ()), dispatcher.known_targets())
    captured = time.perf_counter()
    conversion = convert(
        program,
        root_name=type(model).__name__,
        opset_version=opset,
        dispatcher=dispatcher,
        input_names=input_names,
        output_names=output_names,
        dim_names=_dim_names(program, names, dynamic_axes),
    )
    metadata = {"roundtrip.renamed_values": json.dumps(conversion.renamed)} if conversion.renamed else {}
    onnx_model = to_model(
        conversion.graph, graph_name=type(model).__name__, producer_version=__version__, metadata=metadata
    )
    return ExportResult(
        model=onnx_model,
        program=program,
        opset_version=opset,
        input_names=conversion.user_input_names,
        output_names=conversion.output_names,
        renamed=conversion.renamed,
        capture_seconds=captured - started,
        convert_seconds=time.perf_counter() - captured,
    )


def save(model: onnx.ModelProto, f: str | os.PathLike | IO[bytes]) -> None:
    """Write `model` to a path (atomically: a reader never sees half a file) or a binary file."""
    if hasattr(f, "write"):
        f.write(model.SerializeToString())
    else:
        write_bytes_atomic(f, model.SerializeToString())


def _forward_input_names(model: torch.nn.Module, args: tuple[Any, ...]) -> list[str]:
    """The names torch.export gives the user inputs: forward()'s parameter names."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for index in range(len(args)):
        if index < len(params) and params[index].kind in (params[index].POSITIONAL_ONLY, params[index].POSITIONAL_OR_KEYWORD):
            names.append(params[index].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}_{index}")
        else:
            names.append(f"input_{index}")
    return names


def _dim_names(program, names: Sequence[str], dynamic_axes) -> dict[str, str]:
    """Symbol (e.g. 's77') -> the user's dim name, read off the user inputs' fake shapes."""
    if not dynamic_axes:
        return {}
    user_nodes = [
        node for node in program.graph.nodes
        if node.op == "placeholder" and node.name in {s.arg.name for s in program.graph_signature.input_specs
                                                     if s.kind.name == "USER_INPUT"}
    ]
    mapping: dict[str, str] = {}
    for name, node in zip(names, user_nodes):
        axes = dynamic_axes.get(name)
        val = node.meta.get("val")
        if axes is None or not isinstance(val, torch.Tensor):
            continue
        if not isinstance(axes, Mapping):
            axes = {int(a): f"{name}_dim{int(a)}" for a in axes}
        for axis, dim_name in axes.items():
            size = val.shape[int(axis)]
            if hasattr(size, "node"):
                mapping.setdefault(str(size.node.expr), dim_name)
    return mapping
