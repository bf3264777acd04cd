"""Data-parallel training (gloo, 2 CPU processes) equals one process with the same global batch, and resumes exactly."""
import json
import os

import pandas as pd
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from models.registry import build
from suite.data.batches import TokenBatches
from suite.data.tokenizer import load_tokens
from suite.train import distributed
from suite.train.lm import TrainConfig, train

VOCAB = 512  # the tokenizer of the data_dir fixture (conftest.py)
TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=128, window_size=8)
HP = dict(batch_size=4, seq_len=32, lr=3e-3, warmup=1, seed=5, progress=False, val_batches=2, threads=1)


class Interrupt(Exception):
    pass


SEEN: list[torch.Tensor] = []  # input_ids of this process's training forwards (each forked rank has its own)


def tiny(arch, interrupt_at=None):
    """Factory of a tiny ``arch`` model that records its training inputs in SEEN; with ``interrupt_at`` its
    n-th training forward raises Interrupt."""
    def factory():
        model = build(arch, "1M", **({} if arch == "transformer" else {"window_size": 8}),
                      **{k: v for k, v in TINY.items() if k != "window_size"})
        model.register_forward_pre_hook(lambda m, args, kwargs: SEEN.append(kwargs["input_ids"].clone())
                                        if m.training else None, with_kwargs=True)
        if interrupt_at is not None:
            calls = {"n": 0}

            def hook(module, args, output):
                if module.training:
                    calls["n"] += 1
                    if calls["n"] == interrupt_at:
                        raise Interrupt("killed")
            model.register_forward_hook(hook)
        return model
    return factory


def _worker(rank, world, init_file, factory, data_dir, out_dir, kwargs):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        SEEN.clear()  # a forked child starts with its parent's list
        train(factory, data_dir, out_dir, TrainConfig(**kwargs))
        torch.save(SEEN, os.path.join(out_dir, f"seen-rank{rank}.pt"))
    except Interrupt:
        pass  # the "kill": every rank stops at the same step, after the last checkpoint
    finally:
        dist.destroy_process_group()


def run_ranks(world, tmp_path, factory, data_dir, out_dir, **kwargs):
    init = tmp_path / f"init-{os.urandom(4).hex()}"
    # fork: the children inherit the imported modules (spawn would re-import torch and transformers per rank)
    mp.start_processes(_worker, args=(world, str(init), factory, data_dir, out_dir, kwargs), nprocs=world,
                       join=True, start_method="fork")


def losses(out_dir):
    return pd.read_csv(out_dir / "loss.csv")["loss"].to_numpy().copy()


@pytest.mark.parametrize("arch, parallel", [("orthros", "fsdp"), ("transformer", "fsdp"), ("transformer", "ddp")])
def test_two_ranks_match_one_process(data_dir, tmp_path, arch, parallel):
    one = train(tiny(arch), data_dir, tmp_path / "one", TrainConfig(steps=5, **HP))
    run_ranks(2, tmp_path, tiny(arch), data_dir, tmp_path / "two", steps=5, parallel=parallel, **HP)
    assert losses(tmp_path / "one").shape == (5,)
    torch.testing.assert_close(losses(tmp_path / "two"), losses(tmp_path / "one"), atol=1e-5, rtol=0)
    two = pd.read_csv(tmp_path / "two" / "metrics.csv").iloc[0]
    assert two["world_size"] == 2 and one["world_size"] == 1
    assert two["tokens"] == one["tokens"] == 5 * 4 * 32  # tokens of the global batch
    assert two["val_loss"] == pytest.approx(one["val_loss"], abs=1e-5)
    # each rank trained on its own half of the global batch of each step, not on a copy of it
    seen = [torch.load(tmp_path / "two" / f"seen-rank{r}.pt") for r in (0, 1)]
    batches = TokenBatches(load_tokens(data_dir, "train"), HP["batch_size"], HP["seq_len"], HP["seed"])
    assert len(seen[0]) == len(seen[1]) == 5
    for step in range(5):
        assert seen[0][step].shape == (2, HP["seq_len"])
        assert torch.equal(torch.cat([seen[0][step], seen[1][step]]), batches.batch(step))
    # the gathered checkpoint on rank 0 is a plain HF folder holding the same weights as the one-process run
    w1 = load_file(tmp_path / "one" / "checkpoint" / "model.safetensors")
    w2 = load_file(tmp_path / "two" / "checkpoint" / "model.safetensors")
    assert w1.keys() == w2.keys()
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=0)


def test_two_rank_kill_and_resume_matches_uninterrupted(data_dir, tmp_path):
    kw = dict(steps=6, save_every=2, retrieval_fraction=0.0, **HP)
    run_ranks(2, tmp_path, tiny("orthros"), data_dir, tmp_path / "full", **kw)
    run_ranks(2, tmp_path, tiny("orthros", interrupt_at=4), data_dir, tmp_path / "cut", **kw)
    state = json.loads((tmp_path / "cut" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 2 and not (tmp_path / "cut" / "metrics.csv").exists()
    run_ranks(2, tmp_path, tiny("orthros"), data_dir, tmp_path / "cut", **kw)
    torch.testing.assert_close(losses(tmp_path / "cut"), losses(tmp_path / "full"), atol=1e-6, rtol=0)
    assert len(losses(tmp_path / "cut")) == 6
    # the sharded run's checkpoint also resumes in one process (optimizer state stored by parameter name)
    run_ranks(2, tmp_path, tiny("orthros", interrupt_at=4), data_dir, tmp_path / "cut1", **kw)
    train(tiny("orthros"), data_dir, tmp_path / "cut1", TrainConfig(**kw))
    torch.testing.assert_close(losses(tmp_path / "cut1"), losses(tmp_path / "full"), atol=1e-5, rtol=0)


def test_shard_rows_and_bad_arguments(data_dir, tmp_path):
    x = torch.arange(12).reshape(6, 2)
    assert distributed.shard_rows(x, distributed.Dist(1, 3)).tolist() == [[4, 5], [6, 7]]
    assert distributed.shard_rows(x, distributed.Dist()).equal(x)
    with pytest.raises(ValueError, match="batch_size 6 is not a multiple of the world size 4"):
        distributed.shard_rows(x, distributed.Dist(0, 4))
    with pytest.raises(ValueError, match="parallel must be one of"):
        train(tiny("transformer"), data_dir, tmp_path, TrainConfig(steps=2, parallel="zero3", **HP))
    with pytest.raises(ValueError, match="parallel must be one of"):
        distributed.wrap(torch.nn.Linear(2, 2), distributed.Dist(), "tp")
