"""Sizes the export froze, read back at a sweep's size: "exported static", not a failure there.

An export records what it had to fix: declared dynamic axes held static (`roundtrip.static_axes`)
and sizes computed from dynamic ones that torch.export turned into constants
(`roundtrip.static_sizes`, each an expression over the inputs' sizes such as
`math.trunc(0.75*torch.sym_float(x.shape[0]))`, its traced value and the user's line). At a size
where such an axis or expression takes another value, the model was never promised to hold:
`frozen_at` names each one, and the sweep reports the size as exported static.

The expressions come from a model file, so they are evaluated by a small interpreter that knows
numbers, arithmetic, `.shape[i]` of the inputs and the few functions torch's printer writes;
nothing else (no eval).
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from exporter.contract.static_axes import SpecialisedAxis, static_axes_of, static_sizes_of

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
# the functions torch's PythonPrinter writes for size expressions, by their printed name
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "math.floor": math.floor, "math.ceil": math.ceil, "math.trunc": math.trunc, "math.sqrt": math.sqrt,
    "torch.sym_float": float, "torch.sym_int": int, "torch.sym_min": min, "torch.sym_max": max,
    "torch.sym_sqrt": math.sqrt, "int": int, "float": float, "min": min, "max": max, "abs": abs, "round": round,
}


class UnknownExpression(ValueError):
    """An expression this interpreter does not evaluate (a form it does not know, or a name
    that is not an input)."""


def evaluate_size(expression: str, inputs: Mapping[str, Any]) -> Any:
    """The value of a recorded size expression with `inputs` ({forward parameter name: value};
    tensors, arrays, or lists and tuples of them) bound to its names."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise UnknownExpression(f"not an expression: {expression!r}") from error
    return _value(tree.body, inputs)


def _value(node: ast.AST, inputs: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, inputs), _value(node.right, inputs))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, inputs))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_value(node.left, inputs), _value(node.comparators[0], inputs))
    if isinstance(node, ast.Call) and not node.keywords:
        function = _FUNCTIONS.get(ast.unparse(node.func))
        if function is None:
            raise UnknownExpression(f"unknown function {ast.unparse(node.func)!r}")
        return function(*(_value(argument, inputs) for argument in node.args))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return int(_input(node.value.value, inputs).shape[node.slice.value])
    raise UnknownExpression(f"cannot evaluate {ast.unparse(node)!r}")


def _input(node: ast.AST, inputs: Mapping[str, Any]) -> Any:
    """An input (or an item of a nested input) named in the expression: `x`, `x[0]`."""
    if isinstance(node, ast.Name):
        if node.id not in inputs:
            raise UnknownExpression(f"{node.id!r} is not an input (inputs: {sorted(inputs)})")
        return inputs[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return _input(node.value, inputs)[node.slice.value]
    raise UnknownExpression(f"cannot read an input from {ast.unparse(node)!r}")


def bound_inputs(module: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """{forward parameter name: value} for `args` and `kwargs` (the names torch.export gives the
    inputs in its size expressions); {} when forward's signature cannot bind them."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **dict(kwargs or {}))
    except (TypeError, ValueError):
        return {}
    return dict(bound.arguments)


def frozen_at(model: Any, feeds: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[str]:
    """What the export froze that these inputs change, one line each ("exported static: ...");
    [] when nothing frozen differs here. `feeds`: the ONNX model's inputs by name; `inputs`:
    the module's inputs by forward's parameter names (for the size expressions)."""
    lines = []
    for entry in static_axes_of(model):
        value = feeds.get(entry["input"])
        shape = tuple(getattr(value, "shape", ()))
        if shape and shape[entry["axis"] % len(shape)] != entry["size"]:
            lines.append(f"exported static: {SpecialisedAxis(**entry).describe()}; "
                         f"here it is {shape[entry['axis'] % len(shape)]}")
    for entry in static_sizes_of(model):
        try:
            value = evaluate_size(entry["expression"], inputs)
        except (UnknownExpression, ArithmeticError, IndexError, TypeError, KeyError):
            continue  # an expression that cannot be read here names no frozen size
        if value != entry["size"]:
            where = f" at {entry['source'][-1]}" if entry.get("source") else ""
            lines.append(f"exported static: the size {entry['expression']} was fixed to {entry['size']} (its value "
                         f"at the traced shapes){where}; here it is {value}")
    return lines
