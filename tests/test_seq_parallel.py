"""Sequence-parallel prefill (gloo, 2 and 4 CPU processes) equals the single-process model prefill, for Orthros
(halo + merged output token) and the Transformer (all-gathered K/V, head-tail balanced chunks)."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from models import kernels
from models.registry import build
from models.runtime.seq_parallel import balanced_chunks, prefill, prefill_any, prefill_transformer, shard_bounds

CFG = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           intermediate_size=48, max_position_embeddings=256, qk_norm=True)


def _model(arch="orthros"):
    torch.manual_seed(0)
    if arch == "transformer":
        return build("transformer", "1M", **CFG).eval()
    model = build("orthros", "1M", window_size=8, **CFG).eval()
    with torch.no_grad():  # scale-offset away from identity, so the two streams differ
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


def _worker(rank, world, init_file, arch, ids, out_dir, kernel):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        kernels.force_kernel(kernel)
        logits = prefill_any(_model(arch), ids)
        torch.save(logits, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        kernels.force_kernel(None)
        dist.destroy_process_group()


@pytest.mark.parametrize("arch, world, T, kernel", [
    ("orthros", 2, 29, None),
    ("orthros", 4, 23, None),  # T=23 over 4 ranks: shards of 5-6 < w-1 = 7
    ("transformer", 2, 29, None),
    ("transformer", 4, 23, None),  # 8 chunks of 2-3 tokens, uneven shards (6, 6, 6, 5)
    ("transformer", 2, 30, "sdpa-flash-lse"),  # the GPU route: flash over earlier keys + own keys, LSE merge
])
def test_seq_parallel_prefill_is_exact(tmp_path, arch, world, T, kernel):
    torch.manual_seed(1)
    ids = torch.randint(0, 67, (2, T))
    # fork: the children inherit the imported modules (spawn re-imports torch and transformers per rank)
    mp.start_processes(_worker, args=(world, str(tmp_path / "init"), arch, ids, str(tmp_path), kernel), nprocs=world,
                       join=True, start_method="fork")
    with torch.no_grad():
        ref = _model(arch)(ids, logits_to_keep=1).logits[:, 0]
    for rank in range(world):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("Tq, Tk", [(5, 13), (13, 13), (1, 9)])
def test_flash_lse_kernel_matches_dense_causal(dtype, atol, Tq, Tk):
    """The last Tq of Tk positions attend causally (bottom-right) with grouped K/V heads."""
    g = torch.Generator().manual_seed(Tq * 100 + Tk)
    q = torch.randn(2, 4, Tq, 8, generator=g).to(dtype)
    k, v = (torch.randn(2, 2, Tk, 8, generator=g).to(dtype) for _ in range(2))
    idx = torch.arange(Tk - Tq, Tk)
    kernels.force_kernel("sdpa-flash-lse")
    try:
        got = kernels.attention(q, k, v, idx)
    finally:
        kernels.force_kernel(None)
    allowed = torch.arange(Tk)[None] <= idx[:, None]
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double().repeat_interleave(2, 1),
                                                           v.double().repeat_interleave(2, 1), attn_mask=allowed)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, atol=atol, rtol=0)


def test_flash_lse_kernel_refuses_a_window():
    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 10, 8)
    kernels.force_kernel("sdpa-flash-lse")
    try:
        with pytest.raises(ValueError, match="sdpa-flash-lse.*full causal attention only"):
            kernels.attention(q, k, k, torch.arange(6, 10), window=3)
    finally:
        kernels.force_kernel(None)


def test_shard_bounds_and_balanced_chunks():
    assert shard_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert shard_bounds(4, 4)[-1] == (3, 4)
    with pytest.raises(ValueError, match="3 tokens over 4 ranks"):
        shard_bounds(3, 4)
    assert balanced_chunks(16, 2) == [[(0, 4), (12, 16)], [(4, 12)]]
    assert balanced_chunks(7, 1) == [[(0, 7)]]
    # head-tail chunks give every rank the same causal query-key pairs
    pairs = [sum((e * (e + 1) - s * (s + 1)) // 2 for s, e in ch) for ch in balanced_chunks(4096, 4)]
    assert max(pairs) - min(pairs) == 0
    with pytest.raises(ValueError, match="cannot split 5 tokens into 6 chunks"):
        balanced_chunks(5, 3)


def test_wrong_arch_is_refused():
    with pytest.raises(ValueError, match="two-stream"):
        prefill_transformer(_model("orthros"), torch.zeros(1, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="not a two-stream"):
        prefill(_model("transformer"), torch.zeros(1, 8, dtype=torch.long))
