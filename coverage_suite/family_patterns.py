"""Pattern families: attention/SDPA, blocks (residual, MLP, squeeze-excite, depthwise-separable,
transformer), data-dependent ops, FFT, and dynamic axes."""

from __future__ import annotations

import torch
import torch.nn.functional as nnf
from torch import nn

from .case import B, F, I, Table

attention = Table("attention")
for _causal in (False, True):
    for _scale in (None, 0.3):
        attention.fn(f"sdpa_causal{int(_causal)}_scale{_scale}", f"SDPA(is_causal={_causal}, scale={_scale})",
                     lambda q, k, v, c=_causal, s=_scale: nnf.scaled_dot_product_attention(q, k, v, is_causal=c, scale=s),
                     F(1, 2, 4, 8), F(1, 2, 4, 8), F(1, 2, 4, 8))
attention.fn("sdpa_bool_mask", "SDPA with a boolean attention mask (diagonal kept)",
             lambda q, k, v, m: nnf.scaled_dot_product_attention(q, k, v, attn_mask=m | torch.eye(4, dtype=torch.bool)),
             F(1, 2, 4, 8), F(1, 2, 4, 8), F(1, 2, 4, 8), B(4, 4))
attention.fn("sdpa_float_mask", "SDPA with an additive float mask",
             lambda q, k, v, m: nnf.scaled_dot_product_attention(q, k, v, attn_mask=m), F(1, 2, 4, 8), F(1, 2, 4, 8),
             F(1, 2, 4, 8), F(1, 1, 4, 4))
attention.fn("sdpa_cross_len", "SDPA with 3 queries against 5 keys", nnf.scaled_dot_product_attention,
             F(1, 2, 3, 8), F(1, 2, 5, 8), F(1, 2, 5, 8))
attention.fn("sdpa_gqa", "SDPA with grouped query attention (4 query heads, 2 kv heads)",
             lambda q, k, v: nnf.scaled_dot_product_attention(q, k, v, enable_gqa=True), F(1, 4, 3, 8), F(1, 2, 3, 8), F(1, 2, 3, 8))
for _batch_first in (False, True):
    attention.add(f"mha_bf{int(_batch_first)}", f"nn.MultiheadAttention(8, 2, batch_first={_batch_first}) self-attention",
                  lambda b=_batch_first: _SelfAttention(nn.MultiheadAttention(8, 2, batch_first=b)), F(3, 2, 8))
attention.add("mha_kdim", "nn.MultiheadAttention with kdim/vdim different from embed_dim",
              lambda: _CrossAttention(nn.MultiheadAttention(8, 2, kdim=6, vdim=5)), F(3, 2, 8), F(4, 2, 6), F(4, 2, 5))
attention.add("mha_key_padding", "nn.MultiheadAttention with a key padding mask",
              lambda: _PaddedAttention(nn.MultiheadAttention(8, 2, batch_first=True)), F(2, 4, 8))
attention.add("mha_attn_mask_causal", "nn.MultiheadAttention with a causal float mask",
              lambda: _CausalAttention(nn.MultiheadAttention(8, 2, batch_first=True)), F(2, 4, 8))
for _norm_first in (False, True):
    for _activation in ("relu", "gelu"):
        attention.add(f"encoder_layer_nf{int(_norm_first)}_{_activation}",
                      f"nn.TransformerEncoderLayer(norm_first={_norm_first}, activation={_activation!r})",
                      lambda n=_norm_first, a=_activation: nn.TransformerEncoderLayer(8, 2, 16, 0.0, a, batch_first=True,
                                                                                     norm_first=n), F(2, 4, 8))
attention.add("decoder_layer", "nn.TransformerDecoderLayer with a memory input",
              lambda: nn.TransformerDecoderLayer(8, 2, 16, 0.0, batch_first=True), F(2, 3, 8), F(2, 4, 8))


class _SelfAttention(nn.Module):
    def __init__(self, attention: nn.MultiheadAttention) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, x):
        return self.attention(x, x, x)


class _CrossAttention(_SelfAttention):
    def forward(self, x, y, z):
        return self.attention(x, y, z)


class _PaddedAttention(_SelfAttention):
    def forward(self, x):
        padding = torch.tensor([[False, False, False, True], [False, False, True, True]])
        return self.attention(x, x, x, key_padding_mask=padding)[0]


class _CausalAttention(_SelfAttention):
    def forward(self, x):
        mask = torch.triu(torch.full((4, 4), float("-inf")), 1)
        return self.attention(x, x, x, attn_mask=mask, need_weights=False)[0]


pattern = Table("pattern")


class Residual(nn.Module):
    """conv-bn-relu-conv-bn plus the input (a ResNet basic block)."""

    def __init__(self, channels: int = 4, downsample: bool = False) -> None:
        super().__init__()
        stride = 2 if downsample else 1
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, stride, 1, bias=False), nn.BatchNorm2d(channels),
                                  nn.ReLU(), nn.Conv2d(channels, channels, 3, 1, 1, bias=False), nn.BatchNorm2d(channels))
        self.skip = nn.Conv2d(channels, channels, 1, stride) if downsample else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int = 8, hidden: int = 2, gate=nn.Sigmoid) -> None:
        super().__init__()
        self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, hidden, 1), nn.ReLU(),
                                nn.Conv2d(hidden, channels, 1), gate())

    def forward(self, x):
        return x * self.fc(x)


class Block(nn.Module):
    """A pre-norm transformer block written by hand: attention through SDPA, then an MLP."""

    def __init__(self, dim: int = 8, heads: int = 2, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = nnf.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class ManualAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v written out, with a padding mask from the input."""

    def forward(self, x, mask):
        scores = x @ x.transpose(-1, -2) / x.shape[-1] ** 0.5
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        return torch.softmax(scores, -1) @ x


PATTERNS = {
    "residual": (lambda: Residual(), (F(2, 4, 6, 6),)), "residual_down": (lambda: Residual(downsample=True), (F(2, 4, 6, 6),)),
    "mlp_relu": (lambda: nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)), (F(4, 6),)),
    "mlp_gelu_ln": (lambda: nn.Sequential(nn.LayerNorm(6), nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 6)), (F(2, 3, 6),)),
    "mlp_dropout_eval": (lambda: nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5), nn.Tanh(), nn.Linear(8, 2)), (F(4, 6),)),
    "squeeze_excite": (lambda: SqueezeExcite(), (F(2, 8, 4, 4),)),
    "squeeze_excite_hard": (lambda: SqueezeExcite(gate=nn.Hardsigmoid), (F(2, 8, 4, 4),)),
    "depthwise_separable": (lambda: nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.BatchNorm2d(4), nn.ReLU6(),
                                                  nn.Conv2d(4, 8, 1), nn.BatchNorm2d(8)), (F(2, 4, 6, 6),)),
    "inverted_residual": (lambda: _InvertedResidual(), (F(2, 4, 6, 6),)),
    "transformer_block": (lambda: Block(), (F(2, 4, 8),)), "transformer_block_causal": (lambda: Block(causal=True), (F(2, 4, 8),)),
    "attention_padding_mask": (ManualAttention, (F(2, 4, 8), B(2, 4))),
    "conv_bn_relu_pool": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                                                nn.Flatten(), nn.Linear(36, 5)), (F(2, 3, 8, 8),)),
    "unet_up": (lambda: _UNetUp(), (F(1, 4, 4, 4), F(1, 2, 8, 8))),
    "gated_linear": (lambda: nn.Sequential(nn.Linear(6, 12), nn.GLU(), nn.Linear(6, 6)), (F(4, 6),)),
    "embedding_mean_pool": (lambda: nn.Sequential(nn.Embedding(10, 6), _Mean()), (I(2, 5, high=10),)),
}


class _InvertedResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(4, 12, 1), nn.BatchNorm2d(12), nn.ReLU6(), nn.Conv2d(12, 12, 3, 1, 1, groups=12),
                                  nn.BatchNorm2d(12), nn.ReLU6(), nn.Conv2d(12, 4, 1), nn.BatchNorm2d(4))

    def forward(self, x):
        return x + self.body(x)


class _UNetUp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 2, 2, 2)
        self.conv = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x, skip):
        return self.conv(torch.cat([self.up(x), skip], 1))


class _Mean(nn.Module):
    def forward(self, x):
        return x.mean(1)


for _name, (_factory, _specs) in PATTERNS.items():
    pattern.add(_name, f"{_name.replace('_', ' ')} block", _factory, *_specs)
for _loss, _fn, _specs in (
    ("mse", nnf.mse_loss, (F(4, 5), F(4, 5))), ("l1", nnf.l1_loss, (F(4, 5), F(4, 5))),
    ("smooth_l1", nnf.smooth_l1_loss, (F(4, 5), F(4, 5))), ("huber", nnf.huber_loss, (F(4, 5), F(4, 5))),
    ("cross_entropy", nnf.cross_entropy, (F(4, 5), I(4, high=5))), ("nll", lambda x, t: nnf.nll_loss(torch.log_softmax(x, 1), t), (F(4, 5), I(4, high=5))),
    ("bce_logits", lambda x, y: nnf.binary_cross_entropy_with_logits(x, torch.sigmoid(y)), (F(4, 5), F(4, 5))),
    ("kl_div", lambda x, y: nnf.kl_div(torch.log_softmax(x, 1), torch.softmax(y, 1), reduction="batchmean"), (F(4, 5), F(4, 5))),
    ("cross_entropy_smoothing", lambda x, t: nnf.cross_entropy(x, t, label_smoothing=0.1), (F(4, 5), I(4, high=5))),
    ("cosine_embedding", lambda x, y: nnf.cosine_embedding_loss(x, y, torch.tensor([1, -1, 1, -1])), (F(4, 5), F(4, 5))),
):
    pattern.fn(f"loss_{_loss}", f"F.{_loss} loss (mean reduction)", _fn, *_specs)

data = Table("data_dependent")
DATA_DEPENDENT = {
    "nonzero": (torch.nonzero, F(4, 5)), "nonzero_tuple": (lambda x: torch.nonzero(x > 0, as_tuple=True), F(4, 5)),
    "masked_select": (lambda x: torch.masked_select(x, x > 0), F(4, 5)), "bool_index": (lambda x: x[x > 0.5], F(4, 5)),
    "bool_index_put": (lambda x: torch.where(x > 0, x, x.new_zeros(())).index_put((x < -0.5,), torch.tensor(9.0)), F(4, 5)),
    "masked_scatter": (lambda x: x.masked_scatter(x > 0, -x), F(4, 5)), "unique": (lambda x: torch.unique(x), I(12, high=6)),
    "unique_counts": (lambda x: torch.unique(x, return_counts=True), I(12, high=6)),
    "unique_consecutive": (lambda x: torch.unique_consecutive(torch.sort(x).values), I(12, high=6)),
    "item_scale": (lambda x: x * x.max().item(), F(4, 5)), "repeat_interleave_tensor": (lambda x: torch.repeat_interleave(x), I(4, low=1, high=3)),
    "repeat_interleave_int": (lambda x: torch.repeat_interleave(x, 2, 0), F(3, 4)),
    "argwhere": (torch.argwhere, F(4, 5)), "bincount": (lambda x: torch.bincount(x, minlength=6), I(10, high=6)),
    "bucketize": (lambda x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])), F(4, 5)),
    "searchsorted": (lambda x: torch.searchsorted(torch.tensor([-1.0, 0.0, 0.5, 1.0]), x), F(4, 5)),
}
for _name, (_fn, _spec) in DATA_DEPENDENT.items():
    data.fn(_name, f"{_name.replace('_', ' ')} (output size or values depend on data)", _fn, _spec)

fft = Table("fft")
FFTS = {
    "rfft": lambda x: torch.view_as_real(torch.fft.rfft(x)), "rfft_norm_ortho": lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")),
    "rfft_n": lambda x: torch.view_as_real(torch.fft.rfft(x, n=6)), "fft_real_input": lambda x: torch.view_as_real(torch.fft.fft(x)),
    "irfft": lambda x: torch.fft.irfft(torch.fft.rfft(x)), "rfft_abs": lambda x: torch.fft.rfft(x).abs(),
    "fft2": lambda x: torch.view_as_real(torch.fft.fft2(x)), "rfft2": lambda x: torch.view_as_real(torch.fft.rfft2(x)),
    "irfft2": lambda x: torch.fft.irfft2(torch.fft.rfft2(x), s=x.shape[-2:]),
    "ifft_of_fft": lambda x: torch.view_as_real(torch.fft.ifft(torch.fft.fft(x))),
    "view_as_complex": lambda x: torch.view_as_real(torch.view_as_complex(x) * 2),
    "stft": lambda x: torch.view_as_real(torch.stft(x, 8, 4, window=torch.hann_window(8), return_complex=True)),
    "rfft_dim0": lambda x: torch.view_as_real(torch.fft.rfft(x, dim=0)), "fftshift": lambda x: torch.fft.fftshift(x),
}
for _name, _fn in FFTS.items():
    fft.fn(_name, f"{_name.replace('_', ' ')} (complex results viewed as real)", _fn,
           F(3, 4, 2) if _name == "view_as_complex" else F(2, 32) if _name == "stft" else F(4, 8))

dynamic = Table("dynamic")
DYNAMIC = {
    "linear_batch": (lambda: nn.Linear(5, 3), F(4, 5), {0: (0,)}),
    "conv2d_batch": (lambda: nn.Conv2d(3, 4, 3), F(2, 3, 6, 6), {0: (0,)}),
    "conv2d_hw": (lambda: nn.Conv2d(3, 4, 3, padding=1), F(1, 3, 6, 6), {0: (2, 3)}),
    "softmax_seq": (lambda: nn.Softmax(-1), F(2, 5), {0: (0, 1)}), "layernorm_seq": (lambda: nn.LayerNorm(6), F(2, 5, 6), {0: (0, 1)}),
    "lstm_seq": (lambda: nn.LSTM(4, 5, batch_first=True), F(2, 5, 4), {0: (0, 1)}),
    "gru_batch": (lambda: nn.GRU(4, 5), F(3, 2, 4), {0: (1,)}), "encoder_seq": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), F(2, 5, 8), {0: (0, 1)}),
    "block_seq": (lambda: Block(), F(2, 5, 8), {0: (1,)}), "block_causal_seq": (lambda: Block(causal=True), F(2, 5, 8), {0: (1,)}),
    "pool_hw": (lambda: nn.MaxPool2d(2), F(1, 2, 6, 6), {0: (2, 3)}),
    "adaptive_pool_hw": (lambda: nn.AdaptiveAvgPool2d(1), F(1, 2, 6, 6), {0: (0, 2, 3)}),
    "embedding_seq": (lambda: nn.Embedding(10, 4), I(2, 5, high=10), {0: (0, 1)}),
    "residual_batch": (lambda: Residual(), F(2, 4, 6, 6), {0: (0,)}),
}
for _name, (_factory, _spec, _axes) in DYNAMIC.items():
    dynamic.add(_name, f"{_name.replace('_', ' ')}: axes {dict(_axes)} dynamic, verified at a second size",
                _factory, _spec, dynamic=_axes)
DYNAMIC_FNS = {
    "reshape_neg1": (lambda x: x.reshape(x.shape[0], -1), F(3, 4, 5), {0: (0,)}),
    "flatten_batch": (lambda x: torch.flatten(x, 1), F(3, 4, 5), {0: (0, 2)}),
    "arange_from_size": (lambda x: x + torch.arange(x.shape[1]), F(3, 5), {0: (1,)}),
    "zeros_from_shape": (lambda x: torch.cat([x, torch.zeros(x.shape[0], 2)], 1), F(3, 5), {0: (0,)}),
    "view_split_heads": (lambda x: x.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2), F(2, 5, 8), {0: (0, 1)}),
    "sum_seq": (lambda x: x.sum(1), F(2, 5, 3), {0: (1,)}), "cat_batch": (lambda x, y: torch.cat([x, y], 1), F(2, 3), {0: (0,)}),
    "specialised_axis": (lambda x: x.view(2, -1), F(2, 6), {0: (0,)}),
    "interpolate_scale_hw": (lambda x: nnf.interpolate(x, scale_factor=2.0, mode="nearest"), F(1, 2, 3, 3), {0: (2, 3)}),
    "triu_seq": (lambda x: torch.triu(x), F(4, 4), {0: (0, 1)}),
    "slice_to_size": (lambda x: x[:, : x.shape[1] // 2], F(3, 6), {0: (1,)}),
    "expand_batch": (lambda x: x[:, :1].expand(-1, 4), F(3, 6), {0: (0,)}),
}
for _name, (_fn, _spec, _axes) in DYNAMIC_FNS.items():
    _specs = (_spec, _spec) if _name == "cat_batch" else (_spec,)
    _dyn = {0: (0,), 1: (0,)} if _name == "cat_batch" else _axes
    dynamic.fn(_name, f"{_name.replace('_', ' ')}: axes {dict(_dyn)} dynamic, verified at a second size", _fn, *_specs,
               dynamic=_dyn)

TABLES = (attention, pattern, data, fft, dynamic)
