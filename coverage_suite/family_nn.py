"""nn families: math (cumulative ops, norms, moments, matmul), convolutions, pooling, norms,
activations, layers (embedding, padding, resize, pixel shuffle), recurrent layers, attention."""

from __future__ import annotations

import torch
import torch.nn.functional as nnf
from torch import nn

from .case import F, I, P, Table

math = Table("math")
for _dim in (0, 1, -1):
    math.fn(f"cumsum_d{_dim}", f"torch.cumsum(dim={_dim})", lambda x, d=_dim: torch.cumsum(x, d), F(3, 4, 5))
    math.fn(f"cumprod_d{_dim}", f"torch.cumprod(dim={_dim})", lambda x, d=_dim: torch.cumprod(x, d), P(3, 4, 5))
    math.fn(f"logsumexp_d{_dim}", f"torch.logsumexp(dim={_dim})", lambda x, d=_dim: torch.logsumexp(x, d), F(3, 4, 5))
    math.fn(f"softmax_d{_dim}", f"torch.softmax(dim={_dim})", lambda x, d=_dim: torch.softmax(x, d), F(3, 4, 5))
    math.fn(f"log_softmax_d{_dim}", f"torch.log_softmax(dim={_dim})", lambda x, d=_dim: torch.log_softmax(x, d), F(3, 4, 5))
math.fn("cummax", "torch.cummax(dim=1)", lambda x: torch.cummax(x, 1), F(3, 4))
math.fn("cummin", "torch.cummin(dim=1)", lambda x: torch.cummin(x, 1), F(3, 4))
math.fn("logcumsumexp", "torch.logcumsumexp(dim=1)", lambda x: torch.logcumsumexp(x, 1), F(3, 4))
math.fn("cumsum_int", "torch.cumsum of an int64 tensor", lambda x: torch.cumsum(x, 0), I(3, 4))
math.fn("logsumexp_keep", "torch.logsumexp(dim=(1, 2), keepdim=True)", lambda x: torch.logsumexp(x, (1, 2), True), F(3, 4, 5))
for _p in (1, 2, 3, float("inf")):
    for _dim in (None, -1):
        math.fn(f"norm_p{_p}_d{_dim}", f"torch.linalg.vector_norm(ord={_p}, dim={_dim})",
                lambda x, p=_p, d=_dim: torch.linalg.vector_norm(x, p, d), F(3, 4, 5))
math.fn("norm_fro", "torch.norm (Frobenius) over dims (1, 2)", lambda x: torch.norm(x, dim=(1, 2)), F(3, 4, 5))
math.fn("matrix_norm_fro", "torch.linalg.matrix_norm('fro')", torch.linalg.matrix_norm, F(3, 4, 5))
math.fn("normalize", "F.normalize(dim=1)", lambda x: nnf.normalize(x, dim=1), F(3, 4, 5))
for _fn_name in ("var", "std"):
    for _dim in (None, 1, (1, 2)):
        for _corr in (0, 1):
            math.fn(f"{_fn_name}_d{_dim}_c{_corr}".replace(" ", ""), f"torch.{_fn_name}(dim={_dim}, correction={_corr})",
                    lambda x, f=getattr(torch, _fn_name), d=_dim, c=_corr: f(x, d, correction=c), F(3, 4, 5))
    math.fn(f"{_fn_name}_keep", f"torch.{_fn_name}(dim=-1, keepdim=True)",
            lambda x, f=getattr(torch, _fn_name): f(x, -1, keepdim=True), F(3, 4, 5))
math.fn("var_mean", "torch.var_mean(dim=1)", lambda x: torch.var_mean(x, 1), F(3, 4, 5))
math.fn("std_mean", "torch.std_mean(dim=-1, correction=0)", lambda x: torch.std_mean(x, -1, correction=0), F(3, 4, 5))
MATMUL = {
    "mm": (torch.mm, (F(3, 4), F(4, 5))), "bmm": (torch.bmm, (F(2, 3, 4), F(2, 4, 5))),
    "matmul_broadcast": (torch.matmul, (F(2, 3, 4), F(4, 5))), "matmul_vec": (torch.matmul, (F(3, 4), F(4))),
    "matmul_4d": (torch.matmul, (F(2, 2, 3, 4), F(2, 1, 4, 3))), "outer": (torch.outer, (F(3), F(4))),
    "dot": (torch.dot, (F(5), F(5))), "mv": (torch.mv, (F(3, 4), F(4))),
    "einsum_ij_jk": (lambda x, y: torch.einsum("ij,jk->ik", x, y), (F(3, 4), F(4, 5))),
    "einsum_batch": (lambda x, y: torch.einsum("bij,bkj->bik", x, y), (F(2, 3, 4), F(2, 5, 4))),
    "einsum_trace": (lambda x, y: torch.einsum("ii->", x) + y.sum(), (F(4, 4), F(2))),
    "einsum_outer_sum": (lambda x, y: torch.einsum("i,j->", x, y), (F(3), F(4))),
    "addmm": (lambda x, y: torch.addmm(y[0], x, y), (F(3, 4), F(4, 4))),
    "baddbmm": (lambda x, y: torch.baddbmm(x @ y, x, y, beta=0.5, alpha=2.0), (F(2, 3, 3), F(2, 3, 3))),
    "addmv": (lambda x, y: torch.addmv(y[:3], x, y), (F(3, 4), F(4))),
    "tensordot": (lambda x, y: torch.tensordot(x, y, dims=([1, 2], [0, 1])), (F(2, 3, 4), F(3, 4, 2))),
    "kron": (torch.kron, (F(2, 2), F(2, 3))), "cross": (lambda x, y: torch.linalg.cross(x, y), (F(4, 3), F(4, 3))),
    "cdist": (torch.cdist, (F(3, 4), F(5, 4))), "trace": (lambda x, y: torch.trace(x) * y, (F(4, 4), F(1))),
    "matmul_int": (torch.matmul, (I(3, 4), I(4, 2))), "det_like_linear": (nnf.linear, (F(3, 4), F(5, 4))),
}
for _name, (_fn, _specs) in MATMUL.items():
    math.fn(_name, f"{_name.replace('_', ' ')} of {[s.shape for s in _specs]}", _fn, *_specs)

conv = Table("conv")
# name -> (module factory, input shape)
CONVS = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3), (2, 3, 10)),
    "conv1d_stride_pad": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 10)),
    "conv1d_dilation": (lambda: nn.Conv1d(3, 4, 3, dilation=2), (2, 3, 12)),
    "conv1d_groups": (lambda: nn.Conv1d(4, 4, 3, groups=2), (2, 4, 10)),
    "conv1d_same": (lambda: nn.Conv1d(3, 4, 4, padding="same"), (2, 3, 10)),
    "conv1d_reflect": (lambda: nn.Conv1d(3, 4, 3, padding=1, padding_mode="reflect"), (2, 3, 10)),
    "conv1d_circular": (lambda: nn.Conv1d(3, 4, 3, padding=2, padding_mode="circular"), (2, 3, 10)),
    "conv1d_nobias": (lambda: nn.Conv1d(3, 4, 1, bias=False), (2, 3, 10)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3), (2, 3, 8, 8)),
    "conv2d_stride2": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 8, 8)),
    "conv2d_rect_kernel": (lambda: nn.Conv2d(3, 4, (1, 3), padding=(0, 1)), (2, 3, 6, 8)),
    "conv2d_asym_stride": (lambda: nn.Conv2d(3, 4, 3, stride=(2, 1)), (2, 3, 8, 8)),
    "conv2d_dilation2": (lambda: nn.Conv2d(3, 4, 3, dilation=2, padding=2), (2, 3, 8, 8)),
    "conv2d_groups2": (lambda: nn.Conv2d(4, 6, 3, groups=2), (2, 4, 6, 6)),
    "conv2d_depthwise": (lambda: nn.Conv2d(4, 4, 3, groups=4, padding=1), (2, 4, 6, 6)),
    "conv2d_depth_mult": (lambda: nn.Conv2d(3, 6, 3, groups=3), (2, 3, 6, 6)),
    "conv2d_same": (lambda: nn.Conv2d(3, 4, 3, padding="same"), (2, 3, 7, 7)),
    "conv2d_same_even": (lambda: nn.Conv2d(3, 4, 4, padding="same"), (2, 3, 7, 7)),
    "conv2d_valid": (lambda: nn.Conv2d(3, 4, 3, padding="valid"), (2, 3, 7, 7)),
    "conv2d_reflect": (lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (2, 3, 6, 6)),
    "conv2d_replicate": (lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"), (2, 3, 6, 6)),
    "conv2d_circular": (lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (2, 3, 6, 6)),
    "conv2d_nobias": (lambda: nn.Conv2d(3, 4, 1, bias=False), (2, 3, 6, 6)),
    "conv2d_asym_pad": (lambda: nn.Conv2d(3, 4, 3, padding=(0, 2)), (2, 3, 6, 6)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 3), (1, 2, 5, 5, 5)),
    "conv3d_stride_pad": (lambda: nn.Conv3d(2, 3, 3, stride=2, padding=1), (1, 2, 5, 5, 5)),
    "conv3d_groups": (lambda: nn.Conv3d(2, 4, 3, groups=2, dilation=(1, 1, 2), padding=(1, 1, 2)), (1, 2, 4, 4, 4)),
    "conv3d_replicate": (lambda: nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate"), (1, 2, 4, 4, 4)),
    "convT1d": (lambda: nn.ConvTranspose1d(3, 4, 3), (2, 3, 6)),
    "convT1d_stride": (lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 6)),
    "convT2d": (lambda: nn.ConvTranspose2d(3, 4, 3), (2, 3, 5, 5)),
    "convT2d_stride2": (lambda: nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1), (2, 3, 5, 5)),
    "convT2d_output_pad": (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 5, 5)),
    "convT2d_groups": (lambda: nn.ConvTranspose2d(4, 6, 3, groups=2), (2, 4, 5, 5)),
    "convT2d_dilation": (lambda: nn.ConvTranspose2d(3, 4, 3, dilation=2), (2, 3, 5, 5)),
    "convT2d_nobias": (lambda: nn.ConvTranspose2d(3, 2, 2, stride=2, bias=False), (2, 3, 4, 4)),
    "convT3d": (lambda: nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1), (1, 2, 3, 3, 3)),
    "convT3d_groups": (lambda: nn.ConvTranspose3d(2, 4, 2, groups=2), (1, 2, 3, 3, 3)),
}
for _name, (_factory, _shape) in CONVS.items():
    conv.add(_name, f"{_name.replace('_', ' ')} on {_shape}", _factory, F(*_shape))

pool = Table("pool")
POOLS = {
    "maxpool1d": (lambda: nn.MaxPool1d(2), (2, 3, 10)), "maxpool1d_stride_pad": (lambda: nn.MaxPool1d(3, 2, 1), (2, 3, 10)),
    "maxpool2d": (lambda: nn.MaxPool2d(2), (2, 3, 8, 8)), "maxpool2d_3s2p1": (lambda: nn.MaxPool2d(3, 2, 1), (2, 3, 8, 8)),
    "maxpool2d_ceil": (lambda: nn.MaxPool2d(3, 2, ceil_mode=True), (2, 3, 8, 8)),
    "maxpool2d_dilation": (lambda: nn.MaxPool2d(2, 1, dilation=2), (2, 3, 8, 8)),
    "maxpool2d_indices": (lambda: nn.MaxPool2d(2, return_indices=True), (2, 3, 8, 8)),
    "maxpool3d": (lambda: nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
    "avgpool1d": (lambda: nn.AvgPool1d(3, 2), (2, 3, 10)), "avgpool2d": (lambda: nn.AvgPool2d(2), (2, 3, 8, 8)),
    "avgpool2d_pad_include": (lambda: nn.AvgPool2d(3, 2, 1), (2, 3, 8, 8)),
    "avgpool2d_pad_exclude": (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 8, 8)),
    "avgpool2d_ceil": (lambda: nn.AvgPool2d(3, 2, ceil_mode=True), (2, 3, 8, 8)),
    "avgpool2d_divisor": (lambda: nn.AvgPool2d(2, divisor_override=3), (2, 3, 8, 8)),
    "avgpool3d": (lambda: nn.AvgPool3d(2), (1, 2, 4, 4, 4)),
    "adaptive_avg1d": (lambda: nn.AdaptiveAvgPool1d(5), (2, 3, 10)),
    "adaptive_avg2d_1": (lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 8, 8)),
    "adaptive_avg2d_uneven": (lambda: nn.AdaptiveAvgPool2d((3, 5)), (2, 3, 8, 10)),
    "adaptive_avg3d": (lambda: nn.AdaptiveAvgPool3d(2), (1, 2, 4, 4, 4)),
    "adaptive_max1d": (lambda: nn.AdaptiveMaxPool1d(5), (2, 3, 10)),
    "adaptive_max2d_1": (lambda: nn.AdaptiveMaxPool2d(1), (2, 3, 8, 8)),
    "adaptive_max2d_4": (lambda: nn.AdaptiveMaxPool2d(4), (2, 3, 8, 8)),
    "lppool2d": (lambda: nn.LPPool2d(2, 2), (2, 3, 8, 8)), "lppool1d": (lambda: nn.LPPool1d(1, 3), (2, 3, 9)),
    "maxunpool_roundtrip": (lambda: _MaxUnpool(), (1, 2, 4, 4)),
}


class _MaxUnpool(nn.Module):
    def forward(self, x):
        pooled, indices = nnf.max_pool2d(x, 2, return_indices=True)
        return nnf.max_unpool2d(pooled, indices, 2)


for _name, (_factory, _shape) in POOLS.items():
    pool.add(_name, f"{_name.replace('_', ' ')} on {_shape}", _factory, F(*_shape))

norm = Table("norm")
NORMS = {
    "batchnorm1d": (lambda: nn.BatchNorm1d(4), (3, 4, 5)), "batchnorm1d_2d_input": (lambda: nn.BatchNorm1d(4), (3, 4)),
    "batchnorm2d": (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)), "batchnorm2d_noaffine": (lambda: nn.BatchNorm2d(3, affine=False), (2, 3, 4, 4)),
    "batchnorm3d": (lambda: nn.BatchNorm3d(2), (1, 2, 3, 3, 3)),
    "layernorm_last": (lambda: nn.LayerNorm(5), (3, 4, 5)), "layernorm_two": (lambda: nn.LayerNorm((4, 5)), (3, 4, 5)),
    "layernorm_noaffine": (lambda: nn.LayerNorm(5, elementwise_affine=False), (3, 4, 5)),
    "layernorm_nobias": (lambda: nn.LayerNorm(5, bias=False), (3, 4, 5)),
    "groupnorm_2": (lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)), "groupnorm_1": (lambda: nn.GroupNorm(1, 4), (2, 4, 3, 3)),
    "groupnorm_per_channel": (lambda: nn.GroupNorm(4, 4), (2, 4, 5)),
    "instancenorm1d": (lambda: nn.InstanceNorm1d(3), (2, 3, 6)),
    "instancenorm2d_affine": (lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4)),
    "instancenorm2d_tracked": (lambda: nn.InstanceNorm2d(3, track_running_stats=True), (2, 3, 4, 4)),
    "instancenorm3d": (lambda: nn.InstanceNorm3d(2), (1, 2, 3, 3, 3)),
    "rmsnorm": (lambda: nn.RMSNorm(5), (3, 4, 5)), "rmsnorm_eps": (lambda: nn.RMSNorm((4, 5), eps=1e-3), (3, 4, 5)),
    "localresponse": (lambda: nn.LocalResponseNorm(3), (2, 5, 4, 4)),
}
for _name, (_factory, _shape) in NORMS.items():
    norm.add(_name, f"{_name.replace('_', ' ')} on {_shape} (eval)", _factory, F(*_shape))

act = Table("activation")
ACTIVATIONS = {
    "relu": nn.ReLU, "relu6": nn.ReLU6, "leaky_relu": nn.LeakyReLU, "leaky_relu_0.2": lambda: nn.LeakyReLU(0.2),
    "elu": nn.ELU, "elu_alpha": lambda: nn.ELU(0.5), "selu": nn.SELU, "celu": lambda: nn.CELU(1.5),
    "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU("tanh"), "silu": nn.SiLU, "mish": nn.Mish,
    "hardswish": nn.Hardswish, "hardsigmoid": nn.Hardsigmoid, "hardtanh": nn.Hardtanh,
    "hardtanh_range": lambda: nn.Hardtanh(-0.5, 0.5), "softplus": nn.Softplus, "softplus_beta": lambda: nn.Softplus(2, 5),
    "softsign": nn.Softsign, "tanhshrink": nn.Tanhshrink, "softshrink": nn.Softshrink, "hardshrink": nn.Hardshrink,
    "threshold": lambda: nn.Threshold(0.1, -1.0), "logsigmoid": nn.LogSigmoid, "prelu": nn.PReLU,
    "prelu_channels": lambda: nn.PReLU(4), "softmin": lambda: nn.Softmin(1), "softmax2d": nn.Softmax2d,
    "glu": lambda: nn.GLU(1), "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "rrelu_eval": nn.RReLU,
}
for _name, _factory in ACTIVATIONS.items():
    act.add(_name, f"nn.{_name} on a (2, 4, 3, 3) tensor", _factory, F(2, 4, 3, 3))

layer = Table("layer")
LAYERS = {
    "linear": (lambda: nn.Linear(5, 3), F(4, 5)), "linear_3d": (lambda: nn.Linear(5, 3), F(2, 4, 5)),
    "linear_nobias": (lambda: nn.Linear(5, 3, bias=False), F(4, 5)), "bilinear": (lambda: _Bilinear(), F(4, 5)),
    "embedding": (lambda: nn.Embedding(10, 4), I(2, 5, high=10)),
    "embedding_padding": (lambda: nn.Embedding(10, 4, padding_idx=0), I(2, 5, high=10)),
    "embedding_bag_mean": (lambda: nn.EmbeddingBag(10, 4, mode="mean"), I(3, 4, high=10)),
    "embedding_bag_sum": (lambda: nn.EmbeddingBag(10, 4, mode="sum"), I(3, 4, high=10)),
    "embedding_bag_max": (lambda: nn.EmbeddingBag(10, 4, mode="max"), I(3, 4, high=10)),
    "flatten": (nn.Flatten, F(2, 3, 4)), "unflatten": (lambda: nn.Unflatten(1, (2, 6)), F(2, 12)),
    "pixel_shuffle_2": (lambda: nn.PixelShuffle(2), F(1, 8, 3, 3)), "pixel_shuffle_3": (lambda: nn.PixelShuffle(3), F(1, 9, 2, 2)),
    "pixel_unshuffle_2": (lambda: nn.PixelUnshuffle(2), F(1, 2, 4, 4)), "channel_shuffle": (lambda: nn.ChannelShuffle(2), F(1, 4, 3, 3)),
    "zero_pad2d": (lambda: nn.ZeroPad2d((1, 2, 0, 1)), F(1, 2, 3, 3)), "constant_pad1d": (lambda: nn.ConstantPad1d(2, 3.5), F(1, 2, 4)),
    "reflection_pad1d": (lambda: nn.ReflectionPad1d(2), F(1, 2, 5)), "reflection_pad2d": (lambda: nn.ReflectionPad2d(1), F(1, 2, 4, 4)),
    "replication_pad2d": (lambda: nn.ReplicationPad2d((1, 0, 2, 1)), F(1, 2, 4, 4)),
    "replication_pad3d": (lambda: nn.ReplicationPad3d(1), F(1, 2, 3, 3, 3)), "circular_pad2d": (lambda: nn.CircularPad2d(1), F(1, 2, 4, 4)),
    "pad_negative": (lambda: _Fn(lambda x: nnf.pad(x, (-1, 1))), F(2, 3, 5)),
    "cosine_similarity": (lambda: _Fn(lambda x: nnf.cosine_similarity(x, x.flip(0), dim=1)), F(4, 5)),
    "pairwise_distance": (lambda: _Fn(lambda x: nnf.pairwise_distance(x, x.flip(0))), F(4, 5)),
    "unfold": (lambda: nn.Unfold(2, stride=2), F(1, 2, 4, 4)), "fold": (lambda: nn.Fold((4, 4), 2, stride=2), F(1, 8, 4)),
    "dropout_eval": (lambda: nn.Dropout(0.3), F(4, 5)), "alpha_dropout_eval": (lambda: nn.AlphaDropout(0.3), F(4, 5)),
    "identity": (nn.Identity, F(4, 5)),
}


class _Fn(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class _Bilinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Bilinear(5, 5, 3)

    def forward(self, x):
        return self.layer(x, x.flip(0))


for _name, (_factory, _spec) in LAYERS.items():
    layer.add(_name, f"{_name.replace('_', ' ')} on {_spec.shape}", _factory, _spec)
# interpolate: mode -> (input shape, scale or size variants, align_corners values)
RESIZE = {"nearest": (4, (None,)), "nearest-exact": (4, (None,)), "linear": (3, (False, True)),
          "bilinear": (4, (False, True)), "bicubic": (4, (False, True)), "trilinear": (5, (False, True)),
          "area": (4, (None,))}
for _mode, (_rank, _aligns) in RESIZE.items():
    _shape = (1, 2, 4, 4, 4)[:_rank]
    for _align in _aligns:
        for _how, _kw in (("scale2", {"scale_factor": 2.0}), ("size", {"size": (5, 7, 3)[: _rank - 2]}),
                          ("down", {"scale_factor": 0.5})):
            _suffix = "" if _align is None else f"_align{int(_align)}"
            layer.fn(f"interpolate_{_mode}_{_how}{_suffix}", f"F.interpolate(mode={_mode!r}, {_kw}, align_corners={_align})",
                     lambda x, m=_mode, k=_kw, a=_align: nnf.interpolate(x, mode=m, align_corners=a, **k), F(*_shape))
layer.fn("interpolate_bilinear_size1", "bilinear half-pixel resize to an output of size 1",
         lambda x: nnf.interpolate(x, size=(1, 3), mode="bilinear"), F(1, 2, 4, 4))
layer.fn("interpolate_antialias", "bilinear downsampling with antialias=True",
         lambda x: nnf.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True), F(1, 2, 8, 8))
layer.fn("grid_sample", "F.grid_sample(bilinear, align_corners=False)",
         lambda x, g: nnf.grid_sample(x, g, align_corners=False), F(1, 2, 4, 4), F(1, 3, 3, 2))
layer.fn("affine_grid", "F.affine_grid of a (1, 2, 3) theta", lambda t: nnf.affine_grid(t, [1, 1, 3, 4], align_corners=False), F(1, 2, 3))

rnn = Table("rnn")
for _cell in ("RNN", "LSTM", "GRU"):
    for _layers, _bi, _batch_first in ((1, False, False), (2, False, True), (1, True, True), (2, True, False)):
        rnn.add(f"{_cell.lower()}_l{_layers}_bi{int(_bi)}_bf{int(_batch_first)}",
                f"nn.{_cell}(layers={_layers}, bidirectional={_bi}, batch_first={_batch_first})",
                lambda c=_cell, l=_layers, b=_bi, f=_batch_first: getattr(nn, c)(4, 5, l, bidirectional=b, batch_first=f),
                F(3, 2, 4))
rnn.add("lstm_proj", "nn.LSTM with proj_size=3", lambda: nn.LSTM(4, 5, proj_size=3), F(3, 2, 4))
rnn.add("rnn_relu", "nn.RNN(nonlinearity='relu')", lambda: nn.RNN(4, 5, nonlinearity="relu"), F(3, 2, 4))
for _cell in ("RNNCell", "LSTMCell", "GRUCell"):
    rnn.add(_cell.lower(), f"nn.{_cell} on one step", lambda c=_cell: getattr(nn, c)(4, 5), F(2, 4))

TABLES = (math, conv, pool, norm, act, layer, rnn)
