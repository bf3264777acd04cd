"""Orthros core: exactness against the independent fp64 reference, the four regimes, HF integration."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from models import OrthrosConfig, OrthrosForCausalLM, kernels
from models.registry import build
from models.sizes import SIZES, count_parameters
from tests.reference import fp64_params, reference_forward

torch.manual_seed(0)


def tiny(window=4, so=True, **kw):
    cfg = dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=48, max_position_embeddings=512, window_size=window, scale_offset=so)
    cfg.update(kw)
    model = OrthrosForCausalLM(OrthrosConfig(**cfg)).eval()
    with torch.no_grad():  # move SO away from identity so the tests see it
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("T", [3, 4, 5, 16])  # w-1, w, w+1, 4w with w = 4
def test_pt_forward_matches_fp64_reference_at_window_edges(T):
    model = tiny(window=4)
    ids = torch.randint(0, 61, (1, T))
    got = model(ids).logits[0].double()
    ref = reference_forward(fp64_params(model), model.config, ids[0].tolist(), list(range(T)), window=4)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_qk_norm_and_gqa_match_reference():
    model = tiny(window=3, qk_norm=True, num_attention_heads=4, num_key_value_heads=1)
    ids = torch.randint(0, 61, (1, 9))
    ref = reference_forward(fp64_params(model), model.config, ids[0].tolist(), list(range(9)), window=3)
    torch.testing.assert_close(model(ids).logits[0].double(), ref, atol=1e-5, rtol=0)


def test_window_matters():
    """The reference with a full window must differ: guards against a test that cannot fail."""
    model = tiny(window=4)
    ids = torch.randint(0, 61, (1, 16))
    full = reference_forward(fp64_params(model), model.config, ids[0].tolist(), list(range(16)), window=None)
    assert (model(ids).logits[0].double() - full).abs().max() > 1e-3


def test_prefill_then_decode_equals_pt_at_every_position():
    model = tiny(window=4)
    ids = torch.randint(0, 61, (2, 21))
    with torch.no_grad():
        pt = model(ids).logits
        out = model(ids[:, :6], use_cache=True, logits_to_keep=1)
        assert out.logits.shape == (2, 1, 61)  # Prefill: T_out = 1
        steps = [out.logits[:, 0]]
        cache = out.cache
        for t in range(6, 21):
            out = model(ids[:, t:t + 1], cache=cache)
            cache = out.cache
            steps.append(out.logits[:, 0])
    torch.testing.assert_close(torch.stack(steps, 1), pt[:, 5:], atol=1e-5, rtol=0)


def test_kv_cache_keeps_every_position_and_reports_memory():
    model = tiny(window=4)
    ids = torch.randint(0, 61, (2, 13))
    with torch.no_grad():
        cache = model(ids, use_cache=True, logits_to_keep=1).cache
    cfg = model.config
    expected = cfg.num_hidden_layers * 2 * 2 * cfg.num_key_value_heads * 13 * cfg.head_dim * 4
    assert cache.memory_bytes() == expected
    assert cache.layers[0]["k"].shape[2] == 13  # window limits reads, not storage


def test_sft_logits_equal_pt_restricted_to_answer_positions():
    model = tiny(window=4)
    ids = torch.randint(0, 61, (2, 14))
    labels = ids.clone()
    labels[:, :9] = -100  # prompt: positions 0..8 predict nothing; 8..12 predict answer tokens 9..13
    with torch.no_grad():
        pt = model(ids).logits
        sft = model(ids, labels=labels)
        mask = torch.zeros(14, dtype=torch.bool)
        mask[[2, 7, 13]] = True
        masked = model(ids, output_mask=mask).logits
    torch.testing.assert_close(sft.logits, pt[:, 8:13], atol=1e-5, rtol=0)
    torch.testing.assert_close(masked, pt[:, [2, 7, 13]], atol=1e-5, rtol=0)
    ce = torch.nn.functional.cross_entropy(pt[:, 8:13].reshape(-1, 61), ids[:, 9:14].reshape(-1))
    torch.testing.assert_close(sft.loss, ce, atol=1e-5, rtol=0)


def test_left_padded_batch_equals_unpadded():
    model = tiny(window=4)
    a, b = torch.randint(1, 61, (1, 11)), torch.randint(1, 61, (1, 7))
    batch = torch.cat([a, torch.cat([torch.zeros(1, 4, dtype=torch.long), b], 1)])
    mask = torch.ones_like(batch)
    mask[1, :4] = 0
    with torch.no_grad():
        padded = model(batch, attention_mask=mask).logits
        torch.testing.assert_close(padded[0], model(a).logits[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(padded[1, 4:], model(b).logits[0], atol=1e-5, rtol=0)
        gen = model.generate(batch, attention_mask=mask, max_new_tokens=6, do_sample=False)
        gen_a = model.generate(a, max_new_tokens=6, do_sample=False)
        gen_b = model.generate(b, max_new_tokens=6, do_sample=False)
    assert torch.equal(gen[0, 11:], gen_a[0, 11:])
    assert torch.equal(gen[1, 11:], gen_b[0, 7:])


def test_generate_is_prefill_then_two_token_decode_without_recomputing_prompt():
    model = tiny(window=4)
    ids = torch.randint(0, 61, (1, 9))
    calls = []
    hook = model.model.layers[0].register_forward_pre_hook(lambda m, args: calls.append(args[0].shape[1]))
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=5, do_sample=False)
    hook.remove()
    assert calls == [9 + 1] + [1 + 1] * 4  # prefill: T base + 1 output row; decode: 1 base + 1 output
    seq = ids
    with torch.no_grad():
        for _ in range(5):  # uncached greedy decoding, recomputing everything
            seq = torch.cat([seq, model(seq).logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(gen, seq)


def test_past_key_values_is_the_cache_and_a_foreign_cache_is_refused():
    """HF's usual keyword for the cache reaches the model's SuiteCache; a cache of another kind is an error, never
    silently dropped (which would decode as if there were no context)."""
    model = tiny(window=4)
    ids = torch.randint(0, 61, (1, 9))
    with torch.no_grad():
        cache = model(ids[:, :8], use_cache=True).cache
        got = model(ids[:, 8:], past_key_values=cache, use_cache=True).logits
        want = model(ids).logits[:, -1:]
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match="past_key_values must be the SuiteCache"):
            model(ids[:, 8:], past_key_values=object())


def test_so_off_equals_identity_scale_offset():
    with_so = tiny(window=4, so=True)
    with torch.no_grad():
        for name, p in with_so.named_parameters():
            if name.endswith(("alpha", "alpha_out")):
                p.fill_(1.0)
            elif name.endswith(("beta", "beta_out")):
                p.zero_()
    no_so = OrthrosForCausalLM(OrthrosConfig(**{**with_so.config.to_dict(), "scale_offset": False})).eval()
    missing = no_so.load_state_dict(with_so.state_dict(), strict=False)
    assert not missing.missing_keys and len(missing.unexpected_keys) == 4 * with_so.config.num_hidden_layers
    ids = torch.randint(0, 61, (2, 12))
    torch.testing.assert_close(no_so(ids).logits, with_so(ids).logits, atol=1e-6, rtol=0)
    assert not any("alpha" in n for n, _ in no_so.named_parameters())


def test_pt_gradients_match_reference():
    model = tiny(window=3).train()
    ids = torch.randint(0, 61, (1, 8))
    loss = model(ids, labels=ids).loss
    loss.backward()
    params = fp64_params(model, requires_grad=True)
    logits = reference_forward(params, model.config, ids[0].tolist(), list(range(8)), window=3)
    ref_loss = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:])
    ref_loss.backward()
    torch.testing.assert_close(loss.double(), ref_loss.detach(), atol=1e-6, rtol=0)
    grads = dict(model.named_parameters())
    for name in ["model.layers.0.mixer.q_proj.weight", "model.layers.1.mixer.alpha_out", "model.layers.0.mixer.beta",
                 "model.layers.0.mlp.down_proj.weight", "model.embed_tokens.weight", "lm_head.weight"]:
        torch.testing.assert_close(grads[name].grad.double(), params[name].grad, atol=1e-5, rtol=1e-4, msg=name)


def test_attention_and_block_methods_match_a_naive_fp64_computation():
    """The mixer's public steps (project, attend, output), the runtime's decode-step projection (unfused and fused)
    and the block's two residual halves, each against a per-row fp64 loop over heads from the paper's equations
    (Eqs. 4-5, RoPE as 2x2 rotations, windowed / full causal softmax): tests/reference.py's helpers, not models/."""
    from models.backbone import MixerContext, rope_cos_sin, rope_frequencies
    from tests.reference import rms_norm, rope, softmax_attend

    w, T, out_pos = 3, 7, [2, 6]
    model = tiny(window=w, qk_norm=True).double()
    cfg, layer = model.config, model.model.layers[1]
    mix = layer.mixer
    H, Hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps, theta = cfg.rms_norm_eps, cfg.rope_theta
    P = {n: t.detach() for n, t in layer.named_parameters()}
    B, R = 2, T + len(out_pos)
    x = torch.randn(B, R, cfg.hidden_size, dtype=torch.float64)  # normalized rows: T base, then the output rows

    def q_naive(vec, stream):  # Eq. 4 (base) / Eq. 5 (output): alpha * qnorm(W_Q x) + beta, per head
        q = (P["mixer.q_proj.weight"] @ vec).view(H, d)
        q = torch.stack([rms_norm(q[h], P["mixer.q_norm.weight"], eps) for h in range(H)])
        sfx = "" if stream == "base" else "_out"
        return P["mixer.alpha" + sfx] * q + P["mixer.beta" + sfx]

    def k_naive(vec):
        k = (P["mixer.k_proj.weight"] @ vec).view(Hkv, d)
        return torch.stack([rms_norm(k[h], P["mixer.k_norm.weight"], eps) for h in range(Hkv)])

    def v_naive(vec):
        return (P["mixer.v_proj.weight"] @ vec).view(Hkv, d)

    def mixer_naive(xb):  # one sequence's rows [R, D] -> [R, D] (after W_O)
        keys = [[rope(k_naive(xb[j])[g], j, theta) for g in range(Hkv)] for j in range(T)]
        vals = [v_naive(xb[j]) for j in range(T)]
        rows = []
        for r in range(R):
            t, stream, allowed = (r, "base", [j for j in range(r + 1) if j > r - w]) if r < T else \
                (out_pos[r - T], "out", list(range(out_pos[r - T] + 1)))
            q = q_naive(xb[r], stream)
            heads = [softmax_attend(rope(q[h], t, theta), [kk[h // (H // Hkv)] for kk in keys],
                                    [vv[h // (H // Hkv)] for vv in vals], allowed) for h in range(H)]
            rows.append(P["mixer.o_proj.weight"] @ torch.cat(heads))
        return torch.stack(rows)

    q_base, q_out, k, v = mix.project(x, T)
    assert q_base.shape == (B, H, T, d) and q_out.shape == (B, H, len(out_pos), d)
    assert k.shape == v.shape == (B, Hkv, T, d)
    for b in range(B):
        for r in range(R):
            got = (q_base[b, :, r] if r < T else q_out[b, :, r - T])
            torch.testing.assert_close(got, q_naive(x[b, r], "base" if r < T else "out"), atol=1e-12, rtol=0)
        for t in range(T):
            torch.testing.assert_close(k[b, :, t], k_naive(x[b, t]), atol=1e-12, rtol=0)
            torch.testing.assert_close(v[b, :, t], v_naive(x[b, t]), atol=1e-12, rtol=0)

    positions = torch.arange(T).expand(B, T)
    rope_t = rope_cos_sin(positions, rope_frequencies(cfg), torch.float64)
    out_index = torch.tensor(out_pos)
    k_rot = torch.stack([torch.stack([torch.stack([rope(k[b, g, t], t, theta) for t in range(T)]) for g in range(Hkv)])
                         for b in range(B)])
    o = mix.output(mix.attend(q_base, q_out, k_rot, v, rope_t, torch.arange(T), out_index))
    ref = torch.stack([mixer_naive(x[b]) for b in range(B)])
    torch.testing.assert_close(o, ref, atol=1e-10, rtol=0)

    ctx = MixerContext(positions=positions, q_index=torch.arange(T), out_index=out_index, key_mask=None,
                       attention_mask=None, cache=None, rope=rope_t)
    h = torch.randn(B, R, cfg.hidden_size, dtype=torch.float64)
    hn = torch.stack([torch.stack([rms_norm(h[b, r], P["input_layernorm.weight"], eps) for r in range(R)])
                      for b in range(B)])
    torch.testing.assert_close(layer.mixer_residual(h, ctx), h + torch.stack([mixer_naive(hn[b]) for b in range(B)]),
                               atol=1e-10, rtol=0)
    u = rms_norm(h, P["post_attention_layernorm.weight"], eps)
    gate = u @ P["mlp.gate_proj.weight"].T
    mlp = (gate * torch.sigmoid(gate) * (u @ P["mlp.up_proj.weight"].T)) @ P["mlp.down_proj.weight"].T
    torch.testing.assert_close(layer.mlp_residual(h), h + mlp, atol=1e-12, rtol=0)

    # a decode step through the runtime's per-layer step (models.runtime.layer), unfused and fused: row 0 the base
    # row, row 1 the output row, both rotated to position p
    from models.runtime.layer import LayerStep

    p, hs = 5, h[:, [5, T]]
    xs = hn[:, [5, T]]
    rope_p = rope_cos_sin(torch.full((B, 2), p), rope_frequencies(cfg), torch.float64)
    for fused in (False, True):
        q, k1, v1 = LayerStep(model, fused=fused).attn_in(1, "base+out", hs, *rope_p)
        assert q.shape == (B, H, 2, d) and k1.shape == v1.shape == (B, Hkv, 1, d)
        for b in range(B):
            for r, stream in enumerate(("base", "out")):
                qn = q_naive(xs[b, r], stream)
                torch.testing.assert_close(q[b, :, r], torch.stack([rope(qn[h], p, theta) for h in range(H)]),
                                           atol=1e-12, rtol=0)
            kn = k_naive(xs[b, 0])
            torch.testing.assert_close(k1[b, :, 0], torch.stack([rope(kn[g], p, theta) for g in range(Hkv)]),
                                       atol=1e-12, rtol=0)
            torch.testing.assert_close(v1[b, :, 0], v_naive(xs[b, 0]), atol=1e-12, rtol=0)


def test_kernel_bottom_right_alignment_for_output_queries():
    """Queries addressed by key index, not by row: SDPA's top-left is_causal would be wrong here."""
    q, k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 10, 8), torch.randn(1, 2, 10, 8)
    q_index = torch.tensor([4, 8, 9])
    out = kernels.attention(q, k, v, q_index)
    for i, t in enumerate(q_index.tolist()):
        w = torch.softmax(torch.einsum("hd,hjd->hj", q[0, :, i], k[0, :, : t + 1]) / 8 ** 0.5, -1)
        torch.testing.assert_close(out[0, :, i], torch.einsum("hj,hjd->hd", w, v[0, :, : t + 1]), atol=1e-6, rtol=0)
    top_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (top_left - out).abs().max() > 1e-3


def test_blocked_window_matches_dense_across_block_boundaries(monkeypatch):
    monkeypatch.setattr(kernels, "_BLOCK_ELEMENTS", 64)  # force many small blocks
    q, k, v = torch.randn(2, 4, 50, 8), torch.randn(2, 2, 50, 8), torch.randn(2, 2, 50, 8)
    idx = torch.arange(50)
    got = kernels.attention(q, k, v, idx, window=7)
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    allowed = (idx[None] <= idx[:, None]) & (idx[None] > idx[:, None] - 7)
    ref = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=allowed)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_save_load_roundtrip_and_auto_classes(tmp_path):
    model = tiny(window=4)
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).model_type == "orthros"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, OrthrosForCausalLM)
    ids = torch.randint(0, 61, (1, 10))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, atol=0, rtol=0)


def test_bad_input_errors_name_the_parameter():
    with pytest.raises(ValueError, match="window_size"):
        OrthrosConfig(window_size=0)
    with pytest.raises(ValueError, match="window_size"):
        OrthrosConfig(window_size=4096, max_position_embeddings=2048)
    model = tiny(window=4, max_position_embeddings=16)
    with pytest.raises(ValueError, match="output_mask"):
        model(torch.randint(0, 61, (1, 5)), output_mask=torch.ones(7, dtype=torch.bool))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.randint(0, 61, (1, 17)))
    with pytest.raises(ValueError, match="labels"):
        model(torch.randint(0, 61, (1, 5)), labels=torch.randint(0, 61, (1, 6)))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.randint(0, 61, (2, 5)), attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="q_index"):
        kernels.attention(torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4), torch.tensor([1]))


def nominal_params(name: str) -> float | None:
    """The parameter count a size's name states (``"1.3B"`` -> 1.3e9), or None for shape names."""
    scale = {"M": 1e6, "B": 1e9}
    if name[-1] in scale:
        try:
            return float(name[:-1]) * scale[name[-1]]
        except ValueError:
            return None
    return None


def test_named_sizes_match_their_names():
    for name in SIZES:
        nominal = nominal_params(name)
        if nominal is None:
            continue
        with torch.device("meta"):
            model = build("orthros", name, vocab_size=SIZES[name].ref_vocab)
        n = count_parameters(model)
        assert abs(n / nominal - 1) <= 0.10, f"{name}: {n / 1e6:.1f}M parameters"
    with torch.device("meta"):
        qwen = build("orthros", "qwen3_8b", vocab_size=151936)
    assert 8.0e9 < count_parameters(qwen) < 8.4e9


@pytest.mark.parametrize("arch", ["orthros", "transformer"])
def test_empty_supervision_raises_the_same_error(arch):
    """Labels that are all -100 and an all-False output_mask both leave nothing to score: one ValueError."""
    model = tiny() if arch == "orthros" else build("transformer", "1M", vocab_size=61, hidden_size=32,
                                                   num_hidden_layers=1, num_attention_heads=4, intermediate_size=48)
    ids = torch.randint(0, 61, (2, 6))
    messages = []
    for kwargs in (dict(labels=torch.full((2, 6), -100)), dict(output_mask=torch.zeros(6, dtype=torch.bool)),
                   dict(labels=torch.full((2, 1), 5), input_ids=ids[:, :1]),
                   dict(labels=ids, output_mask=torch.tensor([False] * 5 + [True]))):
        with pytest.raises(ValueError, match="nothing to score") as err:
            model(**{"input_ids": ids, **kwargs})
        messages.append(str(err.value))
    assert len(set(messages)) == 1
    labels = torch.full((2, 6), -100)
    labels[1, 3] = 7
    assert torch.isfinite(model(ids, labels=labels).loss)  # one valid target in the batch is enough
