"""Transformer -> Orthros conversion (Sec. 4.3, Table 2; seed 001's "from_transformer").

Copies every weight of a Llama/Qwen3-style causal LM (transformers' ``LlamaForCausalLM`` /
``Qwen3ForCausalLM``) or of this suite's Transformer baseline into an Orthros model of the same
shape, and initialises the query scale-offset to identity (alpha = alpha' = 1, beta = beta' = 0).
With ``window_size >= T`` the converted model reproduces the source's logits exactly: both streams
then see every past key and share all weights. For T > w it diverges until trained (the paper
continues pre-training for 80B tokens; this suite's conversion experiment does the same in miniature).
"""
from __future__ import annotations

from .orthros import OrthrosConfig, OrthrosForCausalLM

_HF_TYPES = ("llama", "qwen3", "qwen2", "mistral")


def _rope_parameters(cfg) -> dict:
    """The source's RoPE as a ``rope_parameters`` dict (transformers 5 keeps theta and scaling there; older
    configs carry ``rope_theta`` / ``rope_scaling``). OrthrosConfig refuses what it cannot honour."""
    params = dict(getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    params.setdefault("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    return params


def orthros_config_from(source_config, window_size: int = 128, scale_offset: bool = True) -> OrthrosConfig:
    """The Orthros config with the source model's shape (vocab, widths, heads, RoPE, norms).

    Raises ValueError for an unsupported source type, MLP biases, or a RoPE type Orthros does not implement
    (supported: ``models.backbone.ROPE_TYPES``).
    """
    cfg = source_config
    model_type = getattr(cfg, "model_type", "")
    if model_type not in _HF_TYPES and model_type != "suite_transformer":
        raise ValueError(f"cannot convert model_type={model_type!r}; supported: {', '.join(_HF_TYPES)}, "
                         "suite_transformer")
    if getattr(cfg, "mlp_bias", False):
        raise ValueError("source model has MLP biases; the suite backbone has none")
    return OrthrosConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size, max_position_embeddings=cfg.max_position_embeddings,
        rope_parameters=_rope_parameters(cfg), rms_norm_eps=cfg.rms_norm_eps,
        attention_bias=bool(getattr(cfg, "attention_bias", False)),
        qk_norm=model_type == "qwen3" or bool(getattr(cfg, "qk_norm", False)),
        tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
        window_size=min(window_size, cfg.max_position_embeddings), scale_offset=scale_offset,
        bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id)


def transformer_to_orthros(model, window_size: int = 128, scale_offset: bool = True) -> OrthrosForCausalLM:
    """Convert a trained causal Transformer into Orthros with identical weights and identity scale-offset.

    Args:
        model: ``LlamaForCausalLM``/``Qwen3ForCausalLM`` (HF) or this suite's Transformer baseline.
        window_size: Orthros window w for the converted model.
        scale_offset: keep the SO parameters (identity at start) or convert to the w/o SO variant.

    Returns:
        An ``OrthrosForCausalLM`` in the source's dtype and device, in eval mode if the source was.

    Raises:
        ValueError: an unsupported source architecture, or weights that do not map one to one.
    """
    config = orthros_config_from(model.config, window_size, scale_offset)
    target = OrthrosForCausalLM(config).to(dtype=next(model.parameters()).dtype)
    source = {k.replace(".self_attn.", ".mixer."): v for k, v in model.state_dict().items()
              if not k.endswith("rotary_emb.inv_freq")}
    missing, unexpected = target.load_state_dict(source, strict=False)
    so_names = {n for n in missing if n.rsplit(".", 1)[-1] in ("alpha", "beta", "alpha_out", "beta_out")}
    missing = [n for n in missing if n not in so_names and not (config.tie_word_embeddings and n == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"weights do not map one to one: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for module in target.modules():
        if hasattr(module, "reset_suite_parameters"):
            module.reset_suite_parameters()
    target.to(next(model.parameters()).device)
    target.train(model.training)
    return target

