"""The attention mixer shared by Orthros, the Transformer and SWA baselines (Sec. 3.1, Eqs. 4-5).

Input rows are ``[B, T + T_out, D]``: T base-stream rows, then T_out output-stream rows (T_out = 0
for single-stream models).

* Base stream: ``q = alpha * (x W_Q) + beta``, ``k = x W_K``, ``v = x W_V``; attention over keys
  ``t-w+1 .. t`` (``window_size=None``: all of ``1 .. t``). Writes K/V to the cache.
* Output stream: ``q' = alpha' * (x' W_Q) + beta'`` attends keys ``1 .. t`` of the *same* layer's K/V at
  its original position t. It never produces K/V.

Choices the paper leaves open, and ours:
* alpha, beta, alpha', beta' have one entry per (head, channel) of W_Q's output, [H, d_head], the
  multi-head reading of the paper's 1 x d vectors.
* The scale-offset acts on the projected query, after Qwen3's per-head q-norm when present and
  before RoPE; both streams use RoPE at the token's original position.
* ``scale_offset=False`` (the "w/o SO" ablation) means alpha = alpha' = 1, beta = beta' = 0, fixed:
  the parameters do not exist.
"""
from __future__ import annotations

import torch
from torch import nn

from . import backend
from .backbone import MixerContext, SuiteConfig, apply_rope


class Attention(nn.Module):
    def __init__(self, config: SuiteConfig, layer_idx: int, scale_offset: bool = False):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.window = config.window_size
        d, hd = config.hidden_size, config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(d, self.num_heads * hd, bias=bias)
        self.k_proj = nn.Linear(d, self.num_kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(d, self.num_kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * hd, d, bias=bias)
        if config.qk_norm:
            self.q_norm = nn.RMSNorm(hd, eps=config.rms_norm_eps)
            self.k_norm = nn.RMSNorm(hd, eps=config.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.scale_offset = scale_offset
        if scale_offset:
            shape = (self.num_heads, hd)
            self.alpha = nn.Parameter(torch.ones(shape))
            self.beta = nn.Parameter(torch.zeros(shape))
            self.alpha_out = nn.Parameter(torch.ones(shape))
            self.beta_out = nn.Parameter(torch.zeros(shape))

    def reset_suite_parameters(self) -> None:
        """Scale-offset starts at identity (alpha = 1, beta = 0), also after conversion."""
        if self.scale_offset:
            with torch.no_grad():
                self.alpha.fill_(1.0), self.beta.zero_(), self.alpha_out.fill_(1.0), self.beta_out.zero_()

    def forward(self, x: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        """x: [B, T + T_out, D] normalized rows -> [B, T + T_out, D] attention output (after W_O)."""
        B, N, _ = x.shape
        T = ctx.n_base
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, N, H, hd)
        k = self.k_proj(x[:, :T]).view(B, T, Hkv, hd)
        v = self.v_proj(x[:, :T]).view(B, T, Hkv, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q_base, q_out = q[:, :T], q[:, T:]
        if self.scale_offset:
            q_base = self.alpha * q_base + self.beta
            q_out = self.alpha_out * q_out + self.beta_out
        cos, sin = ctx.rope
        q_base = apply_rope(q_base.transpose(1, 2), cos, sin)
        k = apply_rope(k.transpose(1, 2), cos, sin)
        v = v.transpose(1, 2)
        if ctx.cache is not None:
            slot = ctx.cache.layers[self.layer_idx]
            if "k" in slot:
                k = torch.cat([slot["k"], k], dim=2)
                v = torch.cat([slot["v"], v], dim=2)
            slot["k"], slot["v"] = k, v
        outs = [backend.attention(q_base, k, v, ctx.q_index, self.window, ctx.key_mask)]
        if N > T:
            idx = ctx.out_index
            q_out = apply_rope(q_out.transpose(1, 2), cos[:, idx], sin[:, idx])
            outs.append(backend.attention(q_out, k, v, ctx.q_index[idx], None, ctx.key_mask))
        o = torch.cat(outs, dim=2).transpose(1, 2).reshape(B, N, H * hd)
        return self.o_proj(o)
