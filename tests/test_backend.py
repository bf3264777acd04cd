"""models.backend: a forced kernel either computes the bottom-right aligned, windowed attention or refuses."""
import math

import pytest
import torch

from models import backend


def naive_attention(q, k, v, q_index, window=None):
    """fp64 loops: query i at key index q_index[i] attends keys j with q_index[i] - window < j <= q_index[i]."""
    B, H, Tq, d = q.shape
    group = H // k.shape[1]
    out = torch.zeros(B, H, Tq, d, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i, t in enumerate(q_index.tolist()):
                keys = [j for j in range(t + 1) if window is None or j > t - window]
                scores = [float(q[b, h, i].double() @ k[b, h // group, j].double()) / math.sqrt(d) for j in keys]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = sum(weights)
                for w, j in zip(weights, keys):
                    out[b, h, i] += w / total * v[b, h // group, j].double()
    return out


@pytest.fixture
def forced():
    yield backend.force_kernel
    backend.force_kernel(None)


def _qkv(Tq, Tk, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, 2, Tq, 8, generator=g), torch.randn(1, 2, Tk, 8, generator=g),
            torch.randn(1, 2, Tk, 8, generator=g))


def test_forced_sdpa_flash_refuses_queries_that_are_not_bottom_right(forced):
    q, k, v = _qkv(2, 7)
    q_index = torch.tensor([5, 6])
    forced("sdpa-flash")
    with pytest.raises(ValueError, match=r"sdpa-flash.*q \(1, 2, 2, 8\).*k \(1, 2, 7, 8\)"):
        backend.attention(q, k, v, q_index)
    with pytest.raises(ValueError, match="sdpa-flash"):  # the sliding window SDPA cannot apply
        backend.attention(*_qkv(7, 7), torch.arange(7), window=3)
    forced("blocked")  # the kernel that can serve it gives the reference value
    torch.testing.assert_close(backend.attention(q, k, v, q_index).double(), naive_attention(q, k, v, q_index),
                               atol=1e-6, rtol=0)


@pytest.mark.parametrize("Tq, Tk", [(7, 7), (1, 7)])
def test_forced_sdpa_flash_serves_what_it_can(forced, Tq, Tk):
    q, k, v = _qkv(Tq, Tk, seed=1)
    q_index = torch.arange(Tk - Tq, Tk)
    forced("sdpa-flash")
    backend.reset_usage()
    got = backend.attention(q, k, v, q_index)
    assert backend.kernels_used() == {"sdpa-flash": 1}
    torch.testing.assert_close(got.double(), naive_attention(q, k, v, q_index), atol=1e-6, rtol=0)


def test_forced_kernels_that_cannot_run_raise(forced):
    with pytest.raises(ValueError, match="unknown kernel 'sdpa-masked'"):
        forced("sdpa-masked")  # no such kernel exists
    q, k, v = _qkv(7, 7)
    for name in ("flash-attn", "fla-window"):  # CUDA-only kernels on a CPU tensor
        forced(name)
        with pytest.raises(ValueError, match=name):
            backend.attention(q, k, v, torch.arange(7), window=3)
    forced("sdpa-flash")
    with pytest.raises(ValueError, match="key_mask"):
        backend.attention(q, k, v, torch.arange(7), key_mask=torch.ones(1, 7, dtype=torch.bool))


@pytest.mark.parametrize("window", [None, 3])
def test_auto_and_blocked_match_the_naive_reference(forced, window):
    q, k, v = _qkv(3, 9, seed=2)
    q_index = torch.tensor([2, 5, 8])
    ref = naive_attention(q, k, v, q_index, window)
    torch.testing.assert_close(backend.attention(q, k, v, q_index, window).double(), ref, atol=1e-6, rtol=0)
    forced("blocked")
    torch.testing.assert_close(backend.attention(q, k, v, q_index, window).double(), ref, atol=1e-6, rtol=0)


def _fa2_rule(Tq, Tk, is_causal, window_size_left=-1, window_size_right=-1):
    """FlashAttention-2's documented mask, with mha_fwd's normalisations, restated independently: [Tq, Tk] bool.

    Query i sees key j iff i + Tk - Tq - left <= j <= i + Tk - Tq + right; a negative bound is unlimited;
    Tq == 1 drops is_causal; is_causal sets right = 0; a left bound >= Tk is unlimited.
    """
    left, right = window_size_left, window_size_right
    if left >= Tk:
        left = -1
    if Tq == 1:
        is_causal = False
    if is_causal:
        right = 0
    mask = torch.zeros(Tq, Tk, dtype=torch.bool)
    for i in range(Tq):
        for j in range(Tk):
            c = i + Tk - Tq
            mask[i, j] = (left < 0 or j >= c - left) and (right < 0 or j <= c + right)
    return mask


def _masked_fp64(q, k, v, mask):
    group = q.shape[1] // k.shape[1]
    k, v = k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    scores = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v


@pytest.mark.parametrize("Tq, Tk, window", [(3, 9, None), (3, 9, 4), (1, 9, None), (1, 9, 3), (7, 7, 2), (4, 6, 10)])
def test_torch_fa2_arguments_give_the_bottom_right_window(Tq, Tk, window):
    """The arguments backend passes to FlashAttention-2 (is_causal=True + fa2_window_args) select, under FA2's own
    mask rule, exactly the keys of the fp64 naive loop: query i at key Tk - Tq + i, keys within its window."""
    q, k, v = _qkv(Tq, Tk, seed=3)
    q_index = torch.arange(Tk - Tq, Tk)
    mask = _fa2_rule(Tq, Tk, True, **backend.fa2_window_args(window, Tk))
    torch.testing.assert_close(_masked_fp64(q, k, v, mask), naive_attention(q, k, v, q_index, window), atol=1e-9, rtol=0)


def test_torch_fa2_refuses_what_it_cannot_compute(forced):
    q, k, v = _qkv(3, 9)
    forced("torch-fa2")
    with pytest.raises(ValueError, match="torch-fa2.*CUDA fp16/bf16"):  # the CPU path stays the blocked kernel
        backend.attention(q, k, v, torch.tensor([6, 7, 8]), window=4)
    with pytest.raises(ValueError, match="torch-fa2.*aligned for queries at the last"):  # not bottom-right
        backend.attention(q, k, v, torch.tensor([2, 5, 8]))
    forced(None)
    backend.reset_usage()
    backend.attention(q, k, v, torch.tensor([6, 7, 8]), window=4)
    assert backend.kernels_used() == {"blocked": 1}


def test_fla_window_int32_guard():
    """FLA's parallel_attn offsets rows by t * Hq * d in int32: at 32 heads x 128, rows from 524,288 on overflow."""
    assert not backend.fla_offsets_overflow(524288, 32, 128)
    assert backend.fla_offsets_overflow(524289, 32, 128)
    assert backend.fla_offsets_overflow(1048576, 32, 128)
    assert not backend.fla_offsets_overflow(1048576, 8, 128)


def test_prefer_kernels_orders_and_validates():
    try:
        backend.prefer_kernels(["torch-fa2"], ["torch-fa2", "fla-window"])
        assert backend.kernel_order()[0] == "torch-fa2" and backend.kernel_order(True)[:2] == ("torch-fa2", "fla-window")
        assert sorted(backend.kernel_order()) == sorted(backend.KERNELS)
        with pytest.raises(ValueError, match="unknown kernel"):
            backend.prefer_kernels(["fa3"])
    finally:
        backend.prefer_kernels()
    assert backend.kernel_order() == backend.KERNELS == backend.kernel_order(True)


def _naive_decode(q, k_cache, v_cache, used, window):
    """fp64 loops: sequence b's query attends keys used[b] - window .. used[b] - 1 of its token-major cache."""
    B, H, _, d = q.shape
    group = H // k_cache.shape[2]
    out = torch.zeros(B, H, 1, d, dtype=torch.float64)
    for b in range(B):
        n = int(used[b])
        keys = [j for j in range(n) if window is None or j >= n - window]
        for h in range(H):
            scores = [float(q[b, h, 0].double() @ k_cache[b, j, h // group].double()) / math.sqrt(d) for j in keys]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            for w, j in zip(weights, keys):
                out[b, h, 0] += w / sum(weights) * v_cache[b, j, h // group].double()
    return out


@pytest.mark.parametrize("window", [None, 3])
def test_decode_attention_matches_naive_loop(window):
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 1, 8, generator=g)
    k_cache, v_cache = torch.randn(2, 12, 2, 8, generator=g), torch.randn(2, 12, 2, 8, generator=g)
    used = torch.tensor([9, 4], dtype=torch.int32)
    backend.reset_usage()
    got = backend.decode_attention(q, k_cache, v_cache, used, 10, window)
    assert backend.kernels_used() == {"blocked": 1}
    torch.testing.assert_close(got.double(), _naive_decode(q, k_cache, v_cache, used, window), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="L=13"):
        backend.decode_attention(q, k_cache, v_cache, used, 13, window)
    try:
        backend.force_kernel("torch-fa2")
        with pytest.raises(ValueError, match="torch-fa2.*decode_attention"):
            backend.decode_attention(q, k_cache, v_cache, used, 10, window)
    finally:
        backend.force_kernel(None)
