"""Sequence-parallel (context-parallel) Orthros prefill over N ranks (paper Sec. 4.5: 8 GPUs, up to 1M tokens).

The T prompt tokens (base stream) are split contiguously over the ranks; the one output-stream
token (the last position, T_out = 1) is replicated on every rank. Per layer:

* each rank projects its shard's K/V (RoPE at the tokens' global positions) and receives the K/V of
  the w-1 tokens before its shard (the halo, gathered from the tails of earlier ranks), then runs
  sliding-window attention locally through :func:`models.backend.attention`;
* the output token needs every key: each rank computes a partial softmax of its query against its
  local keys (running max m_r, sum of exponentials l_r, weighted values o_r) and a log-sum-exp
  merge across ranks (all_reduce MAX of m, SUM of l*exp(m_r - m) and o*exp(m_r - m)) gives the
  exact result.

Everything else (norms, projections, q/k norms, scale-offset, MLP, LM head) calls the model's own
modules. Communication per layer: one all_gather of a [B, Hkv, w-1, d] K/V tail and three small
all_reduces. Works with any torch.distributed backend (gloo on CPU, nccl on GPUs).

Benchmark on N GPUs: ``torchrun --nproc_per_node N -m suite.bench.seq_parallel --seq-len 1048576``.
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.distributed as dist

from models import backend
from models.backbone import apply_rope, rope_cos_sin, rope_frequencies
from suite.bench.engine import _is_attention, _project


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
    qg = q.reshape(B, Hkv, H // Hkv, d).float()
    scores = torch.matmul(qg, k.float().transpose(-1, -2)) / math.sqrt(d)  # [B, Hkv, G, T_r]
    m = scores.amax(-1, keepdim=True)
    global_m = m.clone()
    dist.all_reduce(global_m, op=dist.ReduceOp.MAX, group=group)
    p = torch.exp(scores - global_m)
    stats = torch.cat([p.sum(-1, keepdim=True), torch.matmul(p, v.float())], dim=-1)  # [B, Hkv, G, 1 + d]
    dist.all_reduce(stats, group=group)
    out = stats[..., 1:] / stats[..., :1]
    return out.to(q.dtype).reshape(B, H, 1, d)


@torch.inference_mode()
def prefill(model, input_ids: torch.Tensor, group=None) -> torch.Tensor:
    """Sequence-parallel Prefill of ``input_ids`` [B, T] (the full prompt, same on every rank).

    Each rank keeps only its shard's activations. Returns the logits of the last position
    [B, vocab] on every rank (regime "Prefill": T_in = T - 1, T_out = 1).

    Raises:
        ValueError: not an Orthros (two-stream attention) model, T < world size, or T past the window rules.
    """
    if not getattr(model, "two_stream", False):
        raise ValueError(f"{type(model).__name__} is not a two-stream (Orthros) model")
    mixers = [layer.mixer for layer in model.model.layers]
    for i, m in enumerate(mixers):
        if not _is_attention(m):
            raise ValueError(f"layer {i} mixer {type(m).__name__} is not attention; sequence-parallel prefill "
                             f"supports transformer, swa and orthros")
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
    cos_out, sin_out = rope_cos_sin(last, freqs, cos.dtype)
    n_local = end - start
    h = model.model.embed_tokens(torch.cat([ids[:, start:end], ids[:, -1:]], dim=1))  # local base rows + output row
    for layer, mix in zip(model.model.layers, mixers):
        x = layer.input_layernorm(h)
        q, k, v = _project(mix, x, n_local)
        k = apply_rope(k, cos, sin)
        halo = min(mix.window - 1, start)
        k_halo, v_halo = _halo(k, mix.window - 1, bounds, rank, group), _halo(v, mix.window - 1, bounds, rank, group)
        keys, values = torch.cat([k_halo, k], dim=2), torch.cat([v_halo, v], dim=2)
        assert keys.shape[2] == halo + n_local
        # queries padded with zeros over the halo so the window kernel sees T_q == T_k (GPU fast path);
        # the halo rows' outputs are dropped
        q_base = apply_rope(q[:, :, :n_local], cos, sin)
        q_pad = torch.cat([q_base.new_zeros(B, q.shape[1], halo, q.shape[3]), q_base], dim=2)
        o_base = backend.attention(q_pad, keys, values, torch.arange(halo + n_local, device=device), mix.window)
        o_out = _merged_query_attention(apply_rope(q[:, :, n_local:], cos_out, sin_out), k, v, group)
        o = torch.cat([o_base[:, :, halo:], o_out], dim=2)
        h = h + mix.o_proj(o.transpose(1, 2).reshape(B, n_local + 1, -1))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return model.lm_head(model.model.norm(h[:, -1]))


def main(argv=None) -> None:  # pragma: no cover - needs several GPUs
    """Time a sequence-parallel prefill of a random-weight model under torchrun (prints ms on rank 0)."""
    from suite.bench.engine import build_bench_model

    ap = argparse.ArgumentParser(description="sequence-parallel Orthros prefill timing (torchrun)")
    ap.add_argument("--seq-len", type=int, default=131072)
    ap.add_argument("--size", default="qwen3_8b")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    torch.manual_seed(0)  # same weights on every rank
    model = build_bench_model("orthros", args.size, "cuda", torch.bfloat16, args.seq_len)
    ids = torch.randint(0, model.config.vocab_size, (1, args.seq_len), device="cuda")
    times = []
    for i in range(args.repeats + 1):
        dist.barrier()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        prefill(model, ids)
        t1.record()
        torch.cuda.synchronize()
        if i:
            times.append(t0.elapsed_time(t1))
    if rank == 0:
        print(f"seq-parallel orthros prefill T={args.seq_len} ranks={dist.get_world_size()}: "
              f"median {sorted(times)[len(times) // 2]:.1f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    main()
