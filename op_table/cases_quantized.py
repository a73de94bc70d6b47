"""PT2E's quantized_decomposed ops as QuantizeLinear / DequantizeLinear (the translate stage's
symbolics/quantized.py): per tensor and per channel, int8 and uint8 at every opset, int16 from
opset 21 (refused before it, with the opset to pass), a range narrower than the dtype's (the
weights' -127..127, 4-bit values held in int8), 4-bit weights (INT4 from opset 21), float16 input, and dynamic quantization's
choose_qparams (affine and symmetric) feeding the `.tensor` forms."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers torch.ops.quantized_decomposed)

from ._samples import ints, module_op, op, randn
from .schema import OpCase

QD = torch.ops.quantized_decomposed
Q, DQ = "quantized_decomposed.quantize_per_tensor.default", "quantized_decomposed.dequantize_per_tensor.default"
Q_T, DQ_T = "quantized_decomposed.quantize_per_tensor.tensor", "quantized_decomposed.dequantize_per_tensor.tensor"
Q_C, DQ_C = "quantized_decomposed.quantize_per_channel.default", "quantized_decomposed.dequantize_per_channel.default"
CHOOSE = "quantized_decomposed.choose_qparams.tensor"
CHOOSE_SYMMETRIC = "quantized_decomposed.choose_qparams_symmetric.tensor"
INT16_OPSETS = (21, 26)  # QuantizeLinear-21 added int16/uint16
FOUR_BIT_OPSETS = (18, 21, 26)  # int8 storage at 18, INT4 from 21 (DequantizeLinear-21)


class PerChannel(torch.nn.Module):
    """Quantize along `axis` with per-channel scales and zero points held as buffers (as
    convert_pt2e holds them), then dequantize."""

    def __init__(self, axis: int, channels: int, dtype: torch.dtype = torch.int8, low: int = -128,
                 high: int = 127) -> None:
        super().__init__()
        self.axis, self.dtype, self.low, self.high = axis, dtype, low, high
        self.register_buffer("scales", torch.linspace(0.02, 0.2, channels, dtype=torch.float64))
        centre = (low + high + 1) // 2  # 0 for int8, 128 for uint8
        self.register_buffer("zero_points", torch.arange(channels, dtype=torch.int64) - channels // 2 + centre)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = QD.quantize_per_channel(x, self.scales, self.zero_points, self.axis, self.low, self.high, self.dtype)
        return q, QD.dequantize_per_channel(q, self.scales, self.zero_points, self.axis, self.low, self.high,
                                            self.dtype)


class FourBitWeight(torch.nn.Module):
    """A 4-bit weight held in int8 (values in [-8, 7], as convert_pt2e folds a weight quantized
    to that range) dequantized per output channel or per tensor and added to the input: the
    weight exports as an INT4 initializer from opset 21 (int8 before)."""

    def __init__(self, per_channel: bool) -> None:
        super().__init__()
        self.per_channel = per_channel
        generator = torch.Generator().manual_seed(0)
        self.register_buffer("weight", torch.randint(-8, 8, (6, 5), generator=generator, dtype=torch.int8))
        self.register_buffer("scales", torch.linspace(0.05, 0.3, 6, dtype=torch.float64))
        self.register_buffer("zero_points", torch.zeros(6, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.per_channel:
            return x + QD.dequantize_per_channel(self.weight, self.scales, self.zero_points, 0, -8, 7, torch.int8)
        return x + QD.dequantize_per_tensor(self.weight, 0.125, -1, -8, 7, torch.int8)


def _dynamic(x: torch.Tensor, symmetric: bool = False) -> tuple[torch.Tensor, ...]:
    choose = QD.choose_qparams_symmetric.tensor if symmetric else QD.choose_qparams.tensor
    scale, zero_point = choose(x, -128, 127, 2.0 ** -12, torch.int8)
    q = QD.quantize_per_tensor.tensor(x, scale, zero_point, -128, 127, torch.int8)
    return scale, zero_point, q, QD.dequantize_per_tensor.tensor(q, scale, zero_point, -128, 127, torch.int8)


def _scaled(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor]:
    """Values spread over several times the quantized range (saturation at both ends)."""
    return (randn(gen, *shape, dtype=dtype) * 4,)


CASES: list[OpCase] = [
    op("quantize_per_tensor_int8", lambda x: QD.quantize_per_tensor(x, 0.05, 3, -128, 127, torch.int8),
       lambda g: _scaled(g, 2, 3, 8), [Q]),
    op("quantize_per_tensor_uint8", lambda x: QD.quantize_per_tensor(x, 0.04, 128, 0, 255, torch.uint8),
       lambda g: _scaled(g, 4, 9), [Q]),
    op("quantize_per_tensor_narrow_weight_range", lambda x: QD.quantize_per_tensor(x, 0.03, 0, -127, 127, torch.int8),
       lambda g: _scaled(g, 3, 16), [Q]),
    op("quantize_per_tensor_int4_in_int8", lambda x: QD.quantize_per_tensor(x, 0.5, -1, -8, 7, torch.int8),
       lambda g: _scaled(g, 5, 7), [Q]),
    op("quantize_per_tensor_float16_input", lambda x: QD.quantize_per_tensor(x, 0.05, 0, -128, 127, torch.int8),
       lambda g: _scaled(g, 2, 10, dtype=torch.float16), [Q]),
    op("dequantize_per_tensor_int8", lambda q: QD.dequantize_per_tensor(q, 0.05, -3, -128, 127, torch.int8),
       lambda g: (ints(g, -128, 128, 2, 3, 5, dtype=torch.int8),), [DQ]),
    op("dequantize_per_tensor_uint8", lambda q: QD.dequantize_per_tensor(q, 0.1, 128, 0, 255, torch.uint8),
       lambda g: (ints(g, 0, 256, 4, 6, dtype=torch.uint8),), [DQ]),
    op("dequantize_per_tensor_out_float16",
       lambda q: QD.dequantize_per_tensor(q, 0.25, 0, -128, 127, torch.int8, out_dtype=torch.float16),
       lambda g: (ints(g, -128, 128, 3, 4, dtype=torch.int8),), [DQ]),
    op("quantize_dequantize_pair",
       lambda x: QD.dequantize_per_tensor(QD.quantize_per_tensor(x, 0.02, 5, -128, 127, torch.int8), 0.02, 5, -128,
                                          127, torch.int8),
       lambda g: _scaled(g, 2, 4, 6), [Q, DQ]),
    module_op("quantize_per_channel_axis1", lambda: PerChannel(1, 4), lambda g: _scaled(g, 2, 4, 3, 3), [Q_C, DQ_C]),
    module_op("quantize_per_channel_last_axis_uint8", lambda: PerChannel(-1, 6, torch.uint8, 0, 255),
              lambda g: _scaled(g, 3, 6), [Q_C, DQ_C]),
    module_op("quantize_per_channel_narrow_weight_range", lambda: PerChannel(0, 5, low=-127, high=127),
              lambda g: _scaled(g, 5, 8), [Q_C, DQ_C]),
    op("quantize_per_tensor_int16", lambda x: QD.quantize_per_tensor(x, 1e-3, 7, -32768, 32767, torch.int16),
       lambda g: _scaled(g, 3, 8), [Q], opsets=INT16_OPSETS),
    op("dequantize_per_tensor_int16", lambda q: QD.dequantize_per_tensor(q, 1e-3, -7, -32768, 32767, torch.int16),
       lambda g: (ints(g, -32768, 32768, 4, 5, dtype=torch.int16),), [DQ], opsets=INT16_OPSETS),
    op("quantize_per_tensor_int16_before_opset_21",
       lambda x: QD.quantize_per_tensor(x, 1e-3, 0, -32768, 32767, torch.int16), lambda g: _scaled(g, 3, 8), [Q],
       opsets=(17, 18), refused="opset_version=21"),
    module_op("dequantize_per_channel_int4_weight", lambda: FourBitWeight(per_channel=True),
              lambda g: (randn(g, 6, 5),), [DQ_C, "aten.add.Tensor"], opsets=FOUR_BIT_OPSETS),
    module_op("dequantize_per_tensor_int4_weight", lambda: FourBitWeight(per_channel=False),
              lambda g: (randn(g, 6, 5),), [DQ, "aten.add.Tensor"], opsets=FOUR_BIT_OPSETS),
    op("dynamic_choose_qparams_affine", _dynamic, lambda g: (randn(g, 4, 16) + 0.5,), [CHOOSE, Q_T, DQ_T]),
    op("dynamic_choose_qparams_symmetric", lambda x: _dynamic(x, symmetric=True), lambda g: (randn(g, 3, 12),),
       [CHOOSE_SYMMETRIC, Q_T, DQ_T]),
]
