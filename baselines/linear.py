"""GDN, GLA and RetNet baselines and the Table 4 hybrids, on the suite backbone.

* ``suite_gdn``: Gated DeltaNet layers (FLA ``GatedDeltaNet``: short conv, gated delta rule, output gate).
* ``suite_gla``: Gated Linear Attention layers (FLA ``GatedLinearAttention``).
* ``suite_retnet``: RetNet layers (FLA ``MultiScaleRetention``).
* ``suite_linear_hybrid``: GDN layers with one full-attention layer in every
  ``full_attention_interval`` (4: layers 3, 7, ...; Qwen3.5 / Qwen3-Next style). Single-stream.
* ``suite_orthros_h``: Orthros layers (window 128, scale-offset) mixed 1:3 with GDN layers (same
  positions), two-stream; GDN layers use :class:`baselines.fla_mixers.GDNTwoStreamMixer`.

``match_budget=True`` (what ``models.registry.build`` passes) treats ``intermediate_size`` as the
Orthros width of the size and replaces it by the width that matches Orthros' total
(:mod:`baselines.budget`); the config then records ``reference_intermediate_size`` and
``match_budget=False``, so a saved config reloads unchanged.
"""
from __future__ import annotations

from models.attention import Attention
from models.backbone import SuiteConfig, SuiteForCausalLM

from . import fla_mixers
from .budget import matched_intermediate_size


class MatchedConfig(SuiteConfig):
    """Base of the baselines whose MLP width is matched to Orthros' parameter budget.

    ``match_budget=True``: ``intermediate_size`` is Orthros' width, replaced by the matched one. Otherwise a
    given ``reference_intermediate_size`` must be the width that ``intermediate_size`` was matched from.
    The pure linear models (no attention layer) read the attention fields (heads, KV heads, head_dim, q/k
    norm, biases) only for the Orthros budget they match; window and RoPE they refuse (``attention_layers``).

    Raises:
        ValueError: ``reference_intermediate_size`` together with ``match_budget=True``, or one that does not
        match ``intermediate_size``.
    """

    attention_layers = False

    @staticmethod
    def make_mixer(config, layer_idx):  # pragma: no cover - abstract
        raise NotImplementedError

    def __init__(self, match_budget: bool = False, reference_intermediate_size: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if match_budget and reference_intermediate_size is not None:
            raise ValueError(f"reference_intermediate_size={reference_intermediate_size!r} with match_budget=True: "
                             f"the reference is intermediate_size={self.intermediate_size}; pass one of them")
        self.reference_intermediate_size = reference_intermediate_size
        self.match_budget = False
        if match_budget:
            self.reference_intermediate_size = self.intermediate_size
            self.intermediate_size = matched_intermediate_size(self, type(self).make_mixer)
        elif reference_intermediate_size is not None:
            width, self.intermediate_size = self.intermediate_size, reference_intermediate_size
            try:
                matched = matched_intermediate_size(self, type(self).make_mixer)
            finally:
                self.intermediate_size = width
            if matched != width:
                raise ValueError(f"reference_intermediate_size={reference_intermediate_size!r} matches "
                                 f"intermediate_size={matched}, not {width}")


def _positive(name, value, kind=float):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0 or (kind is int and value % 1):
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")


class GDNConfig(MatchedConfig):
    """GDN: ``gdn_num_heads`` x ``gdn_head_dim`` keys (None: the size's heads, 0.75 x head_dim),
    values ``gdn_expand_v`` (2) x wider, short conv of ``conv_size`` (4). FLA's defaults otherwise."""

    model_type = "suite_gdn"

    def __init__(self, gdn_num_heads: int | None = None, gdn_head_dim: int | None = None, gdn_expand_v: float = 2.0,
                 conv_size: int = 4, **kwargs):
        for name, value in (("gdn_num_heads", gdn_num_heads), ("gdn_head_dim", gdn_head_dim)):
            if value is not None:
                _positive(name, value, int)
        _positive("gdn_expand_v", gdn_expand_v)
        _positive("conv_size", conv_size, int)
        self.gdn_num_heads, self.gdn_head_dim, self.gdn_expand_v, self.conv_size = (
            gdn_num_heads, gdn_head_dim, gdn_expand_v, conv_size)
        kwargs.setdefault("window_size", None)
        super().__init__(**kwargs)
        fla_mixers.gdn_dims(self)  # validates the derived head size

    make_mixer = staticmethod(fla_mixers.make_gdn)


class _LinearAttnConfig(MatchedConfig):
    default_expand_k = 1.0
    default_expand_v = 1.0

    def __init__(self, expand_k: float | None = None, expand_v: float | None = None,
                 linear_num_heads: int | None = None, **kwargs):
        self.expand_k = self.default_expand_k if expand_k is None else expand_k
        self.expand_v = self.default_expand_v if expand_v is None else expand_v
        self.linear_num_heads = linear_num_heads
        _positive("expand_k", self.expand_k)
        _positive("expand_v", self.expand_v)
        super().__init__(**kwargs)
        heads = linear_num_heads or self.num_attention_heads
        for name, ratio in (("expand_k", self.expand_k), ("expand_v", self.expand_v)):
            dim = self.hidden_size * ratio
            if dim % 1 or int(dim) % heads:
                raise ValueError(f"{name}={ratio}: hidden_size * {name} = {dim} must be an integer multiple of "
                                 f"the {heads} heads")


class GLAConfig(_LinearAttnConfig):
    """GLA with FLA's defaults: keys 0.5 x hidden, values 1 x hidden, low-rank (16) gates, no short convolution.

    ``gla_short_conv``: FLA's ``use_short_conv`` (a causal depthwise convolution of ``conv_size`` taps, default 4,
    with SiLU on q, k and v, as GDN's layers have). Off by default, as in FLA's ``GLAConfig``; GLA has no other
    positional signal (no RoPE, unlike RetNet), and Zoology's MQAR models get the token shift that recall needs
    from a convolution (its BaseConv layer). ``conv_size`` is read only with ``gla_short_conv`` (ValueError
    otherwise).
    """

    model_type = "suite_gla"
    default_expand_k, default_expand_v = 0.5, 1.0
    make_mixer = staticmethod(fla_mixers.make_gla)

    def __init__(self, gla_short_conv: bool = False, conv_size: int | None = None, **kwargs):
        if not isinstance(gla_short_conv, bool):
            raise ValueError(f"gla_short_conv must be a bool, got {gla_short_conv!r}")
        if conv_size is not None:
            if not gla_short_conv:
                raise ValueError(f"conv_size={conv_size!r} without gla_short_conv=True: GLA has no short "
                                 f"convolution unless gla_short_conv is set")
            _positive("conv_size", conv_size, int)
        self.gla_short_conv = gla_short_conv
        self.conv_size = (4 if conv_size is None else int(conv_size)) if gla_short_conv else None
        super().__init__(**kwargs)


class RetNetConfig(_LinearAttnConfig):
    """RetNet with FLA's defaults: keys 1 x hidden, values 2 x hidden, fixed per-head decay."""

    model_type = "suite_retnet"
    default_expand_k, default_expand_v = 1.0, 2.0
    make_mixer = staticmethod(fla_mixers.make_retnet)

    def __init__(self, **kwargs):  # every config class needs its own __init__ (transformers wraps the others)
        super().__init__(**kwargs)


def is_full_attention(config, layer_idx: int) -> bool:
    """Hybrids: layer ``layer_idx`` is an attention layer iff (layer_idx + 1) % full_attention_interval == 0."""
    return (layer_idx + 1) % config.full_attention_interval == 0


class _HybridMixin:
    def _set_interval(self, full_attention_interval):
        if not isinstance(full_attention_interval, int) or full_attention_interval < 1:
            raise ValueError(f"full_attention_interval must be a positive integer, got {full_attention_interval!r}")
        self.full_attention_interval = full_attention_interval


class LinearHybridConfig(_HybridMixin, GDNConfig):
    """GDN layers + one full causal attention layer in every ``full_attention_interval`` (4)."""

    model_type = "suite_linear_hybrid"
    attention_layers = True

    def __init__(self, full_attention_interval: int = 4, **kwargs):
        self._set_interval(full_attention_interval)
        kwargs["window_size"] = kwargs.get("window_size")
        if kwargs["window_size"] is not None:
            raise ValueError(f"window_size must be None for linear_hybrid, got {kwargs['window_size']!r}")
        super().__init__(**kwargs)

    @staticmethod
    def make_mixer(config, layer_idx):
        if is_full_attention(config, layer_idx):
            return Attention(config, layer_idx, scale_offset=False)
        return fla_mixers.make_gdn(config, layer_idx)


class OrthrosHConfig(_HybridMixin, GDNConfig):
    """Orthros layers (``window_size`` 128, ``scale_offset``) 1:3 with two-stream GDN layers."""

    model_type = "suite_orthros_h"
    attention_layers = True

    def __init__(self, full_attention_interval: int = 4, window_size: int = 128, scale_offset: bool = True,
                 **kwargs):
        self._set_interval(full_attention_interval)
        if window_size is None:
            raise ValueError("window_size must be a positive integer for orthros_h, got None")
        self.scale_offset = bool(scale_offset)
        super().__init__(window_size=window_size, **kwargs)

    @staticmethod
    def make_mixer(config, layer_idx):
        if is_full_attention(config, layer_idx):
            return Attention(config, layer_idx, scale_offset=config.scale_offset)
        return fla_mixers.make_gdn_two_stream(config, layer_idx)


def _model(name: str, config_cls, two_stream: bool = False):
    cls = type(name, (SuiteForCausalLM,), {"config_class": config_cls, "two_stream": two_stream,
                                           "make_mixer": staticmethod(config_cls.make_mixer),
                                           "__module__": __name__,
                                           "__doc__": f"Causal LM on the suite backbone with {config_cls.__name__} "
                                                      "mixers."})
    return cls


GDNForCausalLM = _model("GDNForCausalLM", GDNConfig)
GLAForCausalLM = _model("GLAForCausalLM", GLAConfig)
RetNetForCausalLM = _model("RetNetForCausalLM", RetNetConfig)
LinearHybridForCausalLM = _model("LinearHybridForCausalLM", LinearHybridConfig)
OrthrosHForCausalLM = _model("OrthrosHForCausalLM", OrthrosHConfig, two_stream=True)
