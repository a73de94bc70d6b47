"""Arrays as the comparisons and backends need them: numpy views of tensors and scalars."""

from __future__ import annotations

from collections.abc import Mapping
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


def largest_finite(array: np.ndarray) -> float:
    """The largest finite magnitude in a numeric array (0 when it has none)."""
    if array.size == 0 or array.dtype.kind not in "biufc":
        return 0.0
    magnitude = np.abs(array)
    if array.dtype.kind in "fc":
        magnitude = magnitude[np.isfinite(magnitude)]
    return float(magnitude.max()) if magnitude.size else 0.0
