"""Transformer -> Orthros conversion: identity when w >= T, divergence reported (not asserted) when T > w."""
from __future__ import annotations

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

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
    """Norms and biases away from their init (1 and 0), so that a dropped or misplaced one shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("source", [
    lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, rope_theta=500000.0)),
    lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, attention_bias=True)),
    lambda: Qwen3ForCausalLM(Qwen3Config(**SHAPE, head_dim=16)),
    lambda: Qwen2ForCausalLM(Qwen2Config(**SHAPE)),                      # q, k, v biases; no output bias
    lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=None)),
    lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=256)),  # = its positions: never takes effect
], ids=["llama", "llama-biased", "qwen3", "qwen2", "mistral", "mistral-window-of-all-positions"])
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


@pytest.mark.parametrize("source, match", [
    (lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=16)),
     r"sliding_window=16 \(max_position_embeddings 256\): the source attends only its last 16 keys"),
    (lambda: Qwen2ForCausalLM(Qwen2Config(**SHAPE, use_sliding_window=True, sliding_window=32, max_window_layers=1)),
     r"sliding_window=32"),
    (lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, hidden_act="gelu")), r"hidden_act='gelu'"),
    (lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, mlp_bias=True)), r"mlp_bias=True"),
    (lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=None, attention_dropout=0.1)),
     r"attention_dropout=0.1"),
], ids=["mistral-window", "qwen2-sliding-layers", "gelu", "mlp-bias", "dropout"])
def test_what_would_convert_to_another_function_is_refused(source, match):
    """A Mistral window, Qwen2's sliding layers, another activation, MLP biases, attention dropout: the converted model
    would differ from its source (a window: only past it, where the identity control at T <= window cannot look), so
    the conversion is refused, naming the attribute."""
    from models.convert import source_problems

    src = source()
    assert source_problems(src.config)
    with pytest.raises(ValueError, match=f"cannot convert the source model exactly: .*{match}"):
        transformer_to_orthros(src)
    if "window" in match or "sliding" in match:  # the windowed source really is another function past its window
        torch.manual_seed(0)
        ids = torch.randint(0, 73, (1, 48))
        settings = {k: v for k, v in src.config.to_dict().items() if k != "layer_types"}
        unwindowed = type(src)(type(src.config)(**{**settings, "sliding_window": None, "use_sliding_window": False}))
        unwindowed.load_state_dict(src.state_dict())
        with torch.no_grad():
            assert not torch.allclose(src.eval()(ids).logits, unwindowed.eval()(ids).logits, atol=1e-4)
