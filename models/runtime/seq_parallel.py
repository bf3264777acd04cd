"""Sequence-parallel (context-parallel) prefill over N ranks (paper Sec. 4.5: 8 GPUs, up to 1M tokens).

Both architectures compute exactly what the one-process model computes (the logits of the last position,
regime "Prefill"), with every rank holding only its shard of the activations. Works with any
torch.distributed backend (gloo on CPU, nccl on GPUs); ``group`` selects the ranks (default: all).

**Orthros** (:func:`prefill`). The T prompt tokens (base stream) are split contiguously over the ranks;
the one output-stream token (the last position, T_out = 1) is replicated on every rank. Per layer:

* each rank projects its shard's K/V (RoPE at the tokens' global positions) and receives the K/V of
  the w-1 tokens before its shard (the halo, gathered from the tails of earlier ranks), then runs
  sliding-window attention locally through :func:`models.kernels.attention`;
* the output token needs every key: each rank computes a partial softmax of its query against its
  local keys (running max m_r, sum of exponentials l_r, weighted values o_r) and a log-sum-exp
  merge across ranks (all_reduce MAX of m, SUM of l*exp(m_r - m) and o*exp(m_r - m)) gives the
  exact result.

Communication per layer: two all_gathers of a [B, Hkv, w-1, d] K/V tail and two small all_reduces.

**Transformer** (:func:`prefill_transformer`), full causal attention. The tokens are split into 2N
contiguous chunks and rank r holds chunks r and 2N-1-r (head-tail load balancing: every rank then has the
same number of causal query-key pairs). Per layer every rank all-gathers the K/V of all ranks (two
all_gathers of [B, Hkv, ~T/N, d]) and attends its chunks' queries to the keys up to each chunk's end
through :func:`models.kernels.attention` (on CUDA the ``sdpa-flash-lse`` kernel: flash attention over the
earlier keys and over the chunk's own keys, merged by log-sum-exp). PyTorch's own context-parallel API
(``torch.distributed.tensor.experimental.context_parallel``) is not used: it intercepts only the CUDA
flash/efficient/cuDNN SDPA ops, so it cannot run (or be tested) on CPU with gloo.

Everything else is the runtime's per-layer step (:class:`models.runtime.layer.LayerStep`: norms, projections with
q/k-norm and scale-offset, RoPE, W_O, MLP), unfused and eager unless a step is passed; W_O and the MLP run on row
blocks of ``MLP_ROWS`` (token-wise, so exact) to bound memory at 1M tokens.

Timing on N GPUs and the CSV: :mod:`benchmarks.seq_parallel_gpu`.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from models import kernels
from models.backbone import rope_cos_sin, rope_frequencies
from models.runtime.layer import LayerStep, is_attention, token_major


def shard_bounds(T: int, world: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) token ranges of each rank; sizes differ by at most one.

    Raises ValueError when there are fewer tokens than ranks.
    """
    if world < 1 or T < world:
        raise ValueError(f"cannot shard {T} tokens over {world} ranks (need T >= ranks >= 1)")
    base, extra = divmod(T, world)
    bounds, start = [], 0
    for r in range(world):
        end = start + base + (1 if r < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def _attention_mixers(model, two_stream: bool) -> list:
    """The layers' attention mixers of a two-stream (Orthros) model, or of a single-stream model whose layers are
    all full causal attention (no window). Raises ValueError naming the model or the offending layer."""
    if bool(getattr(model, "two_stream", False)) != two_stream:
        raise ValueError(f"{type(model).__name__} is " + ("not a two-stream (Orthros) model" if two_stream else
                                                          "a two-stream model: use prefill()"))
    mixers = [layer.mixer for layer in model.model.layers]
    for i, m in enumerate(mixers):
        if not is_attention(m) or (not two_stream and m.window is not None):
            kind = "attention" if two_stream else "full causal attention"
            raise ValueError(f"layer {i} mixer {type(m).__name__} (window {getattr(m, 'window', None)}) is not {kind}; "
                             f"sequence-parallel prefill supports the orthros and transformer archs")
    return mixers


MLP_ROWS = 65536  # rows per MLP block: the [rows, FFN] intermediates of 1M tokens would not fit beside the rest


def _attn_out_blocks(step: LayerStep, i: int, h: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """Layer i's ``attn_out`` (W_O, residual, MLP) on blocks of ``MLP_ROWS`` rows of h [B, R, D], in place;
    o ``[B, H, R, d]``."""
    o = token_major(o)
    for s in range(0, h.shape[1], MLP_ROWS):
        h[:, s:s + MLP_ROWS] = step.attn_out(i, h[:, s:s + MLP_ROWS], o[:, s:s + MLP_ROWS])
    return h


def balanced_chunks(T: int, world: int) -> list[list[tuple[int, int]]]:
    """Head-tail load balancing: per rank, its [start, end) token ranges.

    T is split into 2 x world contiguous chunks (:func:`shard_bounds`); rank r holds chunks r and
    2 x world - 1 - r, so every rank has the same number of causal query-key pairs (up to rounding). Adjacent
    chunks are merged (one rank: [(0, T)]). Raises ValueError when T < 2 x world.
    """
    if world < 1 or T < 2 * world:
        raise ValueError(f"cannot split {T} tokens into {2 * world} chunks for {world} ranks (need T >= 2 x ranks)")
    chunks = shard_bounds(T, 2 * world)
    out = []
    for r in range(world):
        (s0, e0), (s1, e1) = chunks[r], chunks[2 * world - 1 - r]
        out.append([(s0, e1)] if e0 == s1 else [(s0, e0), (s1, e1)])
    return out


def _gather_sequence(t: torch.Tensor, chunks: list[list[tuple[int, int]]], group) -> torch.Tensor:
    """All ranks' rows of t [B, H, n_local, d] (rank r's rows are its ``chunks[r]`` in order), reassembled in
    token order: [B, H, T, d]."""
    if len(chunks) == 1:
        return t
    sizes = [sum(e - s for s, e in ch) for ch in chunks]
    pad = max(sizes) - t.shape[2]  # all_gather needs equal shapes
    if pad:
        t = torch.cat([t, t.new_zeros(*t.shape[:2], pad, t.shape[3])], dim=2)
    parts = [torch.empty_like(t) for _ in chunks]
    dist.all_gather(parts, t.contiguous(), group=group)
    pieces = []
    for part, ch in zip(parts, chunks):
        offset = 0
        for s, e in ch:
            pieces.append((s, part[:, :, offset:offset + e - s]))
            offset += e - s
    return torch.cat([p for _, p in sorted(pieces, key=lambda x: x[0])], dim=2)


@torch.inference_mode()
def prefill_transformer(model, input_ids: torch.Tensor, group=None, step: LayerStep | None = None) -> torch.Tensor:
    """Context-parallel Prefill of a full-causal-attention model (the Transformer baseline).

    ``input_ids`` [B, T] int64 (the full prompt, the same on every rank). Returns the logits of the last
    position [B, vocab] (dtype of the model) on every rank. ``step``: the per-layer step (default: unfused, eager).

    Raises:
        ValueError: a two-stream model, a mixer that is not full causal attention (window), T < 2 x world size.
    """
    _attention_mixers(model, two_stream=False)
    step = step or LayerStep(model)
    cfg = model.config
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    B, T = input_ids.shape
    chunks = balanced_chunks(T, world)
    mine = chunks[rank]
    param = next(model.parameters())
    device = param.device
    local = torch.cat([torch.arange(s, e, device=device) for s, e in mine])
    cos, sin = rope_cos_sin(local.expand(B, -1), rope_frequencies(cfg, device), param.dtype)
    h = model.model.embed_tokens(input_ids.to(device)[:, local])
    for i in range(len(model.model.layers)):
        q, k, v = step.attn_in(i, "base", h, cos, sin)  # single-stream: every row a base row
        keys, values = _gather_sequence(k, chunks, group), _gather_sequence(v, chunks, group)
        outs, offset = [], 0
        for s, e in mine:  # queries s..e-1 see keys 0..e-1 (causal, bottom-right aligned)
            outs.append(kernels.attention(q[:, :, offset:offset + e - s], keys[:, :, :e], values[:, :, :e],
                                          torch.arange(s, e, device=device)))
            offset += e - s
        o = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
        del q, k, v, keys, values, outs
        h = _attn_out_blocks(step, i, h, o)
        del o
    # position T - 1 ends chunk 2N - 1, the last local row of rank 0
    if rank == 0:
        logits = model.lm_head(model.model.norm(h[:, -1]))
    else:
        logits = torch.empty(B, model.lm_head.out_features, device=device, dtype=param.dtype)
    if world > 1:
        dist.broadcast(logits, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return logits


def prefill_any(model, input_ids: torch.Tensor, group=None) -> torch.Tensor:
    """:func:`prefill` for two-stream (Orthros) models, :func:`prefill_transformer` otherwise."""
    if getattr(model, "two_stream", False):
        return prefill(model, input_ids, group)
    return prefill_transformer(model, input_ids, group)


def _halo(t: torch.Tensor, n: int, bounds, rank: int, group) -> torch.Tensor:
    """The ``n`` positions before this rank's shard of ``t`` [B, H, T_local, d], from earlier ranks' tails."""
    if n == 0:
        return t[:, :, :0]
    tail = t[:, :, -n:]
    if tail.shape[2] < n:  # a shard shorter than the halo: pad at the front (dropped below)
        tail = torch.cat([tail.new_zeros(*tail.shape[:2], n - tail.shape[2], tail.shape[3]), tail], dim=2)
    tails = [torch.empty_like(tail) for _ in bounds]
    dist.all_gather(tails, tail.contiguous(), group=group)
    valid = [tails[r][:, :, n - min(n, e - s):] for r, (s, e) in enumerate(bounds[:rank])]
    if not valid:
        return t[:, :, :0]
    return torch.cat(valid, dim=2)[:, :, -n:]


def _merged_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group) -> torch.Tensor:
    """Exact softmax attention of q [B, H, 1, d] over the union of every rank's k/v [B, Hkv, T_r, d]."""
    B, H, _, d = q.shape
    Hkv = k.shape[1]
    acc = torch.promote_types(q.dtype, torch.float32)  # fp32 for bf16 inputs; fp64 stays fp64
    qg = q.reshape(B, Hkv, H // Hkv, d).to(acc)
    scores = torch.matmul(qg, k.to(acc).transpose(-1, -2)) / math.sqrt(d)  # [B, Hkv, G, T_r]
    m = scores.amax(-1, keepdim=True)
    global_m = m.clone()
    dist.all_reduce(global_m, op=dist.ReduceOp.MAX, group=group)
    p = torch.exp(scores - global_m)
    stats = torch.cat([p.sum(-1, keepdim=True), torch.matmul(p, v.to(acc))], dim=-1)  # [B, Hkv, G, 1 + d]
    dist.all_reduce(stats, group=group)
    out = stats[..., 1:] / stats[..., :1]
    return out.to(q.dtype).reshape(B, H, 1, d)


@torch.inference_mode()
def prefill(model, input_ids: torch.Tensor, group=None, step: LayerStep | None = None) -> torch.Tensor:
    """Sequence-parallel Prefill of ``input_ids`` [B, T] (the full prompt, same on every rank).

    Each rank keeps only its shard's activations. Returns the logits of the last position
    [B, vocab] on every rank (regime "Prefill": T_in = T - 1, T_out = 1). ``step``: the per-layer step (default:
    unfused, eager).

    Raises:
        ValueError: not an Orthros (two-stream attention) model, T < world size, or T past the window rules.
    """
    mixers = _attention_mixers(model, two_stream=True)
    step = step or LayerStep(model)
    cfg = model.config
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    B, T = input_ids.shape
    bounds = shard_bounds(T, world)
    start, end = bounds[rank]
    device = next(model.parameters()).device
    ids = input_ids.to(device)
    positions = torch.arange(start, end, device=device).expand(B, -1)
    freqs = rope_frequencies(cfg, device)
    cos, sin = rope_cos_sin(positions, freqs, next(model.parameters()).dtype)
    last = torch.full((B, 1), T - 1, device=device)
    rope_out = rope_cos_sin(last, freqs, cos.dtype)
    n_local = end - start
    h = model.model.embed_tokens(ids[:, start:end])  # local base rows
    h_out = model.model.embed_tokens(ids[:, -1:])  # the output row, on every rank
    for i, mix in enumerate(mixers):
        q_base, k, v = step.attn_in(i, "base", h, cos, sin)
        q_out, _, _ = step.attn_in(i, "out", h_out, *rope_out, dynamic=False)
        halo = start - kernels.window_start(start, mix.window)
        k_halo, v_halo = _halo(k, mix.window - 1, bounds, rank, group), _halo(v, mix.window - 1, bounds, rank, group)
        keys, values = torch.cat([k_halo, k], dim=2), torch.cat([v_halo, v], dim=2)
        assert keys.shape[2] == halo + n_local
        # queries padded with zeros over the halo so the window kernel sees T_q == T_k (GPU fast path);
        # the halo rows' outputs are dropped
        q_pad = torch.cat([q_base.new_zeros(B, q_base.shape[1], halo, q_base.shape[3]), q_base], dim=2)
        o_base = kernels.attention(q_pad, keys, values, torch.arange(halo + n_local, device=device), mix.window)
        o_out = _merged_query_attention(q_out, k, v, group)
        del q_base, q_pad, keys, values
        h = _attn_out_blocks(step, i, h, o_base[:, :, halo:])
        h_out = step.attn_out(i, h_out, token_major(o_out), dynamic=False)
    return model.lm_head(model.model.norm(h_out[:, -1]))
