"""Neural-network layers: convolution, normalisation, pooling, linear, dropout."""

from __future__ import annotations

import torch

from exporter.graph import Graph, Value
from exporter.registry import symbolic
from exporter.symbolics._helpers import expand_list, rank_of, static_ints


def _conv(g: Graph, x: Value, weight: Value, bias, stride, padding, dilation, groups: int) -> Value:
    spatial = rank_of(weight) - 2
    pads = expand_list(padding, spatial)
    kernel = weight.shape[2:] if weight.shape is not None else None
    return g.op(
        "Conv", x, weight, bias,
        kernel_shape_i=list(kernel) if kernel and all(isinstance(k, int) for k in kernel) else None,
        strides_i=expand_list(stride, spatial),
        pads_i=pads + pads,
        dilations_i=expand_list(dilation, spatial),
        group_i=groups,
    )


@symbolic("aten::conv1d", "aten::conv2d", "aten::conv3d")
def conv(g: Graph, input: Value, weight: Value, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


@symbolic("aten::convolution")
def convolution(g: Graph, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    if transposed:
        raise ValueError("transposed convolution goes through conv_transpose symbolics")
    return _conv(g, input, weight, bias, stride, padding, dilation, groups)


def _batch_norm_inference(g: Graph, x: Value, weight, bias, mean, var, eps: float) -> Value:
    channels = x.shape[1] if x.shape is not None else None
    if not isinstance(channels, int):
        channels = mean.shape[0] if mean is not None and mean.shape else None
    if weight is None:
        weight = g.constant(torch.ones(channels, dtype=x.dtype))
    if bias is None:
        bias = g.constant(torch.zeros(channels, dtype=x.dtype))
    return g.op("BatchNormalization", x, weight, bias, mean, var, epsilon_f=eps)


@symbolic("aten::_native_batch_norm_legit_no_training")
def native_batch_norm_no_training(g: Graph, input, weight, bias, running_mean, running_var, momentum, eps):
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    # The saved mean/invstd outputs are empty tensors in inference; nothing reads them.
    return _batch_norm_inference(g, input, weight, bias, running_mean, running_var, eps), None, None


@symbolic("aten::batch_norm")
def batch_norm(g: Graph, input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    if training or running_mean is None:
        raise ValueError("batch_norm in training mode (batch statistics) is not exported; call model.eval()")
    return _batch_norm_inference(g, input, weight, bias, running_mean, running_var, eps)


@symbolic("aten::max_pool2d")
def max_pool2d(g: Graph, self: Value, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor"""
    kernel = expand_list(kernel_size, 2)
    strides = expand_list(stride, 2) if stride else kernel
    pads = expand_list(padding, 2)
    return g.op(
        "MaxPool", self, kernel_shape_i=kernel, strides_i=strides, pads_i=pads + pads,
        dilations_i=expand_list(dilation, 2), ceil_mode_i=int(ceil_mode),
    )


@symbolic("aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d")
def adaptive_avg_pool2d(g: Graph, self: Value, output_size):
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    out = static_ints(expand_list(output_size, 2), "adaptive_avg_pool2d output_size")
    if out == [1, 1]:
        return g.op("GlobalAveragePool", self)
    size = static_ints(self.shape[-2:], "adaptive_avg_pool2d input spatial size")
    if any(s % o for s, o in zip(size, out)):
        raise ValueError(f"adaptive_avg_pool2d from {size} to {out}: sizes that do not divide are not supported yet")
    kernel = [s // o for s, o in zip(size, out)]
    return g.op("AveragePool", self, kernel_shape_i=kernel, strides_i=kernel)


@symbolic("aten::linear")
def linear(g: Graph, input: Value, weight: Value, bias=None):
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if input.rank == 2:
        return g.op("Gemm", input, weight, bias, transB_i=1)
    product = g.op("MatMul", input, g.op("Transpose", weight, perm_i=[1, 0]))
    return product if bias is None else g.op("Add", product, bias)


@symbolic("aten::addmm")
def addmm(g: Graph, self: Value, mat1: Value, mat2: Value, beta=1, alpha=1):
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return g.op("Gemm", mat1, mat2, self, alpha_f=alpha, beta_f=beta)


@symbolic("aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout")
def dropout(g: Graph, input: Value, p: float, train: bool):
    """dropout(Tensor input, float p, bool train) -> Tensor"""
    if train:
        raise ValueError("dropout in training mode is random and is not exported; call model.eval()")
    return g.op("Identity", input)
