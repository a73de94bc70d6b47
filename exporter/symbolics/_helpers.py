"""Small building blocks shared by the symbolic functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from exporter.graph import Graph, Value


def cast_to(g: Graph, value: Any, dtype: torch.dtype | None) -> Any:
    """`value` as `dtype`: a Cast for a Value of another dtype, a Constant for a Python number."""
    if dtype is None:
        return value
    if isinstance(value, Value):
        if value.dtype == dtype:
            return value
        from exporter.dtypes import onnx_type

        out = g.op("Cast", value, to_i=onnx_type(dtype))
        out.dtype, out.shape = dtype, value.shape
        return out
    if isinstance(value, (bool, int, float)):
        return g.constant(value, dtype)
    return value


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


def rank_of(value: Value) -> int:
    if value.rank is None:
        raise ValueError(f"the rank of {value.name} is unknown")
    return value.rank
