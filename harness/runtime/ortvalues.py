"""numpy arrays to and from onnxruntime OrtValues, bfloat16 and the float8 formats included.

numpy has no bfloat16 or float8 dtype; their arrays are ml_dtypes arrays, which onnxruntime's
`run()` refuses ("Creation of OrtValues is currently only supported from non-string numpy
arrays") and cannot hand back ("No corresponding Numpy type"). They travel as OrtValues made
with the ONNX element type spelled out, and come back by copying the OrtValue's bytes into an
ml_dtypes array. Every other dtype keeps onnxruntime's own conversion.

The harness compares bfloat16 values as float32 (harness.metrics.arrays.as_array widens torch's
bfloat16 tensors the same way); `fed_as` is the inverse on the way in, exact for such values.
"""

from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto

ONNX_TYPE_OF_ML_DTYPE: dict[np.dtype, int] = {
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
    np.dtype(ml_dtypes.float8_e4m3fn): TensorProto.FLOAT8E4M3FN,
    np.dtype(ml_dtypes.float8_e4m3fnuz): TensorProto.FLOAT8E4M3FNUZ,
    np.dtype(ml_dtypes.float8_e5m2): TensorProto.FLOAT8E5M2,
    np.dtype(ml_dtypes.float8_e5m2fnuz): TensorProto.FLOAT8E5M2FNUZ,
}
"""numpy (ml_dtypes) dtypes that onnxruntime's numpy conversion does not know, by ONNX type."""

ML_DTYPE_OF_ONNX_TYPE: dict[int, np.dtype] = {v: k for k, v in ONNX_TYPE_OF_ML_DTYPE.items()}


def type_string(elem_type: int) -> str:
    """onnxruntime's spelling of a tensor type: `tensor(bfloat16)`."""
    return f"tensor({TensorProto.DataType.Name(elem_type).lower()})"


_ML_DTYPE_OF_TYPE_STRING = {type_string(t): d for t, d in ML_DTYPE_OF_ONNX_TYPE.items()}


def needs_ortvalues(arrays: dict[str, np.ndarray], type_strings: list[str]) -> bool:
    """Whether a run with `arrays` fed, or declaring these onnxruntime type strings
    (`tensor(bfloat16)`) as inputs or outputs, must go through OrtValues."""
    return (any(np.asarray(a).dtype in ONNX_TYPE_OF_ML_DTYPE for a in arrays.values())
            or any(t in _ML_DTYPE_OF_TYPE_STRING for t in type_strings))


def to_ortvalue(array: np.ndarray) -> Any:
    """An OrtValue over `array` (no copy for a C-contiguous array), ml_dtypes arrays included."""
    import onnxruntime as ort

    array = np.asarray(array)
    onnx_type = ONNX_TYPE_OF_ML_DTYPE.get(array.dtype)
    if onnx_type is None:
        return ort.OrtValue.ortvalue_from_numpy(array)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).reshape(array.shape)
    bits = array.view(np.uint16 if array.dtype.itemsize == 2 else np.uint8)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_type)  # keeps `bits` alive


def from_ortvalue(value: Any) -> np.ndarray:
    """A numpy array with a CPU OrtValue's values; bfloat16 and float8 as ml_dtypes arrays."""
    np_dtype = _ML_DTYPE_OF_TYPE_STRING.get(value.data_type())
    if np_dtype is None:
        return value.numpy()
    if value.device_name().lower() != "cpu":
        raise ValueError(f"an OrtValue of {value.data_type()} on {value.device_name()} must be bound to the CPU")
    array = np.empty(value.shape(), dtype=np_dtype)
    if array.nbytes:
        ctypes.memmove(array.ctypes.data, value.data_ptr(), array.nbytes)
    return array


def fed_as(array: np.ndarray, type_string: str | None, name: str) -> np.ndarray:
    """`array` in the ml_dtypes type an input declares (`tensor(bfloat16)`), when it holds
    another float type whose values that type represents exactly (the harness holds bfloat16
    values as float32); anything else is returned as it is, for onnxruntime to judge."""
    np_dtype = _ML_DTYPE_OF_TYPE_STRING.get(type_string or "")
    if np_dtype is None or array.dtype == np_dtype or array.dtype.kind != "f":
        return array
    converted = array.astype(np_dtype)
    widened = converted.astype(array.dtype)
    if not np.array_equal(widened, array, equal_nan=True):
        raise ValueError(
            f"input {name!r} is declared {type_string} but was given {array.dtype} values that "
            f"{np_dtype} cannot hold exactly; cast them to {np_dtype} (ml_dtypes) first"
        )
    return converted


def widened(array: np.ndarray) -> np.ndarray:
    """float32 values of a bfloat16 or float8 array (how the harness compares them); other
    arrays as they are."""
    return array.astype(np.float32) if array.dtype in ONNX_TYPE_OF_ML_DTYPE else array
