"""Transformer -> Orthros conversion: identity when w >= T, divergence reported (not asserted) when T > w."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from models.convert import transformer_to_orthros

SHAPE = dict(vocab_size=73, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64, max_position_embeddings=256)


@torch.no_grad()
def conversion_divergence(source, converted, input_ids: torch.Tensor) -> dict:
    """Max |logit difference| and next-token agreement between source and converted models on ``input_ids`` [B, T]."""
    a = source(input_ids).logits.float()
    b = converted(input_ids).logits.float()
    return {"max_abs_logit_diff": float((a - b).abs().max()),
            "top1_agreement": float((a.argmax(-1) == b.argmax(-1)).float().mean())}


def _randomize_norms(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("source", [
    lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, rope_theta=500000.0)),
    lambda: Qwen3ForCausalLM(Qwen3Config(**SHAPE, head_dim=16)),
], ids=["llama", "qwen3"])
def test_conversion_is_identity_when_window_covers_sequence(source):
    torch.manual_seed(0)
    src = _randomize_norms(source())
    ids = torch.randint(0, 73, (2, 24))
    converted = transformer_to_orthros(src, window_size=24)
    assert converted.config.scale_offset and converted.config.window_size == 24
    with torch.no_grad():
        torch.testing.assert_close(converted(ids).logits, src(ids).logits, atol=1e-5, rtol=0)


def test_conversion_diverges_when_sequence_exceeds_window(capsys):
    torch.manual_seed(0)
    src = _randomize_norms(LlamaForCausalLM(LlamaConfig(**SHAPE)))
    ids = torch.randint(0, 73, (2, 64))
    report = conversion_divergence(src, transformer_to_orthros(src, window_size=8), ids)
    print(f"conversion divergence at T=64, w=8 (untrained): {report}")  # reported, not asserted away
    assert report["max_abs_logit_diff"] > 1e-4  # the window bites once T > w


def test_conversion_rejects_unknown_architecture():
    from transformers import GPT2Config, GPT2LMHeadModel

    with pytest.raises(ValueError, match="model_type"):
        transformer_to_orthros(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)))
