"""The axes a shape sweep varies, read from the captured program (or, without one, the ONNX model).

With an ExportedProgram, every size symbol in a user input's shape is one axis (dims that torch
proved equal share a symbol, so they move together; a dim that is an expression of symbols,
`2*s0`, follows them). Its range is the program's range constraint on the symbol, narrowed by the
range the caller declares for the axis; its guards are the conditions torch.export recorded on
the symbol while tracing (the ShapeEnv's guards and deferred runtime asserts), each located by
evaluating it at every size of the range: where its truth changes, there is a guard side.

torch.export gives every backed dynamic size a lower bound of 2 (it specialises sizes 0 and 1
and assumes neither can occur): that bound is torch's assumption, not the model's guard, so a
declared range that starts lower is swept from its own start.

Without a program (a TorchScript export, an ONNX file) every named ONNX dimension (dim_param) of
the inputs is an axis, ranged by the declared range alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import onnx

from harness.shapes.selection import Axis, Guard

logger = logging.getLogger(__name__)

TORCH_ASSUMED_LOWER = 2  # torch.export's lower bound for a backed dynamic size (0/1 specialisation)
GUARD_SCAN_LIMIT = 4096  # sizes a guard is evaluated at, from the range's start (an unbounded range stops here)

AxisRanges = Mapping[str, tuple[int, int]]


@dataclass
class SweepAxes:
    """The axes of one model and how each input's shape follows them.

    `shapes[i][d]`: input i's dim d, an int (static) or a function of {axis name: size}.
    `fixed`: declared dynamic axes the model holds static (they are not swept), one line each.
    """

    axes: list[Axis]
    shapes: list[list[int | Callable[[Mapping[str, int]], int]]]
    fixed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def shape_at(self, index: int, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """Input `index`'s shape at the point `sizes`."""
        return tuple(dim if isinstance(dim, int) else dim(sizes) for dim in self.shapes[index])

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": [{"name": a.name, "traced": a.traced, "lower": a.bottom, "upper": a.upper,
                      "guards": [{"expression": g.expression, "between": [g.size, g.size + 1]} for g in a.guards]}
                     for a in self.axes],
            "fixed": list(self.fixed), "notes": list(self.notes),
        }


def read_axes(program: Any, onnx_model: onnx.ModelProto, leaves: Sequence[Any], *,
              input_names: Sequence[str], declared: Mapping[str, Mapping[int, str]] | None = None,
              ranges: AxisRanges | None = None) -> SweepAxes:
    """The sweep's axes for a model whose user inputs (flattened) are `leaves`, named
    `input_names` (the ONNX model's real inputs); `declared`: the dynamic axes the caller
    declared ({input name: {dim: axis name}}), `ranges`: {axis name: (lowest, highest)}."""
    declared = {name: dict(axes) for name, axes in (declared or {}).items()}
    ranges = dict(ranges or {})
    result = (_from_program(program, onnx_model, leaves, input_names, declared, ranges) if program is not None
              else _from_onnx(onnx_model, leaves, input_names, ranges))
    unknown = sorted(set(ranges) - {axis.name for axis in result.axes})
    if unknown:
        result.notes.append(f"ranges given for {unknown}, which are not dynamic axes of the model "
                            f"(its axes: {[a.name for a in result.axes] or 'none'})")
    return result


def _onnx_dims(onnx_model: onnx.ModelProto, input_names: Sequence[str]) -> dict[str, list[int | str | None]]:
    dims: dict[str, list[int | str | None]] = {}
    for value in onnx_model.graph.input:
        if value.name in input_names:
            dims[value.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                for d in value.type.tensor_type.shape.dim]
    return dims


def _from_onnx(onnx_model: onnx.ModelProto, leaves: Sequence[Any], input_names: Sequence[str],
               ranges: AxisRanges) -> SweepAxes:
    onnx_dims = _onnx_dims(onnx_model, input_names)
    axes: dict[str, Axis] = {}
    shapes: list[list[Any]] = []
    for name, leaf in zip(input_names, leaves):
        shape = []
        for index, dim in enumerate(onnx_dims.get(name, [])):
            if isinstance(dim, str):
                traced = int(leaf.shape[index])
                if dim not in axes:
                    lower, upper = ranges.get(dim, (TORCH_ASSUMED_LOWER, None))
                    axes[dim] = Axis(dim, traced, lower, upper)
                shape.append(lambda sizes, dim=dim: sizes[dim])
            else:
                shape.append(int(leaf.shape[index]))
        shapes.append(shape)
    notes = [] if axes else ["the model's inputs have no named dimension: nothing to sweep"]
    return SweepAxes(list(axes.values()), shapes, notes=notes)


def _user_placeholders(program: Any) -> list[Any]:
    from torch.export.graph_signature import InputKind

    user = {spec.arg.name for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT}
    return [node for node in program.graph.nodes if node.op == "placeholder" and node.name in user]


def _from_program(program: Any, onnx_model: onnx.ModelProto, leaves: Sequence[Any], input_names: Sequence[str],
                  declared: dict[str, dict[int, str]], ranges: AxisRanges) -> SweepAxes:
    import sympy

    onnx_dims = _onnx_dims(onnx_model, input_names)
    names: dict[Any, list[str]] = {}  # symbol -> the axis names its dims carry
    traced: dict[Any, int] = {}
    expressions: list[list[Any]] = []
    fixed: list[str] = []
    for name, node, leaf in zip(input_names, _user_placeholders(program), leaves):
        value = node.meta.get("val")
        shape = getattr(value, "shape", None)
        if shape is None:
            expressions.append([])
            continue
        row = []
        for index, dim in enumerate(shape):
            expr = dim.node.expr if hasattr(dim, "node") else sympy.Integer(int(dim))
            row.append(expr)
            wanted = declared.get(name, {}).get(index) or declared.get(name, {}).get(index - len(shape))
            if expr.is_number:
                if wanted is not None:
                    fixed.append(f"{name!r} axis {index} ({wanted!r}) is declared dynamic but the model holds it "
                                 f"static at {int(expr)}: not swept")
                continue
            onnx_name = (onnx_dims.get(name) or [None] * len(shape))[index] if index < len(onnx_dims.get(name, [])) else None
            label = wanted or (onnx_name if isinstance(onnx_name, str) else None)
            if isinstance(expr, sympy.Symbol):
                names.setdefault(expr, [])
                if label and label not in names[expr]:
                    names[expr].append(label)
                traced.setdefault(expr, int(leaf.shape[index]))
        expressions.append(row)
    for row in expressions:  # symbols that only appear inside expressions (2*s0) still need a traced size
        for expr in row:
            for symbol in getattr(expr, "free_symbols", ()):
                if symbol not in traced:
                    raise ValueError(f"the program's input size {expr} uses {symbol}, which no input dim is alone")
    axis_name = {symbol: "=".join(labels) if labels else str(symbol) for symbol, labels in names.items()}
    constraints = getattr(program, "range_constraints", {}) or {}
    guards = _guards_by_symbol(program, traced)
    axes, notes = [], []
    for symbol, name in axis_name.items():
        lower, upper = _program_range(constraints.get(symbol))
        lower, upper = _narrowed(name, lower, upper, ranges.get(name), notes)
        axis = Axis(name, traced[symbol], lower, upper)
        located = tuple(Guard(text, size) for text, size in _locate(guards.get(symbol, []), symbol, traced, axis,
                                                                    axis_name))
        axes.append(Axis(name, traced[symbol], lower, upper, located))
    shapes = [[int(expr) if expr.is_number else _evaluator(expr, axis_name) for expr in row] for row in expressions]
    return SweepAxes(axes, shapes, fixed, notes)


def _evaluator(expr: Any, axis_name: Mapping[Any, str]) -> Callable[[Mapping[str, int]], int]:
    import sympy

    def evaluate(sizes: Mapping[str, int]) -> int:
        return int(expr.xreplace({symbol: sympy.Integer(sizes[axis_name[symbol]]) for symbol in expr.free_symbols}))

    return evaluate


def _program_range(bounds: Any) -> tuple[int, int | None]:
    if bounds is None:
        return TORCH_ASSUMED_LOWER, None
    return _finite(bounds.lower) or 0, _finite(bounds.upper)


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for torch's int_oo (and sympy's oo)."""
    from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity

    if isinstance(bound, (IntInfinity, NegativeIntInfinity)) or not bound.is_integer:
        return None
    return int(bound)


def _narrowed(name: str, lower: int, upper: int | None, declared: tuple[int, int] | None,
              notes: list[str]) -> tuple[int, int | None]:
    """The program's range, narrowed by the declared one; a declared lower bound below torch's
    assumed 2 is kept (torch assumes, the model did not guard)."""
    if declared is None:
        return lower, upper
    low, high = int(declared[0]), int(declared[1])
    if high < low:
        raise ValueError(f"the range declared for {name!r}, [{low}, {high}], is empty")
    start = low if lower == TORCH_ASSUMED_LOWER and low < lower else max(low, lower)
    stop = high if upper is None else min(high, upper)
    if start > low or stop < high:
        notes.append(f"{name}: declared [{low}, {high}], the program guards [{lower}, "
                     f"{upper if upper is not None else 'unbounded'}]; swept [{start}, {stop}]")
    if stop < start:
        raise ValueError(f"{name}: the declared range [{low}, {high}] and the program's [{lower}, {upper}] do not meet")
    return start, stop


def _guards_by_symbol(program: Any, traced: Mapping[Any, int]) -> dict[Any, list[Any]]:
    """{symbol: [guard expression]} from the ShapeEnv the program was traced with."""
    env = None
    for node in _user_placeholders(program):
        mode = getattr(node.meta.get("val"), "fake_mode", None)
        if mode is not None and getattr(mode, "shape_env", None) is not None:
            env = mode.shape_env
            break
    if env is None:
        return {}
    expressions = [guard.expr for guard in getattr(env, "guards", [])]
    for asserts in getattr(env, "deferred_runtime_asserts", {}).values():
        expressions += [entry.expr for entry in asserts]
    found: dict[Any, list[Any]] = {}
    for expr in expressions:
        for symbol in getattr(expr, "free_symbols", ()):
            if symbol in traced and expr not in found.setdefault(symbol, []):
                found[symbol].append(expr)
    return found


def _locate(guards: Sequence[Any], symbol: Any, traced: Mapping[Any, int], axis: Axis,
            axis_name: Mapping[Any, str]) -> list[tuple[str, int]]:
    """(guard text, k) for every k in the axis's range where a guard's truth differs between k and
    k + 1, the other symbols at their traced sizes."""
    import sympy

    stop = min(axis.top, axis.bottom + GUARD_SCAN_LIMIT)
    located: list[tuple[str, int]] = []
    for expr in guards:
        others = {s: sympy.Integer(traced[s]) for s in expr.free_symbols if s != symbol and s in traced}
        if len(others) + 1 != len(expr.free_symbols):
            continue  # a guard on sizes that are not inputs' (unbacked values)
        univariate = expr.xreplace(others)
        evaluate = _compiled(univariate, symbol)
        previous = None
        for size in range(axis.bottom, stop + 1):
            value = evaluate(size)
            if value is None:
                break
            if previous is not None and value != previous:
                located.append((_text(expr, axis_name), size - 1))
            previous = value
    return located


def _compiled(expr: Any, symbol: Any) -> Callable[[int], bool | None]:
    """`size -> expr's truth at symbol = size` (None where it is not a truth value). The guard is
    printed once as Python by torch's printer and compiled (thousands of sympy substitutions
    would cost seconds per sweep); an expression the printer cannot write is substituted."""
    import math
    import types

    import sympy
    from torch.utils._sympy.printers import PythonPrinter

    try:
        code = compile(f"lambda {symbol}: ({PythonPrinter().doprint(expr)})", "<guard>", "eval")
        sym = types.SimpleNamespace(sym_float=float, sym_int=int, sym_min=min, sym_max=max, sym_sqrt=math.sqrt)
        function = eval(code, {"math": math, "torch": sym, "__builtins__": {
            "min": min, "max": max, "abs": abs, "int": int, "float": float, "bool": bool}})
    except Exception:  # a form the printer does not write as Python: substitute
        return lambda size: _truth(expr.xreplace({symbol: sympy.Integer(size)}))

    def truth(size: int) -> bool | None:
        try:
            value = function(size)
        except Exception:  # a name or form the compiled guard lacks: substitute instead
            return _truth(expr.xreplace({symbol: sympy.Integer(size)}))
        return _truth(value)

    return truth


def _truth(value: Any) -> bool | None:
    try:
        return bool(value)
    except TypeError:  # not decidable at a number: not a size guard
        return None


def _text(expr: Any, axis_name: Mapping[Any, str]) -> str:
    """The guard with the axes' names for the symbols ('Ne(((height - 1)//32) + 1, 1)')."""
    import sympy

    return str(expr.xreplace({s: sympy.Symbol(axis_name[s]) for s in expr.free_symbols if s in axis_name}))
