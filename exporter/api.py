"""The public API: `exporter.export` and its steps, capture a module once, convert the program
at an opset.

`export_program` is `capture` followed by `convert_program`; both steps are public so a caller
may capture once and convert at several opsets. `capture` lives here, not in the capture stage,
because the ops it keeps whole are those the registry (the translate stage) can translate.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
import torch.utils._pytree as pytree

from exporter.capturing import specialise, trace
from exporter.capturing.signature import DynamicAxes, normalize_dynamic_axes, user_input_nodes
from exporter.capturing.trace import capture_record, with_input_names
from exporter.contract.fileio import write_bytes_atomic
from exporter.contract.keys import (
    BAKED_SIZES_KEY, CAPTURE_KEY, DROPPED_CHECKS_KEY, FOLDED_VALUES_KEY, OPTIMIZED_KEY, RELAXED_GUARDS_KEY,
    RENAMED_VALUES_KEY,
)
from exporter.contract.metadata import describe_check
from exporter.contract.options import ExportOptions
from exporter.contract.static_axes import SpecialisedAxis, fixed_sizes_entry, metadata_entry
from exporter.errors import ExportError, ExportWarning
from exporter.optimize import PASSES, WEIGHT_FOLDING, baked_sizes, optimize_ir
from exporter.optimize.legalize_dtypes import LegalizeDtypes
from exporter.translate.registry import DEFAULT_OPSET, Dispatcher, check_opset
from exporter.translate.ir_model import build_model, to_skeleton
from exporter.translate.translator import dim_names_for, translate
from exporter.write.external_data import Written, exceeds_protobuf_limit, weight_bytes, with_weights, write_model
from exporter.write.printer import format_model

__version__ = "0.1.0"


@dataclass
class ExportResult:
    """An exported model with the program it was translated from (the harness needs both).

    The model is the one onnx_ir model that translation built and the passes rewrote in place
    (`ir_model`; its initializers wrap the module's parameter memory and the folded arrays). Its
    protos are built from it on first use, once each: `skeleton` (initializers of 1 KiB or more
    as data-less stubs held in memory, exporter.contract.skeleton's format) with `weights` (the
    arrays by name), which writing the model or handing it to onnxruntime reads so that each
    weight is copied once at most; `model`, the self-contained ModelProto.
    """

    ir_model: ir.Model
    program: torch.export.ExportedProgram
    opset_version: int
    input_names: list[str]
    output_names: list[str]
    renamed: dict[str, str] = field(default_factory=dict)
    capture_seconds: float = 0.0
    convert_seconds: float = 0.0  # the optimisation stage included
    optimize_seconds: float = 0.0
    optimize_cpu_seconds: dict[str, float] = field(default_factory=dict)  # per pass, process CPU time
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # what each optimisation pass changed
    _skeleton: tuple[onnx.ModelProto, dict[str, np.ndarray]] | None = field(default=None, init=False, repr=False,
                                                                             compare=False)
    _model: onnx.ModelProto | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def static_axes(self) -> list[SpecialisedAxis]:
        """The declared dynamic axes the model fixed, exported static (exporter.capturing.specialise)."""
        record = capture_record(self.program)
        return list(record.static_axes) if record is not None else []

    @property
    def skeleton(self) -> onnx.ModelProto:
        """The model's proto with its large initializers as in-memory stubs (built on first use)."""
        return self._skeleton_and_weights()[0]

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """Every initializer's array by name (no copy of the module's parameters)."""
        return self._skeleton_and_weights()[1]

    def _skeleton_and_weights(self) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        if self._skeleton is None:
            self._skeleton = to_skeleton(self.ir_model)
        return self._skeleton

    @property
    def model(self) -> onnx.ModelProto:
        """The model with its weights inline (protobuf copies each weight into it)."""
        if self._model is None:
            self._model = with_weights(self.skeleton, self.weights)
        return self._model

    @property
    def weight_bytes(self) -> int:
        return weight_bytes(self.weights)

    def save(self, f: str | os.PathLike | IO[bytes], *, external_data: bool | None = None) -> Written:
        """Write the model to `f` straight from the weights, each copied once (see
        `exporter.write.external_data.write_model`); nothing else is built. Returns what was written:
        the data file, if the weights went to one, and the model with its references to it."""
        return write_model(f, self.skeleton, self.weights, external=external_data)


# export, capture, export_program, convert and convert_program repeat their keyword arguments on
# purpose: users call them with keywords, as they call torch.onnx.export, and read them in help();
# each builds one ExportOptions from them (ExportOptions.from_arguments), the stages read only that,
# and the arguments are documented once, in exporter.contract.options.
def export(
    model: torch.nn.Module,
    args: Any,
    f: str | os.PathLike | IO[bytes] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: DynamicAxes | None = None,
    verbose: bool = False,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    do_constant_folding: bool = True,
    optimize: bool = True,
    external_data: bool | None = None,
    strict_dynamic: bool = False,
) -> onnx.ModelProto:
    """Export `model` run on `args` (and `kwargs`) to ONNX; also write it to `f` when given.

    The keyword arguments are `ExportOptions` (exporter.contract.options), documented there.
    With `f` a path and the weights written to a data file (`external_data`), the model
    returned holds external-data references instead of the weights.
    """
    options = ExportOptions.from_arguments(locals())
    result = _export_program(model, args, kwargs, options)
    model = result.model if f is None else _save_and_return(result, f, options.external_data)
    if options.verbose:
        sys.stdout.write(format_model(model) + "\n")  # the seed's documented behaviour
    return model


def _save_and_return(result: ExportResult, f: str | os.PathLike | IO[bytes],
                     external_data: bool | None) -> onnx.ModelProto:
    """Write `result` to `f` and return the model `export` returns: the one with external-data
    references when the weights go to a data file, else the self-contained one. To a path, the
    self-contained model is parsed back from the file just written (mapped, so protobuf's parse
    is the one copy of every weight; building it from the arrays costs two, a bytes object and
    protobuf's own); to a file object, it is built from the arrays while a thread writes."""
    if external_data or exceeds_protobuf_limit(result.skeleton, result.weights):
        return result.save(f, external_data=external_data).model  # refuses external_data=False past 2 GB
    if not hasattr(f, "write"):
        result.save(f, external_data=external_data)
        return _parse_mapped(f)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="roundtrip-save") as pool:
        saving = pool.submit(result.save, f, external_data=external_data)
        try:
            model = result.model
        finally:
            saving.result()  # re-raises the writer's error, after it has cleaned up
    return model


def _parse_mapped(path: str | os.PathLike) -> onnx.ModelProto:
    """The model in the file at `path`, parsed from a read-only mapping of it (protobuf copies
    what it keeps, so nothing refers to the mapping once it is closed)."""
    model = onnx.ModelProto()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        with memoryview(mapped) as view:
            model.ParseFromString(view)
    return model


def capture(
    model: torch.nn.Module,
    args: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: DynamicAxes | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    strict_dynamic: bool = False,
) -> torch.export.ExportedProgram:
    """Capture `model` run on `args` (and `kwargs`) once, for `exporter.convert` at one or more opsets.

    The keyword arguments are `ExportOptions`, as for `exporter.export`; `input_names` here only say which
    names `dynamic_axes` uses. The names are checked before anything is traced: duplicates,
    a name used for an input and an output, more names than inputs or outputs, and dynamic
    axes outside their tensor's rank are ExportErrors. The program keeps every op that has a
    symbolic at any opset (or in `custom_symbolics`), so it may be converted at any supported
    opset: the opset is the conversion's alone (`exporter.convert(opset_version=...)`). A
    module that updates its buffers or inputs gets one ExportWarning: the ONNX model computes
    its outputs but cannot carry those updates. A declared dynamic axis the model fixes to one
    size is exported static with an ExportWarning saying why and where (exporter.capturing.specialise);
    `strict_dynamic=True` refuses such a capture instead.
    """
    return _capture(model, args, kwargs, ExportOptions.from_arguments(locals()))


def _capture(model: torch.nn.Module, args: Any, kwargs: dict[str, Any] | None,
             options: ExportOptions) -> torch.export.ExportedProgram:
    """`capture` with its options gathered."""
    input_names, output_names, dynamic_axes = options.input_names, options.output_names, options.dynamic_axes
    custom_symbolics, strict_dynamic = options.custom_symbolics, options.strict_dynamic
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"export() takes a torch.nn.Module, got {type(model).__name__}")
    args = args if isinstance(args, tuple) else (args,)
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise ExportError(f"kwargs must be a dict of keyword arguments for forward(), got {type(kwargs).__name__}")
    kwargs = dict(kwargs or {})
    tensor_count = sum(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves((args, kwargs)))
    trace.check_names(input_names, output_names, tensor_count)
    forward_names = trace.forward_input_names(model, args)
    names = with_input_names(forward_names, input_names)
    clashing = sorted(set(output_names or ()) & set(names + list(kwargs)))
    if clashing:
        raise ExportError(
            f"output_names {clashing} are also the names of inputs ({names + list(kwargs)}); "
            "ONNX values need distinct names: rename the outputs (or name the inputs with input_names)"
        )
    parameter_names = [p.name for p in trace.forward_parameters(model) if p.kind in trace.POSITIONAL]
    dynamic_shapes = trace.dynamic_shapes_for(args, names, dynamic_axes, output_names or (), kwargs, parameter_names)
    keep = Dispatcher(DEFAULT_OPSET, custom_symbolics).known_targets()  # any opset: known_targets spans all
    small = trace.has_small_dynamic_example(args, kwargs, names, dynamic_axes)
    program = trace.capture_program(model, args, kwargs, dynamic_shapes, keep, strict_dynamic, size_oblivious=small)
    static_axes = specialise.specialised_axes(program, names + list(kwargs), normalize_dynamic_axes(dynamic_axes))
    specialise.warn_specialised(static_axes, type(model).__name__)
    fixed = specialise.fixed_sizes(program) if dynamic_axes else []
    if fixed and strict_dynamic:
        raise ExportError(f"{type(model).__name__}: strict_dynamic refuses a size the export would fix: "
                          + "; ".join(size.describe() for size in fixed))
    specialise.warn_fixed_sizes(fixed, type(model).__name__)
    trace.check_outputs(program, output_names, dynamic_axes)
    trace.warn_about_mutations(program, type(model).__name__)
    program.graph_module.meta[CAPTURE_KEY] = trace.CaptureRecord(
        root_name=type(model).__name__,
        forward_names=tuple(forward_names),
        input_names=None if input_names is None else tuple(input_names),
        output_names=None if output_names is None else tuple(output_names),
        dynamic_axes=normalize_dynamic_axes(dynamic_axes) if dynamic_axes else None,
        custom_symbolics=dict(custom_symbolics) if custom_symbolics else None,
        input_keys=tuple(kwargs),
        static_axes=tuple(static_axes),
        fixed_sizes=tuple(fixed),
    )
    return program


def export_program(
    model: torch.nn.Module,
    args: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: DynamicAxes | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    do_constant_folding: bool = True,
    optimize: bool = True,
    strict_dynamic: bool = False,
) -> ExportResult:
    """Like `export`, but return the ExportedProgram and naming alongside the model.

    The same as `capture` followed by `convert_program` on its program.
    """
    return _export_program(model, args, kwargs, ExportOptions.from_arguments(locals()))


def _export_program(model: torch.nn.Module, args: Any, kwargs: dict[str, Any] | None,
                    options: ExportOptions) -> ExportResult:
    """`export_program` with its options gathered: capture, then convert what the capture
    recorded (its names, axes and symbolics)."""
    started = time.perf_counter()
    program = _capture(model, args, kwargs, options)
    captured = time.perf_counter()
    converted = _convert_program(program, replace(options, input_names=None, output_names=None, dynamic_axes=None,
                                                  custom_symbolics=None))
    return replace(converted, capture_seconds=captured - started)


def convert(
    program: torch.export.ExportedProgram,
    *,
    opset_version: int | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: DynamicAxes | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    graph_name: str | None = None,
    do_constant_folding: bool = True,
    optimize: bool = True,
) -> onnx.ModelProto:
    """Translate a program from `exporter.capture` to ONNX at `opset_version`.

    See `convert_program`, which also returns the program and the naming.
    """
    return _convert_program(program, ExportOptions.from_arguments(locals())).model


def convert_program(
    program: torch.export.ExportedProgram,
    *,
    opset_version: int | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: DynamicAxes | None = None,
    custom_symbolics: Mapping[Any, Callable[..., Any]] | None = None,
    graph_name: str | None = None,
    do_constant_folding: bool = True,
    optimize: bool = True,
    strict_dynamic: bool = False,
) -> ExportResult:
    """Translate a captured program to ONNX; the program is left as it is, so it may be
    converted again (e.g. at another opset: capture keeps the ops of every opset).

    An initializer that holds a value depending on a dynamic axis (exporter.optimize.baked_sizes:
    the capture read a size as an int, or a symbolic value was folded) is an ExportWarning naming
    it, its FX node and line, and is listed in the model's `roundtrip.baked_sizes` metadata;
    `strict_dynamic=True` raises ExportError instead.

    `optimize` runs the optimisation stage (exporter.optimize); without it,
    `do_constant_folding` still folds weight-only subgraphs into initializers.

    `opset_version` None is `DEFAULT_OPSET` (exporter.translate.registry, the opset's one owner; capture
    does not depend on it). Each other argument left None takes the value given to
    `exporter.capture`: the input and output names, `dynamic_axes` (keyed by the input names,
    which name the dynamic dims), `custom_symbolics`, and `graph_name`, the module's class name,
    which also roots every node's scope. A program from `torch.export.export` itself is
    accepted too: its inputs are then named after its placeholders.
    """
    return _convert_program(program, ExportOptions.from_arguments(locals()))


def _convert_program(program: torch.export.ExportedProgram, options: ExportOptions) -> ExportResult:
    """`convert_program` with its options gathered; what they leave None comes from the capture."""
    record = capture_record(program)
    if record is not None:
        options = options.with_defaults(
            input_names=record.input_names, output_names=record.output_names, dynamic_axes=record.dynamic_axes,
            custom_symbolics=record.custom_symbolics, graph_name=record.root_name)
        default_names: Sequence[str] = (*record.forward_names, *record.input_keys)
    else:
        options = options.with_defaults(graph_name=_root_name(program))
        default_names = [node.name for node in user_input_nodes(program)]
    input_names, output_names, dynamic_axes = options.input_names, options.output_names, options.dynamic_axes
    custom_symbolics, graph_name, optimize = options.custom_symbolics, options.graph_name, options.optimize
    do_constant_folding, strict_dynamic = options.do_constant_folding, options.strict_dynamic
    opset = check_opset(options.opset_version)

    started = time.perf_counter()
    conversion = translate(
        program,
        root_name=graph_name,
        opset_version=opset,
        dispatcher=Dispatcher(opset, custom_symbolics),
        input_names=input_names,
        output_names=output_names,
        dim_names=dim_names_for(program, with_input_names(default_names, input_names), dynamic_axes),
    )
    metadata = {RENAMED_VALUES_KEY: json.dumps(conversion.renamed)} if conversion.renamed else {}
    metadata[OPTIMIZED_KEY] = "true" if optimize else "false"
    metadata.update(metadata_entry(record.static_axes if record is not None else ()))
    metadata.update(fixed_sizes_entry(record.fixed_sizes if record is not None else ()))
    checks = [*program.graph_module.meta.get(RELAXED_GUARDS_KEY, []), *conversion.graph.dropped_checks]
    if checks:
        metadata[DROPPED_CHECKS_KEY] = json.dumps(checks)
        warn_dropped_checks(checks, graph_name)
    # One IR from translation to the file: the translated graph is an onnx_ir model, the passes
    # rewrite it in place, and its proto (a skeleton plus the arrays) is made once, at the end.
    model = build_model(conversion.graph, graph_name=graph_name, producer_version=__version__, metadata=metadata)
    if optimize:
        passes = PASSES if do_constant_folding else tuple(p for p in PASSES if p.name != "fold_constants")
    else:
        passes = WEIGHT_FOLDING if do_constant_folding else ()
    # Legalisation last, so that what the optimiser fused is legal too: Casts around ops ONNX or
    # onnxruntime cannot run in float16/bfloat16.
    optimizing = time.perf_counter()
    applied = optimize_ir(model, (*passes, LegalizeDtypes()))
    optimize_seconds = time.perf_counter() - optimizing
    _check_baked_sizes(program, model, graph_name, strict_dynamic)
    return ExportResult(
        ir_model=model,
        program=program,
        opset_version=opset,
        input_names=conversion.user_input_names,
        output_names=conversion.output_names,
        renamed=conversion.renamed,
        convert_seconds=time.perf_counter() - started,
        optimize_seconds=optimize_seconds,
        optimize_cpu_seconds=applied.cpu_seconds,
        changes=applied.changes,
    )


def save(model: onnx.ModelProto, f: str | os.PathLike | IO[bytes]) -> None:
    """Write `model` to a path (atomically: a reader never sees half a file) or a binary file.
    (`ExportResult.save` writes an export straight from its weights instead.)"""
    if hasattr(f, "write"):
        f.write(model.SerializeToString())
    else:
        write_bytes_atomic(f, model.SerializeToString())


def warn_dropped_checks(checks: Sequence[dict[str, str]], model_name: str) -> None:
    """One ExportWarning listing the runtime checks the ONNX model does not carry."""
    lines = "\n".join(f"  - {describe_check(check)}" for check in checks)
    warnings.warn(ExportWarning(
        f"{model_name}: {len(checks)} runtime check(s) of the captured program are not in the ONNX model "
        f"(ONNX has no assertion; they are listed in its '{DROPPED_CHECKS_KEY}' metadata):\n{lines}"
    ), stacklevel=3)


def _check_baked_sizes(program: torch.export.ExportedProgram, model: ir.Model, model_name: str,
                       strict: bool) -> None:
    """Warn about (strict: refuse) initializers holding size-dependent values; record them."""
    folded_entry = model.metadata_props.get(FOLDED_VALUES_KEY)
    baked = baked_sizes.check_initializers(program, model, json.loads(folded_entry) if folded_entry else None)
    if not baked:
        return
    message = baked_sizes.describe_all(baked, model_name)
    if strict:
        raise ExportError(message)
    model.metadata_props[BAKED_SIZES_KEY] = json.dumps([b.to_dict() for b in baked])
    warnings.warn(ExportWarning(message), stacklevel=4)


def _root_name(program: torch.export.ExportedProgram) -> str:
    """The captured module's class name, read off the root of a node's module stack."""
    for node in program.graph.nodes:
        for path, module_type in (node.meta.get("nn_module_stack") or {}).values():
            if path == "":
                name = module_type if isinstance(module_type, str) else getattr(module_type, "__qualname__", "")
                return name.rsplit(".", 1)[-1] or "main"
    return "main"
