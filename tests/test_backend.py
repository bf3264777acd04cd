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
