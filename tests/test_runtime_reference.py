"""The inference runtime (models/runtime) in every mode against tests/reference.py, the independent fp64
per-position implementation of the paper's equations: prefill, chunked prefill (fused or not), the decode engine
(matmul and token-major FA2-layout caches, fused or not, chunked prefill), sequence-parallel prefill over gloo."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from models.registry import build
from models.runtime.decode import Engine
from models.runtime.prefill import PrefillRunner
from models.runtime.seq_parallel import prefill_any
from tests.reference import fp64_params, reference_forward

CFG = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           intermediate_size=48, max_position_embeddings=256, qk_norm=True)
W = 4  # the base stream's window: shorter than the prompts, so windowing shows
ATOL = 1e-9


def _model(arch):
    torch.manual_seed(0)
    model = build(arch, "1M", **CFG, **({"window_size": W} if arch == "orthros" else {})).double().eval()
    with torch.no_grad():  # scale-offset away from identity, so a mix-up of the streams shows
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


def _reference(model, ids: list[int], out_positions: list[int]) -> torch.Tensor:
    two_stream = bool(model.two_stream)
    return reference_forward(fp64_params(model), model.config, ids, out_positions, W if two_stream else None,
                             two_stream=two_stream)


@pytest.mark.parametrize("arch", ["orthros", "transformer"])
@pytest.mark.parametrize("chunk, compiled", [(None, False), (5, False), (3, True)])
def test_prefill_matches_reference(arch, chunk, compiled):
    """Whole and chunked prefill (the fused step; compiled with the tracing-only "eager" backend), last 3 positions."""
    model = _model(arch)
    ids = torch.randint(0, 67, (1, 13), generator=torch.Generator().manual_seed(1))
    runner = PrefillRunner(model, compiled=compiled, chunk=chunk, backend_name="eager")
    got = runner.run(ids, n_out=3).logits[0]
    torch.testing.assert_close(got, _reference(model, ids[0].tolist(), [10, 11, 12]), atol=ATOL, rtol=0)


@pytest.mark.parametrize("arch", ["orthros", "transformer"])
@pytest.mark.parametrize("options", [{}, dict(decode_attn="fa2"), dict(fused=True), dict(fused=True, prefill_chunk=5),
                                     dict(decode_attn="fa2", prefill_chunk=3)])
def test_engine_prefill_and_decode_match_reference(arch, options):
    """The engine's prefill and every decode step (across a key-length bucket) give the reference's logits of the
    sequence so far."""
    model = _model(arch)
    prompt = torch.randint(0, 67, (1, 11), generator=torch.Generator().manual_seed(2))
    engine = Engine(model, batch=1, max_len=24, bucket=8, chunk=4, **options)
    logits = [engine.prefill(prompt)] + engine.decode(5, keep_logits=True)
    seq = prompt[0].tolist() + [int(x.argmax(-1)) for x in logits]
    for n, got in enumerate(logits):
        T = 11 + n
        torch.testing.assert_close(got[0], _reference(model, seq[:T], [T - 1])[0], atol=ATOL, rtol=0)


def _worker(rank, world, init_file, arch, ids, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        torch.save(prefill_any(_model(arch), ids), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("arch, world", [("orthros", 2), ("orthros", 3), ("transformer", 2)])
def test_seq_parallel_prefill_matches_reference(tmp_path, arch, world):
    """Sequence-parallel prefill over gloo (CPU processes): every rank returns the reference's last-position logits
    (Orthros with shards shorter than the window halo at 3 ranks)."""
    ids = torch.randint(0, 67, (1, 10), generator=torch.Generator().manual_seed(3))
    mp.start_processes(_worker, args=(world, str(tmp_path / "init"), arch, ids, str(tmp_path)), nprocs=world,
                       join=True, start_method="fork")
    want = _reference(_model(arch), ids[0].tolist(), [9])[0]
    for rank in range(world):
        torch.testing.assert_close(torch.load(tmp_path / f"rank{rank}.pt")[0], want, atol=ATOL, rtol=0)
