"""The float dtype a verification runs in: names, and casting a module and its inputs to it.

`harness.verify(..., dtype=torch.float16)`, `roundtrip run/verify --dtype` and the pytest
plugin's `--roundtrip-dtype` / `@pytest.mark.roundtrip(dtype=...)` all go through
`cast_for_dtype`: a copy of the module with its floating parameters and buffers cast (the
user's module is left as it is), and the floating tensors of the inputs cast; integer and
boolean tensors (token ids, masks) keep their dtype.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
"""The dtypes a run may be asked for, by the name the CLI, the plugin and the reports use."""


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """The torch dtype for `dtype` ("float16", "torch.bfloat16" or a torch dtype), one of DTYPES."""
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ValueError(f"dtype={dtype}: verification runs in one of {', '.join(DTYPES)}")
        return dtype
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    """"float16" for torch.float16."""
    return str(dtype).removeprefix("torch.")


def cast_for_dtype(module: torch.nn.Module, args: Any, kwargs: Mapping[str, Any] | None,
                   dtype: str | torch.dtype) -> tuple[torch.nn.Module, Any, dict[str, Any] | None]:
    """A copy of `module` in `dtype` with `args` and `kwargs` cast to match (see the module
    docstring); `module` itself is not changed."""
    target = parse_dtype(dtype)
    cast = copy.deepcopy(module).to(target)
    args, kwargs = cast_inputs((args, kwargs), target)
    return cast, args, kwargs


def cast_inputs(inputs: Any, dtype: str | torch.dtype) -> Any:
    """`inputs` (any pytree) with every floating-point tensor cast to `dtype`."""
    target = parse_dtype(dtype)
    return pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(target) if t.is_floating_point() else t, inputs)


def run_dtype(module: torch.nn.Module | None, args: Any) -> str:
    """The dtype a module runs in, for the record: its first floating parameter's, else its
    first floating input's, else "float32"."""
    tensors = list(module.parameters()) if module is not None else []
    tensors += [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
    for tensor in tensors:
        if tensor.is_floating_point():
            return dtype_name(tensor.dtype)
    return "float32"


def value_dtypes(program: torch.export.ExportedProgram | None) -> list[str]:
    """The floating dtypes of the program's values, sorted: more than one for a module with
    autocast regions or explicit casts (mixed precision)."""
    if program is None:
        return []
    found = set()
    for node in program.graph.nodes:
        for value in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                found.add(dtype_name(value.dtype))
    return sorted(found)
