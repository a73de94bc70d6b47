"""Arrays as the comparisons and backends need them: numpy views of tensors and scalars."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np


def as_array(value: Any) -> np.ndarray:
    """numpy view of a tensor, array or Python scalar (bfloat16 becomes float32, SymInt int64, a
    complex tensor its (..., 2) real pairs: the layout the exporter gives complex values; ml_dtypes'
    bfloat16 and float8 arrays, as onnxruntime and onnx.reference return them, become float32)."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        if tensor.is_complex():
            import torch

            tensor = torch.view_as_real(tensor.resolve_conj())
        return tensor.numpy()
    if isinstance(value, bool):
        return np.asarray(value)
    if isinstance(value, int) or type(value).__name__ == "SymInt":
        return np.asarray(int(value), dtype=np.int64)
    array = np.asarray(value)
    return array.astype(np.float32) if _ml_float(array.dtype) else array


def _ml_float(dtype: np.dtype) -> bool:
    """Whether `dtype` is one of ml_dtypes' float types (bfloat16, the float8 formats)."""
    return dtype.type.__module__ == "ml_dtypes" and "float" in dtype.name


def contiguous(value: Any) -> np.ndarray:
    """A C-contiguous numpy array of `value`, 0-d kept 0-d (np.ascontiguousarray would make it
    1-d); copies only when needed. A numpy array keeps its dtype (a bfloat16 feed stays one)."""
    array = value if isinstance(value, np.ndarray) else as_array(value)  # feeds keep bfloat16 arrays
    return array if array.flags.c_contiguous else np.ascontiguousarray(array).reshape(array.shape)


def flatten_outputs(outputs: Any) -> list[Any]:
    """The leaves of nested tuples, lists and mappings of outputs, in the order torch.export
    flattens them (a mapping's values in insertion order: a dict, or a Hugging Face
    ModelOutput, which holds only its fields that are not None); a lone value is one leaf."""
    if isinstance(outputs, (tuple, list)):
        return [leaf for item in outputs for leaf in flatten_outputs(item)]
    if isinstance(outputs, Mapping):
        return [leaf for item in outputs.values() for leaf in flatten_outputs(item)]
    return [outputs]


LARGEST_BLOCK = 1 << 20
"""Elements `largest_finite` reads at a time."""


def flat_blocks(arrays: tuple[np.ndarray, ...], size: int) -> Iterator[tuple[np.ndarray, ...]]:
    """The arrays (all of one shape, at least 1-d) in flat blocks of at most `size` elements each
    (an innermost row at a time where a row is longer), in C order, the same elements of each: views
    where every array is C-contiguous, else a copy of one block at a time, so that an array
    that is not contiguous (an expanded view, a transposed one) is never copied whole."""
    if all(array.flags.c_contiguous for array in arrays):
        flat = [array.reshape(-1) for array in arrays]
        for start in range(0, flat[0].size, size):
            yield tuple(array[start:start + size] for array in flat)
        return
    first = arrays[0]
    per_index = first[0].size if first.shape[0] else 0
    if first.ndim == 1 or 0 < per_index <= size:
        step = max(size // max(per_index, 1), 1) if first.ndim > 1 else size
        for start in range(0, first.shape[0], step):
            yield tuple(array[start:start + step].reshape(-1) for array in arrays)
        return
    for index in range(first.shape[0] if per_index else 0):
        yield from flat_blocks(tuple(array[index] for array in arrays), size)


def largest_finite(array: np.ndarray) -> float:
    """The largest finite magnitude in a numeric array (0 when it has none), read in blocks
    (`flat_blocks`), so that no array-sized temporary is made."""
    if array.size == 0 or array.dtype.kind not in "biufc":
        return 0.0
    largest = None
    for (block,) in flat_blocks((array.reshape(1) if array.ndim == 0 else array,), LARGEST_BLOCK):
        magnitude = np.abs(block)
        if array.dtype.kind in "fc":
            magnitude = magnitude[np.isfinite(magnitude)]
        if magnitude.size:
            top = magnitude.max()
            largest = top if largest is None else max(largest, top)
    return float(largest) if largest is not None else 0.0
