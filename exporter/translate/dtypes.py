"""Mapping between torch dtypes, numpy dtypes and ONNX element types.

bfloat16 and the float8 formats have no numpy dtype of their own: their arrays use ml_dtypes'
(which onnx itself depends on and `onnx.numpy_helper` writes as BFLOAT16 / FLOAT8*), and the
bits are moved between torch and numpy unchanged. Some ONNX element types only exist from a
given opset on (`min_opset`); `unsupported_reason` says why a dtype cannot be exported.
"""

from __future__ import annotations

import ml_dtypes
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
    torch.uint16: onnx.TensorProto.UINT16,
    torch.uint32: onnx.TensorProto.UINT32,
    torch.uint64: onnx.TensorProto.UINT64,
    torch.bool: onnx.TensorProto.BOOL,
    torch.complex64: onnx.TensorProto.COMPLEX64,
    torch.complex128: onnx.TensorProto.COMPLEX128,
    torch.float8_e4m3fn: onnx.TensorProto.FLOAT8E4M3FN,
    torch.float8_e4m3fnuz: onnx.TensorProto.FLOAT8E4M3FNUZ,
    torch.float8_e5m2: onnx.TensorProto.FLOAT8E5M2,
    torch.float8_e5m2fnuz: onnx.TensorProto.FLOAT8E5M2FNUZ,
    torch.float8_e8m0fnu: onnx.TensorProto.FLOAT8E8M0,
    torch.int4: onnx.TensorProto.INT4,
    torch.uint4: onnx.TensorProto.UINT4,
}
_ONNX_TO_TORCH = {v: k for k, v in _TORCH_TO_ONNX.items()}

# The ONNX opset that introduced each element type newer than the supported minimum (17):
# the float8 types came with opset 19 (Cast, QuantizeLinear, ...), E8M0 with opset 24.
_MIN_OPSET: dict[torch.dtype, int] = {
    torch.float8_e4m3fn: 19,
    torch.float8_e4m3fnuz: 19,
    torch.float8_e5m2: 19,
    torch.float8_e5m2fnuz: 19,
    torch.float8_e8m0fnu: 24,
    torch.int4: 21,
    torch.uint4: 21,
}

# 4-bit integers: torch holds them in int8/uint8 (a quantized range within [-8, 7] or [0, 15],
# symbolics/quantized.py); ONNX stores them packed two per byte from opset 21. Their arrays use
# ml_dtypes' int4/uint4 (one element per byte, as onnx.numpy_helper reads and writes them).
_FOUR_BIT: dict[torch.dtype, np.dtype] = {
    torch.int4: np.dtype(ml_dtypes.int4),
    torch.uint4: np.dtype(ml_dtypes.uint4),
}

# dtypes numpy lacks: torch's bits are reinterpreted as ml_dtypes' type of the same width.
_BIT_CASTS: dict[torch.dtype, tuple[torch.dtype, np.dtype]] = {
    torch.bfloat16: (torch.int16, np.dtype(ml_dtypes.bfloat16)),
    torch.float8_e4m3fn: (torch.uint8, np.dtype(ml_dtypes.float8_e4m3fn)),
    torch.float8_e4m3fnuz: (torch.uint8, np.dtype(ml_dtypes.float8_e4m3fnuz)),
    torch.float8_e5m2: (torch.uint8, np.dtype(ml_dtypes.float8_e5m2)),
    torch.float8_e5m2fnuz: (torch.uint8, np.dtype(ml_dtypes.float8_e5m2fnuz)),
    torch.float8_e8m0fnu: (torch.uint8, np.dtype(ml_dtypes.float8_e8m0fnu)),
}
_NUMPY_TO_TORCH = {np_dtype: dtype for dtype, (_, np_dtype) in _BIT_CASTS.items()}
_INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16}

_REFUSED: dict[torch.dtype, str] = {
    torch.float4_e2m1fn_x2: (
        "torch packs two float4 values per byte, while ONNX FLOAT4E2M1 counts one element per "
        "value; unpack to float32 (or another float type) before the model's outputs and inputs"
    ),
}


def onnx_type(dtype: torch.dtype) -> int:
    """ONNX TensorProto element type for a torch dtype; TypeError naming the dtype otherwise."""
    try:
        return _TORCH_TO_ONNX[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ONNX element type: {unsupported_reason(dtype, None)}") from None


def torch_type(elem_type: int) -> torch.dtype:
    """torch dtype for an ONNX TensorProto element type."""
    return _ONNX_TO_TORCH[elem_type]


def min_opset(dtype: torch.dtype) -> int | None:
    """The lowest opset whose element types include `dtype` (None: every supported opset)."""
    return _MIN_OPSET.get(dtype)


def unsupported_reason(dtype: torch.dtype, opset_version: int | None) -> str:
    """Why a tensor of `dtype` cannot be exported at `opset_version` ('' when it can)."""
    if dtype in _REFUSED:
        return _REFUSED[dtype]
    if dtype not in _TORCH_TO_ONNX:
        return "ONNX has no element type for it; cast to a standard type (float32, int64, ...) first"
    needed = _MIN_OPSET.get(dtype)
    if opset_version is not None and needed is not None and opset_version < needed:
        return f"ONNX has it from opset {needed} on (exporting at {opset_version}); pass opset_version={needed} or later"
    return ""


def numpy_type(dtype: torch.dtype) -> np.dtype:
    """numpy dtype for a torch dtype (ml_dtypes' for bfloat16, the float8 formats and the 4-bit
    integers)."""
    if dtype in _BIT_CASTS:
        return _BIT_CASTS[dtype][1]
    if dtype in _FOUR_BIT:
        return _FOUR_BIT[dtype]
    return torch.empty((), dtype=dtype).numpy().dtype


def torch_dtype_of(np_dtype: np.dtype) -> torch.dtype:
    """torch dtype for a numpy dtype (ml_dtypes' included)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _NUMPY_TO_TORCH:
        return _NUMPY_TO_TORCH[np_dtype]
    for dtype, four_bit in _FOUR_BIT.items():
        if np_dtype == four_bit:
            return dtype
    return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous CPU numpy copy of a tensor, detached; bfloat16 and float8 keep their bits
    (as ml_dtypes arrays)."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype in _BIT_CASTS:
        integer, np_dtype = _BIT_CASTS[tensor.dtype]
        return tensor.view(integer).numpy().view(np_dtype)
    if tensor.dtype in _REFUSED or tensor.dtype not in _TORCH_TO_ONNX:
        raise TypeError(f"dtype {tensor.dtype} cannot be exported: {unsupported_reason(tensor.dtype, None)}")
    return tensor.numpy()


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """A torch tensor holding `array`'s values (and bits, for ml_dtypes arrays)."""
    array = np.ascontiguousarray(array)
    if array.dtype in _NUMPY_TO_TORCH:
        integer = _INT_OF_WIDTH[array.dtype.itemsize]
        return torch.from_numpy(array.view(np.dtype(str(integer).removeprefix("torch.")))).view(
            _NUMPY_TO_TORCH[array.dtype])
    return torch.from_numpy(array)
