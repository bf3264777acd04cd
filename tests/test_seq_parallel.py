"""Sequence-parallel Orthros prefill (gloo, 2 and 4 CPU processes) equals the single-process model prefill."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from models.registry import build
from suite.bench.seq_parallel import prefill, shard_bounds

CFG = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           intermediate_size=48, max_position_embeddings=256, window_size=8, qk_norm=True)


def _model():
    torch.manual_seed(0)
    model = build("orthros", "1M", **CFG).eval()
    with torch.no_grad():  # scale-offset away from identity, so the two streams differ
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


def _worker(rank, world, init_file, ids, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        logits = prefill(_model(), ids)
        torch.save(logits, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world, T", [(2, 29), (4, 23)])  # T=23 over 4 ranks: shards of 5-6 < w-1 = 7
def test_seq_parallel_prefill_is_exact(tmp_path, world, T):
    torch.manual_seed(1)
    ids = torch.randint(0, 67, (2, T))
    # fork: the children inherit the imported modules (spawn re-imports torch and transformers per rank)
    mp.start_processes(_worker, args=(world, str(tmp_path / "init"), ids, str(tmp_path)), nprocs=world,
                       join=True, start_method="fork")
    with torch.no_grad():
        ref = _model()(ids, logits_to_keep=1).logits[:, 0]
    for rank in range(world):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_shard_bounds():
    assert shard_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert shard_bounds(4, 4)[-1] == (3, 4)
    with pytest.raises(ValueError, match="3 tokens over 4 ranks"):
        shard_bounds(3, 4)
