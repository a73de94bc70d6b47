"""Small building blocks shared by the symbolic functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx

from exporter.translate.graph import Graph, Value


def cast_to(g: Graph, value: Any, dtype: torch.dtype | None) -> Any:
    """`value` as `dtype`: a Cast for a Value of another dtype, a Constant for a Python number."""
    if dtype is None:
        return value
    if isinstance(value, Value):
        if value.dtype == dtype:
            return value
        from exporter.translate.dtypes import onnx_type

        out = g.op("Cast", value, to_i=onnx_type(dtype))
        out.dtype, out.shape = dtype, value.shape
        return out
    if isinstance(value, (bool, int, float)):
        return g.constant(value, dtype)
    return value


def widened(g: Graph, value: Value, wider: Mapping[torch.dtype, torch.dtype], dtype: torch.dtype | None = None) -> Value:
    """`value` (of `dtype`, by default its own) in the type `wider` maps that dtype to, or itself:
    a lossless widening to a type onnxruntime has the op's kernel for."""
    return cast_to(g, value, wider.get(dtype or value.dtype))


def narrowed(g: Graph, result: Value, dtype: torch.dtype, wider: Mapping[torch.dtype, torch.dtype]) -> Value:
    """An op's `result` computed on `widened(g, x, wider)`, back in x's `dtype`."""
    if dtype not in wider:
        return result
    from exporter.translate.dtypes import onnx_type

    return g.op("Cast", result, to_i=onnx_type(dtype))


def promote(g: Graph, *values: Any, dtype: torch.dtype | None = None) -> list[Any]:
    """Bring every operand to the node's result dtype (torch's promotion already decided it)."""
    dtype = dtype or g.ctx.output_dtype
    return [cast_to(g, v, dtype) for v in values]


def int64_vector(g: Graph, items: Sequence[Any]) -> Value:
    """A 1-D int64 value from ints and scalar (0-d) or 1-D int64 Values, e.g. a shape list."""
    if all(isinstance(i, int) for i in items):
        return g.constant(list(items), torch.int64)
    pieces: list[Value] = []
    run: list[int] = []
    for item in items:
        if isinstance(item, int):
            run.append(item)
            continue
        if run:
            pieces.append(g.constant(run, torch.int64))
            run = []
        item = cast_to(g, item, torch.int64)
        if item.rank == 0 or item.rank is None:
            item = g.op("Reshape", item, g.constant([1], torch.int64))
        pieces.append(item)
    if run:
        pieces.append(g.constant(run, torch.int64))
    return pieces[0] if len(pieces) == 1 else g.op("Concat", *pieces, axis_i=0)


def static_ints(items: Sequence[Any], what: str) -> list[int]:
    """The list as Python ints; raise naming `what` when an entry is only known at run time."""
    out = []
    for item in items:
        if not isinstance(item, int):
            raise ValueError(f"{what} must be static integers here, got {item!r}")
        out.append(int(item))
    return out


def expand_list(value: Any, length: int) -> list[int]:
    """`value` given as an int or a shorter list, broadcast to `length` entries."""
    if isinstance(value, int):
        return [value] * length
    value = list(value)
    if len(value) == 1:
        return value * length
    return value


def output_used(g: Graph, index: int) -> bool:
    """Whether anything reads output `index` of the multi-output node being translated."""
    return any(user.args[1] == index for user in g.ctx.node.users if len(user.args) > 1)


def rank_of(value: Value) -> int:
    if value.rank is None:
        raise ValueError(f"the rank of {value.name} is unknown")
    return value.rank


# -- operand metadata -----------------------------------------------------------------------

INT64_MAX = 9223372036854775807


def arg_meta(g: Graph, index: int) -> Any:
    """The FX node's `index`-th argument as torch saw it: a FakeTensor, or the Python scalar."""
    arg = g.ctx.node.args[index] if index < len(g.ctx.node.args) else None
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def result_type(g: Graph, first: int, second: int) -> torch.dtype:
    """torch's promoted dtype of the FX node's arguments `first` and `second`: what it computes
    in. Comparisons return bool but compare in this dtype; 0-d tensors and Python scalars take
    part in promotion the way torch lets them (`first` is the node's tensor operand)."""
    return torch.result_type(_promotion_operand(arg_meta(g, first)), _promotion_operand(arg_meta(g, second)))


def _promotion_operand(meta: Any) -> Any:
    """A stand-in with the dtype and 0-d-ness that promotion reads (SymInts act as numbers)."""
    if isinstance(meta, torch.Tensor):
        return torch.empty(() if meta.dim() == 0 else (1,), dtype=meta.dtype)
    if isinstance(meta, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {torch.SymInt: 1, torch.SymFloat: 1.0, torch.SymBool: True}[type(meta)]
    return meta


# -- shapes and axes ------------------------------------------------------------------------


def normalize_dim(dim: int, rank: int) -> int:
    """`dim` in [0, rank); torch's negative dims count from the end."""
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"dim {dim} is out of range for rank {rank}")
    return dim % max(rank, 1)


def dim_size(g: Graph, value: Value, dim: int) -> int | Value:
    """Size of `dim`: a Python int when static, else a 1-D int64 Value read with Shape."""
    size = value.shape[dim] if value.shape is not None else None
    if isinstance(size, int):
        return size
    dim = normalize_dim(dim, rank_of(value))
    return g.op("Shape", value, start_i=dim, end_i=dim + 1)


def unsqueeze(g: Graph, value: Value, axes: Sequence[int]) -> Value:
    return g.op("Unsqueeze", value, g.constant(list(axes), torch.int64))


def squeeze(g: Graph, value: Value, axes: Sequence[int]) -> Value:
    return g.op("Squeeze", value, g.constant(list(axes), torch.int64))


def scalar_of(g: Graph, value: Any, dtype: torch.dtype) -> Value:
    """A 0-d Value of `dtype` from a Python number or a (0-d or 1-element) Value."""
    if isinstance(value, Value):
        value = cast_to(g, value, dtype)
        return value if value.rank == 0 else g.op("Reshape", value, g.constant([], torch.int64))
    return g.constant(value, dtype)


# -- opset-dependent signatures, decided in one place -----------------------------------------

# Reduce* ops take `axes` as an input from these opsets on (an attribute before).
AXES_INPUT_SINCE = {
    "ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18, "ReduceProd": 18,
    "ReduceL1": 18, "ReduceL2": 18, "ReduceLogSumExp": 18, "ReduceSumSquare": 18,
}


def reduce(g: Graph, op_type: str, value: Value, axes: Sequence[int] | None, keepdims: bool) -> Value:
    """`op_type` over `axes` (None: every axis), with the axes spelled as this opset wants them."""
    if axes is None:
        return g.op(op_type, value, keepdims_i=int(keepdims))
    if g.opset_version >= AXES_INPUT_SINCE[op_type]:
        return g.op(op_type, value, g.constant(list(axes), torch.int64), keepdims_i=int(keepdims))
    return g.op(op_type, value, axes_i=list(axes), keepdims_i=int(keepdims))


def emits_no_nodes(fn: Any) -> Any:
    """Mark a symbolic that translates to no ONNX node (a check torch.export already proved).

    Tests use the mark: such a target shows in the FX graph but never in node provenance.
    """
    fn.emits_no_nodes = True
    return fn


def read_by_checks(fn: Any) -> Any:
    """Mark a symbolic whose value only runtime checks read (SymInt comparisons feeding
    `_assert_scalar`): the checks are not emitted (exporter.translate.symbolics.shape.assert_scalar), so
    its nodes are dead code the export removes. Tests use the mark as `emits_no_nodes`'s."""
    fn.read_by_checks = True
    return fn


def register_from_schema(targets: Sequence[str], fn: Any, *, name: str, note: str, since: int | None = None) -> None:
    """Register `fn` for `targets` (from opset `since`) as the symbolic `name`, its docstring the
    first target's ATen schema line followed by `note`: the symbolics a table makes, one function
    each, as the decorator would register them."""
    from exporter.translate.registry import normalize_target, symbolic

    namespace, op, overload = normalize_target(targets[0]).split(".")
    schema = str(getattr(getattr(getattr(torch.ops, namespace), op), overload)._schema)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{schema.removeprefix(namespace + '::')}\n\n{note}"
    symbolic(*targets, since=since)(fn)


def register_one_node_unaries(table: Mapping[str, str]) -> None:
    """Register, for each overload `aten::op` of `table`, the symbolic emitting its ONNX op
    (`table[target]`) on the input promoted as torch promotes it: the elementwise ops that are
    one ONNX node. Each symbolic's docstring is the overload's ATen schema line."""
    for target, onnx_op in table.items():
        def one_node(g: Graph, self: Value, onnx_op: str = onnx_op) -> Value:
            (self,) = promote(g, self)
            return g.op(onnx_op, self)

        register_from_schema([target], one_node, name=target.split("::")[-1].split(".")[0],
                             note=f"ONNX {onnx_op} of the promoted input.")
