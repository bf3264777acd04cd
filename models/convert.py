"""Transformer -> Orthros conversion (Sec. 4.3, Table 2; seed 001's "from_transformer").

Copies every weight of a Llama, Mistral, Qwen2 or Qwen3 causal LM (transformers' ``LlamaForCausalLM``, ...) or of this
suite's Transformer baseline into an Orthros model of the same shape, and initialises the query scale-offset to
identity (alpha = alpha' = 1, beta = beta' = 0). With ``window_size >= T`` the converted model reproduces the source's
logits exactly: both streams then see every past key and share all weights. For T > w it diverges until trained (the
paper continues pre-training for 80B tokens; this suite's conversion experiment does the same in miniature).

A source converts exactly or not at all (:func:`source_problems`): Qwen2's q/k/v biases convert (``attention_bias=
"qkv"``); what the suite's layers do not compute is refused, naming the source's config attribute: an MLP bias, an
activation other than SiLU, attention dropout, and a sliding window shorter than the source's positions (Mistral's
``sliding_window``, Qwen2/3's sliding layers). A windowed source attends only its last N keys, where the converted
output stream attends them all, so past N tokens it would be another function; and the identity control, which
compares the two on T <= N tokens, could not see it. A ``sliding_window`` at or above ``max_position_embeddings``
never takes effect and converts.
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


def source_window(cfg) -> int | None:
    """The sliding window of the source's windowed layers (Mistral's ``sliding_window`` applies to every layer; Qwen2/3
    use it where ``layer_types`` says ``sliding_attention``), or None when every layer attends all past keys."""
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    return None if types is not None and "sliding_attention" not in types else window


def source_problems(cfg) -> list[str]:
    """Why the causal LM of config ``cfg`` (a transformers ``PreTrainedConfig``) does not convert exactly to Orthros,
    each naming the source's attribute and value; empty when it converts."""
    model_type = getattr(cfg, "model_type", "")
    if model_type not in _HF_TYPES and model_type != "suite_transformer":
        return [f"model_type {model_type!r} does not convert to Orthros; supported: {', '.join(_HF_TYPES)}, "
                "suite_transformer"]
    problems = []
    if getattr(cfg, "mlp_bias", False):
        problems.append("mlp_bias=True: the suite's MLP has no biases")
    act = getattr(cfg, "hidden_act", "silu")
    if act not in ("silu", "swish"):
        problems.append(f"hidden_act={act!r}: the suite's MLP is SwiGLU (a SiLU gate); another activation is another "
                        "function")
    if getattr(cfg, "attention_dropout", 0.0):
        problems.append(f"attention_dropout={cfg.attention_dropout}: the suite's attention has no dropout, so the "
                        "source and its conversion would continue training under different recipes")
    window, positions = source_window(cfg), cfg.max_position_embeddings
    if window is not None and window < positions:
        problems.append(f"sliding_window={window} (max_position_embeddings {positions}): the source attends only its "
                        f"last {window} keys, a converted output stream every past key, so past {window} tokens the "
                        "conversion computes another function (Orthros has no window on its output stream)")
    return problems


def orthros_config_from(source_config, window_size: int = 128, scale_offset: bool = True) -> OrthrosConfig:
    """The Orthros config with the source model's shape (vocab, widths, heads, RoPE, norms, attention biases).

    Raises ValueError listing :func:`source_problems` (an unsupported source type, MLP biases, another activation,
    attention dropout, a sliding window) or a RoPE type Orthros does not implement (supported:
    ``models.backbone.ROPE_TYPES``).
    """
    cfg = source_config
    problems = source_problems(cfg)
    if problems:
        raise ValueError("cannot convert the source model exactly: " + "; ".join(problems))
    bias = "qkv" if cfg.model_type == "qwen2" else getattr(cfg, "attention_bias", False)  # Qwen2: q, k, v only
    return OrthrosConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size, max_position_embeddings=cfg.max_position_embeddings,
        rope_parameters=_rope_parameters(cfg), rms_norm_eps=cfg.rms_norm_eps, attention_bias=bias,
        qk_norm=cfg.model_type == "qwen3" or bool(getattr(cfg, "qk_norm", False)),
        tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
        window_size=min(window_size, cfg.max_position_embeddings), scale_offset=scale_offset,
        bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id)


def transformer_to_orthros(model, window_size: int = 128, scale_offset: bool = True) -> OrthrosForCausalLM:
    """Convert a trained causal Transformer into Orthros with identical weights and identity scale-offset.

    Args:
        model: an HF Llama, Mistral, Qwen2 or Qwen3 causal LM, or this suite's Transformer baseline.
        window_size: Orthros window w for the converted model.
        scale_offset: keep the SO parameters (identity at start) or convert to the w/o SO variant.

    Returns:
        An ``OrthrosForCausalLM`` in the source's dtype and device, in eval mode if the source was.

    Raises:
        ValueError: a source that does not convert exactly (:func:`source_problems`), or weights that do not map one
        to one.
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

