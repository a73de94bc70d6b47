"""Neural-network layers: normalisation, linear algebra, dropout.

Convolution lives in conv.py, pooling and pixel shuffles in pooling.py, recurrent layers in
rnn.py. Normalisation with batch statistics (BatchNorm with track_running_stats=False, which
normalises over the batch even in eval) reuses ONNX InstanceNormalization on a tensor whose
channel axis is moved first, so every statistic is computed by a single ONNX op.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, output_used, rank_of, reduce, squeeze


# -- batch and instance normalisation --------------------------------------------------------


def _channels(x: Value, *params: Value | None) -> int:
    """The channel count (axis 1), from the input's shape or a per-channel parameter."""
    channels = x.shape[1] if x.shape is not None and len(x.shape) > 1 else None
    if isinstance(channels, int):
        return channels
    for param in params:
        if param is not None and param.shape and isinstance(param.shape[0], int):
            return param.shape[0]
    raise ValueError(f"the channel count of {x.name} must be known at export time")


def _affine_or_identity(g: Graph, x: Value, weight, bias, count: int) -> tuple[Value, Value]:
    """weight/bias, or the ones/zeros ONNX needs when the module has affine=False."""
    dtype = x.dtype or torch.float32
    scale = weight if weight is not None else g.constant(torch.ones(count, dtype=dtype))
    shift = bias if bias is not None else g.constant(torch.zeros(count, dtype=dtype))
    return scale, shift


def _batch_norm_running(g: Graph, x: Value, weight, bias, mean: Value, var: Value, eps: float) -> Value:
    """BatchNormalization with the running statistics (inference form)."""
    scale, shift = _affine_or_identity(g, x, weight, bias, _channels(x, weight, mean))
    return g.op("BatchNormalization", x, scale, shift, mean, var, epsilon_f=eps)


def _batch_norm_batch_stats(g: Graph, x: Value, weight, bias, eps: float) -> Value:
    """Normalise over every axis but the channel one with the batch's own (biased) statistics.

    [N, C, *S] -> [1, C, N, *S]: InstanceNormalization then normalises each channel over N and S.
    """
    rank = rank_of(x)
    scale, shift = _affine_or_identity(g, x, weight, bias, _channels(x, weight, bias))
    perm = [1, 0, *range(2, rank)]
    moved = g.op("Unsqueeze", g.op("Transpose", x, perm_i=perm), g.constant([0]))
    normed = g.op("InstanceNormalization", moved, scale, shift, epsilon_f=eps)
    return g.op("Transpose", g.op("Squeeze", normed, g.constant([0])), perm_i=perm)


@symbolic("aten::_native_batch_norm_legit_no_training")
def native_batch_norm_no_training(g: Graph, input, weight, bias, running_mean, running_var, momentum, eps):
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    # The saved mean/invstd outputs are empty tensors in inference; nothing reads them.
    return _batch_norm_running(g, input, weight, bias, running_mean, running_var, eps), None, None


@symbolic("aten::_native_batch_norm_legit.no_stats")
def native_batch_norm_no_stats(g: Graph, input, weight, bias, training, momentum, eps):
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    # BatchNorm with track_running_stats=False: batch statistics, in eval too; the batch mean and
    # inverse std ([C]) when the graph reads them.
    y = _batch_norm_batch_stats(g, input, weight, bias, eps)
    if not (output_used(g, 1) or output_used(g, 2)):
        return y, None, None
    return (y, *_mean_and_rstd(g, input, [0, *range(2, rank_of(input))], eps))


@symbolic("aten::instance_norm")
def instance_norm(g: Graph, input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    if not use_input_stats:  # track_running_stats=True in eval: per-channel running statistics
        return _batch_norm_running(g, input, weight, bias, running_mean, running_var, eps)
    scale, shift = _affine_or_identity(g, input, weight, bias, _channels(input, weight, bias))
    return g.op("InstanceNormalization", input, scale, shift, epsilon_f=eps)


# -- layer and group normalisation -----------------------------------------------------------


def _layer_norm(g: Graph, x: Value, normalized_shape: Sequence[int], weight, bias, eps: float, outputs: int):
    dtype = x.dtype or torch.float32
    shape = [int(s) for s in normalized_shape]
    scale = weight if weight is not None else g.constant(torch.ones(shape, dtype=dtype))
    # B is optional in ONNX, but onnxruntime 1.31 crashes without it: pass zeros
    shift = bias if bias is not None else g.constant(torch.zeros(shape, dtype=dtype))
    results = g.op(
        "LayerNormalization", x, scale, shift, axis_i=-len(shape), epsilon_f=eps, outputs=outputs
    )
    if outputs == 1 or dtype == torch.float32:
        return results
    # mean and inverse std come out in the stash type (float32); torch gives them in x's dtype
    y, mean, inv_std = results
    return y, cast_to(g, mean, dtype), cast_to(g, inv_std, dtype)


@symbolic("aten::layer_norm")
def layer_norm(g: Graph, input: Value, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    return _layer_norm(g, input, normalized_shape, weight, bias, eps, outputs=1)


@symbolic("aten::native_layer_norm")
def native_layer_norm(g: Graph, input: Value, normalized_shape, weight, bias, eps):
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)"""
    return _layer_norm(g, input, normalized_shape, weight, bias, eps, outputs=3)


def _group_norm(g: Graph, x: Value, groups: int, weight, bias, eps: float) -> Value:
    """[N, C, *S] -> [N, G, C/G * S], InstanceNormalization per group, back, then the affine part."""
    grouped = g.op("Reshape", x, g.constant([0, groups, -1]))
    ones = g.constant(torch.ones(groups, dtype=x.dtype or torch.float32))
    zeros = g.constant(torch.zeros(groups, dtype=x.dtype or torch.float32))
    normed = g.op("InstanceNormalization", grouped, ones, zeros, epsilon_f=eps)
    y = g.op("Reshape", normed, g.op("Shape", x))
    per_channel = list(range(1, rank_of(x) - 1))  # [C] -> [C, 1, ..., 1] broadcasts over S
    if weight is not None:
        y = g.op("Mul", y, g.op("Unsqueeze", weight, g.constant(per_channel)) if per_channel else weight)
    if bias is not None:
        y = g.op("Add", y, g.op("Unsqueeze", bias, g.constant(per_channel)) if per_channel else bias)
    return y


@symbolic("aten::group_norm")
def group_norm(g: Graph, input: Value, num_groups: int, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    return _group_norm(g, input, num_groups, weight, bias, eps)


def _mean_and_rstd(g: Graph, x: Value, axes: Sequence[int], eps: float, reshape: Value | None = None
                   ) -> tuple[Value, Value]:
    """The mean of x (reshaped to `reshape` first, if given) over `axes` and 1/sqrt(biased var +
    eps), those axes dropped, in x's dtype (computed in float32 for the half types, as torch's
    kernels do)."""
    dtype = x.dtype or torch.float32
    wide = cast_to(g, x, torch.float32) if dtype in (torch.float16, torch.bfloat16) else x
    if reshape is not None:
        wide = g.op("Reshape", wide, reshape)
    mean = reduce(g, "ReduceMean", wide, axes, keepdims=True)
    centred = g.op("Sub", wide, mean)
    var = reduce(g, "ReduceMean", g.op("Mul", centred, centred), axes, keepdims=False)
    epsilon = g.constant(torch.tensor(eps, dtype=torch.float32 if wide is not x else dtype))
    rstd = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, epsilon)))
    mean = squeeze(g, mean, axes)
    if wide is not x:
        mean, rstd = cast_to(g, mean, dtype), cast_to(g, rstd, dtype)
    return mean, rstd


def _group_statistics(g: Graph, x: Value, groups: int, eps: float) -> tuple[Value, Value]:
    """Each group's mean and reciprocal standard deviation, [N, G]."""
    batch = g.op("Shape", x, start_i=0, end_i=1)  # explicit, not 0: a zero-size input stays zero-size
    return _mean_and_rstd(g, x, [2], eps, reshape=g.op("Concat", batch, g.constant([groups, -1]), axis_i=0))


@symbolic("aten::native_group_norm")
def native_group_norm(g: Graph, input: Value, weight, bias, N, C, HxW, group: int, eps: float):
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)

    The output, and the per-group mean and reciprocal standard deviation ([N, group]) when
    the graph reads them.
    """
    y = _group_norm(g, input, group, weight, bias, eps)
    if not (output_used(g, 1) or output_used(g, 2)):
        return y, None, None
    mean, rstd = _group_statistics(g, input, group, eps)
    return y, mean, rstd


# -- linear algebra -------------------------------------------------------------------------


@symbolic("aten::linear")
def linear(g: Graph, input: Value, weight: Value, bias=None):
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if input.rank == 2:
        return g.op("Gemm", input, weight, bias, transB_i=1)
    product = g.op("MatMul", input, g.op("Transpose", weight, perm_i=[1, 0]))
    return product if bias is None else g.op("Add", product, bias)


@symbolic("aten::mm", "aten::bmm", "aten::matmul")
def matmul(g: Graph, self: Value, other: Value):
    """matmul(Tensor self, Tensor other) -> Tensor"""
    return g.op("MatMul", self, other)


@symbolic("aten::addmv")
def addmv(g: Graph, self: Value, mat: Value, vec: Value, beta=1, alpha=1):
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    beta * self + alpha * (mat @ vec) from MatMul, Mul and Add (addmm's form where Gemm fails).
    """
    product = g.op("MatMul", mat, vec)
    if alpha != 1:
        product = g.op("Mul", product, g.constant(torch.tensor(alpha, dtype=g.ctx.output_dtype)))
    if beta == 0:  # torch ignores `self` entirely then (NaN and inf in it do not propagate)
        return product
    if beta != 1:
        self = g.op("Mul", self, g.constant(torch.tensor(beta, dtype=g.ctx.output_dtype)))
    return g.op("Add", self, product)


@symbolic("aten::addmm")
def addmm(g: Graph, self: Value, mat1: Value, mat2: Value, beta=1, alpha=1):
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    With an empty inner dimension (mat1 [n, 0]) the product is zeros, and onnxruntime's Gemm
    returns uninitialised memory there: the product is then written as MatMul, which sums
    no terms to zero, and scaled and added by hand.
    """
    inner = mat1.shape[1] if mat1.shape is not None and len(mat1.shape) == 2 else None
    if inner == 0:
        return addmv(g, self, mat1, mat2, beta=beta, alpha=alpha)
    if beta == 0:  # torch ignores `self` entirely then (NaN and inf in it do not propagate)
        return g.op("Gemm", mat1, mat2, alpha_f=alpha)
    return g.op("Gemm", mat1, mat2, self, alpha_f=alpha, beta_f=beta)


# -- dropout (identity in inference) -------------------------------------------------------
# aten.dropout and its feature/alpha variants never reach the registry: torch.export cannot
# preserve them (random ops) and removes them in eval, where they are the identity.


@symbolic("aten::native_dropout")
def native_dropout(g: Graph, input: Value, p: float, train):
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)"""
    if train and p > 0:
        raise ValueError("dropout in training mode is random and is not exported; call model.eval()")
    keep_all = g.op("ConstantOfShape", g.op("Shape", input), value_t=torch.ones(1, dtype=torch.bool))
    return g.op("Identity", input), keep_all
