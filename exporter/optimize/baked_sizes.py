"""Size-dependent values exported as constants: found at export, named by FX node and line.

A value whose shape or content depends on a dynamic axis must be computed in the graph; as an
initializer it holds the traced size's value and the model is wrong (or refused by the runtime)
at every other size. Two ways lead there, and both are found from the captured program's own
metadata, never by matching the traced sizes against the initializers' dims:

- **The capture fixed a size.** Python code turned an expression of the dynamic sizes into an
  int (torchvision's `batch_images`: `int(math.ceil(float(h) / 32) * 32)`). torch.export keeps
  the input's axes symbolic but records a guard `Eq(<expression>, 160)`, and every value
  computed from that int is static in the graph: the padded image, the feature maps, then
  the anchors made with `arange` over the feature maps' sizes. Such a guard is a *fixed
  size*; the nodes it reaches are *baked*: the factories whose sizes hold the fixed value,
  every static-shaped value computed from a baked tensor, and the factories whose sizes
  repeat a baked tensor's dims (shape arithmetic done in Python on a baked shape).
- **A symbolic value was folded.** An FX value whose metadata is symbolic (a SymInt read from
  the input's shape, a tensor whose shape has the input's sizes) became an initializer in
  translation or optimisation: the exporter computed it at the traced size.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import sympy
import torch
import torch.fx

from exporter.capturing.frames import short_path
from exporter.translate.provenance import source_of

# Ops that make a tensor from sizes alone (no tensor input): where a fixed size enters the graph.
_FACTORIES = frozenset({
    "aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.empty.memory_format",
    "aten.arange.default", "aten.arange.start", "aten.arange.start_step", "aten.scalar_tensor.default",
    "aten.new_full.default", "aten.new_zeros.default", "aten.new_ones.default", "aten.new_empty.default",
    "aten.randn.default", "aten.rand.default",
})
_BAKED = "static at the traced size"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_OWNER = re.compile(r"^(?P<node>.+?)(?:__\d+)?(?:::.*|/.*)?$")  # conv2d_3, conv2d_3__1, view_15::Constant_449


@dataclasses.dataclass(frozen=True)
class FixedSize:
    """A size of the dynamic axes the capture turned into a Python int (a ShapeEnv guard)."""

    expression: str  # over the input's size symbols, e.g. TruncToInt(...*ToFloat(s14))
    value: int  # the traced value it was fixed to
    frame: tuple[str, int, str] | None  # (file, line, function) where the code read the size as an int

    def describe(self) -> str:
        return f"{self.expression} read as the int {self.value} at {_frame_text(self.frame)}"


@dataclasses.dataclass(frozen=True)
class BakedConstant:
    """An initializer holding a value that depends on a dynamic axis."""

    initializer: str
    shape: tuple[int, ...]
    fx_node: str
    source: str  # the FX node's line in the user's (or library's) code
    reason: str

    def describe(self) -> str:
        return (f"initializer {self.initializer!r} {list(self.shape)} (FX node {self.fx_node!r}, "
                f"{self.source or 'no source line'}): {self.reason}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def dynamic_symbols(program: torch.export.ExportedProgram) -> set[sympy.Symbol]:
    """The size symbols of the user inputs' axes (backed: torch knows their traced values)."""
    user_inputs = set(program.graph_signature.user_inputs)
    symbols: set[sympy.Symbol] = set()
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            for value in _tensors(node.meta.get("val")):
                for dim in value.shape:
                    if isinstance(dim, torch.SymInt):
                        symbols |= {s for s in dim.node.expr.free_symbols if str(s).startswith("s")}
    return symbols


def fixed_sizes(program: torch.export.ExportedProgram) -> list[FixedSize]:
    """The guards `Eq(<expression of the dynamic sizes>, <int>)` torch recorded while capturing:
    sizes the model's Python code read as ints. A bare symbol fixed to a value (the axis itself
    specialised) is exporter.capturing.specialise's finding, not repeated here."""
    shape_env = _shape_env(program)
    symbols = dynamic_symbols(program)
    if shape_env is None or not symbols:
        return []
    found: dict[tuple[str, int], FixedSize] = {}
    for guard in shape_env.guards:
        expr = guard.expr
        if not isinstance(expr, sympy.Eq):
            continue
        lhs, rhs = expr.args
        constant, expression = (lhs, rhs) if lhs.is_number else (rhs, lhs)
        if not constant.is_number or not constant.is_integer or isinstance(expression, sympy.Symbol):
            continue
        if not expression.free_symbols & symbols:
            continue
        key = (str(expression), int(constant))
        found.setdefault(key, FixedSize(str(expression), int(constant), _guard_frame(guard)))
    return list(found.values())


def size_dependent_nodes(program: torch.export.ExportedProgram,
                         fixed: Sequence[FixedSize] | None = None) -> dict[str, str]:
    """{FX node name: why its value depends on a dynamic axis} over the whole graph: symbolic
    nodes (their metadata says so) and nodes baked by a fixed size (see the module's doc)."""
    symbols = dynamic_symbols(program)
    fixed = fixed_sizes(program) if fixed is None else fixed
    fixed_values = {size.value: size for size in fixed if size.value > 1}
    reasons: dict[str, str] = {}
    roots: dict[str, FixedSize] = {}  # a baked node -> the fixed size it comes from
    baked_dims: dict[int, str] = {}  # a dim (> 1) of a baked tensor -> the first such tensor
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        value = node.meta.get("val")
        symbolic = _symbolic_part(value, symbols)
        if symbolic:
            reasons[node.name] = f"its {symbolic} depends on the input's sizes"
            continue
        if not fixed_values or not _tensors(value) or any(_has_symbols(t) for t in _tensors(value)):
            continue
        baked_inputs = [n.name for n in node.all_input_nodes if n.name in roots]
        sizes = _literal_ints(node) if str(node.target) in _FACTORIES or not node.all_input_nodes else []
        if baked_inputs:
            roots[node.name] = roots[baked_inputs[0]]
        elif any(size in fixed_values for size in sizes):
            roots[node.name] = fixed_values[next(size for size in sizes if size in fixed_values)]
        elif sizes and (after := _made_after(node, fixed)) is not None:
            roots[node.name] = after
        elif any(size in baked_dims for size in sizes):
            roots[node.name] = roots[baked_dims[next(size for size in sizes if size in baked_dims)]]
        else:
            continue
        reasons[node.name] = f"{_BAKED}: {roots[node.name].describe()}"
        for tensor in _tensors(value):
            for dim in tensor.shape:
                if int(dim) > 1:
                    baked_dims.setdefault(int(dim), node.name)
    return reasons


def baked_constants(program: torch.export.ExportedProgram,
                    initializers: Iterable[tuple[str, Sequence[int], np.ndarray | None]],
                    folded: Mapping[str, str] | None = None) -> list[BakedConstant]:
    """The initializers (name, dims, value or None) that hold a size-dependent value, each with
    its FX node: an initializer carries FX node `n`'s value when it is named `n` (`n__k`) or
    listed in `folded` ({initializer: FX node}); one named `n::...` or `n/...` is a constant
    made inside `n`'s translation, baked when `n` is baked and the constant's dims or integer
    content hold one of `n`'s sizes."""
    fixed = fixed_sizes(program)
    reasons = size_dependent_nodes(program, fixed)
    if not reasons:
        return []
    # Constants made inside a symbolic node's translation (an axis, a clamp bound) are no values
    # of the node: only a baked node's may carry its static sizes.
    baked = {name for name, why in reasons.items() if why.startswith(_BAKED)}
    nodes = {node.name: node for node in program.graph.nodes}
    symbols = dynamic_symbols(program)
    found = []
    for name, dims, array in initializers:
        owner = (folded or {}).get(name)
        whole = owner is not None
        if owner is None:
            match = _OWNER.match(name)
            owner = match.group("node") if match else name
            whole = owner == name or re.fullmatch(re.escape(owner) + r"__\d+", name) is not None
        if owner not in reasons or owner not in nodes:
            continue
        if not whole and (owner not in baked or not _holds_any(dims, array, _node_sizes(nodes[owner], symbols))):
            continue
        found.append(BakedConstant(name, tuple(int(d) for d in dims), owner, _source(nodes[owner]), reasons[owner]))
    return found


def _made_after(node: torch.fx.Node, fixed: Sequence[FixedSize]) -> FixedSize | None:
    """The fixed size read in the same function as `node` was made, on an earlier line: the
    factory's sizes may be Python arithmetic on that int."""
    match = _FRAME.search(node.meta.get("stack_trace") or "")
    if match is None:
        return None
    for size in fixed:
        if size.frame is not None and (size.frame[0], size.frame[2]) == (match["file"], match["func"]) \
                and size.frame[1] <= int(match["line"]):
            return size
    return None


def _node_sizes(node: torch.fx.Node, symbols: set[sympy.Symbol]) -> set[int]:
    """The sizes (> 1) of a node's value that depend on the input's sizes: the traced values of
    its symbolic dims or SymInt, or, for a baked (all static) tensor, every dim."""
    value = node.meta.get("val")
    sizes: set[int] = set()
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        hint = value.node.hint
        if hint is not None:
            sizes.add(int(hint))
    for tensor in _tensors(value):
        symbolic = _has_symbols(tensor)
        for dim in tensor.shape:
            if not symbolic:
                sizes.add(int(dim))
            elif isinstance(dim, torch.SymInt) and dim.node.expr.free_symbols & symbols and dim.node.hint is not None:
                sizes.add(int(dim.node.hint))
    return {size for size in sizes if size > 1}


def _holds_any(dims: Sequence[int], array: np.ndarray | None, sizes: set[int]) -> bool:
    if any(int(d) in sizes for d in dims):
        return True
    if array is not None and array.dtype.kind in "iu" and array.size <= 64:
        return bool(set(int(v) for v in array.reshape(-1)) & sizes)
    return False


def _symbolic_part(value: Any, symbols: set[sympy.Symbol]) -> str:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"value {value.node.expr}" if value.node.expr.free_symbols & symbols else ""
    for tensor in _tensors(value):
        for index, dim in enumerate(tensor.shape):
            if isinstance(dim, torch.SymInt) and dim.node.expr.free_symbols & symbols:
                return f"shape {list(tensor.shape)}"
    return ""


def _has_symbols(tensor: torch.Tensor) -> bool:
    return any(isinstance(dim, torch.SymInt) for dim in tensor.shape)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _literal_ints(node: torch.fx.Node) -> list[int]:
    """The int arguments of a node (sizes, ends), nested lists flattened."""
    found: list[int] = []

    def visit(item: Any) -> None:
        if isinstance(item, bool):
            return
        if isinstance(item, int):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            for inner in item:
                visit(inner)

    visit(list(node.args) + list(node.kwargs.values()))
    return found


def _shape_env(program: torch.export.ExportedProgram) -> Any:
    for node in program.graph.nodes:
        for tensor in _tensors(node.meta.get("val")):
            mode = getattr(tensor, "fake_mode", None)
            if mode is not None and mode.shape_env is not None:
                return mode.shape_env
    return None


def _guard_frame(guard: Any) -> tuple[str, int, str] | None:
    """(file, line, function) of the code whose size read made the guard."""
    frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    if frame is None or isinstance(frame, str):
        return None
    return frame.filename, int(frame.lineno or 0), frame.name


def _frame_text(frame: tuple[str, int, str] | None) -> str:
    if frame is None:
        return "an unknown line"
    return f"{short_path(frame[0])}:{frame[1]} in {frame[2]}"


def _source(node: torch.fx.Node) -> str:
    return source_of(node)


def check_initializers(program: torch.export.ExportedProgram, model: ir.Model,
                       folded: Mapping[str, str] | None = None) -> list[BakedConstant]:
    """`baked_constants` over an exported onnx_ir model's initializers (their shapes and arrays)."""
    initializers = [(name, list(tensor.shape), tensor.numpy()) if tensor is not None else (name, list(value.shape or ()), None)
                    for name, value in model.graph.initializers.items() for tensor in (value.const_value,)]
    return baked_constants(program, initializers, folded)


def describe_all(baked: Sequence[BakedConstant], model_name: str) -> str:
    """The warning's (or the strict error's) text: every baked initializer, one per line."""
    lines = "\n".join(f"  - {constant.describe()}" for constant in baked)
    return (f"{model_name}: {len(baked)} initializer(s) hold values that depend on a dynamic axis, computed at "
            f"the traced size (the model is wrong or refused at any other size); compute them in the graph "
            f"from the input's shape (a capture rule for library code, see exporter.capturing.rules):\n{lines}")
