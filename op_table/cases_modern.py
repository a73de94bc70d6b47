"""Op table rows for the operators of current architectures: logical and bitwise ops,
remainders, any/all, cumsum, gather, slice assignment (copy, slice_scatter, select_scatter),
interpolation and grid sampling, and scaled dot-product attention.

Rows with a batch or sequence axis mark it dynamic (traced at >= 2: torch.export specialises
sizes 0 and 1). Samples hold the edge values the ops treat specially: zeros and NaN for the
truth of a float, negative operands for the remainders, fully masked attention rows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._samples import ints, mask, nonzero_ints, op, positive, randn, with_nans

GRID_OPSETS = (17, 19, 20, 26)  # GridSample spells its modes differently from opset 20
RESIZE_OPSETS = (17, 18, 26)  # sizes for every axis at 17, `axes` from 18
BITWISE_OPSETS = (18, 26)  # integer Bitwise* ops exist from 18 (bools work at every opset)
BATCH = {0: "batch"}


def _batch(count: int) -> dict[str, dict[int, str]]:
    """A dynamic batch axis on the row's first `count` inputs."""
    return {f"args_{i}": BATCH for i in range(count)}


def _zeros_and_nans(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Normal floats with some exact zeros and some NaN: both decide a float's truth value."""
    values = with_nans(gen, *shape)
    return values.masked_fill(torch.rand(shape, generator=gen) < 0.2, 0.0)


def _slice_assign(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[:, 1:-1:2] = b
    return out


def _select_assign(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[:, -2] = b
    return out


def _copy_into(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out.copy_(b)
    return out


def _causal_mask_rows(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """q, k, v and a bool mask whose first query row hides every key (torch gives 0 there)."""
    keep = mask(gen, 2, 1, 5, 7)
    keep[:, :, 0] = False
    return randn(gen, 2, 4, 5, 8), randn(gen, 2, 4, 7, 8), randn(gen, 2, 4, 7, 8), keep


LOGICAL_CASES = [
    op("logical_not_float_zeros_nan", torch.logical_not, lambda g: (_zeros_and_nans(g, 3, 5),),
       ["aten.logical_not.default"]),
    op("logical_and_mixed", torch.logical_and, lambda g: (mask(g, 3, 4), _zeros_and_nans(g, 3, 4)),
       ["aten.logical_and.default"], dynamic_axes=_batch(2)),
    op("logical_or_broadcast", torch.logical_or, lambda g: (ints(g, -1, 2, 2, 3, 4), mask(g, 4)),
       ["aten.logical_or.default"]),
    op("logical_xor_floats", torch.logical_xor, lambda g: (_zeros_and_nans(g, 4, 3), _zeros_and_nans(g, 4, 3)),
       ["aten.logical_xor.default"]),
    op("bitwise_and_ints", torch.bitwise_and, lambda g: (ints(g, -50, 50, 3, 4), ints(g, -50, 50, 3, 4)),
       ["aten.bitwise_and.Tensor"], opsets=BITWISE_OPSETS),
    op("bitwise_and_ints_opset17_refused", torch.bitwise_and, lambda g: (ints(g, 0, 9, 3), ints(g, 0, 9, 3)),
       ["aten.bitwise_and.Tensor"], opsets=(17,), refused="bitwise ops on integers need ONNX Bitwise* ops"),
    op("bitwise_and_bools", torch.bitwise_and, lambda g: (mask(g, 3, 4), mask(g, 3, 4)), ["aten.bitwise_and.Tensor"]),
    op("bitwise_or_int32", torch.bitwise_or, lambda g: (ints(g, 0, 99, 5, dtype=torch.int32), ints(g, 0, 99, 5, dtype=torch.int32)),
       ["aten.bitwise_or.Tensor"], opsets=BITWISE_OPSETS),
    op("bitwise_not_ints", torch.bitwise_not, lambda g: (ints(g, -20, 20, 2, 5),), ["aten.bitwise_not.default"],
       opsets=BITWISE_OPSETS),
    op("bitwise_not_bools", torch.bitwise_not, lambda g: (mask(g, 2, 5),), ["aten.bitwise_not.default"]),
]

REMAINDER_CASES = [
    op("fmod_scalar_negative", lambda x: torch.fmod(x, -0.7), lambda g: (randn(g, 3, 5) * 3,), ["aten.fmod.Scalar"],
       dynamic_axes=_batch(1)),
    op("fmod_tensor_ints", torch.fmod, lambda g: (ints(g, -20, 20, 3, 4), nonzero_ints(g, 3, 4)), ["aten.fmod.Tensor"]),
    op("fmod_tensor_floats", torch.fmod, lambda g: (randn(g, 3, 4) * 5, positive(g, 4) - 1.5), ["aten.fmod.Tensor"]),
    op("remainder_scalar_floats", lambda x: torch.remainder(x, 0.75), lambda g: (randn(g, 3, 5) * 3,),
       ["aten.remainder.Scalar"]),
    op("remainder_tensor_floats_signs", torch.remainder, lambda g: (randn(g, 3, 4) * 5, positive(g, 3, 4) - 1.5),
       ["aten.remainder.Tensor"]),
    op("remainder_tensor_ints", torch.remainder, lambda g: (ints(g, -20, 20, 3, 4), nonzero_ints(g, 3, 4)),
       ["aten.remainder.Tensor"]),
]

MATH_CASES = [
    op("log_positive", torch.log, lambda g: (positive(g, 3, 4),), ["aten.log.default"], dynamic_axes=_batch(1)),
    op("rsqrt_positive", torch.rsqrt, lambda g: (positive(g, 3, 4),), ["aten.rsqrt.default"]),
    op("sin_wide_range", torch.sin, lambda g: (randn(g, 3, 4) * 4,), ["aten.sin.default"]),
    op("cos_wide_range", torch.cos, lambda g: (randn(g, 3, 4) * 4,), ["aten.cos.default"]),
    op("cumsum_dynamic", lambda x: torch.cumsum(x, 1), lambda g: (randn(g, 2, 6, 3),), ["aten.cumsum.default"],
       dynamic_axes={"args_0": {0: "batch", 1: "sequence"}}),
    op("cumsum_bool_to_int64", lambda m: torch.cumsum(m, -1), lambda g: (mask(g, 3, 5),), ["aten.cumsum.default"]),
    op("index_select_0d", lambda x, i: torch.index_select(x, 0, i), lambda g: (randn(g), torch.zeros(1, dtype=torch.int64)),
       ["aten.index_select.default"]),
    op("gather_smaller_index", lambda x, i: torch.gather(x, 1, i), lambda g: (randn(g, 4, 5), ints(g, 0, 5, 3, 2)),
       ["aten.gather.default"]),
]

REDUCTION_CASES = [
    op("any_dim_float_nan", lambda x: torch.any(x, 1), lambda g: (_zeros_and_nans(g, 2, 4, 3) * (randn(g, 2, 4, 3) > 1),),
       ["aten.any.dim"], dynamic_axes=_batch(1)),
    op("any_dims_keepdim", lambda m: torch.any(m, dim=(0, 2), keepdim=True), lambda g: (torch.rand(3, 4, 5, generator=g) > 0.9,),
       ["aten.any.dims"]),
    op("any_all_uint8", torch.any, lambda g: (ints(g, 0, 2, 3, 4, dtype=torch.uint8),), ["aten.any.default"]),
    op("all_dim_keepdim", lambda m: torch.all(m, -1, keepdim=True), lambda g: (torch.rand(3, 4, generator=g) > 0.2,),
       ["aten.all.dim"]),
    op("all_dims", lambda x: torch.all(x, dim=(1, 2)), lambda g: (_zeros_and_nans(g, 2, 3, 2),), ["aten.all.dims"]),
    op("all_all_ints", torch.all, lambda g: (ints(g, -2, 3, 3, 4),), ["aten.all.default"]),
]

ASSIGNMENT_CASES = [
    op("copy_broadcast_cast", _copy_into, lambda g: (randn(g, 3, 4), ints(g, -5, 5, 4)), ["aten.copy.default"]),
    op("slice_scatter_step_dynamic", _slice_assign, lambda g: (randn(g, 2, 7), randn(g, 2, 3)),
       ["aten.slice_scatter.default"], dynamic_axes=_batch(2)),
    op("select_scatter_negative_index", _select_assign, lambda g: (randn(g, 3, 5, 2), randn(g, 3, 2)),
       ["aten.select_scatter.default"], dynamic_axes=_batch(2)),
]


def _interpolate(**options) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.interpolate(x, **options)


RESIZE_CASES = [
    op("upsample_nearest1d_size", _interpolate(size=11), lambda g: (randn(g, 2, 3, 5),), ["aten.upsample_nearest1d.vec"],
       opsets=RESIZE_OPSETS),
    op("upsample_nearest2d_scale_dynamic", _interpolate(scale_factor=2), lambda g: (randn(g, 2, 3, 4, 5),),
       ["aten.upsample_nearest2d.vec"], opsets=RESIZE_OPSETS, dynamic_axes=_batch(1)),
    op("upsample_nearest2d_size_downsample", _interpolate(size=(3, 7)), lambda g: (randn(g, 1, 2, 6, 5),),
       ["aten.upsample_nearest2d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_nearest3d_scale", _interpolate(scale_factor=(1, 2, 3)), lambda g: (randn(g, 1, 2, 3, 4, 3),),
       ["aten.upsample_nearest3d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_linear1d_align_corners", _interpolate(size=9, mode="linear", align_corners=True),
       lambda g: (randn(g, 2, 3, 5),), ["aten.upsample_linear1d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_bilinear2d_size_dynamic", _interpolate(size=(9, 7), mode="bilinear"), lambda g: (randn(g, 2, 3, 4, 5),),
       ["aten.upsample_bilinear2d.vec"], opsets=RESIZE_OPSETS, dynamic_axes=_batch(1)),
    op("upsample_bilinear2d_scale_downsample", _interpolate(scale_factor=0.5, mode="bilinear"), lambda g: (randn(g, 1, 2, 8, 6),),
       ["aten.upsample_bilinear2d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_bilinear2d_align_corners", _interpolate(scale_factor=(2.5, 1.5), mode="bilinear", align_corners=True),
       lambda g: (randn(g, 1, 2, 4, 4),), ["aten.upsample_bilinear2d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_trilinear3d_size", _interpolate(size=(4, 6, 5), mode="trilinear"), lambda g: (randn(g, 1, 2, 2, 3, 4),),
       ["aten.upsample_trilinear3d.vec"], opsets=RESIZE_OPSETS),
    op("upsample_bicubic2d_size", _interpolate(size=(9, 6), mode="bicubic"), lambda g: (randn(g, 1, 2, 5, 4),),
       ["aten.upsample_bicubic2d.vec"], opsets=RESIZE_OPSETS, atol=1e-4),
    op("upsample_bicubic2d_align_corners", _interpolate(scale_factor=2, mode="bicubic", align_corners=True),
       lambda g: (randn(g, 1, 2, 4, 4),), ["aten.upsample_bicubic2d.vec"], opsets=RESIZE_OPSETS, atol=1e-4),
]


def _grid(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Images and sampling grids reaching a little outside [-1, 1] (the padding mode matters)."""
    return randn(gen, 2, 3, 5, 6), torch.rand(2, 4, 3, 2, generator=gen) * 2.4 - 1.2


GRID_CASES = [
    op("grid_sample_bilinear_zeros", lambda x, grid: F.grid_sample(x, grid, align_corners=False), _grid,
       ["aten.grid_sampler_2d.default"], opsets=GRID_OPSETS, dynamic_axes=_batch(2)),
    op("grid_sample_nearest_border", lambda x, grid: F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
       _grid, ["aten.grid_sampler_2d.default"], opsets=GRID_OPSETS),
    op("grid_sample_bicubic_reflection", lambda x, grid: F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False),
       _grid, ["aten.grid_sampler_2d.default"], opsets=GRID_OPSETS, atol=1e-4),
]

SDPA = "aten.scaled_dot_product_attention.default"
_SEQUENCE = {"args_0": {0: "batch", 2: "sequence"}, "args_1": {0: "batch", 2: "sequence"}, "args_2": {0: "batch", 2: "sequence"}}

ATTENTION_CASES = [
    op("sdpa_causal_dynamic", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
       lambda g: (randn(g, 2, 4, 6, 8), randn(g, 2, 4, 6, 8), randn(g, 2, 4, 6, 8)), [SDPA], dynamic_axes=_SEQUENCE),
    op("sdpa_bool_mask_fully_masked_row", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
       _causal_mask_rows, [SDPA]),
    op("sdpa_float_mask_scale", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.2),
       lambda g: (randn(g, 2, 3, 5, 4), randn(g, 2, 3, 7, 4), randn(g, 2, 3, 7, 6), randn(g, 5, 7)), [SDPA]),
    op("sdpa_gqa_causal_longer_queries", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
       lambda g: (randn(g, 2, 6, 7, 8), randn(g, 2, 2, 5, 8), randn(g, 2, 2, 5, 8)), [SDPA]),
    op("sdpa_3d_unbatched_heads", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
       lambda g: (randn(g, 3, 5, 8), randn(g, 3, 6, 8), randn(g, 3, 6, 8)), [SDPA]),
]

CASES = (LOGICAL_CASES + REMAINDER_CASES + MATH_CASES + REDUCTION_CASES + ASSIGNMENT_CASES + RESIZE_CASES
         + GRID_CASES + ATTENTION_CASES)
