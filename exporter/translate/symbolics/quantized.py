"""PT2E quantization (torchao's convert_pt2e) as ONNX QuantizeLinear / DequantizeLinear.

A converted module holds `quantized_decomposed` ops: quantize and dequantize per tensor (scale
and zero point as numbers, or as 1-element tensors when dynamic), per channel (along `axis`),
and, for dynamic quantization, `choose_qparams` computing scale and zero point from the
tensor's range at run time. Each becomes the ONNX op of the same definition, so runtimes see
the QDQ pairs they fuse into integer kernels.

torch's definitions, and where ONNX differs:
- quantize: clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max), rounding half to
  even. QuantizeLinear computes round(x / scale) + zero_point, also half to even, and saturates
  to the dtype's range. x * fl(1/scale) and x / scale may differ in the last bit, which moves a
  value lying within one ulp of a rounding tie (k + 1/2) to the other side: one step, at ties
  only. A range narrower than the dtype's (weights' -127..127, 4-bit values held in int8) is
  applied as a Clip of x to the float range [(quant_min - zp) * scale, (quant_max - zp) * scale]
  before QuantizeLinear, which is exact (those bounds quantize to quant_min and quant_max) and
  keeps Q and DQ adjacent, as runtimes' fusions want.
- dequantize: (q - zero_point) * scale in float32 (torch rounds the float64 scale to float32
  too): DequantizeLinear's definition, exactly.
- dtypes: int8 and uint8 at every opset; int16 and uint16 from opset 21 (QuantizeLinear-21).
- 4 bits: torch holds a 4-bit quantization in int8 (quant_min/quant_max within [-8, 7]) or
  uint8 (within [0, 15]). From opset 21 a constant so quantized (PT2E folds the weights'
  quantize into int8 constants) is stored as INT4/UINT4 behind its DequantizeLinear, with a
  4-bit zero point: half the bytes, and the values runtimes' 4-bit kernels read. Before opset
  21, and for activations, the range is kept in int8/uint8 through the exact Clip above: the
  same values, 8 bits of storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from exporter.translate.dtypes import numpy_type, onnx_type
from exporter.errors import ExportError
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic

# The quantized dtypes QuantizeLinear / DequantizeLinear take, with the opset that added them.
QUANTIZED_SINCE = {torch.int8: 13, torch.uint8: 13, torch.int16: 21, torch.uint16: 21}


def _check_dtype(g: Graph, dtype: torch.dtype) -> None:
    since = QUANTIZED_SINCE.get(dtype)
    if since is None:
        raise ExportError(
            f"{g.ctx.node.name}: quantization to {dtype} has no ONNX QuantizeLinear form; use int8, uint8, "
            "or int16/uint16 at opset 21 or later (a 4-bit range is held in int8 with quant_min/quant_max)"
        )
    if g.opset_version < since:
        raise ExportError(
            f"{g.ctx.node.name}: QuantizeLinear/DequantizeLinear take {dtype} from opset {since} on "
            f"(exporting at {g.opset_version}); pass opset_version={since} or later"
        )


# A 4-bit range held in int8/uint8, stored as INT4/UINT4 from opset 21: (ONNX dtype, lowest, highest).
FOUR_BIT_STORAGE = {torch.int8: (torch.int4, -8, 7), torch.uint8: (torch.uint4, 0, 15)}
FOUR_BIT_SINCE = 21
FOUR_BIT_NAMES = {torch.int4: "int4", torch.uint4: "uint4"}


def four_bit_storage(dtype: torch.dtype, quant_min: int, quant_max: int, opset_version: int) -> torch.dtype | None:
    """INT4/UINT4 where a tensor quantized to [quant_min, quant_max] in `dtype` fits 4 bits and
    `opset_version` has them; None otherwise (the tensor stays in `dtype`)."""
    four_bit = FOUR_BIT_STORAGE.get(dtype)
    if four_bit is None or opset_version < FOUR_BIT_SINCE:
        return None
    storage, lowest, highest = four_bit
    return storage if lowest <= quant_min and quant_max <= highest else None


def _fits(storage: torch.dtype, *arrays: np.ndarray) -> bool:
    """Whether every value of `arrays` lies in the 4-bit `storage` type's range."""
    _, lowest, highest = next(v for v in FOUR_BIT_STORAGE.values() if v[0] == storage)
    return all(np.asarray(a).size == 0 or (np.min(a) >= lowest and np.max(a) <= highest) for a in arrays)


def _dtype_range(dtype: torch.dtype) -> tuple[int, int]:
    info = torch.iinfo(dtype)
    return int(info.min), int(info.max)


def _float_input(g: Graph, x: Value) -> Value:
    """x as float32: torch quantizes float16/bfloat16 input after casting it to float32."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return g.op("Cast", x, to_i=onnx_type(torch.float32))
    return x


def _scalar_param(g: Graph, value: Any, dtype: torch.dtype) -> Value:
    """A 0-d `dtype` value from a number or a 1-element tensor value (scale, zero point)."""
    if isinstance(value, Value):
        if value.const is not None:
            return g.constant(np.asarray(value.const).reshape(()), dtype)
        cast = g.op("Cast", value, to_i=onnx_type(dtype)) if value.dtype != dtype else value
        return g.op("Reshape", cast, g.constant([], torch.int64))
    return g.constant(value, dtype)


def _vector_param(g: Graph, value: Value, dtype: torch.dtype) -> Value:
    """A 1-D `dtype` value of per-channel parameters."""
    if value.const is not None:
        return g.constant(np.asarray(value.const).reshape(-1), dtype)
    return g.op("Cast", value, to_i=onnx_type(dtype)) if value.dtype != dtype else value


def _narrowed(g: Graph, x: Value, scale: Value, zero_point: Value, quant_min: int, quant_max: int,
              dtype: torch.dtype, axis: int | None = None) -> Value:
    """x clipped to the float range whose quantization is [quant_min, quant_max], when that is
    narrower than `dtype`'s (QuantizeLinear saturates to the dtype's range only)."""
    low, high = _dtype_range(dtype)
    if quant_min <= low and quant_max >= high:
        return x
    if scale.const is not None and zero_point.const is not None:
        s = np.asarray(scale.const, dtype=np.float32)
        zp = np.asarray(zero_point.const, dtype=np.float32)
        lower, upper = (np.float32(quant_min) - zp) * s, (np.float32(quant_max) - zp) * s
        if axis is None:
            return g.op("Clip", x, g.constant(lower.reshape(()), torch.float32),
                        g.constant(upper.reshape(()), torch.float32))
        shape = [1] * (x.rank or 1)
        shape[axis] = -1
        return g.op("Min", g.op("Max", x, g.constant(lower.reshape(shape), torch.float32)),
                    g.constant(upper.reshape(shape), torch.float32))
    zp_float = g.op("Cast", zero_point, to_i=onnx_type(torch.float32))
    lower = g.op("Mul", g.op("Sub", g.constant(float(quant_min), torch.float32), zp_float), scale)
    upper = g.op("Mul", g.op("Sub", g.constant(float(quant_max), torch.float32), zp_float), scale)
    if axis is not None:
        shape = [1] * (x.rank or 1)
        shape[axis] = -1
        lower = g.op("Reshape", lower, g.constant(shape, torch.int64))
        upper = g.op("Reshape", upper, g.constant(shape, torch.int64))
    return g.op("Min", g.op("Max", x, lower), upper)


def _quantize(g: Graph, x: Value, scale: Value, zero_point: Value, quant_min: int, quant_max: int,
              dtype: torch.dtype, axis: int | None = None) -> Value:
    _check_dtype(g, dtype)
    x = _narrowed(g, _float_input(g, x), scale, zero_point, quant_min, quant_max, dtype, axis)
    return g.op("QuantizeLinear", x, scale, zero_point, axis_i=axis)


def _dequantize(g: Graph, x: Value, scale: Value, zero_point: Value, dtype: torch.dtype,
                out_dtype: torch.dtype | None, axis: int | None = None, quant_range: tuple[int, int] | None = None
                ) -> Value:
    _check_dtype(g, dtype)
    storage = None
    if quant_range is not None and all(isinstance(bound, int) for bound in quant_range):
        storage = four_bit_storage(dtype, *quant_range, g.opset_version)
    if storage is not None and x.const is not None and zero_point.const is not None and _fits(
            storage, x.const, zero_point.const):
        packed = np.asarray(x.const).astype(numpy_type(storage))
        # a weight keeps its name (`<weight>_int4`); its int8 initializer, read by nothing else, is dropped
        x = g.add_initializer(f"{x.name}_{FOUR_BIT_NAMES[storage]}", packed) if x.name in g.initializers \
            else g.constant(packed, storage)
        zero_point = g.constant(zero_point.const, storage)
    y = g.op("DequantizeLinear", x, scale, zero_point, axis_i=axis)
    if out_dtype is not None and out_dtype != torch.float32:
        y = g.op("Cast", y, to_i=onnx_type(out_dtype))
    return y


@symbolic("quantized_decomposed::quantize_per_tensor", "quantized_decomposed::quantize_per_tensor.tensor")
def quantize_per_tensor(g: Graph, input: Value, scale: Any, zero_point: Any, quant_min: int, quant_max: int,
                        dtype: torch.dtype) -> Value:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    scale_value = _scalar_param(g, scale, torch.float32)
    zero_value = _scalar_param(g, zero_point, dtype)
    return _quantize(g, input, scale_value, zero_value, quant_min, quant_max, dtype)


@symbolic("quantized_decomposed::dequantize_per_tensor", "quantized_decomposed::dequantize_per_tensor.tensor")
def dequantize_per_tensor(g: Graph, input: Value, scale: Any, zero_point: Any, quant_min: int, quant_max: int,
                          dtype: torch.dtype, out_dtype: torch.dtype | None = None) -> Value:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    out_dtype = g.ctx.node.kwargs.get("out_dtype", out_dtype)
    return _dequantize(g, input, _scalar_param(g, scale, torch.float32), _scalar_param(g, zero_point, dtype),
                       dtype, out_dtype, quant_range=(quant_min, quant_max))


def _axis(g: Graph, input: Value, axis: int) -> int:
    rank = input.rank
    return axis % rank if rank else axis


@symbolic("quantized_decomposed::quantize_per_channel")
def quantize_per_channel(g: Graph, input: Value, scales: Value, zero_points: Value, axis: int, quant_min: int,
                         quant_max: int, dtype: torch.dtype) -> Value:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    axis = _axis(g, input, axis)
    return _quantize(g, input, _vector_param(g, scales, torch.float32), _vector_param(g, zero_points, dtype),
                     quant_min, quant_max, dtype, axis)


@symbolic("quantized_decomposed::dequantize_per_channel")
def dequantize_per_channel(g: Graph, input: Value, scales: Value, zero_points: Value | None, axis: int,
                           quant_min: int, quant_max: int, dtype: torch.dtype,
                           out_dtype: torch.dtype | None = None) -> Value:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    out_dtype = g.ctx.node.kwargs.get("out_dtype", out_dtype)
    axis = _axis(g, input, axis)
    scale_value = _vector_param(g, scales, torch.float32)
    if zero_points is None:
        channels = input.shape[axis] if input.shape is not None else None
        if not isinstance(channels, int):
            raise ExportError(f"{g.ctx.node.name}: dequantize_per_channel without zero points needs a static "
                              f"size on axis {axis}")
        zero_value = g.constant(np.zeros(channels), dtype)
    else:
        zero_value = _vector_param(g, zero_points, dtype)
    return _dequantize(g, input, scale_value, zero_value, dtype, out_dtype, axis, quant_range=(quant_min, quant_max))


def _choose_qparams(g: Graph, input: Value, quant_min: int, quant_max: int, eps: float, dtype: torch.dtype,
                    symmetric: bool) -> tuple[Value, Value]:
    """torch's determine_qparams on the tensor's range, in float32 as torch computes it: the
    range widened to hold 0; affine: scale = (max - min) / (qmax - qmin), zero point =
    qmin - round(min / scale) clamped to the range; symmetric: scale = max|x| / ((qmax - qmin) / 2),
    zero point 0 (128 for uint8). Scale is returned as float64 and the zero point as int64, each
    of shape [1], as torch returns them."""
    f32 = torch.float32
    x = _float_input(g, input)
    zero = g.constant(0.0, f32)
    low = g.op("Min", g.op("ReduceMin", x, keepdims_i=0), zero)
    high = g.op("Max", g.op("ReduceMax", x, keepdims_i=0), zero)
    if symmetric:
        bound = g.op("Max", g.op("Neg", low), high)
        scale = g.op("Div", bound, g.constant(float(quant_max - quant_min) / 2, f32))
        scale = g.op("Max", scale, g.constant(float(eps), f32))
        centre = 128 if dtype == torch.uint8 else 0
        zero_point = g.constant([centre], torch.int64)
    else:
        scale = g.op("Div", g.op("Sub", high, low), g.constant(float(quant_max - quant_min), f32))
        scale = g.op("Max", scale, g.constant(float(eps), f32))
        shift = g.op("Round", g.op("Div", low, scale))
        zero_point = g.op("Sub", g.constant(float(quant_min), f32), shift)
        zero_point = g.op("Clip", zero_point, g.constant(float(quant_min), f32), g.constant(float(quant_max), f32))
        zero_point = g.op("Reshape", g.op("Cast", zero_point, to_i=onnx_type(torch.int64)),
                          g.constant([1], torch.int64))
    scale = g.op("Reshape", g.op("Cast", scale, to_i=onnx_type(torch.float64)), g.constant([1], torch.int64))
    return scale, zero_point


@symbolic("quantized_decomposed::choose_qparams.tensor")
def choose_qparams(g: Graph, input: Value, quant_min: int, quant_max: int, eps: float,
                   dtype: torch.dtype) -> tuple[Value, Value]:
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)"""
    return _choose_qparams(g, input, quant_min, quant_max, eps, dtype, symmetric=False)


@symbolic("quantized_decomposed::choose_qparams_symmetric.tensor")
def choose_qparams_symmetric(g: Graph, input: Value, quant_min: int, quant_max: int, eps: float,
                             dtype: torch.dtype) -> tuple[Value, Value]:
    """choose_qparams_symmetric.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)"""
    return _choose_qparams(g, input, quant_min, quant_max, eps, dtype, symmetric=True)
