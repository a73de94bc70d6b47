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

import contextlib
import inspect
import io
import logging
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import OutputKind

from exporter.capturing import functionalize, specialise
from exporter.capturing.module_state import module_state_kept
from exporter.capturing import rules as capture_rules
from exporter.capturing.frames import is_user_file, short_path
from exporter.capturing.hooks import CAPTURE_HOOKS
from exporter.capturing.signature import DynamicAxes, check_output_names, normalize_dynamic_axes, user_outputs
from exporter.contract.keys import (
    CAPTURE_KEY, FIXED_SIZES_META, RELAXED_GUARDS_KEY, SIZE_OBLIVIOUS_KEY, SPECIALISED_META,
)
from exporter.contract.static_axes import FixedSize, SpecialisedAxis
from exporter.errors import ExportError, ExportWarning


logger = logging.getLogger(__name__)

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

CAPTURE_LOCK = threading.RLock()
"""Held while a module is captured. torch.export keeps process-wide state while it traces, and
capture hooks patch torch's operator tables, so captures from several threads run one at a time."""

_MESSAGE_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n(?P<code>[^\n]*)')


def refuses_mode_switch(model: torch.nn.Module) -> bool:
    """Whether `model` refuses `.eval()`: a GraphModule from PT2E quantization, whose `train` and
    `eval` torchao's prepare_pt2e/convert_pt2e replace with methods that raise. Its graph already
    holds the mode it was captured in (or moved to by move_exported_model_to_eval)."""
    return isinstance(model, torch.fx.GraphModule) and "eval" in vars(model)


# ATen calls that run in training mode, with the index of their `train`/`training` argument
_TRAINING_ARGUMENT = {"aten.dropout.default": 2, "aten.batch_norm.default": 5, "aten.native_batch_norm.default": 5,
                      "aten._native_batch_norm_legit.default": 5}


def _training_calls(model: torch.fx.GraphModule) -> list[str]:
    """The nodes of `model`'s graph that run in training mode (dropout, batch norm)."""
    found = []
    for node in model.graph.nodes:
        index = _TRAINING_ARGUMENT.get(str(node.target))
        if index is not None and len(node.args) > index and node.args[index] is True:
            found.append(node.name)
    return found


@contextmanager
def eval_mode(model: torch.nn.Module):
    """Put every submodule in eval mode and restore each one's flag afterwards. A module that
    refuses eval() (`refuses_mode_switch`) is captured as its graph stands, unless that graph
    runs dropout or batch norm in training mode: ExportError says how to move it to eval."""
    flags = {m: m.training for m in model.modules()}
    if refuses_mode_switch(model):
        training = _training_calls(model)
        if training:
            raise ExportError(
                f"{type(model).__name__} refuses eval() (a PT2E-prepared or converted module) and its graph runs "
                f"{', '.join(training[:4])} in training mode; call "
                "torchao.quantization.pt2e.move_exported_model_to_eval(model) before exporting it")
    else:
        model.eval()
    try:
        yield model
    finally:
        for module, training in flags.items():
            module.training = training


def dynamic_shapes_for(
    args: Sequence[Any],
    input_names: Sequence[str],
    dynamic_axes: DynamicAxes | None,
    output_names: Sequence[str] = (),
    kwargs: Mapping[str, Any] | None = None,
    parameter_names: Sequence[str] = (),
) -> tuple[Any, ...] | dict[str, Any] | None:
    """torch.export dynamic_shapes from the seed-style `dynamic_axes={name: {axis: dim_name}}`.

    Positional inputs are named by `input_names`, keyword inputs by their keys. Entries for
    outputs are accepted and need nothing: their dynamic axes follow from the inputs'. An entry
    for an input that is not a tensor, or an axis outside the tensor's rank, is an ExportError.
    With keyword inputs the shapes are keyed by forward()'s `parameter_names`, as torch wants.
    """
    if not dynamic_axes:
        return None
    kwargs = kwargs or {}
    known = [*input_names, *kwargs]
    unknown = sorted(set(dynamic_axes) - set(known) - set(output_names))
    if unknown:
        raise ExportError(
            f"dynamic_axes names {unknown}, which are neither inputs {known} nor "
            f"outputs {list(output_names)} of the model"
        )
    axes_by_name = normalize_dynamic_axes(dynamic_axes)
    dims: dict[str, torch.export.Dim] = {}

    def spec_for(name: str, value: Any) -> dict[int, Any] | None:
        axes = axes_by_name.get(name)
        if axes is None:
            return None
        if not isinstance(value, torch.Tensor):
            raise ExportError(
                f"dynamic_axes marks axes of input {name!r}, which is a {type(value).__name__}, not a tensor; "
                "only tensor inputs have dynamic axes (the tensors inside a nested input cannot be marked)"
            )
        rank, spec = value.dim(), {}
        for axis, dim_name in axes.items():
            if not -rank <= axis < rank:
                raise ExportError(
                    f"dynamic_axes[{name!r}] marks axis {axis}, but {name!r} has {rank} dimension(s) "
                    f"(shape {tuple(value.shape)}); its axes are 0..{rank - 1} (or -{rank}..-1)"
                    if rank else f"dynamic_axes[{name!r}] marks axis {axis}, but {name!r} is 0-d: it has no axes"
                )
            if axis % rank in spec:
                raise ExportError(f"dynamic_axes[{name!r}] marks axis {axis % rank} twice (as {axis} and another)")
            dims.setdefault(dim_name, torch.export.Dim(_identifier(dim_name)))
            spec[axis % rank] = dims[dim_name]
        return spec

    positional = tuple(spec_for(name, arg) for name, arg in zip(input_names, args))
    if not kwargs:
        return positional
    shapes: dict[str, Any] = {}
    for index, spec in enumerate(positional):
        if index < len(parameter_names):
            shapes[parameter_names[index]] = spec
        else:
            raise ExportError("dynamic_axes with keyword inputs needs named positional parameters in forward()")
    shapes.update({key: spec_for(key, value) for key, value in kwargs.items()})
    return shapes


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"d_{cleaned}"


def with_input_names(default_names: Sequence[str], input_names: Sequence[str] | None) -> list[str]:
    """The inputs' names: the given `input_names` first, `default_names` for the rest."""
    given = list(input_names or [])
    return [*given, *default_names[len(given):]]


def forward_input_names(model: torch.nn.Module, args: Sequence[Any]) -> list[str]:
    """The names `dynamic_axes` may use for the positional inputs: forward()'s parameter names."""
    params = forward_parameters(model)
    names = []
    for index in range(len(args)):
        if index < len(params) and params[index].kind in POSITIONAL:
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
    input_keys: tuple[str, ...] = ()  # the keyword inputs' names, which name their dynamic axes
    static_axes: tuple[SpecialisedAxis, ...] = ()  # declared dynamic, exported static
    fixed_sizes: tuple[FixedSize, ...] = ()  # sizes computed from dynamic ones, exported constant


def capture_record(program: torch.export.ExportedProgram) -> CaptureRecord | None:
    """The record `capture` left on `program`; None for a program captured some other way."""
    record = program.graph_module.meta.get(CAPTURE_KEY)
    return record if isinstance(record, CaptureRecord) else None


def has_small_dynamic_example(args: Sequence[Any], kwargs: Mapping[str, Any], names: Sequence[str],
                              dynamic_axes: DynamicAxes | None) -> bool:
    """Whether an axis `dynamic_axes` declares has an example of size 0 or 1 (which torch.export
    would fix to that size); `names[i]` names the i-th positional input."""
    values = {**dict(zip(names, args)), **kwargs}
    return any(isinstance(values.get(name), torch.Tensor) and values[name].dim() > 0
               and values[name].shape[axis] in (0, 1)
               for name, axes in normalize_dynamic_axes(dynamic_axes).items() for axis in axes)


def check_names(input_names: Sequence[str] | None, output_names: Sequence[str] | None, input_count: int) -> None:
    """ExportError for names the ONNX graph could not carry: not strings, repeated, or more
    input names than the model has tensor inputs. (`capture` also refuses output names that
    are input names.)"""
    for label, names in (("input_names", input_names), ("output_names", output_names)):
        if names is None:
            continue
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise ExportError(f"{label} must be a list of names, got {type(names).__name__} {names!r}")
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad:
            raise ExportError(f"{label} must hold non-empty strings; {bad!r} are not")
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        if repeated:
            raise ExportError(f"{label} repeats {repeated}: every ONNX {label[:-7]} needs a name of its own")
    if input_names is not None and len(input_names) > input_count:
        raise ExportError(
            f"input_names has {len(input_names)} names but the model takes {input_count} tensor input(s); "
            "parameters are initializers and are named after the state_dict, so name only the inputs"
        )


def check_outputs(program: torch.export.ExportedProgram, output_names: Sequence[str] | None,
                   dynamic_axes: DynamicAxes | None) -> None:
    """After capture, when the outputs are known: as many names as outputs at most, and the
    outputs' dynamic axes inside their rank."""
    outputs = user_outputs(program)
    check_output_names(output_names, len(outputs))
    axes_by_name = normalize_dynamic_axes(dynamic_axes)
    for name, item in zip(output_names or (), outputs):
        val = item.meta.get("val") if isinstance(item, torch.fx.Node) else None
        rank = val.dim() if isinstance(val, torch.Tensor) else 0
        for axis in axes_by_name.get(name, {}):
            if not -rank <= axis < rank:
                raise ExportError(
                    f"dynamic_axes[{name!r}] marks axis {axis}, but output {name!r} has {rank} dimension(s)"
                )


def mutated_state(program: torch.export.ExportedProgram) -> list[tuple[str, str]]:
    """(kind, name) of every buffer, parameter or user input the program updates in place:
    ("buffer", "count"), ("input", "x"). ONNX graphs have no state to update."""
    kinds = {
        OutputKind.BUFFER_MUTATION: "buffer", OutputKind.PARAMETER_MUTATION: "parameter",
        OutputKind.USER_INPUT_MUTATION: "input",
    }
    return [(kinds[spec.kind], spec.target) for spec in program.graph_signature.output_specs if spec.kind in kinds]


def describe_mutations(mutations: Sequence[tuple[str, str]]) -> str:
    """`buffer 'count' and input 'x'`."""
    return " and ".join(f"{kind} {name!r}" for kind, name in mutations)


def warn_about_mutations(program: torch.export.ExportedProgram, model_name: str) -> None:
    """One ExportWarning naming every buffer, parameter and input the module updates in place."""
    mutations = mutated_state(program)
    if mutations:
        warnings.warn(
            f"{model_name}.forward() updates {describe_mutations(mutations)} in place; the ONNX model "
            "computes the outputs but cannot express the update (an ONNX graph has no state), so it is "
            "left out. Return the new value as an output if you need it.",
            ExportWarning, stacklevel=3,
        )


def capture_program(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: tuple[Any, ...] | dict[str, Any] | None,
    keep: Iterable[str],
    strict_dynamic: bool = False,
    size_oblivious: bool = False,
) -> torch.export.ExportedProgram:
    """Export `model` and decompose everything except the overloads named in `keep`.

    Runs under CAPTURE_LOCK; torch's diagnostics of a failed capture (the partial FX graph it
    prints, its warnings) are kept off stderr and logged at DEBUG, and the ExportError names
    the line of the user's code that stopped the capture. `size_oblivious` (a dynamic axis
    whose example is 0 or 1) first captures as torch.onnx does, with torch's sizes
    "oblivious" to 0 and 1, which keeps such axes dynamic instead of fixing them to the
    example's size; where that capture fails, the usual one runs.
    """
    keep_set = frozenset(keep)
    if isinstance(dynamic_shapes, tuple) and _takes_only_var_positional(model):
        dynamic_shapes = (dynamic_shapes,)  # forward(*args): torch.export nests them under `args`
    with CAPTURE_LOCK, eval_mode(model), _capture_hooks(model, keep_set), capture_rules.applied():
        program = _size_oblivious_capture(model, args, kwargs, dynamic_shapes) if size_oblivious else None
        if not isinstance(program, torch.export.ExportedProgram):
            refused = program
            try:
                program = _export_specialising(model, args, kwargs, dynamic_shapes, strict_dynamic)
            except ExportError:
                raise  # a capture hook's refusal, which already says what to do
            except Exception as error:  # torch raises many types; all mean "could not capture"
                raise ExportError(capture_failure_message(type(model).__name__, error)) from error
            if refused is not None:  # the model's code, not the example's size, fixed the axis
                program.graph_module.meta[SIZE_OBLIVIOUS_KEY] = refused
        with _oblivious_sizes(program.graph_module.meta.get(SIZE_OBLIVIOUS_KEY) is True):
            return _decomposed(model, program, keep_set)


def _decomposed(model: torch.nn.Module, program: torch.export.ExportedProgram,
                keep_set: frozenset[str]) -> torch.export.ExportedProgram:
    """The captured program with every op outside `keep_set` decomposed (locally where
    functionalize can, else by torch's run_decompositions)."""
    if functionalize.rewrite(program, keep_set):
        # run_decompositions would trace the whole graph again (as long as the capture
        # itself) for what local rewrites do: in-place ops, eval batch_norm and dropout, and
        # the composite ops training IR keeps (silu, reshape, to, the factories, ...).
        return program
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if str(op) in keep_set:
            table.pop(op)
    try:
        with _torch_diagnostics_held():
            decomposed = program.run_decompositions(table)
        for key in (RELAXED_GUARDS_KEY, SIZE_OBLIVIOUS_KEY, SPECIALISED_META, FIXED_SIZES_META):
            if key in program.graph_module.meta:
                decomposed.graph_module.meta[key] = program.graph_module.meta[key]
        return decomposed
    except Exception as error:
        raise ExportError(
            f"decomposing the captured graph of {type(model).__name__} failed: "
            f"{type(error).__name__}: {_first_lines(str(error))}"
        ) from error


@dataclass(frozen=True)
class ObliviousRefusal:
    """Why the size-oblivious capture failed: torch's first line and the user's lines."""

    reason: str
    lines: list[str]


@contextmanager
def _oblivious_sizes(enabled: bool) -> Iterator[None]:
    """torch's sizes oblivious to 0 and 1 (`backed_size_oblivious`, what torch.onnx captures
    with) while the block runs, when `enabled`."""
    if not enabled:
        yield
        return
    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        yield


def _size_oblivious_capture(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: tuple[Any, ...] | dict[str, Any] | None,
) -> torch.export.ExportedProgram | ObliviousRefusal:
    """The capture of a model whose dynamic axis has an example of size 0 or 1, with sizes
    oblivious to 0 and 1: torch then reasons about the axis as about any size instead of
    fixing it to the example's (the ops whose result depends on a size being 1, squeeze and
    numel, are then decided at run time by their symbolics). Why not, where torch refuses it
    (a model that does fix the axis, or whose guards torch cannot prove for every size), for
    the usual capture to run: it then fixes the axis or drops the guards, and says so."""
    try:
        with _oblivious_sizes(True), _torch_diagnostics_held():
            program = _torch_export(model, args, kwargs, dynamic_shapes)
    except ExportError:
        raise
    except Exception as error:  # torch raises many types; the usual capture says why
        logger.info("the size-oblivious capture failed (%s); capturing as torch.export specialises",
                    _first_lines(str(error), 3))
        return ObliviousRefusal(specialise.first_line(str(error)), user_frames(error))
    program.graph_module.meta[SIZE_OBLIVIOUS_KEY] = True
    return program


def _torch_export(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None,
                  dynamic_shapes: Any) -> torch.export.ExportedProgram:
    """One torch.export trace (non-strict); the module's attributes are restored afterwards,
    whether it succeeds or not (exporter.capturing.module_state), so a module that caches in
    forward neither keeps this trace's FakeTensors nor hands them to the next attempt."""
    with module_state_kept(model), specialise.recording_fixed_sizes() as fixed:
        program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    program.graph_module.meta[FIXED_SIZES_META] = fixed
    return program


def _export_specialising(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: tuple[Any, ...] | dict[str, Any] | None,
    strict_dynamic: bool,
) -> torch.export.ExportedProgram:
    """`_export_relaxing_unproven_guards`; where torch refuses because the model fixes a dynamic
    dim to one size, capture again with the dims as Dim.AUTO (unless `strict_dynamic`), recording
    where sizes became constants (exporter.capturing.specialise)."""
    try:
        return _export_relaxing_unproven_guards(model, args, kwargs, dynamic_shapes)
    except Exception as error:
        if strict_dynamic or dynamic_shapes is None or not specialise.is_specialisation(error):
            raise
        refusal = str(error)
    logger.debug("a dynamic dim was fixed to one size (%s); capturing with Dim.AUTO", _first_lines(refusal))
    with specialise.recording_constants() as constants, _torch_diagnostics_held():
        program = _torch_export(model, args, kwargs, specialise.auto_dims(dynamic_shapes))
    program.graph_module.meta[SPECIALISED_META] = specialise.Specialisations(refusal, constants)
    return program


def _export_relaxing_unproven_guards(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: tuple[Any, ...] | dict[str, Any] | None,
) -> torch.export.ExportedProgram:
    """torch.export with the dynamic axes as named Dims; if torch reports that the model's own
    guards on them could not be proven for every size (a "Constraints violated" UserError,
    e.g. RAFT's `(3*batch - 1) // batch == 2`, which holds for every batch >= 1), capture again
    with the axes as `Dim.DYNAMIC`, which keeps such guards as checks of the program instead of
    refusing it. A dim the model really fixes to one size still fails there, with torch's reason."""
    try:
        with _torch_diagnostics_held():
            return _torch_export(model, args, kwargs, dynamic_shapes)
    except Exception as error:
        relaxed = _relaxed_dims(dynamic_shapes)
        if relaxed is None or not _is_unproven_guard(error):
            raise
        logger.info("the named dims' guards could not be proven (%s); capturing with Dim.DYNAMIC (the "
                    "conversion warns about each guard the ONNX model does not check)", _first_lines(str(error)))
        guards = relaxed_guards(error, model)
    with _torch_diagnostics_held():
        program = _torch_export(model, args, kwargs, relaxed)
    program.graph_module.meta[RELAXED_GUARDS_KEY] = guards
    return program


_SIZE_OF = re.compile(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]")  # torch's spelling of x.shape[0]
_GENERATED_GUARD = re.compile(r"satisfy the generated guard (?P<guard>.+?)\.?$", re.MULTILINE)


def relaxed_guards(error: BaseException, model: torch.nn.Module) -> list[dict[str, str]]:
    """The guards torch.export named as unprovable in `error`, as dropped checks
    ({"expression", "fx_node", "source"}): the program captured with Dim.DYNAMIC keeps none of
    them, so the exported model accepts sizes that break them. Their source is the model's
    forward (torch does not say which line made each guard)."""
    forward = type(model).forward
    try:
        where = f"{short_path(inspect.getsourcefile(forward) or '')}:{inspect.getsourcelines(forward)[1]}"
    except (OSError, TypeError):
        where = ""
    source = f"{type(model).__name__}.forward" + (f" at {where}" if where else "")
    return [{"expression": _SIZE_OF.sub(r"\1.shape[\2]", match["guard"]), "fx_node": "", "source": source}
            for match in _GENERATED_GUARD.finditer(str(error))]


def _is_unproven_guard(error: BaseException) -> bool:
    """Whether torch.export refused the named dims because a guard on them was not provable."""
    return isinstance(error, torch._dynamo.exc.UserError) and "Constraints violated" in str(error)


def _relaxed_dims(shapes: Any) -> Any:
    """`shapes` with every named Dim replaced by Dim.DYNAMIC; None if there is none to replace."""
    found = False

    def relax(value: Any) -> Any:
        nonlocal found
        if isinstance(value, dict):
            return {key: relax(item) for key, item in value.items()}
        if isinstance(value, (tuple, list)):
            return type(value)(relax(item) for item in value)
        if isinstance(value, torch.export.Dim):  # named Dims are instances of this class
            found = True
            return torch.export.Dim.DYNAMIC
        return value

    relaxed = relax(shapes)
    return relaxed if found else None


@contextmanager
def _torch_diagnostics_held() -> Iterator[None]:
    """Hold what torch writes to stderr while it traces (its log handlers and, on a failed
    capture, a print of the partial FX graph). On success it is written out as it would have
    been; on failure it goes to this module's DEBUG log, since the ExportError says what matters.
    Callers hold CAPTURE_LOCK, so no other capture swaps sys.stderr meanwhile."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    except BaseException:
        if held.getvalue():
            logger.debug("torch's diagnostics of the failed capture:\n%s", held.getvalue())
        raise
    if held.getvalue():
        sys.stderr.write(held.getvalue())


def capture_failure_message(model_name: str, error: BaseException) -> str:
    """What a failed torch.export capture says to the user: torch's summary, the lines of the
    user's code it stopped at (innermost last), and what to do."""
    text = str(error).strip()
    summary = _first_lines(text.split("\n\n", 1)[0], 6)
    frames = user_frames(error)
    where = "".join(f"\n  at {frame}" for frame in frames[-3:]) or "\n  (no line of your code was on the stack)"
    return (
        f"torch.export could not capture {model_name}: {type(error).__name__}: {summary}{where}\n"
        "What to do: make forward() traceable (no data-dependent Python control flow on tensor values: "
        "use torch.where for element-wise choices), or check that dynamic_axes only marks axes the model "
        "really treats as dynamic."
    )


def user_frames(error: BaseException) -> list[str]:
    """`file:line in func: code` for each frame of the user's code in the error, outermost
    first: the traceback's frames, then those torch quotes in its message (outside torch, the
    exporter and code generated at run time)."""
    frames: list[tuple[str, int, str, str]] = [
        (f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in traceback.extract_tb(error.__traceback__)
    ]
    frames += [
        (m["file"], int(m["line"]), m["func"].strip(), m["code"].strip()) for m in _MESSAGE_FRAME.finditer(str(error))
    ]
    seen: set[tuple[str, int]] = set()
    lines = []
    for file, line, func, code in frames:
        if not is_user_file(file) or (file, line) in seen:
            continue
        seen.add((file, line))
        lines.append(f"{short_path(file)}:{line} in {func}" + (f": {code}" if code else ""))
    return lines


@contextmanager
def _capture_hooks(model: torch.nn.Module, keep: frozenset[str]):
    """Enter every registered capture hook (see `exporter.capturing.hooks.capture_hook`)."""
    with ExitStack() as stack:
        for hook in CAPTURE_HOOKS:
            stack.enter_context(hook(model, keep))
        yield


def forward_parameters(model: torch.nn.Module) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []


def _takes_only_var_positional(model: torch.nn.Module) -> bool:
    params = forward_parameters(model)
    return len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL


def _first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count]) + ("\n..." if len(lines) > count else "")
