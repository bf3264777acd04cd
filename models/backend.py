"""Attention kernels: the one module that knows about devices and kernel libraries.

Every attention call in the suite goes through :func:`attention`. It picks a kernel at run time
and records the choice, so every result row can say which kernel produced it
(:func:`describe`, :func:`kernels_used`).

Kernels, in order of preference:

* ``flash-attn`` (when importable, CUDA, no key padding): ``flash_attn_func`` with
  ``window_size=(w-1, 0)``; flash-attn aligns a short query block bottom-right, as Orthros needs.
* ``sdpa-flash`` (CUDA): torch SDPA for full causal self-attention (T_q == T_k, ``is_causal``)
  and for a single query per row over all keys (prefill's output token, decode).
* ``sdpa-flash-lse`` (CUDA, bf16/fp16): full causal attention of the *last* T_q of T_k > T_q positions (a
  context-parallel rank's chunk, a cached continuation): the flash kernel over the keys before the block (all
  visible) and over the block's own keys (causal), merged by their log-sum-exp.
* ``fla-window`` (CUDA, FLA importable): FLA's Triton ``parallel_attn(window_size=w)`` for
  the sliding window.
* ``blocked`` (any device, the CPU path): queries in blocks; each block sees only the key span it
  can reach, so sliding-window attention never builds a T x T matrix (128K tokens fit in memory).

Alignment trap: SDPA's ``is_causal`` with T_q != T_k aligns top-left. Queries here are given by
their absolute key index (``q_index``), never by their row in the query tensor, which is what the
output stream needs (Eq. 5: it attends keys j <= t at its *original* position t).
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

try:  # pragma: no cover - flash-attn cannot be installed on the CPU machines
    from flash_attn import flash_attn_func as _flash_attn_func
except Exception:  # ImportError, or a broken CUDA build
    _flash_attn_func = None

_fla_parallel_attn = None
_fla_checked = False

_USED: Counter = Counter()
_FORCE: str | None = None
_BLOCK_ELEMENTS = 1 << 24  # score-matrix elements per block in the blocked path


def _fla_window():
    """FLA's Triton window kernel, or None (FLA absent, or no CUDA)."""
    global _fla_parallel_attn, _fla_checked
    if not _fla_checked:
        _fla_checked = True
        try:
            from fla.ops.attn.parallel import parallel_attn

            _fla_parallel_attn = parallel_attn
        except Exception:
            _fla_parallel_attn = None
    return _fla_parallel_attn


KERNELS = ("flash-attn", "sdpa-flash", "sdpa-flash-lse", "fla-window", "blocked")  # auto-selection order on CUDA


def force_kernel(name: str | None) -> None:
    """Force one kernel of ``KERNELS`` for tests and GPU-vs-CPU checks; None restores auto.

    A forced kernel serves only calls it computes exactly: :func:`attention` raises ValueError (naming the
    kernel and the shapes) for any other call, it never falls back to another kernel.
    Raises ValueError for a name not in ``KERNELS``.
    """
    global _FORCE
    if name is not None and name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    _FORCE = name


def reset_usage() -> None:
    _USED.clear()


def kernels_used() -> dict[str, int]:
    """How many attention calls each kernel served since the last :func:`reset_usage`."""
    return dict(_USED)


def describe(device: str | torch.device = "cpu") -> str:
    """The kernel backend a run on ``device`` uses, for the ``backend`` provenance column.

    Returns e.g. ``"blocked-torch"`` on CPU, ``"flash-attn"`` or ``"sdpa-flash+fla-window"`` on CUDA.
    """
    if torch.device(device).type != "cuda":
        return "blocked-torch"
    if _flash_attn_func is not None:
        return "flash-attn"
    return "sdpa-flash+fla-window" if _fla_window() is not None else "sdpa-flash+blocked-window"


def _check(q, k, v, q_index, window, key_mask):
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(f"attention expects q [B,Hq,Tq,d], k=v [B,Hkv,Tk,d]; got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    B, Hq, Tq, d = q.shape
    if k.shape[0] != B or k.shape[3] != d or Hq % k.shape[1]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree in batch, head_dim or GQA grouping")
    if q_index.shape != (Tq,):
        raise ValueError(f"q_index must have shape ({Tq},), got {tuple(q_index.shape)}")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")
    if key_mask is not None and key_mask.shape != (B, k.shape[2]):
        raise ValueError(f"key_mask must have shape ({B}, {k.shape[2]}), got {tuple(key_mask.shape)}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_index: torch.Tensor,
              window: int | None = None, key_mask: torch.Tensor | None = None,
              scale: float | None = None) -> torch.Tensor:
    """Causal (optionally sliding-window) attention by absolute key index; Eqs. (4)-(5) of the paper.

    Query ``i`` sits at key index ``q_index[i]`` and attends keys ``j`` with
    ``q_index[i] - window < j <= q_index[i]`` (``window=None``: all ``j <= q_index[i]``).

    Args:
        q: ``[B, Hq, Tq, d]`` queries (fp32/bf16/fp16).
        k, v: ``[B, Hkv, Tk, d]`` keys and values; ``Hq`` a multiple of ``Hkv`` (GQA).
        q_index: ``[Tq]`` int64, ascending, each in ``[0, Tk)``.
        window: window length w (the token itself included), or None for full causal.
        key_mask: ``[B, Tk]`` bool, False for padding keys that nobody may read.
        scale: softmax scale, default ``1/sqrt(d)``.

    Returns:
        ``[B, Hq, Tq, d]`` in the dtype of ``q``.

    Raises:
        ValueError: on inconsistent shapes, ``window < 1``, or a kernel forced by :func:`force_kernel`
        that cannot compute this call.
    """
    _check(q, k, v, q_index, window, key_mask)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    lo = 0 if window is None else max(0, int(q_index[0]) - window + 1)
    if lo > 0:  # keys no query can reach (e.g. decode with a window): drop them before any kernel runs
        k, v, q_index = k[:, :, lo:], v[:, :, lo:], q_index - lo
        key_mask = None if key_mask is None else key_mask[:, lo:]
    if _FORCE is None:
        kernel = _pick(q, k, q_index, window, key_mask)
    else:
        kernel = _FORCE
        why = _cannot_serve(kernel, q, k, q_index, window, key_mask)
        if why:
            raise ValueError(f"forced kernel {kernel!r} cannot serve q {tuple(q.shape)}, k {tuple(k.shape)}, "
                             f"q_index {int(q_index[0])}..{int(q_index[-1])}, window {window}: {why}")
    Tq = q.shape[2]
    _USED[kernel] += 1
    if kernel == "flash-attn":
        out = _flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale,
                               causal=True, window_size=(window - 1 if window else -1, 0))
        return out.transpose(1, 2)
    if kernel == "sdpa-flash":
        return F.scaled_dot_product_attention(q, k, v, is_causal=Tq > 1, scale=scale,
                                              enable_gqa=q.shape[1] != k.shape[1])
    if kernel == "fla-window":
        out = _fla_window()(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=scale,
                            window_size=window)
        return out.transpose(1, 2)
    if kernel == "sdpa-flash-lse":
        return _last_block_causal(q, k, v, scale)
    return _blocked(q, k, v, q_index, window, key_mask, scale)


def _cannot_serve(kernel, q, k, q_index, window, key_mask) -> str:
    """Why ``kernel`` cannot compute this call exactly ("" when it can)."""
    if kernel == "blocked":
        return ""
    Tq, Tk = q.shape[2], k.shape[2]
    if key_mask is not None:
        return "it takes no key_mask (padding)"
    if int(q_index[-1]) != Tk - 1 or int(q_index[0]) != Tk - Tq:
        return "its causal mask is aligned for queries at the last Tq keys only"
    half = q.dtype in (torch.float16, torch.bfloat16)
    if kernel == "sdpa-flash":
        if window is not None and window < Tk:
            return "SDPA's is_causal has no sliding window"
        if Tq not in (1, Tk):
            return "SDPA's is_causal aligns top-left when Tq != Tk"
        return ""
    if kernel == "sdpa-flash-lse":
        if window is not None and window < Tk:
            return "it computes full causal attention only (no window)"
        return "" if q.device.type != "cuda" or half else "PyTorch's CUDA flash kernel needs fp16/bf16"
    if q.device.type != "cuda" or not half:
        return "it needs CUDA fp16/bf16 tensors"
    if kernel == "flash-attn":
        return "" if _flash_attn_func is not None else "flash_attn is not importable"
    if Tq != Tk:
        return "FLA's parallel_attn needs Tq == Tk"
    return "" if _fla_window() is not None else "FLA is not importable"


def _pick(q, k, q_index, window, key_mask) -> str:
    """The first kernel of ``KERNELS`` that serves the call exactly; always "blocked" off CUDA."""
    if q.device.type != "cuda":
        return "blocked"
    return next(name for name in KERNELS if not _cannot_serve(name, q, k, q_index, window, key_mask))


def _blocked(q, k, v, q_index, window, key_mask, scale):
    """Reference-grade path: query blocks over the key span they can reach; works on any device."""
    B, Hq, Tq, d = q.shape
    Hkv = k.shape[1]
    if Hq != Hkv:
        k = k.repeat_interleave(Hq // Hkv, dim=1)
        v = v.repeat_interleave(Hq // Hkv, dim=1)
    span = Tq + (window or k.shape[2])
    budget = _BLOCK_ELEMENTS * (16 if q.is_cuda else 1)
    block = max(16, min(Tq, budget // max(1, B * Hq * min(span, k.shape[2]))))
    neg = torch.finfo(q.dtype).min / 2
    outs = []
    for start in range(0, Tq, block):
        idx = q_index[start:start + block]
        lo = 0 if window is None else max(0, int(idx[0]) - window + 1)
        hi = int(idx[-1]) + 1
        keys = torch.arange(lo, hi, device=q.device)
        allowed = keys[None, :] <= idx[:, None]
        if window is not None:
            allowed &= keys[None, :] > idx[:, None] - window
        allowed = allowed[None, None]
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, lo:hi]
        bias = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed, neg)
        outs.append(F.scaled_dot_product_attention(q[:, :, start:start + block], k[:, :, lo:hi], v[:, :, lo:hi],
                                                   attn_mask=bias, scale=scale))
    return torch.cat(outs, dim=2)


def _flash_lse(q, k, v, causal: bool, scale: float):
    """Flash attention with its log-sum-exp: out [B, Hq, Tq, d] (dtype of q), lse [B, Hq, Tq] float32.

    ``causal`` aligns top-left (use it with Tq == Tk only). K/V heads are repeated to Hq (GQA).
    """
    if k.shape[1] != q.shape[1]:
        g = q.shape[1] // k.shape[1]
        k, v = (t.repeat_interleave(g, dim=1) for t in (k, v))
    if q.is_cuda:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)[:2]
    else:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    return out, lse[..., :q.shape[2]].float()


def _last_block_causal(q, k, v, scale):
    """Causal attention of queries at key positions Tk - Tq .. Tk - 1: every key before the block (no mask)
    and the block's own keys (causal), merged exactly by their log-sum-exp (in float32)."""
    Tq, Tk = q.shape[2], k.shape[2]
    start = Tk - Tq
    out, lse = _flash_lse(q, k[:, :, start:], v[:, :, start:], True, scale)
    if start == 0:
        return out
    out_pre, lse_pre = _flash_lse(q, k[:, :, :start], v[:, :, :start], False, scale)
    own = torch.sigmoid(lse - lse_pre)[..., None]  # exp(lse) / (exp(lse) + exp(lse_pre)), the block's share
    return torch.lerp(out_pre.float(), out.float(), own).to(q.dtype)
