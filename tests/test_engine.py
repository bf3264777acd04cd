"""KV-cache engine: cached prefill + decode equals the uncached model forward; GPU bench scripts smoke-run on CPU."""
import pandas as pd
import pytest
import torch

from models.registry import build
from models.runtime.decode import Engine

TINY = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=256)


def tiny(arch, **kw):
    torch.manual_seed(0)
    model = build(arch, "1M", **{**TINY, **kw}).eval()
    with torch.no_grad():  # move the scale-offset away from identity so a mix-up of streams shows
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("arch, kw", [("orthros", dict(window_size=4)), ("orthros", dict(window_size=8, qk_norm=True)),
                                      ("transformer", {}), ("swa", dict(window_size=5))])
def test_engine_decode_matches_uncached_forward(arch, kw):
    model = tiny(arch, **kw)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=40, bucket=8, chunk=4)  # decode crosses buckets 16 and 24
    first = engine.prefill(prompt)
    steps = engine.decode(14, keep_logits=True)
    logits = [first] + steps
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    assert torch.equal(engine.tok, seq[:, -1:])  # the greedy choice is fed back
    with torch.no_grad():
        for n, got in enumerate(logits):
            ref = model(seq[:, :11 + n], logits_to_keep=1).logits[:, 0]
            torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch, kw", [("linear_hybrid", {}), ("orthros_h", dict(window_size=4)), ("gdn", {}),
                                      ("gla", {})])
def test_engine_recurrent_layers_match_uncached_forward(arch, kw):
    """GDN/GLA layers keep their state in the engine's buffers; the reference is the uncached PT forward
    (all positions, so Orthros-H's GDN output rows take the general second-pass route, not the S_T read)."""
    model = tiny(arch, num_hidden_layers=4, intermediate_size=256, **kw)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=32, bucket=8, chunk=4)
    logits = [engine.prefill(prompt)] + engine.decode(12, keep_logits=True)
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    assert engine.state_bytes() > 0 and (engine.kv_bytes() > 0) == (arch in ("linear_hybrid", "orthros_h"))
    with torch.no_grad():
        for n in (0, 1, 6, 12):
            ref = model(seq[:, :11 + n]).logits[:, -1]
            torch.testing.assert_close(logits[n], ref, atol=1e-5, rtol=0)
    engine.prefill(prompt)  # a second prefill resets the state in place
    torch.testing.assert_close(engine.decode(1, keep_logits=True)[0], logits[1], atol=1e-6, rtol=0)


def test_engine_sees_the_window():
    """Guard: a model whose window differs must disagree with the engine's logits (the test can fail)."""
    model = tiny("orthros", window_size=4)
    other = tiny("orthros", window_size=6)
    prompt = torch.randint(0, 67, (2, 12))
    engine = Engine(model, batch=2, max_len=20, bucket=8, chunk=8)
    first = engine.prefill(prompt)
    got = engine.decode(1, keep_logits=True)[-1]
    seq = torch.cat([prompt, first.argmax(-1, keepdim=True)], dim=1)
    with torch.no_grad():
        ref = other(seq, logits_to_keep=1).logits[:, 0]
        torch.testing.assert_close(model(seq, logits_to_keep=1).logits[:, 0], got, atol=1e-5, rtol=0)
    assert (got - ref).abs().max() > 1e-3


@pytest.mark.parametrize("arch, kw", [("orthros", dict(window_size=4)), ("transformer", {})])
def test_engine_slots_past_the_prompt_contribute_exactly_zero(arch, kw):
    """An earlier run that overflowed leaves NaN in its K/V slots; a later, shorter prompt on the same engine
    must give the fresh engine's logits bit for bit (a masked slot's weight is 0, but 0 * NaN = NaN)."""
    model = tiny(arch, **kw)
    prompt = torch.randint(0, 67, (2, 11))
    fresh = Engine(model, batch=2, max_len=40, bucket=8, chunk=4)
    want = [fresh.prefill(prompt)] + fresh.decode(6, keep_logits=True)
    engine = Engine(model, batch=2, max_len=40, bucket=8, chunk=4)
    engine.prefill(torch.randint(0, 67, (2, 30)))
    engine.decode(9)
    for buf in engine.k + engine.v:
        buf.fill_(float("nan"))
    got = [engine.prefill(prompt)] + engine.decode(6, keep_logits=True)
    assert all(torch.isfinite(g).all() for g in got)
    for n, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), f"step {n}"


def test_engine_reads_scale_offset_loaded_after_it_was_built():
    model = tiny("orthros", window_size=4)
    engine = Engine(model, batch=2, max_len=40, bucket=8, chunk=4)
    trained = tiny("orthros", window_size=4)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.5 * torch.randn(p.shape, generator=g))
    model.load_state_dict(trained.state_dict())  # weights loaded into the model the engine already holds
    prompt = torch.randint(0, 67, (2, 11))
    logits = [engine.prefill(prompt)] + engine.decode(5, keep_logits=True)
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    with torch.no_grad():
        for n, got in enumerate(logits):
            torch.testing.assert_close(got, trained(seq[:, :11 + n], logits_to_keep=1).logits[:, 0], atol=1e-5, rtol=0)


def test_engine_bad_input():
    model = tiny("orthros", window_size=4)
    with pytest.raises(ValueError, match="chunk"):
        Engine(model, batch=1, max_len=16, bucket=8, chunk=3)
    engine = Engine(model, batch=2, max_len=16, bucket=8, chunk=4)
    with pytest.raises(ValueError, match="prefill"):
        engine.decode(1)
    with pytest.raises(ValueError, match="input_ids"):
        engine.prefill(torch.zeros(3, 4, dtype=torch.long))
    engine.prefill(torch.zeros(2, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        engine.decode(7)


def test_engine_refuses_non_attention_mixer():
    model = tiny("orthros", window_size=4)
    model.model.layers[1].mixer = torch.nn.Identity()
    with pytest.raises(ValueError, match="layer 1"):
        Engine(model, batch=1, max_len=16)
    with pytest.raises(ValueError, match="layer 0 mixer FLAMixer"):
        Engine(tiny("retnet"), batch=1, max_len=16)


def test_the_prefill_and_e2e_benchmarks_run_on_cpu_at_tiny_size(tmp_path):
    """The H200 benchmarks, end to end on CPU at tiny size: CSV columns, target rows (targets.csv), definitions."""
    from benchmarks import e2e_gpu, prefill_cpu, prefill_gpu

    prefill_gpu.main(["--device", "cpu", "--dtype", "float32", "--size", "1M", "--lengths", "32,64",
                      "--layer-lengths", "96", "--matmul-n", "64", "--window", "8", "--ffn-chunk", "32",
                      "--repeats", "1", "--out-dir", str(tmp_path)])
    pre = pd.read_csv(tmp_path / "prefill.csv")
    need = {"arch", "shape", "seq_len", "gpus", "ms", "tflops", "mfu", "peak_mem_gib", "kv_cache_gib", "kernel",
            "attn_kernel_tflops", "method", "status", "gpu_name", "driver", "torch", "triton", "commit", "backend"}
    assert need <= set(pre.columns)
    ok = pre[pre.status == "ok"]
    assert set(ok.method) == {"full-model", "one-layer x n_layers", "cost-model prediction"}
    assert (ok[ok.method != "cost-model prediction"].ms > 0).all()
    assert set(ok[ok.gpus == 8].seq_len) >= {1048576}
    assert not {"target", "value", "threshold"} & set(pre.columns) and set(pre.method) != {"target"}
    targets = pd.read_csv(tmp_path / "targets.csv")
    pre_t = targets[(targets.source == "prefill.csv") & (targets.method == "target")]
    assert len(pre_t) == 3 and set(pre_t.status) <= {"pass", "fail"} and set(pre_t.arch) == {"orthros"}
    assert (tmp_path / "rates.json").exists()

    e2e_gpu.main(["--device", "cpu", "--dtype", "float32", "--size", "1M", "--configs", "40/3,30/12",
                  "--bucket", "16", "--chunk", "8", "--window", "8", "--full-decode-max", "4", "--sample-steps", "2",
                  "--check-steps", "6",
                  "--rates", str(tmp_path / "rates.json"), "--out-dir", str(tmp_path)])
    e2e = pd.read_csv(tmp_path / "e2e.csv")
    rows = e2e[e2e.status == "ok"]
    assert len(rows) == 4 and set(rows.arch) == {"transformer", "orthros"}
    assert (rows.ttft_s < rows.e2e_s).all()
    assert ((rows.output_tok_s - rows.batch * rows.output_len / rows.e2e_s).abs() < 1e-9).all()
    assert ((rows.decode_tok_s - rows.batch * rows.output_len / (rows.e2e_s - rows.ttft_s)).abs() < 1e-6).all()
    assert set(rows.method) == {"measured", "measured TTFT + timed decode steps x output_len"}
    targets = pd.read_csv(tmp_path / "targets.csv")
    check = targets[(targets.source == "e2e.csv") & (targets.method == "engine check")]
    assert check.arch.tolist() == ["orthros+transformer"] and check.status.tolist() == ["pass"]
    assert check.value.iloc[0] < 1e-4 and len(targets[targets.source == "prefill.csv"]) == 3  # prefill's stay

    # the Table 4 hybrid rows, appended (the rows above stay)
    prefill_gpu.main(["--device", "cpu", "--dtype", "float32", "--size", "1M", "--lengths", "32", "--layer-lengths", "",
                      "--matmul-n", "64", "--window", "8", "--repeats", "1", "--archs", "linear_hybrid,orthros_h",
                      "--append", "--out-dir", str(tmp_path)])
    pre = pd.read_csv(tmp_path / "prefill.csv")
    hyb = pre[pre.arch.isin(["linear_hybrid", "orthros_h"]) & (pre.status == "ok") & (pre.method == "full-model")]
    assert len(hyb) == 2 and hyb.kernel.str.contains("fla-naive:GatedDeltaNet").all()
    assert {"transformer", "orthros"} <= set(pre[pre.status == "ok"].arch)
    e2e_gpu.main(["--device", "cpu", "--dtype", "float32", "--size", "1M", "--configs", "40/3", "--archs",
                  "linear_hybrid,orthros_h", "--bucket", "16", "--chunk", "8", "--window", "8", "--check-steps", "6",
                  "--rates", str(tmp_path / "rates.json"), "--out-dir", str(tmp_path), "--append"])
    e2e = pd.read_csv(tmp_path / "e2e.csv")
    rows = e2e[(e2e.status == "ok")]
    assert set(rows.arch) == {"transformer", "orthros", "linear_hybrid", "orthros_h"}
    hyb = rows[rows.arch.isin(["linear_hybrid", "orthros_h"])]
    assert (hyb.state_gib > 0).all() and (hyb.hbm_bound_ms > 0).all()
    targets = pd.read_csv(tmp_path / "targets.csv")
    check = targets[targets.method == "engine check"].set_index("arch")
    assert check.loc["linear_hybrid+orthros_h", "status"] == "pass"
    assert check.loc["linear_hybrid+orthros_h", "value"] < 1e-4 and "orthros+transformer" in check.index

    out = prefill_cpu.main(["--profile", "ci", "--archs", "orthros,transformer", "--lengths", "32", "--repeats", "1",
                            "--out", str(tmp_path / "prefill_cpu.csv")])
    cpu = pd.read_csv(out)
    assert list(cpu.columns[:6]) == ["arch", "size", "n_params", "seq_len", "ms", "status"]
    assert (cpu.status == "ok").all() and (cpu.ms > 0).all() and (cpu.n_params > 0).all()
    assert (cpu.threads == torch.get_num_threads()).all()  # the condition the latency was measured under


def test_prefill_sweep_fails_on_a_truncated_checkpoint(tmp_path, capsys):
    """A given checkpoint that cannot be read stops the sweep naming the file (a usage error: no 'not run' row, no
    CSV)."""
    from benchmarks import prefill_cpu

    good = tmp_path / "good"
    tiny("transformer").save_pretrained(good)
    args = ["--profile", "ci", "--archs", "transformer", "--lengths", "16", "--repeats", "1"]
    cpu = pd.read_csv(prefill_cpu.main(args + ["--checkpoint", f"transformer={good}",
                                               "--out", str(tmp_path / "a.csv")]))
    assert cpu.status.tolist() == ["ok"] and cpu.weights.tolist() == [str(good)]
    weights = good / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    with pytest.raises(SystemExit) as stop:
        prefill_cpu.main(args + ["--checkpoint", f"transformer={good}", "--out", str(tmp_path / "b.csv")])
    assert stop.value.code == 2 and f"corrupt checkpoint file {weights}" in capsys.readouterr().err
    assert not (tmp_path / "b.csv").exists()


@pytest.mark.parametrize("arch, kw", [("orthros", dict(window_size=4)), ("transformer", {}),
                                      ("swa", dict(window_size=5)), ("orthros", dict(window_size=8, qk_norm=True))])
@pytest.mark.parametrize("options", [dict(decode_attn="fa2"), dict(fused=True),
                                     dict(fused=True, decode_attn="fa2", prefill_chunk=3),
                                     dict(fused=True, prefill_chunk=5), dict(prefill_chunk=4)])
def test_engine_options_match_uncached_forward(arch, kw, options):
    """Token-major caches + decode_attention, the fused step, chunked prefill (T_q != T_k chunks over the cache,
    fused or not): each gives the uncached model's logits at every step (fp32, CPU: eager fused functions)."""
    model = tiny(arch, **kw)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=40, bucket=8, chunk=4, **options)
    logits = [engine.prefill(prompt)] + engine.decode(14, keep_logits=True)
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    with torch.no_grad():
        for n, got in enumerate(logits):
            ref = model(seq[:, :11 + n], logits_to_keep=1).logits[:, 0]
            torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch, kw", [("linear_hybrid", {}), ("orthros_h", dict(window_size=4))])
def test_engine_fused_recurrent_layers_match_uncached_forward(arch, kw):
    model = tiny(arch, num_hidden_layers=4, intermediate_size=256, **kw)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=32, bucket=8, chunk=4, fused=True, decode_attn="fa2")
    logits = [engine.prefill(prompt)] + engine.decode(12, keep_logits=True)
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    with torch.no_grad():
        for n in (0, 1, 6, 12):
            torch.testing.assert_close(logits[n], model(seq[:, :11 + n]).logits[:, -1], atol=1e-5, rtol=0)


def test_engine_step_kernels_leaves_the_state_alone():
    """Counting one step's kernels runs a step; the decode that follows must be the one without the count."""
    model = tiny("orthros_h", window_size=4, num_hidden_layers=4, intermediate_size=256)
    prompt = torch.randint(0, 67, (2, 11))
    plain = Engine(model, batch=2, max_len=32, bucket=8, chunk=4, fused=True)
    want = [plain.prefill(prompt)] + plain.decode(3, keep_logits=True)
    counted = Engine(model, batch=2, max_len=32, bucket=8, chunk=4, fused=True)
    got = [counted.prefill(prompt)]
    n, unit = counted.step_kernels()
    assert n > 50 and unit == "aten ops (cpu)"
    got += counted.decode(3, keep_logits=True)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_engine_option_errors():
    model = tiny("orthros", window_size=4)
    with pytest.raises(ValueError, match="prefill_chunk"):
        Engine(model, batch=1, max_len=16, prefill_chunk=0)
    with pytest.raises(ValueError, match="compiled=True needs fused=True"):
        Engine(model, batch=1, max_len=16, compiled=True)
    with pytest.raises(ValueError, match="decode_attn"):
        Engine(model, batch=1, max_len=16, decode_attn="flash")
    with pytest.raises(ValueError, match="prefill_chunk"):
        Engine(tiny("orthros_h", window_size=4, num_hidden_layers=4, intermediate_size=256), batch=1, max_len=16,
               fused=True, prefill_chunk=4)


def test_engine_check_compiled_and_set_compiled():
    """check_compiled compares the compiled fused functions with the same functions run eagerly (here the
    "eager" torch.compile backend, so they agree to rounding); set_compiled switches back and forth and the
    engine still decodes what the uncached model computes; both refuse an engine without fused functions."""
    model = tiny("orthros", window_size=4)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=32, bucket=8, chunk=4, fused=True, compiled=True, compile_backend="eager")
    rel = engine.check_compiled(prompt)
    assert set(rel) == {"prefill_rel", "decode_rel"} and max(rel.values()) < 1e-5
    engine.set_compiled(False)
    logits = [engine.prefill(prompt)] + engine.decode(3, keep_logits=True)
    engine.set_compiled(True)
    assert torch.equal(engine.prefill(prompt), logits[0])
    seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
    with torch.no_grad():
        for n, got in enumerate(logits):
            torch.testing.assert_close(got, model(seq[:, :11 + n], logits_to_keep=1).logits[:, 0], atol=1e-5, rtol=0)
    plain = Engine(model, batch=2, max_len=32, bucket=8, chunk=4)
    with pytest.raises(ValueError, match="fused=True"):
        plain.set_compiled(True)
    with pytest.raises(ValueError, match="compiled fused functions"):
        plain.check_compiled(prompt)


def test_check_compiled_decodes_the_same_token_in_both_modes(monkeypatch):
    """A compiled prefill whose greedy token differs from the eager one (bf16 rounding on random weights flips
    near-tied top-2 logits) must not make the decode comparison read two different inputs: here the compiled
    mode's greedy token is deliberately shifted, and the decode logits must still agree."""
    model = tiny("orthros", window_size=4)
    prompt = torch.randint(0, 67, (2, 11))
    engine = Engine(model, batch=2, max_len=32, bucket=8, chunk=4, fused=True, compiled=True, compile_backend="eager")
    finish = Engine._finish_prefill

    def shifted_when_compiled(self, logits, T):
        finish(self, logits, T)
        if self.step.compiled:
            self.tok.copy_((self.tok + 1) % 67)

    monkeypatch.setattr(Engine, "_finish_prefill", shifted_when_compiled)
    rel = engine.check_compiled(prompt)
    assert rel["decode_rel"] < 1e-5, rel


def test_prefill_128k_row_is_labelled_with_the_profile(tmp_path):
    """The 128K CPU Prefill row carries the profile it ran for (it was always 'cpu')."""
    from benchmarks import prefill_cpu

    out = prefill_cpu.main(["--mode", "128k", "--profile", "gpu", "--seq-len", "64", "--window", "8",
                            "--out", str(tmp_path / "prefill_128k.csv")])
    row = pd.read_csv(out).iloc[0]
    assert row["profile"] == "gpu" and row["seq_len"] == 64 and row["status"] == "ok"
