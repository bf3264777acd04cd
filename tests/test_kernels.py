"""models.kernels: a forced kernel either computes the bottom-right aligned, windowed attention or refuses."""
import math

import pytest
import torch

from models import kernels


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
    yield kernels.force_kernel
    kernels.force_kernel(None)


def _qkv(Tq, Tk, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, 2, Tq, 8, generator=g), torch.randn(1, 2, Tk, 8, generator=g),
            torch.randn(1, 2, Tk, 8, generator=g))


def test_forced_sdpa_flash_refuses_queries_that_are_not_bottom_right(forced):
    q, k, v = _qkv(2, 7)
    q_index = torch.tensor([5, 6])
    forced("sdpa-flash")
    with pytest.raises(ValueError, match=r"sdpa-flash.*q \(1, 2, 2, 8\).*k \(1, 2, 7, 8\)"):
        kernels.attention(q, k, v, q_index)
    with pytest.raises(ValueError, match="sdpa-flash"):  # the sliding window SDPA cannot apply
        kernels.attention(*_qkv(7, 7), torch.arange(7), window=3)
    forced("blocked")  # the kernel that can serve it gives the reference value
    torch.testing.assert_close(kernels.attention(q, k, v, q_index).double(), naive_attention(q, k, v, q_index),
                               atol=1e-6, rtol=0)


@pytest.mark.parametrize("Tq, Tk", [(7, 7), (1, 7)])
def test_forced_sdpa_flash_serves_what_it_can(forced, Tq, Tk):
    q, k, v = _qkv(Tq, Tk, seed=1)
    q_index = torch.arange(Tk - Tq, Tk)
    forced("sdpa-flash")
    kernels.reset_usage()
    got = kernels.attention(q, k, v, q_index)
    assert kernels.kernels_used() == {"sdpa-flash": 1}
    torch.testing.assert_close(got.double(), naive_attention(q, k, v, q_index), atol=1e-6, rtol=0)


def test_forced_kernels_that_cannot_run_raise(forced):
    with pytest.raises(ValueError, match="unknown kernel 'sdpa-masked'"):
        forced("sdpa-masked")  # no such kernel exists
    q, k, v = _qkv(7, 7)
    for name in ("flash-attn", "fla-window"):  # CUDA-only kernels on a CPU tensor
        forced(name)
        with pytest.raises(ValueError, match=name):
            kernels.attention(q, k, v, torch.arange(7), window=3)
    forced("sdpa-flash")
    with pytest.raises(ValueError, match="key_mask"):
        kernels.attention(q, k, v, torch.arange(7), key_mask=torch.ones(1, 7, dtype=torch.bool))


def test_fla_window_kernel_loads_through_the_fla_version_check(monkeypatch):
    """The fla-window kernel (FLA's parallel_attn, its int32 offset limit) is FLA 0.6's: an FLA version the suite
    was not checked against is refused when the kernel is first looked up (models.fla_check), not silently used."""
    import fla

    from models import fla_check

    assert fla_check.window_kernel() is not None  # FLA 0.6.0 is installed (pyproject.toml pins it)
    monkeypatch.setattr(fla, "__version__", "0.9.9")
    monkeypatch.setattr(kernels, "_fla_checked", False)
    message = r"flash-linear-attention 0\.9\.9 is installed, .* models/kernels\.py calls fla\.ops\.attn\.parallel"
    with pytest.raises(RuntimeError, match=message):
        kernels._fla_window()
    assert kernels._fla_checked is False  # a refused version is refused again on the next call


def test_fla_is_imported_below_its_layer_api_only_behind_the_version_check():
    """Outside tests, FLA is imported by models/fla_check.py, baselines/fla_internals.py (both checked) and for its
    public layers (``fla.layers``) by baselines/fla_mixers.py, which runs fla_internals.install() first."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doors = {"models/fla_check.py", "baselines/fla_internals.py"}
    found = set()
    for package in ("models", "baselines", "benchmarks", "suite", "scripts"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                for name in names:
                    if name == "fla" or name.startswith("fla."):
                        found.add((str(path.relative_to(root)), name))
    assert {path for path, _ in found} == doors | {"baselines/fla_mixers.py"}, found
    assert {name for path, name in found if path not in doors} == {"fla.layers"}, found


@pytest.mark.parametrize("window", [None, 3])
def test_auto_and_blocked_match_the_naive_reference(forced, window):
    q, k, v = _qkv(3, 9, seed=2)
    q_index = torch.tensor([2, 5, 8])
    ref = naive_attention(q, k, v, q_index, window)
    torch.testing.assert_close(kernels.attention(q, k, v, q_index, window).double(), ref, atol=1e-6, rtol=0)
    forced("blocked")
    torch.testing.assert_close(kernels.attention(q, k, v, q_index, window).double(), ref, atol=1e-6, rtol=0)


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
    mask = _fa2_rule(Tq, Tk, True, **kernels.fa2_window_args(window, Tk))
    torch.testing.assert_close(_masked_fp64(q, k, v, mask), naive_attention(q, k, v, q_index, window), atol=1e-9,
                               rtol=0)


def test_torch_fa2_refuses_what_it_cannot_compute(forced):
    q, k, v = _qkv(3, 9)
    forced("torch-fa2")
    with pytest.raises(ValueError, match="torch-fa2.*CUDA fp16/bf16"):  # the CPU path stays the blocked kernel
        kernels.attention(q, k, v, torch.tensor([6, 7, 8]), window=4)
    with pytest.raises(ValueError, match="torch-fa2.*aligned for queries at the last"):  # not bottom-right
        kernels.attention(q, k, v, torch.tensor([2, 5, 8]))
    forced(None)
    kernels.reset_usage()
    kernels.attention(q, k, v, torch.tensor([6, 7, 8]), window=4)
    assert kernels.kernels_used() == {"blocked": 1}


def test_fla_window_int32_guard():
    """FLA's parallel_attn offsets rows by t * Hq * d in int32: at 32 heads x 128, rows from 524,288 on overflow."""
    assert not kernels.fla_offsets_overflow(524288, 32, 128)
    assert kernels.fla_offsets_overflow(524289, 32, 128)
    assert kernels.fla_offsets_overflow(1048576, 32, 128)
    assert not kernels.fla_offsets_overflow(1048576, 8, 128)


def test_prefer_kernels_orders_and_validates():
    try:
        kernels.prefer_kernels(["torch-fa2"], ["torch-fa2", "fla-window"])
        assert kernels.kernel_order()[0] == "torch-fa2"
        assert kernels.kernel_order(True)[:2] == ("torch-fa2", "fla-window")
        assert sorted(kernels.kernel_order()) == sorted(kernels.KERNELS)
        with pytest.raises(ValueError, match="unknown kernel"):
            kernels.prefer_kernels(["fa3"])
    finally:
        kernels.prefer_kernels()
    assert kernels.kernel_order() == kernels.KERNELS == kernels.kernel_order(True)


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


def _decode_case(d: int, capacity: int, used: list[int]):
    """q [2, 4, 1, d], token-major caches [2, capacity, 2, d] (GQA 4:2) and ``used`` as int32, seeded."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 1, d, generator=g)
    k_cache, v_cache = torch.randn(2, capacity, 2, d, generator=g), torch.randn(2, capacity, 2, d, generator=g)
    return q, k_cache, v_cache, torch.tensor(used, dtype=torch.int32)


@pytest.mark.parametrize("window", [None, 3])
def test_decode_attention_matches_naive_loop(window):
    q, k_cache, v_cache, used = _decode_case(8, 12, [9, 4])
    kernels.reset_usage()
    got = kernels.decode_attention(q, k_cache, v_cache, used, 10, window)
    assert kernels.kernels_used() == {"blocked": 1}
    torch.testing.assert_close(got.double(), _naive_decode(q, k_cache, v_cache, used, window), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="L=13"):
        kernels.decode_attention(q, k_cache, v_cache, used, 13, window)
    try:
        kernels.force_kernel("torch-fa2")
        with pytest.raises(ValueError, match="torch-fa2.*decode_attention"):
            kernels.decode_attention(q, k_cache, v_cache, used, 10, window)
    finally:
        kernels.force_kernel(None)


def _fa2_varlen_fp64(q, k, v, cu_q, cu_k, seqused_k, is_causal, window_size_left=-1, window_size_right=-1):
    """FlashAttention-2's variable-length forward restated in fp64 from its documented semantics: packed
    ``q [total_q, Hq, d]``, ``k, v [total_k, Hkv, d]``; sequence b's queries are rows cu_q[b]..cu_q[b+1]-1, its
    keys rows cu_k[b].. of which the first seqused_k[b] are read; the mask is :func:`_fa2_rule` at
    (T_q = that sequence's query count, T_k = seqused_k[b]); GQA: query head h reads KV head h // (Hq / Hkv)."""
    total_q, Hq, d = q.shape
    group = Hq // k.shape[1]
    out = torch.zeros(total_q, Hq, d, dtype=torch.float64)
    for b in range(len(cu_q) - 1):
        q0, q1, k0 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b])
        Tq, Tk = q1 - q0, int(seqused_k[b])
        mask = _fa2_rule(Tq, Tk, is_causal, window_size_left, window_size_right)
        for h in range(Hq):
            kb, vb = k[k0:k0 + Tk, h // group].double(), v[k0:k0 + Tk, h // group].double()
            scores = q[q0:q1, h].double() @ kb.T / math.sqrt(d)
            out[q0:q1, h] = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ vb
    return out


@pytest.mark.parametrize("window", [None, 3, 1, 12])
def test_fa2_decode_arguments_select_the_keys_of_the_naive_decode_loop(window):
    """The packing decode_attention hands to FlashAttention-2 (fa2_decode_args: cu_seqlens, max lengths, causal
    flag, window; seqused_k = used), run through an fp64 restatement of FA2's varlen semantics on the CPU, gives
    the fp64 naive decode loop: sequence b's query attends keys used[b] - window .. used[b] - 1 of its cache."""
    g = torch.Generator().manual_seed(7)
    B, cap, L, Hq, Hkv, d = 3, 12, 10, 4, 2, 8
    q = torch.randn(B, Hq, 1, d, generator=g)
    k_cache, v_cache = torch.randn(B, cap, Hkv, d, generator=g), torch.randn(B, cap, Hkv, d, generator=g)
    used = torch.tensor([9, 4, 10], dtype=torch.int32)
    a = kernels.fa2_decode_args(B, cap, L, window, "cpu")
    assert a["max_q"] == 1 and a["max_k"] == L and a["cu_seqlens_q"].dtype == torch.int32
    got = _fa2_varlen_fp64(q.reshape(B, Hq, d), k_cache.flatten(0, 1), v_cache.flatten(0, 1), a["cu_seqlens_q"],
                           a["cu_seqlens_k"], used, a["is_causal"], **a["window"])
    torch.testing.assert_close(got.reshape(B, Hq, 1, d), _naive_decode(q, k_cache, v_cache, used, window),
                               atol=1e-9, rtol=0)


def test_disabled_kernels_are_never_picked(monkeypatch, forced):
    """SUITE_DISABLE_KERNELS (set by perf_all.sh after a failed GPU check) takes a kernel out of service."""
    q, k, v = _qkv(3, 9)
    monkeypatch.setenv("SUITE_DISABLE_KERNELS", "torch-fa2, sdpa-flash,blocked")
    assert kernels.disabled_kernels() == {"torch-fa2", "sdpa-flash"}  # blocked, the reference, always serves
    forced("sdpa-flash")
    with pytest.raises(ValueError, match="disabled by SUITE_DISABLE_KERNELS"):
        kernels.attention(q[:, :, -1:], k, v, torch.tensor([8]))
    forced("blocked")
    kernels.attention(q, k, v, torch.tensor([6, 7, 8]), window=4)


cuda_fa2 = pytest.mark.skipif(not (torch.cuda.is_available() and kernels._fa2_available()),
                              reason="needs CUDA and aten::_flash_attention_forward (the CPU tests above cover the "
                                     "argument logic)")


@pytest.mark.gpu
@cuda_fa2
@pytest.mark.parametrize("Tq, Tk, window", [(64, 64, None), (64, 64, 16), (16, 80, None), (16, 80, 24), (1, 80, None),
                                            (1, 80, 5)])
def test_torch_fa2_on_gpu_matches_the_fp64_naive_loop(forced, Tq, Tk, window):
    g = torch.Generator().manual_seed(9)
    q = torch.randn(2, 4, Tq, 64, generator=g)
    k, v = torch.randn(2, 2, Tk, 64, generator=g), torch.randn(2, 2, Tk, 64, generator=g)
    q_index = torch.arange(Tk - Tq, Tk)
    forced("torch-fa2")
    dev = [x.cuda().bfloat16() for x in (q, k, v)]
    got = kernels.attention(*dev, q_index.cuda(), window).double().cpu()
    want = naive_attention(*[x.bfloat16().double() for x in (q, k, v)], q_index, window)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=0)


@pytest.mark.gpu
@cuda_fa2
@pytest.mark.parametrize("window", [None, 3])
def test_decode_attention_fa2_on_gpu_matches_the_fp64_naive_loop(window):
    q, k_cache, v_cache, used = _decode_case(64, 40, [33, 7])
    kernels.reset_usage()
    got = kernels.decode_attention(*[x.cuda().bfloat16() for x in (q, k_cache, v_cache)], used.cuda(), 36, window)
    assert kernels.kernels_used() == {"torch-fa2": 1}
    want = _naive_decode(*[x.bfloat16().double() for x in (q, k_cache, v_cache)], used, window)
    torch.testing.assert_close(got.double().cpu(), want, atol=2e-2, rtol=0)


def test_fa2_shape_rule_runs_without_cuda():
    """The torch-fa2 eligibility rule is plain Python: exercised here, not only on a GPU (the H200 run of
    913e214 found a NameError in it that no CPU test reached)."""
    q = torch.zeros(1, 2, 4, 16, dtype=torch.bfloat16)
    assert kernels.fa2_shape_problem(q, q) == ""
    assert "multiple of 8" in kernels.fa2_shape_problem(q[..., :12], q[..., :12])
    assert "one fp16/bf16 dtype" in kernels.fa2_shape_problem(q, q.float())


@pytest.mark.parametrize("Tq, Tk, window, masked", [(9, 9, None, False), (9, 9, 3, False), (4, 11, 3, False),
                                                    (1, 11, 4, False), (4, 11, None, True), (9, 9, 2, True)])
def test_int_q_index_is_the_tensor_form_bit_for_bit(monkeypatch, Tq, Tk, window, masked):
    """q_index as a host int s (queries at keys s .. s + Tq - 1, what a training step or prefill knows) gives the
    tensor form's output exactly, across several query blocks of the blocked path (a small block budget), keys
    trimmed by the window, GQA and padding; an int that puts a query past the keys is refused."""
    monkeypatch.setattr(kernels, "_BLOCK_ELEMENTS", 1)  # blocks of 16 queries: several blocks at Tq = 40 below
    g = torch.Generator().manual_seed(4)
    for B, Tq_, Tk_ in ((2, Tq, Tk), (1, 40, 45)):
        q = torch.randn(B, 4, Tq_, 8, generator=g)
        k, v = torch.randn(B, 2, Tk_, 8, generator=g), torch.randn(B, 2, Tk_, 8, generator=g)
        key_mask = (torch.rand(B, Tk_, generator=g) > 0.2) if masked else None
        if masked:
            key_mask[:, Tk_ - Tq_:] = True  # every query keeps its own key
        kernels.reset_usage()
        got = kernels.attention(q, k, v, Tk_ - Tq_, window, key_mask)
        want = kernels.attention(q, k, v, torch.arange(Tk_ - Tq_, Tk_), window, key_mask)
        assert torch.equal(got, want)
        assert kernels.kernels_used() == {"blocked": 2}
    with pytest.raises(ValueError, match=r"q_index=3 puts the 9 queries at keys 3\.\.11, outside the 11 keys"):
        kernels.attention(*_qkv(9, 11), 3)


def test_attention_under_autocast_runs_in_the_autocast_dtype():
    """Under autocast the kernels get q, k and v in the autocast dtype (as SDPA does), so a bf16 training step whose
    q/k came out of RoPE in fp32 can still use the bf16-only windowed kernels; the result equals the call on bf16
    inputs."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 40, 16, generator=g) for _ in range(3))
    for window in (None, 8):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = kernels.attention(q, k, v, 0, window=window)
        ref = kernels.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), 0, window=window)
        assert out.dtype == torch.bfloat16 and torch.equal(out, ref)
