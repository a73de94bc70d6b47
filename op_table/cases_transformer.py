"""Op table rows for transformer building blocks, each with a dynamic batch and sequence.

`nn.TransformerEncoder`, `nn.TransformerDecoder` and `nn.Transformer` (norm first and last,
batch first or not, key-padding and causal masks given as inputs), `nn.MultiheadAttention`
(with and without weights, bool and float masks), and the pieces of decoder-only LLMs:
rotary embeddings, RMSNorm, a SiLU-gated MLP and attention with a KV cache passed in and
returned. Masks never hide every key of a query (torch's fused attention then gives NaN).
`is_causal`/`tgt_is_causal` are always passed: left at None, torch compares the mask with a
causal one element by element, a data-dependent check torch.export cannot capture.
tests/test_transformer_blocks.py verifies the same rows per op through the harness.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ._samples import module_op, randn
from .schema import OpCase

D_MODEL, HEADS, FFN, SEQ, MEMORY_SEQ, BATCH = 16, 4, 32, 6, 7, 2
SDPA, LINEAR, LAYER_NORM = "aten.scaled_dot_product_attention.default", "aten.linear.default", "aten.layer_norm.default"


def _axes(*specs: tuple[str, Mapping[int, str]]) -> dict[str, dict[int, str]]:
    return {name: dict(axes) for name, axes in specs}


def padding_mask(batch: int, length: int) -> torch.Tensor:
    """Key-padding mask (True = ignore): every other sequence ends in two padded positions."""
    pad = torch.zeros(batch, length, dtype=torch.bool)
    pad[1::2, length - 2:] = True
    return pad


def causal_mask(length: int) -> torch.Tensor:
    """Float causal mask: -inf above the diagonal, as nn.Transformer.generate_square_subsequent_mask."""
    return nn.Transformer.generate_square_subsequent_mask(length)


class Encoder(nn.Module):
    """nn.TransformerEncoder with a final norm, fed a causal mask and a key-padding mask."""

    def __init__(self, norm_first: bool, batch_first: bool) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, batch_first=batch_first, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D_MODEL), enable_nested_tensor=False)
        self.causal = norm_first  # one row hints that the mask is causal, the other does not

    def forward(self, src: torch.Tensor, mask: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        return self.encoder(src, mask=mask, src_key_padding_mask=padding, is_causal=self.causal)


class Decoder(nn.Module):
    """nn.TransformerDecoder: causal self-attention and padded memory."""

    def __init__(self, norm_first: bool, batch_first: bool) -> None:
        super().__init__()
        layer = nn.TransformerDecoderLayer(D_MODEL, HEADS, FFN, batch_first=batch_first, norm_first=norm_first)
        self.decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D_MODEL))

    def forward(self, tgt, memory, tgt_mask, memory_padding) -> torch.Tensor:
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_key_padding_mask=memory_padding, tgt_is_causal=True)


class Seq2Seq(nn.Module):
    """nn.Transformer (sequence first) with a causal target mask and source padding."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.Transformer(D_MODEL, HEADS, 1, 1, FFN)

    def forward(self, src, tgt, tgt_mask, src_padding) -> torch.Tensor:
        return self.transformer(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=src_padding,
                                memory_key_padding_mask=src_padding, src_is_causal=False, tgt_is_causal=True)


class Attention(nn.Module):
    """nn.MultiheadAttention (sequence first), returning the output and, if asked, the weights."""

    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(D_MODEL, HEADS)
        self.need_weights = need_weights

    def forward(self, query, key, mask, padding):
        out, weights = self.attention(query, key, key, attn_mask=mask, key_padding_mask=padding,
                                      need_weights=self.need_weights)
        return (out, weights) if self.need_weights else out


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class RotaryEmbedding(nn.Module):
    """cos/sin tables of rotary position embeddings for positions 0..L-1 (RoFormer, Llama)."""

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.float()[..., None] * self.inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()


class LlamaBlock(nn.Module):
    """A decoder-only block: RMSNorm, rotary causal attention with a KV cache, SiLU-gated MLP.

    Takes the new tokens' hidden states, their positions and the cache of earlier keys and
    values; returns the hidden states and the cache grown by the new tokens.
    """

    def __init__(self) -> None:
        super().__init__()
        self.head_dim = D_MODEL // HEADS
        self.attention_norm = nn.RMSNorm(D_MODEL, eps=1e-6)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.out = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.rotary = RotaryEmbedding(self.head_dim)
        self.mlp_norm = nn.RMSNorm(D_MODEL, eps=1e-6)
        self.gate = nn.Linear(D_MODEL, FFN, bias=False)
        self.up = nn.Linear(D_MODEL, FFN, bias=False)
        self.down = nn.Linear(FFN, D_MODEL, bias=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (HEADS, self.head_dim)).transpose(1, 2)

    def forward(self, hidden, positions, past_key, past_value):
        q, k, v = self.qkv(self.attention_norm(hidden)).chunk(3, dim=-1)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        cos, sin = self.rotary(positions)
        cos, sin = cos[:, None], sin[:, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        key, value = torch.cat((past_key, k), dim=2), torch.cat((past_value, v), dim=2)
        # new token i sees every cached position and the new ones up to itself
        new, total = q.shape[2], key.shape[2]
        visible = torch.ones(new, total, dtype=torch.bool).tril(total - new)
        attended = F.scaled_dot_product_attention(q, key, value, attn_mask=visible)
        hidden = hidden + self.out(attended.transpose(1, 2).flatten(2))
        normed = self.mlp_norm(hidden)
        hidden = hidden + self.down(F.silu(self.gate(normed)) * self.up(normed))
        return hidden, key, value


# Input builders take the sizes, so that tests/test_transformer_blocks.py can feed the
# exported models other batches and sequence lengths.


def _encoder_inputs(batch_first: bool):
    def inputs(gen: torch.Generator, batch: int = BATCH, seq: int = SEQ, memory: int = MEMORY_SEQ):
        src = randn(gen, batch, seq, D_MODEL) if batch_first else randn(gen, seq, batch, D_MODEL)
        return src, causal_mask(seq), padding_mask(batch, seq)

    return inputs


def _encoder_axes(batch_first: bool) -> dict[str, dict[int, str]]:
    src = {0: "batch", 1: "sequence"} if batch_first else {0: "sequence", 1: "batch"}
    return _axes(("src", src), ("mask", {0: "sequence", 1: "sequence"}), ("padding", {0: "batch", 1: "sequence"}))


def _decoder_inputs(gen: torch.Generator, batch: int = BATCH, seq: int = SEQ, memory: int = MEMORY_SEQ):
    return (randn(gen, batch, seq, D_MODEL), randn(gen, batch, memory, D_MODEL), causal_mask(seq),
            padding_mask(batch, memory))


DECODER_AXES = _axes(
    ("tgt", {0: "batch", 1: "sequence"}), ("memory", {0: "batch", 1: "memory"}),
    ("tgt_mask", {0: "sequence", 1: "sequence"}), ("memory_padding", {0: "batch", 1: "memory"}),
)


def _seq2seq_inputs(gen: torch.Generator, batch: int = BATCH, seq: int = SEQ, memory: int = MEMORY_SEQ):
    return (randn(gen, memory, batch, D_MODEL), randn(gen, seq, batch, D_MODEL), causal_mask(seq),
            padding_mask(batch, memory))


SEQ2SEQ_AXES = _axes(
    ("src", {0: "memory", 1: "batch"}), ("tgt", {0: "sequence", 1: "batch"}),
    ("tgt_mask", {0: "sequence", 1: "sequence"}), ("src_padding", {0: "batch", 1: "memory"}),
)


def _attention_inputs(float_mask: bool):
    def inputs(gen: torch.Generator, batch: int = BATCH, seq: int = SEQ, memory: int = MEMORY_SEQ):
        query, key = randn(gen, seq, batch, D_MODEL), randn(gen, memory, batch, D_MODEL)
        if float_mask:
            mask = randn(gen, seq, memory)
        else:  # True = not allowed to attend; the first key stays visible to every query
            mask = torch.rand(seq, memory, generator=gen) > 0.6
            mask[:, 0] = False
        return query, key, mask, padding_mask(batch, memory)

    return inputs


ATTENTION_AXES = _axes(
    ("query", {0: "sequence", 1: "batch"}), ("key", {0: "memory", 1: "batch"}),
    ("mask", {0: "sequence", 1: "memory"}), ("padding", {0: "batch", 1: "memory"}),
)

CACHED = 5  # positions already in the KV cache at the traced size


def _llama_inputs(gen: torch.Generator, batch: int = BATCH, seq: int = SEQ, memory: int = CACHED):
    """`memory` positions are in the cache; the `seq` new tokens come after them."""
    head_dim = D_MODEL // HEADS
    positions = torch.arange(memory, memory + seq).expand(batch, seq).contiguous()
    return (randn(gen, batch, seq, D_MODEL), positions, randn(gen, batch, HEADS, memory, head_dim),
            randn(gen, batch, HEADS, memory, head_dim))


LLAMA_AXES = _axes(
    ("hidden", {0: "batch", 1: "sequence"}), ("positions", {0: "batch", 1: "sequence"}),
    ("past_key", {0: "batch", 2: "cached"}), ("past_value", {0: "batch", 2: "cached"}),
)

CASES: list[OpCase] = [
    module_op(f"transformer_encoder_{'pre' if norm_first else 'post'}norm_{'batch' if batch_first else 'seq'}_first",
              lambda nf=norm_first, bf=batch_first: Encoder(nf, bf), _encoder_inputs(batch_first), [SDPA, LAYER_NORM, LINEAR],
              dynamic_axes=_encoder_axes(batch_first), tags=("transformer",))
    for norm_first, batch_first in ((True, True), (False, False))
] + [
    module_op("transformer_decoder_prenorm_causal", lambda: Decoder(True, True), _decoder_inputs, [SDPA, LAYER_NORM],
              dynamic_axes=DECODER_AXES, tags=("transformer",)),
    module_op("transformer_decoder_postnorm", lambda: Decoder(False, True), _decoder_inputs, [SDPA, LAYER_NORM],
              dynamic_axes=DECODER_AXES, tags=("transformer",)),
    module_op("transformer_seq2seq_masks", Seq2Seq, _seq2seq_inputs, [SDPA, LAYER_NORM], dynamic_axes=SEQ2SEQ_AXES,
              tags=("transformer",)),
    module_op("multihead_attention_weights_bool_mask", lambda: Attention(True), _attention_inputs(False),
              ["aten.bmm.default", "aten.softmax.int"], dynamic_axes=ATTENTION_AXES, tags=("transformer",)),
    module_op("multihead_attention_no_weights_float_mask", lambda: Attention(False), _attention_inputs(True), [SDPA],
              dynamic_axes=ATTENTION_AXES, tags=("transformer",)),
    module_op("llama_block_rotary_rmsnorm_swiglu_kv_cache", LlamaBlock, _llama_inputs,
              [SDPA, "aten.rsqrt.default", "aten.sin.default", "aten.cos.default", "aten.cat.default"],
              dynamic_axes=LLAMA_AXES, tags=("transformer",)),
]
