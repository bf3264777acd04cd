"""Baselines on the suite backbone (issue 3): training, cached decoding, budgets, CPU routes, HF I/O."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore", message=".*Triton is not supported.*")

from models.registry import build, known_archs  # noqa: E402

BASELINES = ["transformer", "swa", "gdn", "gla", "retnet", "linear_hybrid", "orthros_h"]
VOCAB = 512
# GLA with its opt-in short convolution, whose state lives in the cache slot as GDN's does
GLA_CONV = pytest.param("gla", {"gla_short_conv": True}, id="gla-short_conv")


def tiny(arch: str, **overrides):
    """1M shape, 512-token vocab; hybrids alternate (interval 2) so both layer kinds exist in 2 layers."""
    kw = dict(vocab_size=VOCAB, max_position_embeddings=64)
    if arch in ("linear_hybrid", "orthros_h"):
        kw["full_attention_interval"] = 2
    if arch in ("swa", "orthros_h"):
        kw["window_size"] = 8
    torch.manual_seed(0)
    return build(arch, "1M", **{**kw, **overrides})


def test_all_baselines_registered():
    assert set(BASELINES) <= set(known_archs())


@pytest.mark.parametrize("arch", BASELINES)
def test_training_loss_falls(arch):
    model = tiny(arch).train()
    batch = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = model(batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("arch, overrides", [(a, {}) for a in BASELINES] + [GLA_CONV])
def test_cached_generation_equals_uncached_greedy(arch, overrides):
    model = tiny(arch, **overrides).eval()
    prompt = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(2))
    cached = model.generate(prompt, max_new_tokens=6, do_sample=False)[:, 10:]
    seq = prompt
    with torch.no_grad():
        for _ in range(6):
            seq = torch.cat([seq, model(seq).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(cached, seq[:, 10:])


@pytest.mark.parametrize("arch, overrides", [(a, {}) for a in ("gdn", "gla", "retnet", "linear_hybrid")] + [GLA_CONV])
def test_left_padding_matches_unpadded(arch, overrides):
    model = tiny(arch, **overrides).eval()
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    with torch.no_grad():
        padded = model(ids, attention_mask=mask).logits[1]
        alone = model(ids[1:, 3:]).logits[0]
    torch.testing.assert_close(padded[3:], alone, atol=1e-4, rtol=1e-4)
    padded_gen = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)[1, 9:]
    alone_gen = model.generate(ids[1:, 3:], max_new_tokens=4, do_sample=False)[0, 6:]
    assert torch.equal(padded_gen, alone_gen)


def test_orthros_h_rejects_padding():
    model = tiny("orthros_h").eval()
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, 0] = 0
    with pytest.raises(ValueError, match="left-padded"), torch.no_grad():
        model(torch.zeros(2, 6, dtype=torch.long), attention_mask=mask)


def test_parameter_budgets_within_5_percent():
    from models.sizes import count_parameters
    from suite.params import table

    rows = table(sizes=["1M", "6M", "25M", "1.3B"], archs=BASELINES)
    bad = [(r["arch"], r["size"], r["ratio"]) for r in rows if not 0.95 <= r["ratio"] <= 1.05]
    assert not bad
    # the matching did something: RetNet (8 d^2 mixers) gets a narrower MLP than Orthros
    widths = {(r["arch"], r["size"]): r["intermediate_size"] for r in rows}
    assert widths[("retnet", "6M")] < widths[("transformer", "6M")] == 704
    # independent count on real (CPU) modules at 1M
    orthros = count_parameters(build("orthros", "1M"))
    for arch in ("gdn", "retnet"):
        assert abs(count_parameters(build(arch, "1M")) / orthros - 1) <= 0.05


def test_unknown_arch_and_bad_window_raise():
    from baselines import swa_window

    with pytest.raises(ValueError, match="unknown architecture 'mamba7'"):
        build("mamba7", "1M")
    with pytest.raises(ValueError, match="window_size=4096 exceeds max_position_embeddings=2048"):
        build("swa", "1M", window_size=4096, max_position_embeddings=2048)
    with pytest.raises(ValueError, match="window_size=256 exceeds"):
        build("orthros_h", "1M", window_size=256, max_position_embeddings=128)
    with pytest.raises(ValueError, match="window_size must be None"):
        build("transformer", "1M", window_size=8)
    with pytest.raises(ValueError, match="gdn_head_dim"):
        build("gdn", "1M", head_dim=22)
    with pytest.raises(ValueError, match="seq_len"):
        swa_window(2)
    assert swa_window(2048) == 512 and swa_window(256) == 64
    assert build("swa", "1M").config.window_size == swa_window(2048)  # the default window is the rule's


# ---------------------------------------------------------------- CPU routes vs independent references

def _qkv(B=2, T=21, H=2, K=8, V=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, H, K, generator=g), torch.randn(B, T, H, K, generator=g),
            torch.randn(B, T, H, V, generator=g), g)


def _token_by_token(fn, q, k, v, extra: dict, state_v_first: bool):
    """Run ``fn`` one token at a time carrying the final state: the recurrent (decode) route."""
    state, outs = None, []
    for t in range(q.shape[1]):
        o, state = fn(q=q[:, t:t + 1], k=k[:, t:t + 1], v=v[:, t:t + 1],
                      **{n: x[:, t:t + 1] for n, x in extra.items()}, initial_state=state, output_final_state=True,
                      **({"state_v_first": True} if state_v_first else {}))
        outs.append(o)
    return torch.cat(outs, 1), state


def test_gla_cpu_route_matches_parallel_form_and_recurrence():
    from baselines import fla_internals as cf

    q, k, v, g = _qkv()
    gk = torch.nn.functional.logsigmoid(torch.randn(*k.shape, generator=g)) / 16
    o, h = cf.chunk_gla_cpu(q, k, v, gk, output_final_state=True, state_v_first=True)
    # parallel form: o_t = sum_{s<=t} ((q_t * exp(G_t - G_s)) . k_s) v_s / sqrt(K), G = cumsum(gk)
    G = gk.cumsum(1)
    decay = (G[:, :, None] - G[:, None, :])  # [B, t, s, H, K]
    scores = torch.einsum("bthk,btshk,bshk->bhts", q, decay.exp(), k) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~torch.ones(q.shape[1], q.shape[1]).tril().bool(), 0)
    torch.testing.assert_close(o, torch.einsum("bhts,bshv->bthv", scores, v), atol=1e-4, rtol=1e-4)
    o_rec, h_rec = _token_by_token(lambda **kw: cf.fused_recurrent_gla_cpu(gk=kw.pop("gk"), **kw), q, k, v,
                                   {"gk": gk}, True)
    torch.testing.assert_close(o_rec, o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h_rec, h, atol=1e-5, rtol=1e-5)
    assert h.shape == (2, 2, 12, 8)  # state_v_first: [N, H, V, K]


def test_gdn_cpu_chunk_route_matches_recurrence():
    from baselines import fla_internals as cf

    q, k, v, g = _qkv(T=37)
    H = q.shape[2]
    extra = {"g": torch.randn(2, 37, H, generator=g), "beta": torch.randn(2, 37, H, generator=g)}
    flags = dict(use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, use_gate_in_kernel=True,
                 A_log=torch.rand(H, generator=g).log(), dt_bias=torch.randn(H, generator=g))
    o, h = cf.chunk_gated_delta_rule_cpu(q, k, v, **extra, output_final_state=True, state_v_first=True, **flags)
    o_rec, h_rec = _token_by_token(lambda **kw: cf.fused_recurrent_gated_delta_rule_cpu(**kw, **flags),
                                   q, k, v, extra, True)
    torch.testing.assert_close(o_rec, o, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(h_rec, h, atol=1e-4, rtol=1e-4)
    # packed variable-length input (what left padding turns into) == each sequence alone
    cu = torch.tensor([0, 37, 60])
    qp, kp, vp = (torch.cat([x[0], x[1, :23]])[None] for x in (q, k, v))
    ep = {n: torch.cat([x[0], x[1, :23]])[None] for n, x in extra.items()}
    o_p, _ = cf.chunk_gated_delta_rule_cpu(qp, kp, vp, **ep, cu_seqlens=cu, **flags)
    o_1, _ = cf.chunk_gated_delta_rule_cpu(q[1:, :23], k[1:, :23], v[1:, :23],
                                           **{n: x[1:, :23] for n, x in extra.items()}, **flags)
    torch.testing.assert_close(o_p[:, 37:], o_1, atol=1e-5, rtol=1e-5)


def test_retention_cpu_route_matches_naive_retention_and_recurrence():
    from fla.ops.retention.naive import naive_retention

    from baselines import fla_internals as cf

    q, k, v, _ = _qkv(T=29, H=3)
    o, h = cf.chunk_retention_cpu(q, k, v, output_final_state=True)
    reference = naive_retention(*(x.transpose(1, 2) for x in (q, k, v))).transpose(1, 2)  # head-first reference
    torch.testing.assert_close(o, reference, atol=1e-4, rtol=1e-4)
    o_rec, h_rec = _token_by_token(cf.fused_recurrent_retention_cpu, q, k, v, {}, False)
    torch.testing.assert_close(o_rec, o, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(h_rec, h, atol=1e-4, rtol=1e-4)


def test_fla_ops_are_routed_only_for_cpu_tensors():
    import fla.layers.gated_deltanet as gdn
    import fla.layers.gla as gla

    from baselines import fla_internals as cf

    cf.install()
    assert gla.chunk_gla.__fla_original__.__module__ == "fla.ops.gla.chunk"
    assert gdn.chunk_gated_delta_rule.__fla_original__.__module__.startswith("fla.ops.gated_delta_rule")
    assert cf._use_naive(torch.zeros(1)) and not cf._use_naive(torch.zeros(1, device="meta"))
    with cf.force_naive():
        assert cf._use_naive(torch.zeros(1, device="meta"))


def test_fla_internals_refuse_an_fla_version_they_were_not_checked_against(monkeypatch):
    import tomllib

    import fla

    from baselines import fla_internals
    from models.fla_check import CHECKED_FLA_VERSIONS, check_fla_version

    assert check_fla_version() == fla.__version__
    pins = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert "flash-linear-attention==" + CHECKED_FLA_VERSIONS[-1] in pins["dependencies"]
    monkeypatch.setattr(fla, "__version__", "0.9.9")
    message = r"flash-linear-attention 0\.9\.9 is installed, .* checked against flash-linear-attention 0\.6\.0 only"
    with pytest.raises(RuntimeError, match=message):
        fla_internals.install()
    with pytest.raises(RuntimeError, match=message):  # every FLA mixer is built through install()
        tiny("gdn")


def test_short_conv_cpu_cache_matches_full_sequence():
    from baselines.fla_internals import causal_conv1d_cpu

    x = torch.randn(2, 9, 6)
    w, b = torch.randn(6, 4), torch.randn(6)
    full, _ = causal_conv1d_cpu(x, w, b, activation="silu")
    # independent: explicit sum over the last 4 inputs
    padded = torch.cat([torch.zeros(2, 3, 6), x], 1)
    manual = torch.nn.functional.silu(sum(padded[:, i:i + 9] * w[:, i] for i in range(4)) + b)
    torch.testing.assert_close(full, manual)
    state, steps = None, []
    for t in range(9):
        y, state = causal_conv1d_cpu(x[:, t:t + 1], w, b, initial_state=state, output_final_state=True,
                                     activation="silu")
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, 1), full)


# ---------------------------------------------------------------- Orthros-H cross query

def test_orthros_h_gdn_cross_query_reads_state_without_conv():
    import torch.nn.functional as F

    from baselines import fla_internals as cf
    from baselines.fla_mixers import make_gdn_two_stream
    from models.backbone import MixerContext
    from models.registry import make_config

    config = make_config("orthros_h", "1M", vocab_size=VOCAB, max_position_embeddings=64, window_size=8)
    torch.manual_seed(0)
    mixer = make_gdn_two_stream(config, 0)
    T, out_index = 11, torch.tensor([0, 4, 10])
    x = torch.randn(1, T + 3, config.hidden_size)
    ctx = MixerContext(positions=torch.arange(T)[None], q_index=torch.arange(T), out_index=out_index,
                       key_mask=None, attention_mask=None, cache=None)
    out = mixer(x, ctx)
    L = mixer.layer
    # base rows: exactly FLA's own layer on the base stream
    base_ctx = MixerContext(positions=ctx.positions, q_index=ctx.q_index, out_index=torch.arange(T),
                            key_mask=None, attention_mask=None, cache=None)
    torch.testing.assert_close(out[:, :T], mixer.__class__.__mro__[1].forward(mixer, x[:, :T], base_ctx))
    # output rows: S_t (state after base token t, recurrent route) read by silu(x' W_Q), no conv
    xb = x[:, :T]
    k = L.k_conv1d(x=L.k_proj(xb))[0].view(1, T, L.num_heads, L.head_k_dim)
    v = L.v_conv1d(x=L.v_proj(xb))[0].view(1, T, L.num_heads, L.head_v_dim)
    g, beta = L.a_proj(xb), L.b_proj(xb)
    for j, t in enumerate(out_index.tolist()):
        _, S = cf.fused_recurrent_gated_delta_rule_cpu(
            q=k[:, :t + 1], k=k[:, :t + 1], v=v[:, :t + 1], g=g[:, :t + 1], beta=beta[:, :t + 1],
            output_final_state=True, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
            use_gate_in_kernel=True, A_log=L.A_log, dt_bias=L.dt_bias)  # S: [1, H, K, V]
        q = F.normalize(F.silu(L.q_proj(x[:, T + j])).view(1, L.num_heads, L.head_k_dim), dim=-1, eps=1e-3)
        o = torch.einsum("bhk,bhkv->bhv", q * L.head_k_dim ** -0.5, S)
        gate = L.g_proj(x[:, T + j]).view(1, L.num_heads, L.head_v_dim)
        expected = L.o_proj(L.o_norm(o, gate).reshape(1, -1))
        torch.testing.assert_close(out[:, T + j], expected, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- HF integration

@pytest.mark.parametrize("arch, overrides", [(a, {}) for a in BASELINES] + [GLA_CONV])
def test_save_load_round_trip(arch, overrides, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    model = tiny(arch, **overrides).eval()
    model.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == model.config.model_type
    for key in (*overrides, "conv_size"):
        assert getattr(config, key, None) == getattr(model.config, key, None), key
    assert config.intermediate_size == model.config.intermediate_size  # matched width is not re-matched
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    ids = torch.randint(0, VOCAB, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)


def test_fla_vs_naive_dry_run_writes_csvs(tmp_path):
    from benchmarks.fla_vs_naive import main
    from suite.provenance import read_csv

    main(["--dry-run", "--out-dir", str(tmp_path), "--archs", "gdn"])
    check = read_csv(tmp_path / "fla_crosscheck.csv")
    assert sorted(set(check["mixer"])) == ["gdn", "gla", "retnet"]
    assert set(check["direction"]) == {"forward", "backward"}
    assert check["passed"].all() and (check["rel_err"] < 1e-4).all()
    assert {"commit", "device", "backend", "dtype", "seed", "wall_s"} <= set(check.columns)
    speed = read_csv(tmp_path / "baseline_throughput.csv")
    assert list(speed["arch"]) == ["gdn"] and (speed["tokens_per_s"] > 0).all()


def test_orthros_h_gdn_last_row_read_equals_general_path():
    """Prefill/decode read S_T q' from the final state; it must equal the general (second pass) route."""
    from baselines.fla_mixers import make_gdn_two_stream
    from models.backbone import MixerContext
    from models.registry import make_config

    config = make_config("orthros_h", "1M", vocab_size=VOCAB, max_position_embeddings=64, window_size=8)
    torch.manual_seed(1)
    mixer = make_gdn_two_stream(config, 0).eval()
    T = 13
    x = torch.randn(2, T + 1, config.hidden_size)
    outs = []
    for last in (False, True):
        ctx = MixerContext(positions=torch.arange(T).expand(2, T), q_index=torch.arange(T),
                           out_index=torch.tensor([T - 1]), key_mask=None, attention_mask=None, cache=None,
                           out_is_last=last)
        with torch.no_grad():
            outs.append(mixer(x, ctx))
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    # and the flag matters only for the output row: a wrong route would change it
    ctx = MixerContext(positions=torch.arange(T).expand(2, T), q_index=torch.arange(T),
                       out_index=torch.tensor([T - 2]), key_mask=None, attention_mask=None, cache=None)
    with torch.no_grad():
        other = mixer(x, ctx)
    assert (other[:, T] - outs[0][:, T]).abs().max() > 1e-4


# ---------------------------------------------------------------- GLA short convolution (gla_short_conv)

def _gla_layer(model):
    return model.model.layers[0].mixer.layer


def test_gla_default_is_fla_default_without_short_conv():
    """Existing profiles build FLA's default GLA layer: no short convolution, no conv parameters or config value."""
    model = tiny("gla")
    layer = _gla_layer(model)
    assert layer.use_short_conv is False and not any("conv" in n for n, _ in model.named_parameters())
    assert model.config.gla_short_conv is False and model.config.conv_size is None
    import fla.layers

    reference = fla.layers.GatedLinearAttention(hidden_size=model.config.hidden_size, num_heads=layer.num_heads)
    for name in ("use_short_conv", "expand_k", "expand_v", "gate_logit_normalizer", "use_output_gate",
                 "feature_map_fn", "clamp_min", "fuse_norm_and_gate"):
        assert getattr(layer, name) == getattr(reference, name), name


@pytest.mark.parametrize("conv_size", [None, 2])
def test_gla_short_conv_builds_fla_short_conv(conv_size):
    model = tiny("gla", gla_short_conv=True, conv_size=conv_size)
    layer = _gla_layer(model)
    want = 4 if conv_size is None else conv_size
    assert layer.use_short_conv is True and model.config.conv_size == want
    assert [m.kernel_size[0] for m in (layer.q_conv1d, layer.k_conv1d, layer.v_conv1d)] == [want] * 3
    # the convolution reaches the output: the logits differ from the same weights without it
    base = tiny("gla")
    ids = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, base(ids).logits)


@pytest.mark.parametrize("kw, pattern", [
    (dict(conv_size=4), r"conv_size=4 without gla_short_conv"),
    (dict(gla_short_conv=1), r"gla_short_conv must be a bool"),
    (dict(gla_short_conv=True, conv_size=0), r"conv_size must be a positive int"),
])
def test_gla_short_conv_bad_values_raise(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        tiny("gla", **kw)
