"""Mapping between torch dtypes, numpy dtypes and ONNX element types."""

from __future__ import annotations

import numpy as np
import onnx
import torch

_TORCH_TO_ONNX: dict[torch.dtype, int] = {
    torch.float32: onnx.TensorProto.FLOAT,
    torch.float64: onnx.TensorProto.DOUBLE,
    torch.float16: onnx.TensorProto.FLOAT16,
    torch.bfloat16: onnx.TensorProto.BFLOAT16,
    torch.int64: onnx.TensorProto.INT64,
    torch.int32: onnx.TensorProto.INT32,
    torch.int16: onnx.TensorProto.INT16,
    torch.int8: onnx.TensorProto.INT8,
    torch.uint8: onnx.TensorProto.UINT8,
    torch.bool: onnx.TensorProto.BOOL,
    torch.complex64: onnx.TensorProto.COMPLEX64,
    torch.complex128: onnx.TensorProto.COMPLEX128,
}
_ONNX_TO_TORCH = {v: k for k, v in _TORCH_TO_ONNX.items()}


def onnx_type(dtype: torch.dtype) -> int:
    """ONNX TensorProto element type for a torch dtype."""
    try:
        return _TORCH_TO_ONNX[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ONNX element type") from None


def torch_type(elem_type: int) -> torch.dtype:
    """torch dtype for an ONNX TensorProto element type."""
    return _ONNX_TO_TORCH[elem_type]


def numpy_type(dtype: torch.dtype) -> np.dtype:
    """numpy dtype for a torch dtype (bfloat16 excluded)."""
    return torch.empty((), dtype=dtype).numpy().dtype


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous CPU numpy copy of a tensor, detached."""
    return tensor.detach().cpu().contiguous().numpy()
