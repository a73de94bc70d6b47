"""Op table rows for nn layers: convolution, padding modes, pooling, pixel shuffle,
normalisation, linear algebra and dropout. Inputs are small; weights are seeded."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from op_table.schema import Lambda, OpCase

WEIGHT_SEED = 0


def seeded(factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    """The module built with torch's RNG seeded, without touching the caller's RNG state."""

    def build() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(WEIGHT_SEED)
            return factory()

    return build


def randn(*shapes: tuple[int, ...]) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    return lambda gen: tuple(torch.randn(*shape, generator=gen) for shape in shapes)


def case(name: str, factory: Callable[[], nn.Module], shapes: tuple[tuple[int, ...], ...], targets: tuple[str, ...],
         seed_ops: tuple[str, ...] = (), **options) -> OpCase:
    return OpCase(name, seeded(factory), randn(*shapes), targets, seed_ops, **options)


def fn(function: Callable[..., torch.Tensor]) -> Callable[[], nn.Module]:
    """A module calling `function(*inputs)`."""
    return lambda: Lambda(lambda self, *args: function(*args))


def with_stats(norm: nn.Module) -> nn.Module:
    """A norm layer whose running statistics are not the trivial 0/1 defaults."""
    if norm.running_mean is not None:
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)
    if norm.weight is not None:
        nn.init.uniform_(norm.weight, 0.5, 1.5)
        nn.init.uniform_(norm.bias, -0.5, 0.5)
    return norm


CONV1D, CONV2D, CONV3D = "aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default"
CONVOLUTION = "aten.convolution.default"

CONV_CASES = [
    case("conv1d_stride_dilation_groups", lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
         ((2, 4, 11),), (CONV1D,), ("Conv",)),
    case("conv2d_basic", lambda: nn.Conv2d(3, 5, 3, padding=1), ((2, 3, 6, 6),), (CONV2D,), ("Conv",)),
    case("conv2d_rect_groups_no_bias", lambda: nn.Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=4, bias=False),
         ((1, 4, 7, 6),), (CONV2D,), ("Conv",)),
    case("conv2d_depthwise", lambda: nn.Conv2d(3, 3, 3, groups=3), ((1, 3, 5, 5),), (CONV2D,), ("Conv",)),
    case("conv2d_unbatched", lambda: nn.Conv2d(2, 3, 3), ((2, 5, 5),), (CONV2D,), ("Conv",)),
    case("conv3d_groups", lambda: nn.Conv3d(4, 4, 2, stride=2, padding=1, groups=2), ((1, 4, 4, 5, 3),), (CONV3D,), ("Conv",)),
    case("conv1d_same_even_kernel", lambda: nn.Conv1d(2, 3, 4, padding="same"), ((1, 2, 9),), ("aten.conv1d.padding",), ("Conv",)),
    case("conv2d_same_even_dilated", lambda: nn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2)),
         ((1, 2, 7, 8),), ("aten.conv2d.padding",), ("Conv",)),
    case("conv2d_same_dilation_odd_total", lambda: nn.Conv2d(2, 2, 2, padding="same", dilation=3),
         ((1, 2, 6, 6),), ("aten.conv2d.padding",), ("Conv",)),
    case("conv2d_valid", lambda: nn.Conv2d(2, 3, 3, padding="valid"), ((1, 2, 6, 5),), ("aten.conv2d.padding",), ("Conv",)),
    case("conv3d_same", lambda: nn.Conv3d(2, 2, (2, 3, 4), padding="same"), ((1, 2, 4, 5, 6),), ("aten.conv3d.padding",), ("Conv",)),
    case("conv2d_reflect", lambda: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), ((1, 2, 6, 6),),
         ("aten.reflection_pad2d.default", CONV2D), ("Conv",)),
    case("conv1d_replicate", lambda: nn.Conv1d(2, 3, 3, padding=2, padding_mode="replicate"), ((2, 2, 7),),
         ("aten.replication_pad1d.default", CONV1D), ("Conv",)),
    case("conv2d_circular", lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), ((1, 2, 5, 6),),
         ("aten._pad_circular.default", CONV2D), ("Conv",)),
    case("conv3d_circular", lambda: nn.Conv3d(2, 2, 3, padding=(1, 2, 1), padding_mode="circular"), ((1, 2, 4, 5, 4),),
         ("aten._pad_circular.default", CONV3D), ("Conv",)),
    case("conv3d_replicate", lambda: nn.Conv3d(2, 2, 3, padding=1, padding_mode="replicate"), ((1, 2, 4, 4, 4),),
         ("aten.replication_pad3d.default", CONV3D), ("Conv",)),
    case("conv1d_reflect", lambda: nn.Conv1d(2, 2, 3, padding=2, padding_mode="reflect"), ((1, 2, 6),),
         ("aten.reflection_pad1d.default", CONV1D), ("Conv",)),
    case("reflection_pad3d", fn(lambda x: F.pad(x, (1, 0, 2, 1, 0, 1), mode="reflect")), ((1, 2, 3, 4, 4),),
         ("aten.reflection_pad3d.default",)),
    case("replication_pad2d_unbatched", fn(lambda x: F.pad(x, (2, 1, 0, 3), mode="replicate")), ((2, 3, 4),),
         ("aten.replication_pad2d.default",)),
    # replicate pads whose negative part crops an axis to nothing: torch replicates the border the
    # crop reaches, onnxruntime's edge Pad refuses the axis (a Gather of clamped indices there)
    case("replication_pad1d_crop_to_nothing", fn(lambda x: F.pad(x, (-3, 2), mode="replicate")), ((2, 3, 3),),
         ("aten.replication_pad1d.default",)),
    case("replication_pad2d_crop_past_and_pad", fn(lambda x: F.pad(x, (2, -6, -1, 3), mode="replicate")), ((1, 2, 4, 5),),
         ("aten.replication_pad2d.default",)),
    case("replication_pad3d_crop_to_nothing_mixed", fn(lambda x: F.pad(x, (-4, 1, 1, -1, 0, -2), mode="replicate")),
         ((1, 2, 3, 3, 4),), ("aten.replication_pad3d.default",)),
    case("replication_pad2d_negative_kept", fn(lambda x: F.pad(x, (-1, 2, 3, -2), mode="replicate")), ((2, 4, 5),),
         ("aten.replication_pad2d.default",)),
    case("replication_pad1d_negative_symbolic", fn(lambda x: F.pad(x, (-3, 2), mode="replicate")), ((2, 3, 6),),
         ("aten.replication_pad1d.default",), dynamic_axes={"args_0": {2: "w"}}, sizes=({"w": 3}, {"w": 2})),
    case("circular_pad_negative", fn(lambda x: F.pad(x, (-1, 2, 2, -1), mode="circular")), ((1, 2, 4, 5),),
         ("aten._pad_circular.default",)),
    case("convolution_generic", fn(lambda x, w: torch.ops.aten.convolution(x, w, None, [2, 1], [1, 0], [1, 2], False, [0, 0], 2)),
         ((1, 4, 7, 7), (6, 2, 3, 2)), (CONVOLUTION,), ("Conv",)),
    case("convolution_transposed_generic", fn(lambda x, w, b: torch.ops.aten.convolution(x, w, b, [2, 3], [1, 0], [1, 1], True, [1, 2], 2)),
         ((1, 4, 4, 3), (4, 3, 3, 2), (6,)), (CONVOLUTION,), ("Conv",)),
    case("conv_transpose1d", lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
         ((2, 4, 5),), ("aten.conv_transpose1d.default",), ("Conv",)),
    case("conv_transpose2d_grouped", lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2),
         ((1, 4, 4, 3),), ("aten.conv_transpose2d.input",), ("Conv",)),
    case("conv_transpose2d_dilated_no_bias", lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, dilation=2, output_padding=1, bias=False),
         ((1, 3, 4, 4),), ("aten.conv_transpose2d.input",), ("Conv",)),
    case("conv_transpose2d_unbatched", lambda: nn.ConvTranspose2d(2, 3, 2, stride=2), ((2, 3, 3),), ("aten.conv_transpose2d.input",), ("Conv",)),
    case("conv_transpose3d_grouped", lambda: nn.ConvTranspose3d(4, 4, 2, stride=2, padding=1, output_padding=1, groups=4),
         ((1, 4, 3, 3, 2),), ("aten.conv_transpose3d.input",), ("Conv",)),
]

MAXPOOL2D_IDX = "aten.max_pool2d_with_indices.default"

POOL_CASES = [
    case("max_pool1d_ceil", lambda: nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True), ((2, 3, 10),),
         ("aten.max_pool1d.default",), ("MaxPool1d",)),
    case("max_pool1d_indices", lambda: nn.MaxPool1d(2, stride=3, padding=1, return_indices=True), ((2, 3, 10),),
         ("aten.max_pool1d_with_indices.default",), ("MaxPool1d",)),
    case("max_pool2d", lambda: nn.MaxPool2d(3, stride=2, padding=1), ((2, 3, 7, 8),), ("aten.max_pool2d.default",), ("MaxPool2d",)),
    # 5 wide, kernel 2, stride 2, pad 1: ONNX's ceil_mode would add a window starting in the padding
    case("max_pool2d_ceil_drops_last_window", lambda: nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True),
         ((1, 2, 5, 5),), ("aten.max_pool2d.default",), ("MaxPool2d",)),
    case("max_pool2d_ceil_dilation", lambda: nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True),
         ((1, 2, 9, 8),), ("aten.max_pool2d.default",), ("MaxPool2d",)),
    case("max_pool2d_unbatched", lambda: nn.MaxPool2d(2), ((3, 6, 5),), ("aten.max_pool2d.default",), ("MaxPool2d",)),
    case("max_pool2d_indices", lambda: nn.MaxPool2d(3, stride=2, padding=1, return_indices=True), ((2, 3, 7, 6),),
         (MAXPOOL2D_IDX,), ("MaxPool2d",)),
    case("max_pool2d_indices_ceil_edge", lambda: nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True, return_indices=True),
         ((2, 2, 5, 5),), (MAXPOOL2D_IDX,), ("MaxPool2d",)),
    # ceil_mode with dilation 3 needs end padding 2 >= kernel 2, which onnxruntime refuses:
    # padded explicitly with -inf instead, and the indices mapped back to the unpadded plane
    case("max_pool2d_indices_end_pad_ge_kernel", lambda: nn.MaxPool2d(2, stride=2, padding=1, dilation=3, ceil_mode=True, return_indices=True),
         ((1, 2, 5, 6),), (MAXPOOL2D_IDX,), ("MaxPool2d",)),
    case("max_pool2d_indices_unbatched", lambda: nn.MaxPool2d(2, return_indices=True), ((2, 4, 5),), (MAXPOOL2D_IDX,), ("MaxPool2d",)),
    case("max_pool3d_ceil", lambda: nn.MaxPool3d(2, stride=2, padding=1, ceil_mode=True), ((1, 2, 5, 4, 5),),
         ("aten.max_pool3d.default",), ("MaxPool3d",)),
    case("max_pool3d_indices", lambda: nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), return_indices=True),
         ((1, 2, 4, 5, 4),), ("aten.max_pool3d_with_indices.default",), ("MaxPool3d",)),
    case("avg_pool1d_ceil", lambda: nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), ((2, 3, 10),),
         ("aten.avg_pool1d.default",)),
    case("avg_pool1d_exclude_pad", lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
         ((1, 2, 9),), ("aten.avg_pool1d.default",)),
    case("avg_pool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1), ((2, 3, 7, 6),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    # the last window hangs past torch's padding: torch divides by the clipped window (2, not 3)
    case("avg_pool2d_ceil_overhang_include_pad", lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
         ((1, 2, 6, 6),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    case("avg_pool2d_ceil_no_pad", lambda: nn.AvgPool2d(2, ceil_mode=True), ((1, 2, 5, 5),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    case("avg_pool2d_ceil_exclude_pad", lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         ((1, 2, 6, 7),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    case("avg_pool2d_divisor_override", lambda: nn.AvgPool2d(3, stride=2, padding=1, divisor_override=5),
         ((1, 2, 6, 6),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    case("avg_pool2d_unbatched", lambda: nn.AvgPool2d(2), ((2, 4, 4),), ("aten.avg_pool2d.default",), ("avg_pool2d",)),
    case("avg_pool3d_ceil", lambda: nn.AvgPool3d(2, stride=2, padding=1, ceil_mode=True), ((1, 2, 5, 4, 5),),
         ("aten.avg_pool3d.default",)),
    case("avg_pool3d_divisor_ceil", lambda: nn.AvgPool3d(2, ceil_mode=True, divisor_override=3), ((1, 1, 3, 5, 4),),
         ("aten.avg_pool3d.default",)),
    case("adaptive_avg_pool1d", lambda: nn.AdaptiveAvgPool1d(3), ((2, 3, 7),), ("aten.adaptive_avg_pool1d.default",)),
    case("adaptive_avg_pool2d_divides", lambda: nn.AdaptiveAvgPool2d((2, 3)), ((1, 2, 8, 6),), ("aten.adaptive_avg_pool2d.default",)),
    case("adaptive_avg_pool2d_mixed", lambda: nn.AdaptiveAvgPool2d((3, 3)), ((1, 2, 7, 6),), ("aten.adaptive_avg_pool2d.default",)),
    case("adaptive_avg_pool2d_global", lambda: nn.AdaptiveAvgPool2d(1), ((2, 3, 5, 4),), ("aten.adaptive_avg_pool2d.default",)),
    case("adaptive_avg_pool2d_upsample", lambda: nn.AdaptiveAvgPool2d((5, 4)), ((1, 2, 3, 3),), ("aten.adaptive_avg_pool2d.default",)),
    case("adaptive_avg_pool3d", lambda: nn.AdaptiveAvgPool3d((2, 3, 4)), ((1, 2, 5, 7, 4),), ("aten.adaptive_avg_pool3d.default",)),
    case("_adaptive_avg_pool2d", fn(lambda x: torch.ops.aten._adaptive_avg_pool2d(x, [3, 2])), ((1, 2, 7, 5),),
         ("aten._adaptive_avg_pool2d.default",)),
    case("_adaptive_avg_pool3d", fn(lambda x: torch.ops.aten._adaptive_avg_pool3d(x, [2, 2, 3])), ((1, 2, 3, 4, 7),),
         ("aten._adaptive_avg_pool3d.default",)),
    case("adaptive_avg_pool2d_unbatched", lambda: nn.AdaptiveAvgPool2d(3), ((2, 7, 5),), ("aten.adaptive_avg_pool2d.default",)),
    case("adaptive_max_pool1d", lambda: nn.AdaptiveMaxPool1d(3, return_indices=True), ((2, 3, 7),), ("aten.adaptive_max_pool1d.default",)),
    case("adaptive_max_pool2d_indices", lambda: nn.AdaptiveMaxPool2d((3, 2), return_indices=True), ((2, 2, 7, 5),),
         ("aten.adaptive_max_pool2d.default",)),
    case("adaptive_max_pool2d_divides", lambda: nn.AdaptiveMaxPool2d((2, 3), return_indices=True), ((1, 2, 6, 6),),
         ("aten.adaptive_max_pool2d.default",)),
    case("adaptive_max_pool2d_values", lambda: nn.AdaptiveMaxPool2d(4), ((1, 3, 9, 6),), ("aten.adaptive_max_pool2d.default",)),
    case("adaptive_max_pool3d", lambda: nn.AdaptiveMaxPool3d((2, 2, 3), return_indices=True), ((1, 2, 3, 5, 4),),
         ("aten.adaptive_max_pool3d.default",)),
    case("pixel_shuffle", lambda: nn.PixelShuffle(2), ((2, 12, 3, 4),), ("aten.pixel_shuffle.default",)),
    case("pixel_shuffle_extra_batch_axes", lambda: nn.PixelShuffle(3), ((2, 1, 9, 2, 3),), ("aten.pixel_shuffle.default",)),
    case("pixel_shuffle_unbatched", lambda: nn.PixelShuffle(2), ((8, 2, 3),), ("aten.pixel_shuffle.default",)),
    case("pixel_unshuffle", lambda: nn.PixelUnshuffle(2), ((2, 3, 4, 6),), ("aten.pixel_unshuffle.default",)),
    case("pixel_unshuffle_unbatched", lambda: nn.PixelUnshuffle(3), ((2, 6, 3),), ("aten.pixel_unshuffle.default",)),
]

BN_NO_TRAINING = "aten._native_batch_norm_legit_no_training.default"

NORM_CASES = [
    case("batch_norm1d_2d_input", lambda: with_stats(nn.BatchNorm1d(4)), ((3, 4),), (BN_NO_TRAINING,), ("BatchNorm",)),
    case("batch_norm1d", lambda: with_stats(nn.BatchNorm1d(3)), ((2, 3, 5),), (BN_NO_TRAINING,), ("BatchNorm",)),
    case("batch_norm2d", lambda: with_stats(nn.BatchNorm2d(3)), ((2, 3, 4, 5),), (BN_NO_TRAINING,), ("BatchNorm",)),
    case("batch_norm2d_no_affine", lambda: with_stats(nn.BatchNorm2d(3, affine=False)), ((2, 3, 4, 4),), (BN_NO_TRAINING,), ("BatchNorm",)),
    case("batch_norm3d", lambda: with_stats(nn.BatchNorm3d(2, eps=1e-3)), ((2, 2, 3, 4, 3),), (BN_NO_TRAINING,), ("BatchNorm",)),
    case("batch_norm2d_batch_stats", lambda: with_stats(nn.BatchNorm2d(3, track_running_stats=False)), ((4, 3, 3, 5),),
         ("aten._native_batch_norm_legit.no_stats",), ("BatchNorm",)),
    case("instance_norm1d", lambda: nn.InstanceNorm1d(3), ((2, 3, 6),), ("aten.instance_norm.default",)),
    case("instance_norm2d_affine", lambda: with_stats(nn.InstanceNorm2d(3, affine=True)), ((2, 3, 4, 5),), ("aten.instance_norm.default",)),
    case("instance_norm2d_running_stats", lambda: with_stats(nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
         ((2, 3, 4, 4),), ("aten.instance_norm.default",)),
    case("layer_norm", lambda: nn.LayerNorm(6), ((2, 3, 6),), ("aten.layer_norm.default",)),
    case("layer_norm_2d_no_affine", lambda: nn.LayerNorm((3, 4), elementwise_affine=False), ((2, 3, 4),), ("aten.layer_norm.default",)),
    case("layer_norm_no_bias", lambda: nn.LayerNorm(5, bias=False), ((4, 5),), ("aten.layer_norm.default",)),
    case("native_layer_norm_stats", fn(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [4], w, b, 1e-5)),
         ((2, 3, 4), (4,), (4,)), ("aten.native_layer_norm.default",)),
    case("native_group_norm", fn(lambda x, w, b: torch.ops.aten.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5)[0]),
         ((2, 6, 3, 4), (6,), (6,)), ("aten.native_group_norm.default",)),
    case("group_norm", lambda: nn.GroupNorm(2, 4), ((2, 4, 3, 3),), ("aten.group_norm.default",)),
    case("group_norm_no_affine_1d", lambda: nn.GroupNorm(3, 6, affine=False), ((2, 6, 5),), ("aten.group_norm.default",)),
]

LINEAR_CASES = [
    case("linear_2d", lambda: nn.Linear(5, 3), ((4, 5),), ("aten.linear.default",)),
    case("linear_1d", lambda: nn.Linear(5, 3), ((5,),), ("aten.linear.default",)),
    case("linear_4d_no_bias", lambda: nn.Linear(5, 3, bias=False), ((2, 3, 2, 5),), ("aten.linear.default",)),
    case("mm", fn(torch.mm), ((3, 4), (4, 2)), ("aten.mm.default",), ("mm",)),
    case("bmm", fn(torch.bmm), ((2, 3, 4), (2, 4, 5)), ("aten.bmm.default",)),
    case("matmul_broadcast", fn(torch.matmul), ((2, 1, 3, 4), (3, 4, 2)), ("aten.matmul.default",)),
    case("matmul_vector", fn(torch.matmul), ((4,), (2, 4, 3)), ("aten.matmul.default",)),
    case("addmm", fn(torch.addmm), ((2, 3), (2, 4), (4, 3)), ("aten.addmm.default",), ("addmm",)),
    case("addmm_beta_alpha_broadcast", fn(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0)),
         ((3,), (2, 4), (4, 3)), ("aten.addmm.default",), ("addmm",)),
    case("addmv", fn(lambda c, a, b: torch.addmv(c, a, b, beta=2.0, alpha=0.5)), ((3,), (3, 4), (4,)), ("aten.addmv.default",)),
    case("addmm_beta_zero_ignores_nan", fn(lambda c, a, b: torch.addmm(c * float("nan"), a, b, beta=0)),
         ((2, 3), (2, 4), (4, 3)), ("aten.addmm.default",), ("addmm",)),
    # nn.Bilinear decomposes into _trilinear (and the bias add)
    case("bilinear", lambda: nn.Bilinear(5, 4, 3), ((6, 5), (6, 4)), ("aten._trilinear.default",),
         dynamic_axes={"input1": {0: "batch"}, "input2": {0: "batch"}}),
    case("bilinear_3d_no_bias", lambda: nn.Bilinear(3, 2, 4, bias=False), ((2, 5, 3), (2, 5, 2)), ("aten._trilinear.default",)),
    case("trilinear_expanded_kept_dim", fn(lambda a, b, c: torch.ops.aten._trilinear(a, b, c, [1], [0], [1], [2])),
         ((3, 4), (2, 4), (3, 4)), ("aten._trilinear.default",)),
]

# Dropout in eval is the identity: torch.export removes the nn.Dropout* layers (dropout ops
# cannot be preserved), so those rows check that the layer exports and computes the identity;
# there is no dropout op to find. native_dropout, called directly, is kept.
DROPOUT_CASES = [
    case("dropout_eval", lambda: nn.Sequential(nn.Dropout(0.5), nn.ReLU()), ((3, 4),), ("aten.relu.default",), ("Dropout",)),
    case("feature_dropout2d_eval", lambda: nn.Sequential(nn.Dropout2d(0.3), nn.ReLU()),
         ((2, 3, 4, 4),), ("aten.relu.default",), ("FeatureDropout",)),
    case("feature_dropout1d_3d_eval", lambda: nn.Sequential(nn.Dropout1d(0.3), nn.Dropout3d(0.3), nn.ReLU()),
         ((2, 3, 4),), ("aten.relu.default",), ("FeatureDropout",)),
    case("native_dropout_eval", fn(lambda x: torch.ops.aten.native_dropout(x, 0.5, False)), ((3, 4),),
         ("aten.native_dropout.default",), ("Dropout",)),
    case("alpha_dropout_eval", lambda: nn.Sequential(nn.AlphaDropout(0.2), nn.FeatureAlphaDropout(0.2), nn.ReLU()),
         ((2, 3, 4),), ("aten.relu.default",), ("Dropout",)),
]

BATCH = {"input": {0: "batch"}}
BATCH_SPATIAL = {"input": {0: "batch", 2: "height", 3: "width"}}

# Dynamic axes: batch everywhere; height and width where torch.export keeps them symbolic
# (it specialises pooled and strided sizes whose output could be 1).
DYNAMIC_CASES = [
    case("conv2d_dynamic_batch", lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), ((2, 2, 7, 6),), (CONV2D,), ("Conv",),
         dynamic_axes=BATCH),
    case("conv2d_circular_dynamic", lambda: nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"), ((2, 2, 5, 6),),
         ("aten._pad_circular.default", CONV2D), ("Conv",), dynamic_axes=BATCH_SPATIAL),
    case("conv2d_reflect_dynamic", lambda: nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"), ((2, 2, 5, 6),),
         ("aten.reflection_pad2d.default", CONV2D), ("Conv",), dynamic_axes=BATCH_SPATIAL),
    case("conv_transpose2d_dynamic", lambda: nn.ConvTranspose2d(2, 2, 3, stride=2), ((2, 2, 5, 6),),
         ("aten.conv_transpose2d.input",), ("Conv",), dynamic_axes=BATCH_SPATIAL),
    case("max_pool2d_indices_dynamic_batch", lambda: nn.MaxPool2d(3, stride=2, padding=1, return_indices=True),
         ((2, 2, 7, 6),), (MAXPOOL2D_IDX,), ("MaxPool2d",), dynamic_axes=BATCH),
    case("avg_pool2d_ceil_overhang_dynamic_batch", lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
         ((2, 2, 6, 6),), ("aten.avg_pool2d.default",), ("avg_pool2d",), dynamic_axes=BATCH),
    case("adaptive_max_pool2d_dynamic_batch", lambda: nn.AdaptiveMaxPool2d((3, 2), return_indices=True), ((2, 2, 7, 5),),
         ("aten.adaptive_max_pool2d.default",), dynamic_axes=BATCH),
    case("adaptive_avg_pool2d_global_dynamic", lambda: nn.AdaptiveAvgPool2d(1), ((2, 3, 5, 4),),
         ("aten.adaptive_avg_pool2d.default",), dynamic_axes=BATCH_SPATIAL),
    case("pixel_shuffle_dynamic", lambda: nn.PixelShuffle(2), ((2, 8, 3, 4),), ("aten.pixel_shuffle.default",),
         dynamic_axes=BATCH_SPATIAL),
    case("batch_norm2d_batch_stats_dynamic", lambda: with_stats(nn.BatchNorm2d(2, track_running_stats=False)), ((2, 2, 5, 6),),
         ("aten._native_batch_norm_legit.no_stats",), ("BatchNorm",), dynamic_axes=BATCH_SPATIAL),
    case("group_norm_dynamic", lambda: nn.GroupNorm(2, 4), ((2, 4, 5, 6),), ("aten.group_norm.default",), dynamic_axes=BATCH_SPATIAL),
    case("linear_dynamic", lambda: nn.Linear(5, 3), ((2, 3, 5),), ("aten.linear.default",),
         dynamic_axes={"input": {0: "batch", 1: "seq"}}),
    case("layer_norm_dynamic", lambda: nn.LayerNorm(5), ((2, 3, 5),), ("aten.layer_norm.default",),
         dynamic_axes={"input": {0: "batch", 1: "seq"}}),
]

CASES: list[OpCase] = CONV_CASES + POOL_CASES + NORM_CASES + LINEAR_CASES + DROPOUT_CASES + DYNAMIC_CASES
