"""Prefill (regime "Prefill" of Sec. 3.2): the prompt through every layer, K/V into a store, logits of the last
``n_out`` positions.

Orthros runs T base rows (sliding-window attention, K/V written) and ``n_out`` output rows (full attention over the
layer's K/V at their original positions, no K/V written); single-stream models take the logits of their last
``n_out`` rows. The loop is layer-major; with ``chunk`` each layer's base rows go in chunks, each chunk's queries
attending the keys they can reach, bottom-right aligned (``T_q != T_k``): the window halo read back from the store,
or every earlier key. Attention goes through :func:`models.kernels.attention`; the rest is the per-layer step
(:class:`models.runtime.layer.LayerStep`). Layers whose mixer is not attention (the FLA mixers of the hybrids) run
through a caller's ``recurrent(i, x)`` on all rows at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models import kernels
from models.backbone import rope_cos_sin, rope_frequencies
from models.runtime.kv import FP8KV, DenseKV
from models.runtime.layer import AttnWeights, LayerStep, is_attention, token_major

KV_FORMATS = ("dense", "bf16", "fp8")  # PrefillRunner.new_kv


def chunk_bounds(T: int, chunk: int | None) -> list[tuple[int, int]]:
    """``[start, end)`` of each prefill chunk of ``chunk`` rows (None: one chunk of T)."""
    C = T if chunk is None else min(chunk, T)
    return [(s, min(s + C, T)) for s in range(0, T, C)]


def prefill(model, step: LayerStep, ids: torch.Tensor, kv, n_out: int = 1, chunk: int | None = None,
            recurrent=None, freqs=None) -> torch.Tensor:
    """Prefill ``ids`` [B, T] (int64) into the store ``kv``; returns logits ``[B, n_out, vocab]`` (model dtype).

    ``recurrent(i, x)``: layer i's mixer output on normalized rows x (base rows, then output rows), for the
    layers that are not attention. ``freqs``: the RoPE frequencies (:func:`models.backbone.rope_frequencies`).
    """
    m = model
    B, T = ids.shape
    dev = ids.device
    freqs = freqs if freqs is not None else rope_frequencies(m.config, dev)
    two_stream = bool(m.two_stream)
    chunks = chunk_bounds(T, chunk)
    h = m.model.embed_tokens(ids)  # [B, T, D], base rows
    dtype = h.dtype
    out_pos = torch.arange(T - n_out, T, device=dev)
    h_out = h[:, T - n_out:].clone() if two_stream else None
    rope_out = rope_cos_sin(out_pos.expand(B, n_out), freqs, dtype) if two_stream else None
    ropes = [rope_cos_sin(torch.arange(s, e, device=dev).expand(B, e - s), freqs, dtype) for s, e in chunks]
    for i, w in enumerate(step.weights):
        if not isinstance(w, AttnWeights):
            rows = torch.cat([h, h_out], dim=1) if two_stream else h
            rows = step.mlp_res(i, rows + recurrent(i, step.norm_in(i, rows)))
            h, h_out = (rows[:, :T], rows[:, T:]) if two_stream else (rows, None)
            continue
        fresh = None
        for (s, e), (cos, sin) in zip(chunks, ropes):
            hc = h[:, s:e]
            q, k, v = step.attn_in(i, "base", hc, cos, sin)
            k, v = kv.write(i, s, k, v)
            lo = kernels.window_start(s, w.window)
            if lo < s:  # earlier chunks' keys: read back from the store
                k_old, v_old = kv.read(i, lo, s)
                k, v = torch.cat([k_old, k], dim=2), torch.cat([v_old, v], dim=2)
            o = kernels.attention(q, k, v, torch.arange(s - lo, e - lo, device=dev), w.window)
            del q
            new = step.attn_out(i, hc, token_major(o))
            if len(chunks) == 1:
                h, fresh = new, (k, v)
            else:
                h[:, s:e] = new
            del o, new
        if two_stream:
            q, _, _ = step.attn_in(i, "out", h_out, *rope_out, dynamic=False)
            k, v = fresh if fresh is not None else kv.read(i, 0, T)
            o = kernels.attention(q, k, v, out_pos, None)
            h_out = step.attn_out(i, h_out, token_major(o), dynamic=False)
        del fresh
    final = h_out if two_stream else h[:, T - n_out:]
    return m.lm_head(m.model.norm(final))


@dataclass
class PrefillResult:
    """logits ``[B, n_out, vocab]`` (model dtype) of the last ``n_out`` positions; the K/V store; kernels used."""

    logits: torch.Tensor
    kv: object
    kernels: dict


class PrefillRunner:
    """:func:`prefill` of a Transformer / SWA / Orthros model with the fused step, into a K/V store of its own.

    Args:
        model: a :class:`models.backbone.SuiteForCausalLM` whose every mixer is :class:`models.attention.Attention`.
        compiled: torch.compile the step's functions.
        chunk: base rows per chunk (None: the whole sequence at once).
        backend_name: torch.compile backend.

    Fusing rebinds the model's Q/K/V and gate/up weights as new Parameters on one tensor (:func:`fused_weight`):
    build an optimizer after the runner, not before. ``run(ids, n_out, kv)`` -> :class:`PrefillResult`.
    Raises ValueError for models with non-attention mixers,
    ``n_out`` outside ``[1, T]``, or a store whose shape does not fit.
    """

    def __init__(self, model, compiled: bool = False, chunk: int | None = None, backend_name: str = "inductor"):
        if not all(is_attention(layer.mixer) for layer in model.model.layers):
            raise ValueError("PrefillRunner serves models whose every mixer is attention (transformer, swa, orthros)")
        if chunk is not None and chunk < 1:
            raise ValueError(f"chunk must be >= 1 or None, got {chunk}")
        self.model, self.chunk = model, chunk
        self.step = LayerStep(model, fused=True, compiled=compiled, backend=backend_name)
        self._freqs = None

    def new_kv(self, B: int, T: int, fmt: str = "dense", block: int = 4096):
        """An empty store for ``B`` sequences of ``T`` tokens: ``fmt`` "dense" (model dtype), "bf16" (stored in
        bf16, read in the model dtype) or "fp8" (e4m3, one scale per KV head and ``block`` tokens)."""
        c = self.model.config
        p = next(self.model.parameters())
        args = (c.num_hidden_layers, B, c.num_key_value_heads, T, c.head_dim, p.dtype, p.device)
        if fmt == "dense":
            return DenseKV(*args)
        if fmt == "bf16":
            return DenseKV(*args, store_dtype=torch.bfloat16)
        if fmt == "fp8":
            return FP8KV(*args, block=block)
        raise ValueError(f"unknown KV format {fmt!r}; known: {', '.join(KV_FORMATS)}")

    @torch.inference_mode()
    def run(self, ids: torch.Tensor, n_out: int = 1, kv=None) -> PrefillResult:
        """Prefill ``ids`` [B, T] (int64); returns logits of the last ``n_out`` positions and the filled store."""
        if ids.dim() != 2 or ids.dtype != torch.long:
            raise ValueError(f"ids must be int64 [B, T], got {ids.dtype} {tuple(ids.shape)}")
        B, T = ids.shape
        if T > self.model.config.max_position_embeddings:
            raise ValueError(f"T={T} exceeds max_position_embeddings={self.model.config.max_position_embeddings}")
        if not 1 <= n_out <= T:
            raise ValueError(f"n_out={n_out} must be in [1, T={T}]")
        kv = kv if kv is not None else self.new_kv(B, T)
        if kv.k[0].shape[0] != B or kv.k[0].shape[2] < T:
            raise ValueError(f"KV store of shape {tuple(kv.k[0].shape)} does not fit B={B}, T={T}")
        if self._freqs is None:
            self._freqs = rope_frequencies(self.model.config, ids.device)
        kernels.reset_usage()
        logits = prefill(self.model, self.step, ids, kv, n_out, self.chunk, freqs=self._freqs)
        return PrefillResult(logits, kv, kernels.kernels_used())
