"""Op table rows for edge forms PyTorch's OpInfo samples found wrong: 0-d and zero-size
inputs, empty inner dimensions, output paddings beyond the stride, the statistics outputs
of native_group_norm. Each row is one regression: it failed before its symbolic was fixed."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._samples import module_op, op, randn
from .schema import OpCase

CONV_TRANSPOSE_2D, CONV_TRANSPOSE_3D = "aten.conv_transpose2d.input", "aten.conv_transpose3d.input"


def _empty_index(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return randn(gen, 5), torch.zeros(2, 0, dtype=torch.int64)


def _group_norm_with_statistics(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n, c = x.shape[:2]
    return torch.ops.aten.native_group_norm.default(x, weight, bias, n, c, x[0, 0].numel(), 2, 1e-5)


def _batch_norm_with_statistics(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """BatchNorm without running statistics, as training computes it: output, batch mean, inverse std."""
    return torch.ops.aten._native_batch_norm_legit.no_stats(x, weight, bias, True, 0.1, 1e-5)


def _conv_transpose(spatial: int, *, batched: bool = True):
    """conv_transpose{spatial}d with an output_padding (3) beyond its stride (2), which torch
    allows because the dilation (4) is larger: OpInfo's sample, shrunk."""
    function = {2: F.conv_transpose2d, 3: F.conv_transpose3d}[spatial]
    strides, pads, extras = (3, 2, 2)[:spatial], (1, 2, 0)[:spatial], (2, 3, 1)[:spatial]

    def call(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return function(x, weight, bias, stride=strides, padding=pads, output_padding=extras, groups=2, dilation=4)

    def inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        batch = (2,) if batched else ()
        return randn(gen, *batch, 4, *[3] * spatial), randn(gen, 4, 2, *[2] * spatial), randn(gen, 4)

    return call, inputs


CASES: list[OpCase] = [
    module_op("prelu_0d_input", lambda: torch.nn.PReLU(), lambda g: (randn(g),), ["aten.prelu.default"],
              seed_ops=("prelu",)),
    op("prelu_scalar_weight", F.prelu, lambda g: (randn(g, 2, 3), torch.tensor(0.25)), ["aten.prelu.default"],
       seed_ops=("prelu",)),
    op("prelu_0d_input_scalar_weight", F.prelu, lambda g: (randn(g), torch.tensor(0.25)), ["aten.prelu.default"],
       seed_ops=("prelu",)),
    op("gather_empty_index_of_other_rank", lambda x, i: torch.gather(x, 0, i), _empty_index, ["aten.gather.default"]),
    op("gather_0d_index", lambda x, i: torch.gather(x, 0, i), lambda g: (randn(g, 5), torch.tensor(3)),
       ["aten.gather.default"]),
    op("addmm_empty_inner_dim", lambda s, a, b: torch.addmm(s, a, b, beta=0.2, alpha=0.6),
       lambda g: (randn(g, 5, 4), randn(g, 5, 0), randn(g, 0, 4)), ["aten.addmm.default"]),
    op("addmm_empty_inner_dim_beta0", lambda s, a, b: torch.addmm(s, a, b, beta=0, alpha=2),
       lambda g: (randn(g, 4), randn(g, 3, 0), randn(g, 0, 4)), ["aten.addmm.default"]),
    op("conv_transpose2d_output_padding_beyond_stride", *_conv_transpose(2), [CONV_TRANSPOSE_2D]),
    op("conv_transpose2d_output_padding_beyond_stride_unbatched", *_conv_transpose(2, batched=False),
       [CONV_TRANSPOSE_2D]),
    op("conv_transpose3d_output_padding_beyond_stride", *_conv_transpose(3), [CONV_TRANSPOSE_3D]),
    op("pixel_unshuffle_zero_size", lambda x: F.pixel_unshuffle(x, 1), lambda g: (randn(g, 1, 1, 0, 1),),
       ["aten.pixel_unshuffle.default"]),
    op("pixel_unshuffle_5d", lambda x: F.pixel_unshuffle(x, 2), lambda g: (randn(g, 2, 3, 2, 4, 6),),
       ["aten.pixel_unshuffle.default"]),
    op("pixel_shuffle_5d_zero_size", lambda x: F.pixel_shuffle(x, 2), lambda g: (randn(g, 2, 0, 8, 3, 3),),
       ["aten.pixel_shuffle.default"]),
    op("native_group_norm_statistics", _group_norm_with_statistics,
       lambda g: (randn(g, 3, 4, 5, 2), randn(g, 4), randn(g, 4)), ["aten.native_group_norm.default"]),
    op("native_group_norm_statistics_float16", _group_norm_with_statistics,
       lambda g: tuple(t.half() for t in (randn(g, 3, 4, 5, 2), randn(g, 4), randn(g, 4))),
       ["aten.native_group_norm.default"], atol=1e-3, rtol=1e-2),
    op("native_batch_norm_no_stats_statistics", _batch_norm_with_statistics,
       lambda g: (randn(g, 3, 4, 5), randn(g, 4), randn(g, 4)), ["aten._native_batch_norm_legit.no_stats"]),
]
