"""GDN, GLA and RetNet token mixers: FLA's own layers behind the suite's mixer protocol.

``forward(x [B, T, D], ctx: MixerContext) -> [B, T, D]``. Each wraps one FLA layer
(``fla.layers.GatedDeltaNet``, ``GatedLinearAttention``, ``MultiScaleRetention``) built with FLA's
documented defaults; only the head count and (GDN) head size follow the suite size (README).

Cached generation: the layer's recurrent state and short-conv state live in the generation's
``SuiteCache`` slot of this layer (``recurrent_state``, ``conv_q/k/v``, ``seen``), exposed to FLA
through :class:`SlotCache`, the small part of FLA's ``Cache`` interface that its layers call. A
cached forward then runs exactly FLA's own cached path. Left padding: the key mask goes to FLA as
``attention_mask`` ([B, past + T], 0 = pad), which FLA turns into packed variable-length sequences.

Every FLA layer is built through :func:`_fla`, which first runs :func:`baselines.fla_internals.install` (FLA
version check; on CPU the Triton ops are then served by FLA's references). What reaches below FLA's layer API
lives in :mod:`baselines.fla_internals` only.

:class:`GDNTwoStreamMixer` is the GDN layer of Orthros-H (Sec. 4.6, Table 4): see baselines/README.md.
"""
from __future__ import annotations

import torch
from torch import nn

from models.backbone import MixerContext

from . import fla_internals

CONV_KEYS = ("conv_q", "conv_k", "conv_v")


def _fla():
    fla_internals.install()
    import fla.layers

    return fla.layers


class SlotCache:
    """One SuiteCache slot seen through the FLA ``Cache`` methods FLA layers call.

    ``len()``, ``[layer_idx]`` -> ``{"recurrent_state", "conv_state"}``, ``update(...)`` and
    ``get_seq_length()`` (tokens seen by this layer, padding included, as FLA counts them).
    """

    def __init__(self, slot: dict, layer_idx: int):
        self.slot, self.layer_idx = slot, layer_idx

    def __len__(self) -> int:
        return self.layer_idx + 1 if "recurrent_state" in self.slot else 0

    def __getitem__(self, layer_idx: int) -> dict:
        conv = tuple(self.slot[k] for k in CONV_KEYS) if CONV_KEYS[0] in self.slot else None
        return {"recurrent_state": self.slot["recurrent_state"], "conv_state": conv}

    def update(self, layer_idx: int, recurrent_state=None, conv_state=None, offset: int = 1, **_) -> dict:
        if recurrent_state is not None:
            self.slot["recurrent_state"] = recurrent_state
        if conv_state is not None:
            self.slot.update(zip(CONV_KEYS, conv_state))
        self.slot["seen"] = self.slot.get("seen", 0) + int(offset)
        return self[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.slot.get("seen", 0)


class FLAMixer(nn.Module):
    """Single-stream mixer around one FLA layer (``self.layer``)."""

    def __init__(self, layer: nn.Module, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.layer = layer

    def forward(self, x: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        """x: [B, T, D] normalized rows -> [B, T, D]. Raises ValueError on output-stream rows."""
        if x.shape[1] != ctx.n_base:
            raise ValueError(f"{type(self.layer).__name__} mixer is single-stream: got {x.shape[1]} rows "
                             f"for {ctx.n_base} tokens")
        cache = None if ctx.cache is None else SlotCache(ctx.cache.layers[self.layer_idx], self.layer_idx)
        mask = None if ctx.key_mask is None else ctx.key_mask.long()
        out, _, _ = self.layer(x, attention_mask=mask, past_key_values=cache, use_cache=cache is not None)
        return out


def gdn_dims(config) -> tuple[int, int]:
    """(num_heads, head_dim) of the GDN layers: FLA's rule num_heads * head_dim = 0.75 * hidden.

    Defaults: the size's query heads, head_dim = 0.75 * attention head_dim. Raises ValueError.
    """
    heads = config.gdn_num_heads or config.num_attention_heads
    head_dim = config.gdn_head_dim
    if head_dim is None:
        if (3 * config.head_dim) % 4:
            raise ValueError(f"gdn_head_dim: 0.75 * head_dim={config.head_dim} is not an integer; set gdn_head_dim")
        head_dim = 3 * config.head_dim // 4
    return heads, head_dim


def make_gdn(config, layer_idx: int) -> FLAMixer:
    heads, head_dim = gdn_dims(config)
    layer = _fla().GatedDeltaNet(hidden_size=config.hidden_size, expand_v=config.gdn_expand_v, head_dim=head_dim,
                                 num_heads=heads, mode="chunk", use_gate=True, use_short_conv=True,
                                 conv_size=config.conv_size, layer_idx=layer_idx)
    return FLAMixer(layer, layer_idx)


def make_gla(config, layer_idx: int) -> FLAMixer:
    short_conv = dict(use_short_conv=True, conv_size=config.conv_size) if getattr(config, "gla_short_conv", False) \
        else {}  # FLA's default: no short convolution
    layer = _fla().GatedLinearAttention(mode="chunk", hidden_size=config.hidden_size, expand_k=config.expand_k,
                                        expand_v=config.expand_v, num_heads=config.linear_num_heads or
                                        config.num_attention_heads, layer_idx=layer_idx, **short_conv)
    return FLAMixer(layer, layer_idx)


def make_retnet(config, layer_idx: int) -> FLAMixer:
    layer = _fla().MultiScaleRetention(mode="chunk", hidden_size=config.hidden_size, expand_k=config.expand_k,
                                       expand_v=config.expand_v, num_heads=config.linear_num_heads or
                                       config.num_attention_heads, layer_idx=layer_idx)
    fla_internals.retnet_rotary_hook(layer)  # the rotary table must be rebuilt after from_pretrained
    return FLAMixer(layer, layer_idx)


class GDNTwoStreamMixer(FLAMixer):
    """GDN layer of a two-stream model (Orthros-H).

    Rows ``[B, T + T_out, D]``. Base rows: FLA's GatedDeltaNet computation (short conv on q/k/v,
    gated delta rule, state written to the cache). Output rows at position t: the query
    ``q' = silu(x' W_Q)`` skips the short convolution (seed 000, Sec. 3.2) and reads the state
    S_t, the state right after base token t was written: ``o'_t = S_t q'_t`` (q' L2-normalized and
    scaled as the base query). Gate, norm and W_O are shared. The output rows never write state.

    The read is exact: the same gated-delta-rule op runs a second time with the base keys, values,
    gates and initial state and the output queries placed at their positions (zeros elsewhere).
    When the only output row sits at the last base position (prefill and decode, Sec. 3.2), the
    read is ``S_T q'`` from the op's final state instead, so that second pass is skipped.
    The computation reads FLA's layer internals: :func:`baselines.fla_internals.gdn_two_stream`.

    Raises:
        ValueError: on a padded batch (key_mask with False entries), not supported here.
    """

    def forward(self, x: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        T = ctx.n_base
        if x.shape[1] == T:
            return super().forward(x, ctx)
        if ctx.key_mask is not None:
            raise ValueError("orthros_h GDN layers do not support left-padded batches (attention_mask with zeros)")
        slot = None if ctx.cache is None else ctx.cache.layers[self.layer_idx]
        use_cache = slot is not None
        out, new_state, conv = fla_internals.gdn_two_stream(
            self.layer, x, T, ctx.out_index, ctx.out_is_last, state=slot.get("recurrent_state") if use_cache else None,
            conv=[slot.get(k) if use_cache else None for k in CONV_KEYS], use_cache=use_cache, training=self.training)
        if use_cache:
            SlotCache(slot, self.layer_idx).update(self.layer_idx, recurrent_state=new_state, conv_state=conv,
                                                   offset=T)
        return out


def make_gdn_two_stream(config, layer_idx: int) -> GDNTwoStreamMixer:
    mixer = make_gdn(config, layer_idx)
    return GDNTwoStreamMixer(mixer.layer, layer_idx)
