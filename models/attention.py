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

The math is written once, as public methods that the model's ``forward``, the E2E engine
(:mod:`suite.bench.engine`) and the sequence-parallel prefill (:mod:`suite.bench.seq_parallel`) call:
:meth:`Attention.project` (Eqs. 4-5; :meth:`Attention.project_decode` is its one-step form with RoPE),
:meth:`Attention.attend` (both streams' attention) and :meth:`Attention.output` (W_O). The fused
functions of :mod:`suite.bench.fused` regroup the same math as functions of tensors for ``torch.compile``, calling
:func:`two_stream_scale_offset` and :func:`models.backbone.rotate_half_rope` (through ``apply_rope_token_major``);
they keep their own one-GEMM Q/K/V projection over concatenated weights.
"""
from __future__ import annotations

import torch
from torch import nn

from . import kernels
from .backbone import MixerContext, SuiteConfig, apply_rope


def two_stream_scale_offset(q: torch.Tensor, n_base: int, alpha: torch.Tensor, beta: torch.Tensor,
                            alpha_out: torch.Tensor, beta_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The query scale-offsets of Sec. 3.1, Eqs. 4-5, on token-major ``q`` ``[B, R, H, d]``.

    Rows ``< n_base`` are base-stream queries (``alpha * q + beta``), the rest output-stream queries
    (``alpha' * q + beta'``); alpha, beta, alpha', beta' are ``[H, d]``. Returns ``(q_base [B, n_base, H, d],
    q_out [B, R - n_base, H, d])``; an empty part is returned as its (empty) slice. The projections
    (:meth:`Attention.project`, :meth:`Attention.project_decode`) and the fused prefill and decode functions
    (:mod:`suite.bench.fused`) all call this.
    """
    q_base, q_out = q[:, :n_base], q[:, n_base:]
    if q_base.shape[1]:
        q_base = alpha * q_base + beta
    if q_out.shape[1]:
        q_out = alpha_out * q_out + beta_out
    return q_base, q_out


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

    # ---- the layer's math, one public method per step; the model's forward, the E2E engine
    # (suite/bench/engine.py) and the sequence-parallel prefill (suite/bench/seq_parallel.py) all call these

    def _qkv(self, x: torch.Tensor, n_base: int):
        """Token-major q [B, R, H, d] of every row, k, v [B, n_base, Hkv, d] of the base rows; q/k-norm applied."""
        B, R, _ = x.shape
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, R, H, hd)
        k = self.k_proj(x[:, :n_base]).view(B, n_base, Hkv, hd)
        v = self.v_proj(x[:, :n_base]).view(B, n_base, Hkv, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v

    def _scale_offset(self, q: torch.Tensor, n_base: int):
        """Eqs. 4-5 on token-major q [B, R, H, d]: rows < n_base get alpha, beta, the rest alpha', beta'."""
        if not self.scale_offset:
            return q[:, :n_base], q[:, n_base:]
        return two_stream_scale_offset(q, n_base, self.alpha, self.beta, self.alpha_out, self.beta_out)

    def project(self, x: torch.Tensor, n_base: int):
        """Both streams' projections with their query scale-offsets (Sec. 3.1, Eqs. 4-5); no RoPE yet.

        Args:
            x: ``[B, R, D]`` normalized rows (model dtype): the first ``n_base`` (T) are base-stream rows, the other
                ``R - n_base`` (T_out) output-stream rows; ``R == n_base`` for a single-stream model.
            n_base: T, ``0 <= n_base <= R``.

        Returns:
            ``(q_base, q_out, k, v)`` in x's dtype, head-major views of token-major memory:

            * q_base ``[B, H, T, d]``: ``alpha * (x W_Q) + beta`` (Eq. 4);
            * q_out ``[B, H, T_out, d]``: ``alpha' * (x' W_Q) + beta'`` (Eq. 5);
            * k, v ``[B, Hkv, T, d]``: ``x W_K``, ``x W_V`` of the base rows only (the output stream writes no K/V).

            Qwen3's per-head q/k-norm (``qk_norm``) comes before the scale-offset; without ``scale_offset``,
            alpha = alpha' = 1 and beta = beta' = 0.
        """
        q, k, v = self._qkv(x, n_base)
        q_base, q_out = self._scale_offset(q, n_base)
        return q_base.transpose(1, 2), q_out.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def stacked_scale_offset(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The scale-offset of a decode step's rows ``[base, output]``: ``(alpha, beta)``, each ``[2, H, d]`` with row 0
        the base stream's (alpha, beta) and row 1 the output stream's (alpha', beta'), a new tensor (parameter dtype);
        None without ``scale_offset``. The per-row form :meth:`project_decode` takes as ``so``."""
        if not self.scale_offset:
            return None
        return torch.stack([self.alpha, self.alpha_out]), torch.stack([self.beta, self.beta_out])

    def project_decode(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                       so: tuple[torch.Tensor, torch.Tensor] | None = None):
        """:meth:`project` for one decode step, RoPE included, in fewer kernels (what the E2E engine captures).

        Args:
            x: ``[B, R, D]`` normalized rows of one new token: row 0 its base row (writes K/V), rows 1.. output rows
                (R = 2 for Orthros, 1 for a single-stream model); all at the same position.
            rope: ``(cos, sin)``, each ``[B, 1, d]``, of that position.
            so: None, or the scale-offset per row ``(alpha, beta)``, each ``[R, H, d]`` (the
                :meth:`stacked_scale_offset` of a two-stream step, possibly held in static buffers for CUDA graphs),
                applied in one ``torch.addcmul(beta, q, alpha)``: Eqs. 4-5 with the streams' vectors stacked by row.
                None: :meth:`project`'s per-stream form.

        Returns:
            q ``[B, H, R, d]`` and k ``[B, Hkv, 1, d]``, both rotated (together, in one RoPE call), and v
            ``[B, Hkv, 1, d]``, in x's dtype.
        """
        B, R, _ = x.shape
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q, k, v = self._qkv(x, 1)
        if so is not None:
            q = torch.addcmul(so[1], q, so[0])
        elif self.scale_offset:
            q_base, q_out = self._scale_offset(q, 1)
            q = torch.cat([q_base, q_out], dim=1) if R > 1 else q_base
        cos, sin = rope
        qk = apply_rope(torch.cat([q, k.expand(B, R, Hkv, hd)], dim=2).transpose(1, 2), cos, sin)
        return qk[:, :H], qk[:, H:, :1], v.transpose(1, 2)

    def attend(self, q_base: torch.Tensor, q_out: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               rope: tuple[torch.Tensor, torch.Tensor], q_index: torch.Tensor, out_index,
               key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Both streams' attention over the layer's K/V (Sec. 3.1), RoPE applied to the queries here.

        Args:
            q_base, q_out: ``[B, H, T, d]``, ``[B, H, T_out, d]`` from :meth:`project` (not rotated).
            k, v: ``[B, Hkv, L, d]`` the layer's keys (rotated) and values, cached past ones first, then the T new.
            rope: ``(cos, sin)``, each ``[B, T, d]``, of the T new base tokens.
            q_index: ``[T]`` int64 key index of the new base tokens (``past + arange(T)``).
            out_index: the new tokens (rows of the T) that carry the output rows: ``[T_out]`` int64, or a slice.
            key_mask: ``[B, L]`` bool, False = padding key, or None.

        Base query t attends keys ``q_index[t] - w < j <= q_index[t]`` (w = ``window_size``; None: every earlier key).
        Output query i attends every key ``j <= q_index[out_index[i]]`` at its token's original position (RoPE and
        causality), through :func:`models.kernels.attention`.

        Returns:
            ``[B, H, T + T_out, d]`` (q's dtype): the base rows, then the output rows.
        """
        cos, sin = rope
        outs = [kernels.attention(apply_rope(q_base, cos, sin), k, v, q_index, self.window, key_mask)]
        if q_out.shape[2]:
            q_out = apply_rope(q_out, cos[:, out_index], sin[:, out_index])
            outs.append(kernels.attention(q_out, k, v, q_index[out_index], None, key_mask))
        return torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]

    def output(self, o: torch.Tensor) -> torch.Tensor:
        """Attention output ``[B, H, R, d]`` -> ``[B, R, D]``: the heads concatenated per row, times W_O."""
        B, H, R, hd = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, R, H * hd))

    def forward(self, x: torch.Tensor, ctx: MixerContext) -> torch.Tensor:
        """x: [B, T + T_out, D] normalized rows -> [B, T + T_out, D] attention output (after W_O).

        :meth:`project`, RoPE of the new keys, the K/V cache (``ctx.cache``), :meth:`attend`, :meth:`output`.
        """
        q_base, q_out, k, v = self.project(x, ctx.n_base)
        cos, sin = ctx.rope
        k = apply_rope(k, cos, sin)
        if ctx.cache is not None:
            slot = ctx.cache.layers[self.layer_idx]
            if "k" in slot:
                k = torch.cat([slot["k"], k], dim=2)
                v = torch.cat([slot["v"], v], dim=2)
            slot["k"], slot["v"] = k, v
        o = self.attend(q_base, q_out, k, v, ctx.rope, ctx.q_index, ctx.out_index, ctx.key_mask)
        return self.output(o)
