"""models.runtime: the fused step, the chunked prefill runner and the FP8 K/V store, on CPU."""
import math

import pytest
import torch

from models.registry import build
from models.runtime import kv, layer
from models.runtime.prefill import PrefillRunner

TINY = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=256)


def tiny(arch, **kw):
    torch.manual_seed(0)
    model = build(arch, "1M", **{**TINY, **kw}).eval()
    with torch.no_grad():  # scale-offset away from identity, so a mix-up of the streams shows
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


def test_fused_weight_rebinds_in_place():
    model = tiny("orthros", window_size=4)
    mix = model.model.layers[0].mixer
    before = [mix.q_proj.weight.detach().clone(), mix.k_proj.weight.detach().clone(),
              mix.v_proj.weight.detach().clone()]
    big = layer.fused_weight(mix, ("q_proj", "k_proj", "v_proj"))
    assert torch.equal(big, torch.cat(before))
    assert layer.fused_weight(mix, ("q_proj", "k_proj", "v_proj")) is big  # idempotent
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    model.load_state_dict(state)  # loading reaches the concatenated tensor through the slices
    nq, nv = before[0].shape[0], before[2].shape[0]
    assert torch.equal(big[:nq], state["model.layers.0.mixer.q_proj.weight"])
    assert torch.equal(big[-nv:], state["model.layers.0.mixer.v_proj.weight"])
    with pytest.raises(ValueError, match="biases"):
        biased = tiny("orthros", window_size=4, attention_bias=True).model.layers[0].mixer
        layer.fused_weight(biased, ("q_proj", "k_proj"))


@pytest.mark.parametrize("arch, kw", [("orthros", dict(window_size=4)), ("orthros", dict(window_size=8, qk_norm=True)),
                                      ("transformer", {}), ("swa", dict(window_size=5))])
@pytest.mark.parametrize("chunk, n_out", [(None, 1), (None, 5), (4, 1), (7, 5)])
def test_prefill_runner_matches_model_forward(arch, kw, chunk, n_out):
    """Logits of the last n_out positions and every layer's K/V equal the model's own forward (fp32)."""
    model = tiny(arch, **kw)
    ids = torch.randint(0, 67, (2, 23))
    got = PrefillRunner(model, chunk=chunk).run(ids, n_out=n_out)
    with torch.no_grad():
        want = model(ids, use_cache=True, logits_to_keep=n_out)
    torch.testing.assert_close(got.logits, want.logits, atol=2e-6, rtol=0)
    for i, slot in enumerate(want.cache.layers):
        torch.testing.assert_close(got.kv.k[i], slot["k"], atol=1e-6, rtol=0)
        torch.testing.assert_close(got.kv.v[i], slot["v"], atol=1e-6, rtol=0)
    assert set(got.kernels) == {"blocked"}


def test_prefill_runner_sees_the_window():
    """Guard: the chunked runner of a model with another window must disagree (the comparison can fail)."""
    ids = torch.randint(0, 67, (1, 23))
    a = PrefillRunner(tiny("orthros", window_size=4), chunk=5).run(ids).logits
    b = PrefillRunner(tiny("orthros", window_size=6), chunk=5).run(ids).logits
    assert (a - b).abs().max() > 1e-3


def test_prefill_runner_refuses_recurrent_layers_and_bad_sizes():
    with pytest.raises(ValueError, match="every mixer is attention"):
        PrefillRunner(tiny("linear_hybrid", num_hidden_layers=4, intermediate_size=256))
    runner = PrefillRunner(tiny("orthros", window_size=4))
    with pytest.raises(ValueError, match="n_out"):
        runner.run(torch.zeros(1, 5, dtype=torch.long), n_out=6)
    with pytest.raises(ValueError, match="chunk"):
        PrefillRunner(tiny("orthros", window_size=4), chunk=0)


def _e4m3_values() -> torch.Tensor:
    """Every finite float8_e4m3fn value, built from its bit fields (independent of torch's cast)."""
    vals = set()
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue  # NaN
            vals.add((m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    pos = torch.tensor(sorted(vals), dtype=torch.float64)
    return torch.cat([-pos.flip(0), pos])


def test_fp8_quantize_rounds_to_the_nearest_e4m3_value_of_each_block():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 10, 8, generator=g) * torch.tensor([1.0, 10.0, 0.01]).view(1, 3, 1, 1)
    x8, scale = kv.fp8_quantize(x, block=4)
    assert x8.dtype == torch.float8_e4m3fn and scale.shape == (2, 3, 3)
    grid = _e4m3_values()
    for b in range(2):
        for h in range(3):
            for blk in range(3):
                part = x[b, h, 4 * blk:4 * blk + 4].double()
                s = part.abs().max() / 448
                assert math.isclose(float(scale[b, h, blk]), float(s), rel_tol=1e-6)
                scaled = (part / float(scale[b, h, blk])).flatten()
                nearest = grid[(scaled[:, None] - grid[None, :]).abs().argmin(1)]
                got = x8[b, h, 4 * blk:4 * blk + 4].double().flatten()
                assert torch.isin(got, grid).all()  # a representable value ...
                assert ((got - scaled).abs() <= (nearest - scaled).abs() + 1e-12).all()  # ... and a nearest one
    back = kv.fp8_dequantize(x8, scale, 4, torch.float32)
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 for normals, absolute <= 2^-10 x scale below them
    bound = x.abs() * 2.0 ** -4 + scale.repeat_interleave(4, 2)[:, :, :10, None] * 2.0 ** -10
    assert ((back - x).abs() <= bound * (1 + 1e-6)).all()


def test_fp8_store_reads_any_span_as_written():
    g = torch.Generator().manual_seed(1)
    store = kv.FP8KV(n_layers=2, B=1, Hkv=2, T=37, d=4, dtype=torch.float32, device="cpu", block=8, span=16)
    k, v = torch.randn(1, 2, 37, 4, generator=g), torch.randn(1, 2, 37, 4, generator=g)
    seen_k = torch.cat([store.write(1, s, k[:, :, s:s + 16], v[:, :, s:s + 16])[0] for s in (0, 16, 32)], dim=2)
    rounded = [kv.fp8_dequantize(*kv.fp8_quantize(k[:, :, s:s + 16], 8), 8, torch.float32) for s in (0, 16, 32)]
    torch.testing.assert_close(seen_k, torch.cat(rounded, dim=2))
    for lo, hi in ((0, 37), (5, 30), (13, 17), (31, 37)):
        rk, rv = store.read(1, lo, hi)
        torch.testing.assert_close(rk, seen_k[:, :, lo:hi])
        assert rk.shape == (1, 2, hi - lo, 4) and (rv - v[:, :, lo:hi]).abs().max() < 0.15 * v.abs().max()
    with pytest.raises(ValueError, match="multiple of block"):
        store.write(0, 3, k[:, :, :4], v[:, :, :4])


def test_prefill_runner_with_fp8_store_reads_the_rounded_cache():
    """FP8 K/V: the store holds the model's K/V rounded per block, and the logits stay close to bf16/fp32 ones."""
    model = tiny("orthros", window_size=4)
    ids = torch.randint(0, 67, (1, 24))
    runner = PrefillRunner(model, chunk=8)
    dense = runner.run(ids, n_out=3)
    got = runner.run(ids, n_out=3, kv=runner.new_kv(1, 24, "fp8", block=8))
    # layer 0 sees the same input in both runs: its stored keys are exactly the dense keys rounded per block
    want = kv.fp8_dequantize(*kv.fp8_quantize(dense.kv.k[0], 8), 8, torch.float32)
    torch.testing.assert_close(got.kv.read(0, 0, 24)[0], want, atol=1e-6, rtol=0)
    assert not torch.equal(want, dense.kv.k[0])
    rel = ((got.logits - dense.logits).norm() / dense.logits.norm()).item()
    assert 0 < rel < 0.1


def test_bf16_store_under_a_float32_model_reads_rounded_keys():
    """new_kv(fmt="bf16"): the cache holds bf16, readers get float32 copies of the rounded values; "dense" stays the
    model dtype, an unknown format is refused by name."""
    model = tiny("orthros", window_size=4)
    ids = torch.randint(0, 67, (1, 24))
    runner = PrefillRunner(model, chunk=8)
    dense = runner.run(ids, n_out=3)
    got = runner.run(ids, n_out=3, kv=runner.new_kv(1, 24, "bf16"))
    assert got.kv.k[0].dtype == torch.bfloat16 and dense.kv.k[0].dtype == torch.float32
    k0 = got.kv.read(0, 0, 24)[0]
    assert k0.dtype == torch.float32 and torch.equal(k0, dense.kv.k[0].bfloat16().float())
    rel = ((got.logits - dense.logits).norm() / dense.logits.norm()).item()
    assert 0 < rel < 1e-2
    with pytest.raises(ValueError, match="unknown KV format 'int4'; known: dense, bf16, fp8"):
        runner.new_kv(1, 24, "int4")


def test_layer_functions_trace_as_one_graph_each():
    """torch.compile(fullgraph=True) traces every fused function without a graph break (dynamo only, 'eager'
    backend), and the compiled runner computes the eager runner's logits at two lengths (one dynamic graph)."""
    model = tiny("orthros", window_size=4, qk_norm=True)
    eager = PrefillRunner(model)
    traced = PrefillRunner(model, compiled=True, backend_name="eager")
    for T in (19, 26):
        ids = torch.randint(0, 67, (1, T))
        torch.testing.assert_close(traced.run(ids).logits, eager.run(ids).logits, atol=1e-6, rtol=0)
