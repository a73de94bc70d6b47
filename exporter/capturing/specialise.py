"""Dynamic axes that the model fixes to one size: exported static, with a warning, not refused.

`dynamic_axes` declares axes dynamic; a model may still fix one of them (`x.view(6, -1)`, an
`if x.shape[0] == 6`, `torch.linspace(0, 1, x.shape[0])`, or an example of size 0 or 1, which
torch.export specialises). torch.export then refuses the whole capture. As torch.onnx does, the
capture is retried with every declared axis as `Dim.AUTO`, which lets torch keep the axes it can
and fix the others; each fixed axis is reported in an ExportWarning naming the input, the axis,
the size, the reason and the line of the user's code that fixed it, and recorded in the model's
`roundtrip.static_axes` metadata, so a verification at other sizes reports "declared dynamic,
exported static" instead of failing on a size the model was never promised to accept.
`strict_dynamic=True` keeps the refusal.

The lines come from torch's ShapeEnv: while the retry runs, each replacement of a size symbol
by a constant is recorded with the stack of the user's code at that moment.
"""

from __future__ import annotations

import logging
import re
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from exporter.capturing.frames import is_user_file, short_path
from exporter.capturing.signature import user_input_nodes
from exporter.contract.keys import FIXED_SIZES_META, SIZE_OBLIVIOUS_KEY, SPECIALISED_META
from exporter.contract.static_axes import FixedSize, SpecialisedAxis
from exporter.errors import ExportWarning

logger = logging.getLogger(__name__)


@dataclass
class Specialisations:
    """What the AUTO retry recorded: the refusal it replaced and the constants sizes became."""

    refusal: str
    constants: list[tuple[str, int, list[str]]] = field(default_factory=list)  # (source, size, user lines)


def is_specialisation(error: BaseException) -> bool:
    """Whether torch.export refused because a dynamic dim was fixed to one size (by the model's
    code, or by an example of size 0 or 1)."""
    text = str(error)
    if isinstance(error, torch._dynamo.exc.UserError) and "Constraints violated" in text:
        return True
    return isinstance(error, ValueError) and "conflicts between user-specified ranges and inferred ranges" in text


def auto_dims(shapes: Any) -> Any:
    """`shapes` with every Dim (named or DYNAMIC) replaced by Dim.AUTO."""
    if isinstance(shapes, dict):
        return {key: auto_dims(item) for key, item in shapes.items()}
    if isinstance(shapes, (tuple, list)):
        return type(shapes)(auto_dims(item) for item in shapes)
    if isinstance(shapes, torch.export.Dim) or shapes is torch.export.Dim.DYNAMIC:
        return torch.export.Dim.AUTO
    return shapes


@contextmanager
def recording_constants() -> Iterator[list[tuple[str, int, list[str]]]]:
    """Record (source, size, user lines) each time torch replaces a size symbol by a constant.
    Callers hold exporter.capturing.trace.CAPTURE_LOCK (the ShapeEnv method is patched for the capture)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    found: list[tuple[str, int, list[str]]] = []
    original = ShapeEnv._set_replacement

    def record(self: ShapeEnv, symbol: Any, target: Any, msg: str) -> None:
        if getattr(target, "is_number", False) and symbol not in self.replacements:
            sources = self.var_to_sources.get(symbol) or []
            name = sources[0].name if sources else str(symbol)
            found.append((name() if callable(name) else str(name), int(target), _user_lines()))
        return original(self, symbol, target, msg)

    ShapeEnv._set_replacement = record
    try:
        yield found
    finally:
        ShapeEnv._set_replacement = original


def _user_lines() -> list[str]:
    """`file:line: code` of the stack's frames outside torch and the exporter, outermost first."""
    lines = []
    for frame in traceback.extract_stack()[:-2]:
        if not is_user_file(frame.filename):
            continue
        lines.append(f"{short_path(frame.filename)}:{frame.lineno}" + (f": {frame.line.strip()}" if frame.line else ""))
    return lines[-3:]


def specialised_axes(program: torch.export.ExportedProgram, names: Sequence[str],
                     dynamic_axes: Mapping[str, Mapping[int, str]]) -> list[SpecialisedAxis]:
    """The axes `dynamic_axes` declares that `program` holds as constants, with the reason and
    lines its capture recorded (`SPECIALISED_META`); `names[i]` names the i-th user input."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    recorded: Specialisations | None = program.graph_module.meta.get(SPECIALISED_META)
    oblivious = program.graph_module.meta.get(SIZE_OBLIVIOUS_KEY)  # True, or why it was refused
    out = []
    for name, node in zip(names, user_input_nodes(program)):
        val = node.meta.get("val")
        if name not in dynamic_axes or not isinstance(val, torch.Tensor):
            continue
        for axis, dim_name in dynamic_axes[name].items():
            size = val.shape[axis]
            if is_concrete_int(size):  # an int, or a SymInt torch replaced by a constant
                size = int(size)
                reason, lines = _why(recorded, name, axis % val.dim(), size, oblivious)
                out.append(SpecialisedAxis(name, axis, dim_name, size, reason, lines))
    return out


def _why(recorded: Specialisations | None, name: str, axis: int, size: int,
         oblivious: Any = None) -> tuple[str, list[str]]:
    """The reason an axis became `size`, and the user's lines that made it so. An example of
    size 0 or 1 is the reason only where no size-oblivious capture was tried (which keeps such
    an axis dynamic unless the model's code fixes it; its refusal then says where)."""
    if size in (0, 1) and hasattr(oblivious, "reason"):
        return f"the model's code requires size {size} (torch: {oblivious.reason})", list(oblivious.lines)
    if size in (0, 1) and not oblivious:
        return (f"torch.export specialises sizes 0 and 1, and the example's size is {size}; export with an "
                "example of size 2 or more to keep the axis dynamic"), []
    refusal = first_line(recorded.refusal) if recorded else "torch.export fixed it"
    candidates = [(source, lines) for source, constant, lines in (recorded.constants if recorded else [])
                  if constant == size and source.endswith(f".size()[{axis}]")]
    named = [c for c in candidates if f"['{name}']" in c[0]] or candidates
    return f"the model's code requires size {size} (torch: {refusal})", (named[0][1] if named else [])


def first_line(text: str) -> str:
    """torch's refusal in one line: its first "- " item (the violated guard), else its first line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip().startswith("- ")]
    line = lines[0][2:] if lines else text.strip().splitlines()[0] if text.strip() else ""
    return line.split(". If you", 1)[0][:300]


def warn_specialised(axes: Sequence[SpecialisedAxis], model_name: str) -> None:
    """One ExportWarning per fixed axis, as torch.onnx warns: the axis, the reason, the line."""
    for axis in axes:
        message = f"{model_name}: {axis.describe()}"
        logger.info("%s", message)
        warnings.warn(message, ExportWarning, stacklevel=4)


_SOURCE_SIZE = re.compile(r"L\['(\w+)'\]((?:\[\d+\])*)\.size\(\)\[(\d+)\]")  # L['x'].size()[0]
_LONG_FLOAT = re.compile(r"\b(\d+\.\d*?)0{4,}\b")  # 0.75000000000000000 -> 0.75


@contextmanager
def recording_fixed_sizes() -> Iterator[list[tuple[Any, int, list[str]]]]:
    """Record (expression, value, user lines) each time the trace turns a size computed from
    dynamic sizes into a Python int (`int(h * 0.5)`), unless the size is the same for every
    input size. Callers hold exporter.capturing.trace.CAPTURE_LOCK (SymNode is patched)."""
    from torch.fx.experimental.sym_node import SymNode
    from torch.fx.experimental.symbolic_shapes import uninteresting_files

    found: list[tuple[Any, int, list[str]]] = []
    original = SymNode.guard_int
    # torch records a guard's location as the first frame outside its own files: keep the wrapper
    # below out of it too, so the guard names the user's line, not this module's
    skipped = uninteresting_files()
    added = __file__ not in skipped

    def record(self: SymNode, file: str, line: int) -> int:
        expr, env = self.expr, self.shape_env
        varies = (env is not None and getattr(expr, "free_symbols", None) and not expr.is_Symbol
                  and env._maybe_evaluate_static(expr) is None)
        value = original(self, file, line)
        if varies:
            found.append((_in_input_terms(env, expr), int(value), _user_lines()))
        return value

    SymNode.guard_int = record
    if added:
        skipped.add(__file__)
    try:
        yield found
    finally:
        SymNode.guard_int = original
        if added:
            skipped.discard(__file__)


def _in_input_terms(env: Any, expr: Any) -> str:
    """`expr` as Python over the inputs' sizes: math.trunc(0.75*torch.sym_float(x.shape[0]))."""
    from torch.utils._sympy.printers import PythonPrinter

    text = PythonPrinter().doprint(expr)
    for symbol in sorted(expr.free_symbols, key=lambda s: -len(str(s))):
        sources = env.var_to_sources.get(symbol) or []
        if sources:
            name = _SOURCE_SIZE.sub(lambda m: f"{m[1]}{m[2]}.shape[{m[3]}]", sources[0].name)
            text = re.sub(rf"\b{re.escape(str(symbol))}\b", name, text)
    return _LONG_FLOAT.sub(r"\1", text)


def fixed_sizes(program: torch.export.ExportedProgram) -> list[FixedSize]:
    """The sizes the program's trace fixed (recorded by `recording_fixed_sizes`), one per
    expression and value, with the user's lines."""
    seen: dict[tuple[str, int], FixedSize] = {}
    for expression, size, lines in program.graph_module.meta.get(FIXED_SIZES_META, []):
        seen.setdefault((expression, size), FixedSize(expression, size, lines))
    return list(seen.values())


def warn_fixed_sizes(sizes: Sequence[FixedSize], model_name: str) -> None:
    """One ExportWarning per size the export fixed: the expression, the constant, the line."""
    for size in sizes:
        message = f"{model_name}: {size.describe()}"
        logger.info("%s", message)
        warnings.warn(message, ExportWarning, stacklevel=4)
