"""One backbone for every architecture of the suite; only the token mixer differs.

Embedding -> L x [RMSNorm -> mixer -> residual -> RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM head,
with Llama-style parameter names so Llama/Qwen3 checkpoints map onto it (``models.convert``).

Two-stream architectures (Orthros) carry the output stream as extra rows appended to the hidden
tensor: ``h`` is ``[B, T + T_out, D]``, the first T rows the base stream, the last T_out rows the
output-specific copies of the tokens at ``out_index`` (Sec. 3.1, Algorithm 2). Norms and the MLP
are token-wise, so they are shared by both streams for free; the mixer knows the split.

Single-stream architectures (Transformer, SWA, GDN, GLA, RetNet) run the same backbone with
T_out = 0 and take logits from the rows at ``out_index``.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

DEFAULT_ROPE_THETA = 10000.0
# rope_type -> (required keys, optional keys) of ``rope_parameters`` besides rope_type and rope_theta; the scaled
# types' frequencies come from transformers' ROPE_INIT_FUNCTIONS (types that change with the sequence length,
# "dynamic" and "longrope", are refused: the suite's RoPE tables depend on positions only). llama3 and yarn need
# original_max_position_embeddings: without it transformers takes max_position_embeddings (2^20 for the registry's
# models), and llama3 then leaves every frequency as it was and yarn only rescales cos and sin.
ROPE_TYPES = {
    "default": (set(), set()),
    "linear": ({"factor"}, set()),
    "llama3": ({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, set()),
    "yarn": ({"factor", "original_max_position_embeddings"}, {"attention_factor", "beta_fast", "beta_slow", "mscale",
                                                               "mscale_all_dim", "truncate"}),
}
# keys that must hold a number > 0 where given (transformers reads beta_fast=0 as its default 32, and mscale=0 as no
# mscale)
POSITIVE_ROPE_KEYS = ("rope_theta", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
                      "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")
# PreTrainedConfig fields that would change what forward returns; the suite's models implement only these values
_FIXED_BASE_FIELDS = {"output_hidden_states": False, "_output_attentions": False, "return_dict": True,
                      "chunk_size_feed_forward": 0, "is_encoder_decoder": False}


ATTENTION_BIAS = (False, True, "qkv")  # the projections with a bias: none, q/k/v/output (Llama), q/k/v (Qwen2)

NOTHING_TO_SCORE = ("nothing to score: output_mask / labels select no position with a next-token target "
                    "(an all-False output_mask, or labels that are all -100 at the output positions)")
COMPILED_OUTPUT_MASK = ("output_mask chooses the output positions by value, which torch.compile cannot trace "
                        "without a graph break: run this call eagerly, or pass labels with -100 at the positions "
                        "not to score (compiled, every position then carries an output token; the loss is the same)")


class SuiteConfig(PreTrainedConfig):
    """Fields shared by every architecture of the suite (Llama/Qwen3-style backbone).

    Architecture configs subclass this and add their mixer's fields. ``window_size`` is the
    sliding window w (the token itself included), None for full attention. ``attention_bias``: False (no biases),
    True (q, k, v and output projections, as Llama's and Qwen3's ``attention_bias``) or ``"qkv"`` (q, k and v only,
    as Qwen2's attention).

    RoPE lives in ``rope_parameters`` (transformers 5 layout): ``{"rope_type": ..., "rope_theta": ...}`` plus
    the type's keys (``ROPE_TYPES``: default, linear, llama3, yarn). ``rope_theta=`` (also a property) and the
    legacy ``rope_scaling=`` are other spellings of the same dict; default: ``{"rope_type": "default",
    "rope_theta": 10000.0}``.

    Raises:
        ValueError: naming the field and value, for a malformed shape, an unsupported or contradictory RoPE
        setting, a key no suite model uses, or a PreTrainedConfig option the suite's models do not implement
        (``output_hidden_states=True``, ``return_dict=False``, ...): nothing is accepted and then ignored.
    """

    model_type = "suite"
    attention_layers = True  # False: no layer is attention, so window_size, qk_norm, attention_bias, RoPE are refused

    def __init__(self, vocab_size=4096, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=None, head_dim=None, intermediate_size=704, max_position_embeddings=2048,
                 rope_theta=None, rope_parameters=None, rms_norm_eps=1e-6, initializer_range=0.02,
                 attention_bias=False, qk_norm=False, window_size=None, tie_word_embeddings=False,
                 pad_token_id=None, bos_token_id=None, eos_token_id=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.rope_parameters = _rope_parameters(rope_theta, rope_parameters, kwargs.pop("rope_scaling", None))
        _check_rope(self.rope_parameters)  # before transformers' own checks, which raise KeyError or only warn
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        self.attention_bias = attention_bias
        self.qk_norm = qk_norm
        self.window_size = window_size
        super().__init__(tie_word_embeddings=tie_word_embeddings, pad_token_id=pad_token_id,
                         bos_token_id=bos_token_id, eos_token_id=eos_token_id, **kwargs)
        self.validate_suite()
        self._refuse_unused_keys()

    @property
    def rope_theta(self) -> float:
        """RoPE base; stored as ``rope_parameters["rope_theta"]``."""
        return self.rope_parameters["rope_theta"]

    @rope_theta.setter
    def rope_theta(self, value) -> None:
        self.rope_parameters["rope_theta"] = value

    def _refuse_unused_keys(self) -> None:
        """Raise ValueError for a keyword no suite model reads (it would be stored and ignored)."""
        known = _base_config_keys() | {"model_type", "rope_parameters"}
        for cls in type(self).__mro__:
            if "__init__" in cls.__dict__ and issubclass(cls, SuiteConfig):
                known |= set(inspect.signature(cls.__init__).parameters)
        for key, value in self.__dict__.items():
            if key not in known:
                raise ValueError(f"{key}={value!r} is not a field of {type(self).__name__}; no suite model reads it")
        for key, fixed in _FIXED_BASE_FIELDS.items():
            if self.__dict__.get(key, fixed) != fixed:
                raise ValueError(f"{key.lstrip('_')}={self.__dict__[key]!r} is not implemented by the suite's "
                                 f"models (only {fixed!r})")

    def validate_suite(self) -> None:
        """Raise ValueError naming the first bad field."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "head_dim", "num_key_value_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.attention_bias not in ATTENTION_BIAS:
            raise ValueError(f"attention_bias must be one of {ATTENTION_BIAS}, got {self.attention_bias!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads={self.num_key_value_heads}")
        if self.window_size is not None:
            if not isinstance(self.window_size, int) or self.window_size < 1:
                raise ValueError(f"window_size must be a positive integer or None, got {self.window_size!r}")
            if self.window_size > self.max_position_embeddings:
                raise ValueError(f"window_size={self.window_size} exceeds max_position_embeddings="
                                 f"{self.max_position_embeddings}")
        _check_rope(self.rope_parameters)
        if not self.attention_layers:
            unused = {"window_size": None, "qk_norm": False, "attention_bias": False,
                      "rope_parameters": {"rope_type": "default", "rope_theta": DEFAULT_ROPE_THETA}}
            for name, neutral in unused.items():
                if getattr(self, name) != neutral:
                    raise ValueError(f"{name}={getattr(self, name)!r} has no effect on {self.model_type}, which has "
                                     f"no attention layer (only {neutral!r})")


@functools.cache
def _base_config_keys() -> frozenset:
    """The attributes a bare PreTrainedConfig sets (transformers' own bookkeeping and generic options)."""
    return frozenset(PreTrainedConfig().__dict__)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _rope_parameters(rope_theta, rope_parameters, rope_scaling) -> dict:
    """One ``rope_parameters`` dict from its three spellings; ValueError when two of them disagree."""
    if rope_parameters is not None and rope_scaling is not None and dict(rope_parameters) != dict(rope_scaling):
        raise ValueError(f"rope_scaling={rope_scaling!r} disagrees with rope_parameters={rope_parameters!r}; "
                         f"pass rope_parameters only")
    params = dict(rope_parameters if rope_parameters is not None else rope_scaling or {})
    if "type" in params:  # the legacy spelling of rope_type
        legacy = params.pop("type")
        if params.setdefault("rope_type", legacy) != legacy:
            raise ValueError(f"rope_parameters has type={legacy!r} and rope_type={params['rope_type']!r}")
    params.setdefault("rope_type", "default")
    if rope_theta is not None and params.setdefault("rope_theta", rope_theta) != rope_theta:
        raise ValueError(f"rope_theta={rope_theta!r} disagrees with rope_parameters['rope_theta']="
                         f"{params['rope_theta']!r}")
    params.setdefault("rope_theta", DEFAULT_ROPE_THETA)
    return params


def _check_rope(params: dict) -> None:
    """ValueError naming the key and value of the first RoPE setting the suite would not honour."""
    kind = params.get("rope_type")
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_parameters['rope_type']={kind!r} is not supported; supported: {', '.join(ROPE_TYPES)}")
    required, optional = ROPE_TYPES[kind]
    for key in sorted(required - set(params)):
        raise ValueError(f"rope_parameters[{key!r}] is required for rope_type {kind!r}")
    for key, value in params.items():
        if key == "partial_rotary_factor":
            if value not in (None, 1, 1.0):
                raise ValueError(f"rope_parameters['partial_rotary_factor']={value!r} is not supported (RoPE "
                                 f"rotates the whole head)")
        elif key not in required | optional | {"rope_type", "rope_theta"}:
            raise ValueError(f"rope_parameters[{key!r}]={value!r} is not used by rope_type {kind!r}")
    for key in POSITIVE_ROPE_KEYS:
        if key in params and not _number(params[key]):
            raise ValueError(f"rope_parameters[{key!r}]={params[key]!r} must be a positive number")
    if kind == "llama3" and params["high_freq_factor"] <= params["low_freq_factor"]:
        raise ValueError(f"rope_parameters['high_freq_factor']={params['high_freq_factor']!r} must exceed "
                         f"low_freq_factor={params['low_freq_factor']!r} (llama3 interpolates between them)")
    if kind == "yarn":
        # transformers uses mscale only with mscale_all_dim, and neither when attention_factor is given
        if ("mscale" in params) != ("mscale_all_dim" in params):
            raise ValueError("rope_parameters['mscale'] and ['mscale_all_dim'] are used only together: give both or "
                             "neither")
        if "attention_factor" in params and "mscale" in params:
            raise ValueError("rope_parameters['attention_factor'] replaces the one mscale/mscale_all_dim give: give "
                             "attention_factor or the mscale pair")
        if not isinstance(params.get("truncate", True), bool):
            raise ValueError(f"rope_parameters['truncate']={params['truncate']!r} must be true or false")


class SwiGLU(nn.Module):
    def __init__(self, config: SuiteConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return swiglu(x, (self.gate_proj.weight, self.up_proj.weight), self.down_proj.weight)


def swiglu(x: torch.Tensor, w_gate_up, w_down: torch.Tensor) -> torch.Tensor:
    """``down(SiLU(gate(x)) * up(x))``: the MLP of every layer, written once (:class:`SwiGLU` and the inference
    runtime's step, :mod:`models.runtime.layer`). ``w_gate_up``: ``(W_gate, W_up)`` (two GEMMs) or one
    ``[2 F, D]`` tensor (one GEMM, split after)."""
    if isinstance(w_gate_up, tuple):
        gate, up = F.linear(x, w_gate_up[0]), F.linear(x, w_gate_up[1])
    else:
        gu = F.linear(x, w_gate_up)
        gate, up = gu[..., :w_down.shape[1]], gu[..., w_down.shape[1]:]
    return F.linear(F.silu(gate) * up, w_down)


def rope_frequencies(config: SuiteConfig, device: torch.device | str | None = None) -> tuple[torch.Tensor, float]:
    """The RoPE of ``config.rope_parameters``: inverse frequencies ``[head_dim // 2]`` float64 on ``device``,
    and the factor that scales cos and sin (1.0 except for yarn).

    ``default``: ``theta ** (-2i / head_dim)`` computed in fp64. ``linear``, ``llama3``, ``yarn``: transformers'
    ``ROPE_INIT_FUNCTIONS`` (what ``LlamaRotaryEmbedding`` uses; their frequencies are fp32, widened to fp64).
    Raises ValueError for an unsupported ``rope_type``.
    """
    params = config.rope_parameters
    _check_rope(params)
    if params["rope_type"] == "default":
        d = config.head_dim
        return 1.0 / (params["rope_theta"] ** (torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)), 1.0
    inv_freq, scale = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, device)
    return inv_freq.to(device=device, dtype=torch.float64), float(scale)


def rope_cos_sin(positions: torch.Tensor, frequencies: tuple[torch.Tensor, float], dtype: torch.dtype):
    """RoPE tables for ``positions`` [B, T] (int64): cos, sin of shape [B, T, head_dim] (Llama layout) in ``dtype``.

    ``frequencies``: ``(inv_freq [head_dim // 2] float64, scale)`` from :func:`rope_frequencies`; angles are
    computed in fp64, cos and sin multiplied by ``scale`` when it is not 1.
    """
    inv_freq, scale = frequencies
    angles = positions.to(torch.float64)[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos(), angles.sin()
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos.to(dtype), sin.to(dtype)


def rotate_half_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE's rotation over ``x``'s last dim (rotate-half convention): ``x * cos + rotate_half(x) * sin``, with cos
    and sin already broadcastable to x. The one RoPE formula: :func:`apply_rope` (head-major) and
    :func:`apply_rope_token_major` (the inference runtime's step, :mod:`models.runtime.layer`) call it."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [B, H, T, d] by cos/sin [B, T, d] (rotate-half convention)."""
    return rotate_half_rope(x, cos[:, None], sin[:, None])


def apply_rope_token_major(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rope` of token-major ``x`` [B, T, H, d] (cos/sin [B, T, d])."""
    return rotate_half_rope(x, cos[:, :, None], sin[:, :, None])


class SuiteCache:
    """KV cache / recurrent state of one generation: one slot per layer, filled by that layer's mixer.

    Attention mixers keep the K/V of *every* past position (the window limits reads, not storage;
    Sec. 5): :meth:`memory_bytes` reports what that costs.
    """

    def __init__(self, num_layers: int):
        self.layers: list[dict] = [dict() for _ in range(num_layers)]
        self.seq_len = 0
        self.key_mask: torch.Tensor | None = None  # [B, seq_len] bool, False = padding

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seq_len

    def memory_bytes(self) -> int:
        """Bytes held by cached tensors (K/V, recurrent states), all layers."""
        return sum(t.numel() * t.element_size() for slot in self.layers for t in slot.values()
                   if isinstance(t, torch.Tensor))

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        for slot in self.layers:
            for key, value in slot.items():
                if isinstance(value, torch.Tensor):
                    slot[key] = value.index_select(0, beam_idx.to(value.device))
        if self.key_mask is not None:
            self.key_mask = self.key_mask.index_select(0, beam_idx.to(self.key_mask.device))


@dataclass
class MixerContext:
    """What a mixer needs besides its input rows.

    positions: [B, T] int64 RoPE positions of the T new base tokens.
    q_index: [T] int64 absolute key index of the new base tokens (cache length + arange(T)).
    out_index: [T_out] int64 rows (into the T new tokens) that carry an output-stream token.
    key_mask: [B, past + T] bool or None; False marks padding keys.
    attention_mask: [B, past + T] 0/1 as given by the caller, or None.
    cache: the generation's SuiteCache, or None.
    rope: (cos, sin), each [B, T, head_dim].
    out_is_last: True when out_index is known (on the host) to be just the last new token, T_out = 1
        (prefill and decode); lets a mixer skip work without reading out_index from the device.
    q_start: the cache length as a host int, when known: q_index is ``q_start + arange(T)``. None: only q_index.
    out_start: s when out_index is known on the host to be ``arange(s, T)`` (PT: 0, ``logits_to_keep=k``: T - k);
        None when values chose it (output_mask, labels with -100). With q_start, the attention mixer then reads no
        index from the device (no host synchronisation; ``torch.compile`` traces it without a graph break).
    """

    positions: torch.Tensor
    q_index: torch.Tensor
    out_index: torch.Tensor
    key_mask: torch.Tensor | None
    attention_mask: torch.Tensor | None
    cache: SuiteCache | None
    rope: tuple[torch.Tensor, torch.Tensor] = field(default=None)
    out_is_last: bool = False
    q_start: int | None = None
    out_start: int | None = None

    @property
    def n_base(self) -> int:
        return self.positions.shape[1]


class Block(nn.Module):
    def __init__(self, config: SuiteConfig, mixer: nn.Module):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mixer = mixer
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = SwiGLU(config)

    def mixer_residual(self, h: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        """The token-mixing half: ``h + mixer(RMSNorm(h), ctx)``; h ``[B, T + T_out, D]``, same shape and dtype out."""
        return h + self.mixer(self.input_layernorm(h), ctx)

    def mlp_residual(self, h: torch.Tensor) -> torch.Tensor:
        """The token-wise half: ``h + SwiGLU(RMSNorm(h))``; h ``[B, R, D]`` (any rows), same shape and dtype out."""
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward(self, h: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        return self.mlp_residual(self.mixer_residual(h, ctx))


class SuiteModel(nn.Module):
    def __init__(self, config: SuiteConfig, make_mixer):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config, make_mixer(config, i)) for i in range(config.num_hidden_layers))
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class SuiteForCausalLM(PreTrainedModel, GenerationMixin):
    """Causal LM on the shared backbone. Subclasses set ``config_class``, ``make_mixer`` and ``two_stream``.

    ``forward`` serves every regime of Sec. 3.2 by choosing which positions carry an output token:

    * PT (default): every position (T_out = T).
    * SFT: ``output_mask`` ([T] or [B, T] bool; rows are OR-ed), or, when ``labels`` hold -100,
      the positions whose next label is valid.
    * Prefill: ``logits_to_keep=1`` (what ``generate()`` passes on its first call): T_out = 1.
    * Decode: with a ``cache``, each new token is a base token and an output token.

    ``logits`` are ``[B, T_out, vocab]`` for the output positions in ascending order.

    Under ``torch.compile`` (``fullgraph=True``, static shapes) forward reads no tensor value on the host, so a
    training step (PT) is one graph: labels do not narrow the output positions (every position carries an output
    token; the loss is the same), ``output_mask`` is refused with a ValueError, an ``attention_mask`` is kept even
    when it is all ones, and empty supervision gives a NaN loss instead of the ``NOTHING_TO_SCORE`` ValueError.
    """

    config_class = SuiteConfig
    base_model_prefix = "model"
    two_stream = False
    _no_split_modules = ["Block"]
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    @staticmethod
    def make_mixer(config, layer_idx):  # pragma: no cover - abstract
        raise NotImplementedError

    def __init__(self, config: SuiteConfig):
        super().__init__(config)
        self.model = SuiteModel(config, type(self).make_mixer)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # we bring our own cache (SuiteCache), created on the first cached forward

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.RMSNorm):
            init.ones_(module.weight)
        elif hasattr(module, "reset_suite_parameters"):
            module.reset_suite_parameters()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def _output_index(self, T, labels, output_mask, logits_to_keep, device) -> tuple[torch.Tensor, int | None]:
        """The output positions ``[T_out]`` int64 (ascending), and s where they are known on the host to be
        ``s .. T - 1`` (None where values chose them: ``output_mask``, labels with -100).

        Under ``torch.compile`` nothing here reads a value: labels do not narrow the positions (every position
        carries an output token, which gives the same loss, as the output rows are independent and a target of -100
        adds nothing to it; the logits then cover all T positions), and ``output_mask``, which chooses positions by
        value, is refused (ValueError ``COMPILED_OUTPUT_MASK``)."""
        compiling = torch.compiler.is_compiling()
        if output_mask is not None:
            if compiling:
                raise ValueError(COMPILED_OUTPUT_MASK)
            mask = torch.as_tensor(output_mask, device=device).bool()
            if mask.shape[-1] != T:
                raise ValueError(f"output_mask has length {mask.shape[-1]} but the input has {T} tokens")
            mask = mask.reshape(-1, T).any(0)
            if not mask.any():
                raise ValueError(NOTHING_TO_SCORE)
            return mask.nonzero().flatten(), None
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            start = max(0, T - logits_to_keep)
            return torch.arange(start, T, device=device), start
        if labels is not None and not compiling and (labels[:, 1:] == -100).any():
            index = (labels[:, 1:] != -100).any(0).nonzero().flatten()
            if not len(index):
                raise ValueError(NOTHING_TO_SCORE)
            return index, None
        return torch.arange(T, device=device), 0

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, cache: SuiteCache | None = None,
                use_cache: bool | None = None, labels: torch.LongTensor | None = None,
                output_mask: torch.Tensor | None = None, logits_to_keep: int = 0,
                inputs_embeds: torch.Tensor | None = None, **kwargs) -> CausalLMOutputWithPast:
        """Run the backbone on T new tokens (after ``cache``'s past ones, if any).

        Args:
            input_ids: [B, T] int64.
            attention_mask: [B, past + T] or [B, T] 0/1 (left padding), optional.
            position_ids: [B, T] RoPE positions, optional (derived from attention_mask).
            cache: SuiteCache from an earlier call (decode), optional.
            labels: [B, T] int64 with -100 for ignored positions; token t is scored on labels[:, t+1].
            output_mask, logits_to_keep: choose the output positions (see class docstring).

        Returns:
            CausalLMOutputWithPast with ``logits`` [B, T_out, vocab] (fp32 upcast not applied),
            ``loss`` (mean cross entropy over valid targets) when labels are given, and ``cache``.

        Raises:
            ValueError: on mismatched shapes, an output mask longer than the input, a sequence past
            ``max_position_embeddings``, or empty supervision (``NOTHING_TO_SCORE``: an all-False
            ``output_mask``, or ``labels`` with no valid next-token target at an output position).
        """
        if input_ids is None and inputs_embeds is None:
            raise ValueError("pass input_ids or inputs_embeds")
        past_key_values = kwargs.pop("past_key_values", None)  # the usual HF name for what this model calls `cache`
        if past_key_values is not None:
            if cache is not None or not isinstance(past_key_values, SuiteCache):
                raise ValueError(f"past_key_values must be the SuiteCache this model returned (as `cache`), got "
                                 f"{type(past_key_values).__name__}" + (" beside cache=" if cache is not None else ""))
            cache = past_key_values
        h = self.model.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if h.dim() != 3:
            raise ValueError(f"input_ids must be [B, T], got shape {tuple(h.shape[:-1])}")
        B, T, _ = h.shape
        device = h.device
        past = cache.seq_len if cache is not None else 0
        if past + T > self.config.max_position_embeddings:
            raise ValueError(f"sequence length {past + T} exceeds max_position_embeddings="
                             f"{self.config.max_position_embeddings}")
        if labels is not None and labels.shape != (B, T):
            raise ValueError(f"labels must have shape {(B, T)}, got {tuple(labels.shape)}")
        use_cache = bool(use_cache) if use_cache is not None else cache is not None

        key_mask = self._key_mask(attention_mask, cache, B, T, past, device)
        if position_ids is None:
            if key_mask is not None:
                position_ids = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
            else:
                position_ids = torch.arange(past, past + T, device=device).expand(B, T)
        elif position_ids.shape[-1] != T:
            raise ValueError(f"position_ids must have length {T}, got {tuple(position_ids.shape)}")
        position_ids = position_ids.expand(B, T)

        out_index, out_start = self._output_index(T, labels, output_mask, logits_to_keep, device)
        out_rows = out_index if out_start is None else slice(out_start, None)  # a view where the host knows them
        if use_cache and cache is None:
            cache = SuiteCache(self.config.num_hidden_layers)
        ctx = MixerContext(positions=position_ids, q_index=torch.arange(past, past + T, device=device),
                           out_index=out_index, key_mask=key_mask,
                           attention_mask=None if attention_mask is None else attention_mask[:, -(past + T):],
                           cache=cache if use_cache else None,
                           rope=rope_cos_sin(position_ids, rope_frequencies(self.config, device), h.dtype),
                           out_is_last=T == 1 or (output_mask is None and isinstance(logits_to_keep, int)
                                                  and logits_to_keep == 1),
                           q_start=past, out_start=out_start)
        if self.two_stream:
            h = torch.cat([h, h[:, out_rows]], dim=1)  # output stream starts from the same embedding
        for layer in self.model.layers:
            h = layer(h, ctx)
        h = h[:, T:] if self.two_stream else h[:, out_rows]
        logits = self.lm_head(self.model.norm(h))

        loss = None
        if labels is not None:
            if out_start is None:
                scored = out_index < T - 1
                targets, scored_logits = labels[:, out_index[scored] + 1], logits[:, scored]
            else:  # positions out_start .. T - 2 have a next token
                targets, scored_logits = labels[:, out_start + 1:], logits[:, :T - 1 - out_start]
            if not torch.compiler.is_compiling() and not (targets != -100).any():
                raise ValueError(NOTHING_TO_SCORE)
            loss = F.cross_entropy(scored_logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        if use_cache:
            cache.seq_len = past + T
            cache.key_mask = key_mask
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None)

    @staticmethod
    def _key_mask(attention_mask, cache, B, T, past, device):
        previous = cache.key_mask if cache is not None else None
        if attention_mask is None:
            if previous is None:
                return None
            return torch.cat([previous, torch.ones(B, T, dtype=torch.bool, device=device)], dim=1)
        mask = attention_mask.to(device).bool()
        if mask.shape == (B, past + T):
            pass
        elif mask.shape == (B, T) and past > 0:
            mask = torch.cat([previous if previous is not None else
                              torch.ones(B, past, dtype=torch.bool, device=device), mask], dim=1)
        else:
            raise ValueError(f"attention_mask must have shape {(B, past + T)} (or {(B, T)}), "
                             f"got {tuple(attention_mask.shape)}")
        if torch.compiler.is_compiling():  # kept even when all True (the same attention), as it is not read
            return mask
        return None if bool(mask.all()) else mask
