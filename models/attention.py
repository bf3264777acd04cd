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

The math is written once. :func:`qkv_rows` (Q/K/V projection and Qwen3's q/k-norm) and
:func:`two_stream_scale_offset` (Eqs. 4-5) are what :meth:`Attention.project` and the inference runtime's
per-layer step (:mod:`models.runtime.layer`: prefill, decode, sequence-parallel prefill, fused or compiled) both
call; :meth:`Attention.attend` and the runtime attend through :func:`models.kernels.attention`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import kernels
from .backbone import MixerContext, SuiteConfig, apply_rope


def two_stream_scale_offset(q: torch.Tensor, n_base: int, alpha: torch.Tensor, beta: torch.Tensor,
                            alpha_out: torch.Tensor, beta_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The query scale-offsets of Sec. 3.1, Eqs. 4-5, on token-major ``q`` ``[B, R, H, d]``.

    Rows ``< n_base`` are base-stream queries (``alpha * q + beta``), the rest output-stream queries
    (``alpha' * q + beta'``); alpha, beta, alpha', beta' are ``[H, d]``. Returns ``(q_base [B, n_base, H, d],
    q_out [B, R - n_base, H, d])``; an empty part is returned as its (empty) slice. The model's
    projection (:meth:`Attention.project`) and the runtime's per-layer step (:mod:`models.runtime.layer`) call this.
    """
    q_base, q_out = q[:, :n_base], q[:, n_base:]
    if q_base.shape[1]:
        q_base = alpha * q_base + beta
    if q_out.shape[1]:
        q_out = alpha_out * q_out + beta_out
    return q_base, q_out


def qkv_rows(x: torch.Tensor, w_qkv, b_qkv, q_norm: torch.Tensor | None, k_norm: torch.Tensor | None, n_base: int,
             H: int, Hkv: int, d: int, eps: float):
    """Token-major ``q [B, R, H, d]`` of every row of ``x [B, R, D]`` and ``k, v [B, n_base, Hkv, d]`` of its first
    ``n_base`` rows (the base stream's; output rows write no K/V), Qwen3's per-head q/k-norm applied when given.

    ``w_qkv``: the weights as ``(W_Q, W_K, W_V)`` (three GEMMs, the model's own modules) or one
    ``[(H + 2 Hkv) d, D]`` tensor (one GEMM over all rows; with ``n_base == 0`` only its W_Q rows); ``b_qkv`` the
    matching biases or None. ``n_base == 0`` gives ``k = v = None``.
    """
    qd, kd = H * d, Hkv * d
    if isinstance(w_qkv, tuple):
        (wq, wk, wv), (bq, bk, bv) = w_qkv, b_qkv or (None, None, None)
        q = F.linear(x, wq, bq)
        xb = x[:, :n_base]
        k, v = (F.linear(xb, wk, bk), F.linear(xb, wv, bv)) if n_base else (None, None)
    elif n_base == 0:
        q, k, v = F.linear(x, w_qkv[:qd], None if b_qkv is None else b_qkv[:qd]), None, None
    else:
        qkv = F.linear(x, w_qkv, b_qkv)
        q, k, v = qkv[..., :qd], qkv[:, :n_base, qd:qd + kd], qkv[:, :n_base, qd + kd:]
    q = q.unflatten(-1, (H, d))
    if k is not None:
        k, v = k.unflatten(-1, (Hkv, d)), v.unflatten(-1, (Hkv, d))
    if q_norm is not None:
        q = F.rms_norm(q, (d,), q_norm, eps)
        if k is not None:
            k = F.rms_norm(k, (d,), k_norm, eps)
    return q, k, v


class Attention(nn.Module):
    def __init__(self, config: SuiteConfig, layer_idx: int, scale_offset: bool = False):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.window = config.window_size
        d, hd = config.hidden_size, config.head_dim
        bias = bool(config.attention_bias)  # "qkv": q, k and v only (Qwen2)
        self.q_proj = nn.Linear(d, self.num_heads * hd, bias=bias)
        self.k_proj = nn.Linear(d, self.num_kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(d, self.num_kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * hd, d, bias=config.attention_bias is True)
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

    def qkv_weights(self):
        """``(w_qkv, b_qkv)`` as :func:`qkv_rows` takes them: the three projections' weights and biases (or None)."""
        w = (self.q_proj.weight, self.k_proj.weight, self.v_proj.weight)
        b = (self.q_proj.bias, self.k_proj.bias, self.v_proj.bias) if self.q_proj.bias is not None else None
        return w, b

    def scale_offsets(self):
        """``(alpha, beta, alpha', beta')`` of Eqs. 4-5, or None without ``scale_offset``."""
        return (self.alpha, self.beta, self.alpha_out, self.beta_out) if self.scale_offset else None

    def project(self, x: torch.Tensor, n_base: int):
        """Both streams' projections with their query scale-offsets (Sec. 3.1, Eqs. 4-5); no RoPE yet.

        Args:
            x: ``[B, R, D]`` normalized rows (model dtype): the first ``n_base`` (T) are base-stream rows, the other
                ``R - n_base`` (T_out) output-stream rows; ``R == n_base`` for a single-stream model.
            n_base: T, ``1 <= n_base <= R``.

        Returns:
            ``(q_base, q_out, k, v)`` in x's dtype, head-major views of token-major memory:

            * q_base ``[B, H, T, d]``: ``alpha * (x W_Q) + beta`` (Eq. 4);
            * q_out ``[B, H, T_out, d]``: ``alpha' * (x' W_Q) + beta'`` (Eq. 5);
            * k, v ``[B, Hkv, T, d]``: ``x W_K``, ``x W_V`` of the base rows only (the output stream writes no K/V).

            Qwen3's per-head q/k-norm (``qk_norm``) comes before the scale-offset; without ``scale_offset``,
            alpha = alpha' = 1 and beta = beta' = 0.
        """
        w, b = self.qkv_weights()
        q, k, v = qkv_rows(x, w, b, None if self.q_norm is None else self.q_norm.weight,
                           None if self.k_norm is None else self.k_norm.weight, n_base, self.num_heads,
                           self.num_kv_heads, self.head_dim, self.q_norm.eps if self.q_norm is not None else 0.0)
        so = self.scale_offsets()
        q_base, q_out = (q[:, :n_base], q[:, n_base:]) if so is None else two_stream_scale_offset(q, n_base, *so)
        return q_base.transpose(1, 2), q_out.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def attend(self, q_base: torch.Tensor, q_out: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               rope: tuple[torch.Tensor, torch.Tensor], q_index: torch.Tensor | int, out_index,
               key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Both streams' attention over the layer's K/V (Sec. 3.1), RoPE applied to the queries here.

        Args:
            q_base, q_out: ``[B, H, T, d]``, ``[B, H, T_out, d]`` from :meth:`project` (not rotated).
            k, v: ``[B, Hkv, L, d]`` the layer's keys (rotated) and values, cached past ones first, then the T new.
            rope: ``(cos, sin)``, each ``[B, T, d]``, of the T new base tokens.
            q_index: ``[T]`` int64 key index of the new base tokens (``past + arange(T)``), or the int ``past``
                (:func:`models.kernels.attention`'s host-known form: no value is read from the device).
            out_index: the new tokens (rows of the T) that carry the output rows: ``[T_out]`` int64, or a slice
                (with an int ``q_index`` and a slice of step 1, the output queries' key indices are known on the host
                too).
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
            outs.append(kernels.attention(q_out, k, v, _output_keys(q_index, out_index, q_base.shape[2], k.device),
                                          None, key_mask))
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
        q_index = ctx.q_index if ctx.q_start is None else ctx.q_start
        out_index = ctx.out_index if ctx.out_start is None else slice(ctx.out_start, None)
        o = self.attend(q_base, q_out, k, v, ctx.rope, q_index, out_index, ctx.key_mask)
        return self.output(o)


def _output_keys(q_index: torch.Tensor | int, out_index, T: int, device) -> torch.Tensor | int:
    """The key indices of the base tokens ``out_index`` selects (``q_index[out_index]``), as an int s (keys
    ``s, s + 1, ..``) where an int ``q_index`` and a step-1 slice give them on the host, else as a tensor."""
    if not isinstance(q_index, int):
        return q_index[out_index]
    if isinstance(out_index, slice):
        rows = range(T)[out_index]
        if rows.step == 1:
            return q_index + rows.start
    return torch.arange(q_index, q_index + T, device=device)[out_index]
