"""Small Hugging Face models (BERT, GPT-2, Llama, T5 encoder, T5 encoder-decoder) built from
configs with seeded random weights, verified per op through the harness.

Each must export, pass every op's tolerance row and every output, carry node scopes that name
the Hugging Face modules down to the attention layers, and run at another batch (and sequence
length, where the model's positions allow it) with the same ONNX model.
"""

from __future__ import annotations

import pytest
import torch

import harness
from model_zoo_cases import huggingface

# A scope every model's ops must show: the module path into its first layer's attention.
SCOPES = {
    "hf_bert": "BertModel/BertEncoder[encoder]/BertLayer[layer.0]/BertAttention[attention]",
    "hf_gpt2": "GPT2LMHeadModel/GPT2Model[transformer]/GPT2Block[h.0]/GPT2Attention[attn]",
    "hf_llama": "LlamaForCausalLM/LlamaModel[model]/LlamaDecoderLayer[layers.0]/LlamaAttention[self_attn]",
    "hf_t5_encoder": "T5EncoderModel/T5Stack[encoder]/T5Block[block.0]/T5LayerSelfAttention[layer.0]/T5Attention[SelfAttention]",
    "hf_t5": "T5ForConditionalGeneration/T5Stack[decoder]/T5Block[block.0]/T5LayerCrossAttention[layer.1]/T5Attention[EncDecAttention]",
}
# Overloads each model must have verified op rows for (attention as sdpa or as its pieces).
KEY_OPS = {
    "hf_bert": ("aten.scaled_dot_product_attention.default", "aten.layer_norm.default", "aten.gelu.default"),
    "hf_gpt2": ("aten.scaled_dot_product_attention.default", "aten.addmm.default", "aten.cumsum.default"),
    "hf_llama": ("aten.scaled_dot_product_attention.default", "aten.rsqrt.default", "aten.sin.default"),
    "hf_t5_encoder": ("aten.log.default", "aten.rsqrt.default", "aten.softmax.int"),
    "hf_t5": ("aten.log.default", "aten.softmax.int", "aten.embedding.default"),
}


def test_every_model_has_expectations() -> None:
    assert set(SCOPES) == set(KEY_OPS) == set(huggingface.MODELS)


def _build(name: str) -> torch.nn.Module:
    build = huggingface.MODELS[name][0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build().eval()


@pytest.mark.parametrize("name", list(huggingface.MODELS))
def test_hf_model_verifies_per_op(name: str) -> None:
    _, make_inputs, input_names, output_names = huggingface.MODELS[name]
    model = _build(name)
    axes = {key: value for key, value in huggingface.dynamic_axes(name).items() if key in input_names}
    args = make_inputs(torch.Generator().manual_seed(0), 2)
    traced = harness.verify(model, args, dynamic_axes=axes, input_names=list(input_names))
    assert traced.checker.passed, traced.checker.message
    assert len(traced.outputs) == len(output_names)
    failing = [op.to_dict() for op in traced.ops if op.passed is False]
    assert not failing, failing
    assert traced.passed, [c.to_dict() for c in traced.outputs if not c.passed] or traced.notes

    scopes = {op.scope for op in traced.ops}
    assert any(scope.startswith(SCOPES[name]) for scope in scopes), sorted(scopes)[:20]
    verified = {op.aten for op in traced.ops if op.passed}
    assert not set(KEY_OPS[name]) - verified, f"no verified row for {sorted(set(KEY_OPS[name]) - verified)}"

    other_args = make_inputs(torch.Generator().manual_seed(1), 3)
    # a shorter sequence too; contiguous: a view's strides would tie the dynamic length to the full one
    other_args = tuple(a[:, : a.shape[1] - 3].contiguous() for a in other_args)
    other = harness.verify(model, other_args, dynamic_axes=axes, input_names=list(input_names),
                           onnx_model=traced.onnx_model, per_op=False)
    assert other.passed, [c.to_dict() for c in other.outputs if not c.passed] or other.notes
    assert other.outputs[0].shape_actual[0] == 3
