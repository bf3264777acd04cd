"""Cost model: FLOP formulas against a hand count, limits, and the prediction CLI."""
import math

import pandas as pd
import pytest

from suite import cost_model as cm

TINY = cm.Shape(hidden=8, layers=1, heads=2, kv_heads=1, head_dim=4, ffn=16, vocab=10)


def test_prefill_flops_hand_count_transformer():
    # per row: q 2*8*8=128, k 2*8*4=64, v 64, o 128, gate/up/down 2*3*8*16=768 -> 1152; 5 rows
    # attention: 15 causal pairs x 4 * 2 heads * 4 dims = 480; LM head on one row: 2*8*10 = 160
    f = cm.prefill_flops(TINY, 5, "transformer", None)
    assert f["dense"] == 5760
    assert f["full_attn"] == 480
    assert f["lm_head"] == 160
    assert f["window_attn"] == f["query_attn"] == 0
    assert f["total"] == 6400


def test_prefill_flops_hand_count_orthros():
    # q/o/FFN on 5 base + 1 output rows: (128+128+768)*6 = 6144; k/v on 5 rows: 128*5 = 640
    # window 2 pairs: 1+2+2+2+2 = 9 -> 288; output token over 5 keys -> 160; LM head 160
    f = cm.prefill_flops(TINY, 5, "orthros", 2)
    assert f["dense"] == 6784
    assert f["window_attn"] == 288
    assert f["query_attn"] == 160
    assert f["total"] == 6784 + 288 + 160 + 160
    assert cm.prefill_flops(TINY, 5, "orthros", 2, batch=3)["total"] == 3 * f["total"]


def test_shape_from_size_qwen3():
    s = cm.Shape.from_size("qwen3_8b")
    assert (s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab) == \
        (4096, 36, 32, 8, 128, 12288, 151936)
    # Qwen3-8B has ~8.2B parameters; the decode step reads all but the embedding table (bf16)
    n = s.weight_bytes_per_step() / 2 + s.hidden * s.vocab
    assert 8.0e9 < n < 8.4e9
    assert s.kv_bytes_per_token() == 2 * 2 * 8 * 128 * 36


def test_speedup_tends_to_one_at_window_length_and_grows():
    rates = cm.Rates(window_tflops=cm.Rates().attn_tflops)  # same kernel rate: only the FLOPs differ
    s = cm.Shape.from_size("qwen3_8b")
    speed = [cm.prefill_time(s, T, "transformer", 1, rates, None)["total_s"] /
             cm.prefill_time(s, T, "orthros", 1, rates, 128)["total_s"] for T in (128, 8192, 131072, 1048576)]
    assert 0.95 < speed[0] <= 1.0  # window == sequence: identical attention, one extra output row
    assert speed == sorted(speed) and speed[-1] > 10


def test_e2e_speedup_decreases_with_output_length():
    s = cm.Shape.from_size("qwen3_8b")
    speed = []
    for out in (1, 128, 1024, 8192, 65536):
        t = cm.e2e(s, 131072, out, 2, "transformer", window=None)
        o = cm.e2e(s, 131072, out, 2, "orthros")
        speed.append(t["e2e_s"] / o["e2e_s"])
        assert math.isclose(o["output_tok_s"], 2 * out / o["e2e_s"])
    assert all(a > b for a, b in zip(speed, speed[1:]))
    assert speed[-1] < 1.2


def test_decode_step_is_hbm_bound_and_orthros_reads_window_more():
    s = cm.Shape.from_size("qwen3_8b")
    rates = cm.Rates(hbm_bytes_per_s=1e12)
    t = cm.decode_step_time(s, 1000, 2, "transformer", rates, None)
    o = cm.decode_step_time(s, 1000, 2, "orthros", rates, 128)
    expect_t = (s.weight_bytes_per_step() + 2 * 1001 * s.kv_bytes_per_token()) / 1e12
    assert math.isclose(t, expect_t)
    assert math.isclose(o - t, 2 * 128 * s.kv_bytes_per_token() / 1e12)
    # sum over steps of the E2E closed form equals the explicit loop
    e = cm.e2e(s, 1000, 5, 2, "orthros", rates)
    loop = sum(cm.decode_step_time(s, 1000 + i, 2, "orthros", rates) for i in range(4))
    assert math.isclose(e["e2e_s"] - e["ttft_s"], loop, rel_tol=1e-12)


def test_more_gpus_is_faster_but_not_superlinear():
    s = cm.Shape.from_size("qwen3_8b")
    for arch, w in (("transformer", None), ("orthros", 128)):
        one = cm.prefill_time(s, 262144, arch, 1, window=w)["total_s"]
        eight = cm.prefill_time(s, 262144, arch, 8, window=w)
        assert one / 8 <= eight["total_s"] < one
        assert eight["comm_s"] >= 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(T=0, arch="orthros"), "sequence length"),
    (dict(T=8, arch="gdn"), "unknown arch"),
    (dict(T=8, arch="orthros", window=0), "window"),
])
def test_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cm.prefill_flops(TINY, **kwargs)


def test_bad_rates_raise(tmp_path):
    with pytest.raises(ValueError, match="gemm_tflops"):
        cm.Rates(gemm_tflops=0)
    path = tmp_path / "r.json"
    path.write_text('{"gemm_tflops": 500, "other": 1}')
    assert cm.Rates.load(path).gemm_tflops == 500


def test_cli_writes_headline_rows(tmp_path):
    out = tmp_path / "cm.csv"
    cm.main(["--out", str(out)])
    df = pd.read_csv(out)
    assert set(df["method"]) == {"cost-model prediction"}
    head = df[df["condition"].fillna("").str.startswith("headline")]
    assert sorted(head["paper_value"]) == [3.45, 21.9]
    pre = df[(df.quantity == "prefill_speedup") & (df.gpus == 1)].sort_values("input_len")
    assert list(pre["input_len"]) == [8192 << k for k in range(8)]
    assert pre["speedup"].is_monotonic_increasing
    assert {"commit", "device", "backend", "wall_s"} <= set(df.columns)


def test_sequence_parallel_communication_hand_count():
    # TINY K/V per token and layer: 2 (K, V) x 1 head x 4 dims x 2 bytes = 16 bytes
    rates = cm.Rates(link_bytes_per_s=1e3, link_latency_s=1.0, hbm_bytes_per_s=1e3)
    one, two = (cm.prefill_time(TINY, 8, "transformer", g, rates, None) for g in (1, 2))
    assert one["comm_s"] == one["cp_s"] == 0
    # all_gather of K and V: half of 8 tokens x 16 B received, 2 collectives, + the logits broadcast
    assert two["comm_s"] == pytest.approx(8 * 16 / 2 / 1e3 + 2 + 1)
    # reassembly 2 x 8 x 16 B; K/V of 8 keys read (1 head) and written (2 heads): 8 x 2 x 3 x 4 x 2 B;
    # merge: 4 queries x 2 heads x 4 dims x 34 B
    assert two["cp_s"] == pytest.approx((256 + 384 + 4 * 8 * cm.MERGE_BYTES_PER_EL) / 1e3)
    assert two["attn_s"] == pytest.approx(one["attn_s"] / 2)  # head-tail chunks balance the causal pairs
    # Orthros, w = 3: one halo of 2 tokens x 16 B, two all_reduces of 2 heads x (4 + 2) fp32, 4 collectives
    orth = cm.prefill_time(TINY, 8, "orthros", 2, rates, 3)
    assert orth["comm_s"] == pytest.approx((2 * 16 + 2 * 2 * 6 * 4) / 1e3 + 4)
    assert cm.seq_parallel_speedup(TINY, 8, "orthros", 2, rates, 3) == pytest.approx(
        cm.prefill_time(TINY, 8, "orthros", 1, rates, 3)["total_s"] / orth["total_s"])


def test_two_gpu_speedups_near_two_at_long_lengths():
    s = cm.Shape.from_size("qwen3_8b")
    for arch, w in (("transformer", None), ("orthros", 128)):
        speed = [cm.seq_parallel_speedup(s, T, arch, 2, window=w) for T in (131072, 1048576)]
        assert 1.9 < speed[0] <= speed[1] < 2.0


def test_decode_step_flops_hand_count():
    # TINY: one layer, per row 1152 FLOPs of projections and FFN (k/v on every row, as the fused step runs them);
    # LM head 2*8*10 = 160 per sequence; attention 4 * 2 heads * 4 dims = 32 FLOPs per key
    t = cm.decode_step_flops(TINY, 5, 3, "transformer", None)
    assert t == {"gemm": 3 * 1152 + 3 * 160, "attn": 3 * 32 * 6}
    o = cm.decode_step_flops(TINY, 5, 3, "orthros", 2)  # 2 rows a sequence; keys 6 (output) + 2 (base window)
    assert o == {"gemm": 6 * 1152 + 3 * 160, "attn": 3 * 32 * 8}


def test_decode_step_predict_memory_bound_at_small_batch_and_gemm_bound_at_large():
    s, rates = cm.Shape.from_size("qwen3_8b"), cm.Rates()
    small_t = cm.decode_step_predict(s, 131072, 2, "transformer", 0, rates, None)
    small_o = cm.decode_step_predict(s, 131072, 2, "orthros", 0, rates)
    assert small_t["predicted_s"] == pytest.approx(small_t["hbm_bound_s"])  # no overhead, all memory bound
    assert small_o["predicted_s"] / small_t["predicted_s"] < 1.01          # the second row is free
    big_t = cm.decode_step_predict(s, 2048, 512, "transformer", 0, rates, None)
    big_o = cm.decode_step_predict(s, 2048, 512, "orthros", 0, rates)
    assert big_o["gemm_s"] > big_o["weight_bytes"] / rates.hbm_bytes_per_s  # 1024 rows: compute bound GEMMs
    assert big_o["gemm_s"] / big_t["gemm_s"] == pytest.approx(2, rel=0.05)
    assert big_o["predicted_s"] / big_t["predicted_s"] > 1.1
    with_k = cm.decode_step_predict(s, 2048, 1, "orthros", 1000, rates)
    assert with_k["overhead_s"] == pytest.approx(1000 * rates.kernel_overhead_s)
    with pytest.raises(ValueError, match="kernels_per_step"):
        cm.decode_step_predict(s, 2048, 1, "orthros", -1, rates)


def test_train_flops_count_the_second_stream():
    """A training step is 3x the forward; Orthros adds the output stream's Q, O and FFN rows and the base stream's
    window attention to the Transformer's step (full causal attention on the output stream)."""
    from suite.train.throughput import step_flops

    shape, T, w = cm.Shape.from_size("160M"), 2048, 128
    transformer = cm.train_flops(shape, T, "transformer", batch=2)
    assert transformer == 3 * 2 * (shape.layers * (cm.dense_flops(shape, T, T) + cm.attn_flops(shape, T * (T + 1) // 2))
                                   + T * 2 * shape.hidden * shape.vocab)
    orthros = cm.train_flops(shape, T, "orthros", w, batch=2)
    extra = 3 * 2 * shape.layers * (cm.dense_flops(shape, T, 0) + cm.attn_flops(shape, cm.causal_pairs(T, w)))
    assert orthros - transformer == extra
    assert cm.train_flops(shape, T, "transformer", w) < transformer / 2  # SWA: window attention only
    from models.registry import make_config

    config = make_config("orthros", "160M", window_size=w, vocab_size=shape.vocab)
    assert step_flops(config, 2, T) == orthros
    assert step_flops(make_config("gdn", "1M"), 2, T) is None
