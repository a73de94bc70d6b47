"""Small Hugging Face models built from configs: random (seeded) weights, no downloads.

BERT, GPT-2, Llama and T5 (encoder alone, and encoder + decoder), two layers each with tiny
hidden sizes, so that they export and verify per op in seconds. Each is the Hugging Face
class itself (no wrapper), so the exported nodes' scopes start with its name
(`BertModel/BertEncoder[encoder]/...`). Configs keep no KV cache (`use_cache=False`: a cache
object is no tensor output); the ModelOutput returned flattens to its tensors in field order.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

VOCAB = 128
HIDDEN = 32
HEADS = 4
LAYERS = 2
FFN = 64
MAX_POSITIONS = 64
SEQUENCE = 8
DECODER_SEQUENCE = 6

# Each model's attention implementation: "sdpa" exercises aten.scaled_dot_product_attention;
# T5's relative position bias is added by its own (eager) attention.
_COMMON: dict[str, Any] = {"use_cache": False}


def bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=FFN, max_position_embeddings=MAX_POSITIONS, attn_implementation="sdpa",
                        **_COMMON)
    return BertModel(config)


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=MAX_POSITIONS,
                        bos_token_id=0, eos_token_id=0, attn_implementation="sdpa", **_COMMON)
    return GPT2LMHeadModel(config)


def llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=HEADS // 2, intermediate_size=FFN, max_position_embeddings=MAX_POSITIONS,
                         bos_token_id=0, eos_token_id=0, attn_implementation="sdpa", **_COMMON)
    return LlamaForCausalLM(config)


def _t5_config() -> Any:
    from transformers import T5Config

    return T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                    num_decoder_layers=LAYERS, num_heads=HEADS, decoder_start_token_id=0, pad_token_id=0,
                    eos_token_id=1, attn_implementation="eager", **_COMMON)


def t5_encoder() -> nn.Module:
    from transformers import T5EncoderModel

    return T5EncoderModel(_t5_config())


def t5() -> nn.Module:
    from transformers import T5ForConditionalGeneration

    return T5ForConditionalGeneration(_t5_config())


def tokens(generator: torch.Generator, batch: int, length: int = SEQUENCE) -> torch.Tensor:
    """Token ids in [2, VOCAB) (0 and 1 are the special pad/eos ids of the configs)."""
    return torch.randint(2, VOCAB, (batch, length), generator=generator, dtype=torch.int64)


def padded_mask(batch: int, length: int) -> torch.Tensor:
    """An attention mask whose every other sequence ends in two padding positions."""
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[1::2, max(1, length - 2):] = 0
    return mask


def token_inputs(generator: torch.Generator, batch: int) -> tuple[torch.Tensor]:
    return (tokens(generator, batch),)


def masked_token_inputs(generator: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    return tokens(generator, batch), padded_mask(batch, SEQUENCE)


def seq2seq_inputs(generator: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, decoder_input_ids): T5's positional forward arguments."""
    return tokens(generator, batch), padded_mask(batch, SEQUENCE), tokens(generator, batch, DECODER_SEQUENCE)


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[..., tuple[torch.Tensor, ...]], tuple[str, ...], tuple[str, ...]]] = {
    # name: (builder, inputs, input names, output names)
    "hf_bert": (bert, masked_token_inputs, ("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output")),
    "hf_gpt2": (gpt2, token_inputs, ("input_ids",), ("logits",)),
    "hf_llama": (llama, token_inputs, ("input_ids",), ("logits",)),
    "hf_t5_encoder": (t5_encoder, masked_token_inputs, ("input_ids", "attention_mask"), ("last_hidden_state",)),
    "hf_t5": (t5, seq2seq_inputs, ("input_ids", "attention_mask", "decoder_input_ids"),
              ("logits", "encoder_last_hidden_state")),
}

# The sequence axis each input and output runs along (all have the batch first).
SEQUENCE_AXES = {
    "input_ids": "sequence", "attention_mask": "sequence", "last_hidden_state": "sequence",
    "logits": "sequence", "encoder_last_hidden_state": "sequence", "decoder_input_ids": "target_sequence",
}


def dynamic_axes(name: str) -> dict[str, dict[int, str]]:
    """Batch on every input and output; sequence axes where there is one (T5's logits run
    along the decoder's sequence). BERT's and GPT-2's position tables bound the sequence, a
    guard torch.export cannot prove for a named dim: exporter.capture then captures with
    Dim.DYNAMIC, which keeps the bound as a check of the program."""
    _, _, input_names, output_names = MODELS[name]
    axes: dict[str, dict[int, str]] = {}
    for value in (*input_names, *output_names):
        sequence = SEQUENCE_AXES.get(value)
        if name == "hf_t5" and value == "logits":
            sequence = "target_sequence"
        axes[value] = {0: "batch", 1: sequence} if sequence else {0: "batch"}
    return axes
