"""The seed's "Supported operators" list, and the ATen overloads that implement each today.

`SEED_LIST` is the list exactly as the seed's docs write it (torch.onnx 0.4, "Supported
operators"), notes included. `SEED_OPERATORS` maps each name to the overloads that
torch.export (with roundtrip's decomposition table) produces for it today; the meta-tests hold
every one of them to a registered symbolic and a test row, and docs/OPERATORS.md shows the map.
"""

from __future__ import annotations

from torch import nn

SEED_LIST = (
    "add (nonzero alpha not supported)",
    "sub (nonzero alpha not supported)",
    "mul",
    "div",
    "cat",
    "mm",
    "addmm",
    "neg",
    "sqrt",
    "tanh",
    "sigmoid",
    "mean",
    "sum",
    "prod",
    "t",
    "expand (only when used before a broadcasting ONNX operator; e.g., add)",
    "transpose",
    "view",
    "split",
    "squeeze",
    "prelu (single weight shared among input channels not supported)",
    "threshold (non-zero threshold/non-zero value not supported)",
    "leaky_relu",
    "glu",
    "softmax (only dim=-1 supported)",
    "avg_pool2d (ceil_mode not supported)",
    "log_softmax",
    "unfold (experimental support with ATen-Caffe2 integration)",
    "elu",
    "concat",
    "abs",
    "index_select",
    "pow",
    "clamp",
    "max",
    "min",
    "eq",
    "exp",
    "permute",
    "Conv",
    "BatchNorm",
    "MaxPool1d (ceil_mode not supported)",
    "MaxPool2d (ceil_mode not supported)",
    "MaxPool3d (ceil_mode not supported)",
    "Embedding (no optional arguments supported)",
    "RNN",
    "ConstantPadNd",
    "Dropout",
    "FeatureDropout (training mode not supported)",
    "Index (constant integer and tuple indices supported)",
)

SEED_OPERATORS: dict[str, tuple[str, ...]] = {
    "add": ("aten.add.Tensor", "aten.add.Scalar"),
    "sub": ("aten.sub.Tensor", "aten.sub.Scalar"),  # rsub reaches torch.export's graph as sub.Tensor
    "mul": ("aten.mul.Tensor", "aten.mul.Scalar"),
    "div": ("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode"),
    "cat": ("aten.cat.default",),
    "mm": ("aten.mm.default",),
    "addmm": ("aten.addmm.default",),
    "neg": ("aten.neg.default",),
    "sqrt": ("aten.sqrt.default",),
    "tanh": ("aten.tanh.default",),
    "sigmoid": ("aten.sigmoid.default",),
    "mean": ("aten.mean.default", "aten.mean.dim"),
    "sum": ("aten.sum.default", "aten.sum.dim_IntList"),
    "prod": ("aten.prod.default", "aten.prod.dim_int"),
    "t": ("aten.t.default",),
    "expand": ("aten.expand.default",),
    "transpose": ("aten.transpose.int",),
    "view": ("aten.view.default", "aten._unsafe_view.default"),  # reshape and flatten become view
    "split": ("aten.split.Tensor", "aten.split_with_sizes.default"),  # chunk becomes split.Tensor
    "squeeze": ("aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims"),
    "prelu": ("aten.prelu.default",),
    "threshold": ("aten.threshold.default",),
    "leaky_relu": ("aten.leaky_relu.default",),
    "glu": ("aten.glu.default",),
    "softmax": ("aten.softmax.int", "aten._softmax.default"),
    "avg_pool2d": ("aten.avg_pool2d.default",),
    "log_softmax": ("aten.log_softmax.int", "aten._log_softmax.default"),
    "unfold": ("aten.unfold.default",),
    "elu": ("aten.elu.default",),
    "concat": ("aten.cat.default",),  # torch.concat is an alias torch.export resolves to cat
    "abs": ("aten.abs.default",),
    "index_select": ("aten.index_select.default",),
    "pow": ("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar"),
    "clamp": ("aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default"),
    "max": ("aten.max.default", "aten.max.dim", "aten.max.other", "aten.maximum.default", "aten.amax.default"),
    "min": ("aten.min.default", "aten.min.dim", "aten.min.other", "aten.minimum.default", "aten.amin.default"),
    "eq": ("aten.eq.Tensor", "aten.eq.Scalar"),
    "exp": ("aten.exp.default",),
    "permute": ("aten.permute.default",),
    # the seed's Conv translated aten::_convolution, transposed convolutions included
    "Conv": (
        "aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
        "aten.conv2d.padding", "aten.conv3d.padding", "aten.convolution.default",
        "aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input",
    ),
    # no_stats: track_running_stats=False, normalised by the batch's statistics in eval too
    "BatchNorm": ("aten._native_batch_norm_legit_no_training.default", "aten._native_batch_norm_legit.no_stats"),
    "MaxPool1d": ("aten.max_pool1d.default", "aten.max_pool1d_with_indices.default"),  # return_indices=True
    "MaxPool2d": ("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default"),
    "MaxPool3d": ("aten.max_pool3d.default", "aten.max_pool3d_with_indices.default"),
    "Embedding": ("aten.embedding.default", "aten.embedding_renorm.default"),  # renorm: max_norm
    "RNN": ("aten.rnn_tanh.input", "aten.rnn_relu.input", "aten.lstm.input", "aten.gru.input"),
    "ConstantPadNd": ("aten.constant_pad_nd.default",),
    # nn.Dropout* leave no op in an eval-mode export (they are the identity there); a direct
    # call of native_dropout is kept. Rows check the eval-mode identity for both.
    "Dropout": ("aten.native_dropout.default",),
    "FeatureDropout": (),
    "Index": ("aten.index.Tensor", "aten.select.int", "aten.slice.Tensor"),
}


# Seed operators whose layers an eval-mode export removes (they are the identity there): no
# overload reaches the graph, so rows cover them by holding the layer, and the runner checks
# that no dropout is left in the exported graph.
SEED_REMOVED_IN_EVAL: dict[str, tuple[type[nn.Module], ...]] = {
    "Dropout": (nn.Dropout, nn.AlphaDropout),
    "FeatureDropout": (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.FeatureAlphaDropout),
}


def seed_name(line: str) -> str:
    """The operator's name in a SEED_LIST line: the text before any parenthesised note."""
    return line.split(" (", 1)[0].strip()


def seed_names_by_target() -> dict[str, list[str]]:
    """ATen overload -> the seed-list names it implements."""
    names: dict[str, list[str]] = {}
    for name, targets in SEED_OPERATORS.items():
        for target in targets:
            names.setdefault(target, []).append(name)
    return names
