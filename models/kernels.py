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
  the sliding window (T_q == T_k, and T * Hq * d < 2^31: the kernel's query offsets are int32). It is loaded
  through :mod:`models.fla_check`, which refuses an FLA version the suite was not checked against.
* ``torch-fa2`` (CUDA, fp16/bf16, head dim a multiple of 8 up to 256): the FlashAttention-2 kernels
  bundled with PyTorch, called through ``aten::_flash_attention_forward``. Its causal mask is aligned
  bottom-right (query i of T_q sits at key T_k - T_q + i), and ``window_size_left = w - 1``,
  ``window_size_right = 0`` give the sliding window; GQA is native. It serves every bottom-right aligned
  call: chunked prefill (T_q != T_k, with and without a window), a windowed single query (decode), and
  the full-length shapes the kernels above serve.
* ``sdpa-cudnn`` (CUDA): torch SDPA restricted to the cuDNN backend, for the same calls as
  ``sdpa-flash``. Never picked automatically (``torch-fa2`` comes first); :func:`prefer_kernels` or
  :func:`force_kernel` select it.
* ``blocked`` (any device, the CPU path): queries in blocks; each block sees only the key span it
  can reach, so sliding-window attention never builds a T x T matrix (128K tokens fit in memory).

:func:`prefer_kernels` reorders the automatic choice (e.g. ``torch-fa2`` before ``fla-window``); a
kernel is still used only for calls it computes exactly. The environment variable ``SUITE_DISABLE_KERNELS``
(comma list) takes kernels out of service, e.g. after a failed GPU correctness check.

Alignment trap: SDPA's ``is_causal`` with T_q != T_k aligns top-left. Queries here are given by
their absolute key index (``q_index``), never by their row in the query tensor, which is what the
output stream needs (Eq. 5: it attends keys j <= t at its *original* position t).

torch.compile: :func:`attention` traces without a graph break when ``q_index`` is an int (queries at consecutive
keys, known on the host: the model's base stream, and its output stream when the output positions are known on the
host, as in pretraining); the kernel choice and its usage count run while Dynamo traces (:func:`_select`).
"""
from __future__ import annotations

import functools
import math
import os
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import fla_check

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
    """FLA's Triton window kernel, or None (FLA absent, or no CUDA), loaded once through
    :func:`models.fla_check.window_kernel`, which raises RuntimeError for an FLA version the suite was not checked
    against (the kernel's call and its int32 offset limit, :func:`fla_offsets_overflow`, are FLA 0.6's)."""
    global _fla_parallel_attn, _fla_checked
    if not _fla_checked:
        _fla_parallel_attn = fla_check.window_kernel()
        _fla_checked = True
    return _fla_parallel_attn


KERNELS = ("flash-attn", "sdpa-flash", "sdpa-flash-lse", "fla-window", "torch-fa2", "sdpa-cudnn",
           "blocked")  # auto order on CUDA
_ORDER: tuple[str, ...] = KERNELS  # calls without an effective window
_ORDER_WINDOW: tuple[str, ...] = KERNELS  # calls whose window is shorter than the keys
_INT32 = 2**31  # FLA's parallel_attn computes query/output offsets (row * Hq * d) in int32


def fla_offsets_overflow(T: int, Hq: int, d: int) -> bool:
    """True when FLA 0.6's ``parallel_attn`` would overflow: it computes the offset of query/output row t as
    ``t * Hq * d`` in int32 (``o_q[:, None] * (HQ*K)`` in ``parallel_attn_fwd_kernel``), so rows at and past
    ``2^31 / (Hq * d)`` (524,288 at 32 heads x 128) are read from and written to wrong addresses."""
    return (T - 1) * Hq * d + d > _INT32 - 1


def _ordered(names) -> tuple[str, ...]:
    names = tuple(names or ())
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernel(s) {unknown}; known: {', '.join(KERNELS)}")
    return names + tuple(n for n in KERNELS if n not in names)


def prefer_kernels(full=None, window=None) -> None:
    """Reorder automatic selection: try the kernels ``full`` first for calls without an effective window
    (full causal, single query) and ``window`` first for sliding-window calls, then the rest in
    ``KERNELS`` order. None (both) restores the defaults. A preferred kernel still serves only the calls
    it computes exactly. Raises ValueError for an unknown name."""
    global _ORDER, _ORDER_WINDOW
    _ORDER, _ORDER_WINDOW = _ordered(full), _ordered(window)


def kernel_order(windowed: bool = False) -> tuple[str, ...]:
    """The current automatic selection order for full (default) or windowed calls (:func:`prefer_kernels`)."""
    return _ORDER_WINDOW if windowed else _ORDER


@functools.cache
def _fa2_available() -> bool:
    """True when this torch has ``aten::_flash_attention_forward`` with sliding-window arguments."""
    try:
        args = {a.name for a in torch.ops.aten._flash_attention_forward.default._schema.arguments}
    except (AttributeError, RuntimeError):
        return False
    return {"window_size_left", "window_size_right"} <= args


def window_start(i: int, window: int | None) -> int:
    """The first key position a query at position ``i`` reads: ``i - w + 1`` under a window of w tokens (the query's
    own included), never below 0; 0 for full causal attention (``window`` None)."""
    return 0 if window is None else max(0, i - window + 1)


def fa2_window_args(window: int | None, Tk: int) -> dict:
    """Keyword arguments of ``aten::_flash_attention_forward`` (with ``is_causal=True``) that restrict each
    query to its last ``window`` keys (the query's own key included), bottom-right aligned.

    FlashAttention-2's rule: query i of T_q attends key j iff
    ``i + Tk - Tq - window_size_left <= j <= i + Tk - Tq + window_size_right``; causal sets the right
    window to 0, so ``window_size_left = w - 1`` gives keys ``t - w + 1 .. t`` with ``t = i + Tk - Tq``.
    A window of None, or one covering all ``Tk`` keys, adds nothing (plain bottom-right causal).
    """
    if window is None or window >= Tk:
        return {}
    return {"window_size_left": int(window) - 1, "window_size_right": 0}


def fa2_shape_problem(q: torch.Tensor, k: torch.Tensor) -> str:
    """Why FlashAttention-2 cannot take q [B, Hq, Tq, d] and k (= v's shape and dtype) [B, Hkv, Tk, d]:
    "" when it can (one dtype for q and k, head dim a multiple of 8 up to 256)."""
    return _fa2_shape_problem(q.shape[-1], q.dtype, k.dtype)


def _fa2_shape_problem(d: int, q_dtype: torch.dtype, k_dtype: torch.dtype) -> str:
    if d % 8 or d > 256 or k_dtype != q_dtype:
        return "FlashAttention-2 needs one fp16/bf16 dtype and a head dim that is a multiple of 8, at most 256"
    return ""


def _fa2(q, k, v, window, scale):
    """FlashAttention-2 bundled with torch: q [B, Hq, Tq, d], k/v [B, Hkv, Tk, d] -> [B, Hq, Tq, d]."""
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    Tq, Tk = q.shape[2], k.shape[2]
    out = torch.ops.aten._flash_attention_forward(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, None, Tq, Tk, 0.0, True, False,
        scale=scale, **fa2_window_args(window, Tk))[0]
    return out.transpose(1, 2)


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
    """How many attention calls each kernel served since the last :func:`reset_usage`.

    Under ``torch.compile`` a call of :func:`attention` is counted when Dynamo traces it, where its kernel is chosen;
    the compiled graph then runs that kernel on every call without counting it again (:func:`_select`)."""
    return dict(_USED)


def describe(device: str | torch.device = "cpu") -> str:
    """The kernel backend a run on ``device`` uses, for the ``backend`` provenance column.

    Returns e.g. ``"blocked-torch"`` on CPU, ``"flash-attn"`` or ``"sdpa-flash+fla-window"`` on CUDA.
    """
    if torch.device(device).type != "cuda":
        return "blocked-torch"
    if _flash_attn_func is not None:
        return "flash-attn"
    base = "sdpa-flash+fla-window" if _fla_window() is not None else "sdpa-flash+blocked-window"
    return base + ("+torch-fa2" if _fa2_available() else "")


def _check(q, k, v, q_index, window, key_mask):
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(f"attention expects q [B,Hq,Tq,d], k=v [B,Hkv,Tk,d]; got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    B, Hq, Tq, d = q.shape
    if k.shape[0] != B or k.shape[3] != d or Hq % k.shape[1]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree in batch, head_dim or GQA grouping")
    if isinstance(q_index, int):
        if not 0 <= q_index <= k.shape[2] - Tq:
            raise ValueError(f"q_index={q_index} puts the {Tq} queries at keys {q_index}..{q_index + Tq - 1}, "
                             f"outside the {k.shape[2]} keys")
    elif q_index.shape != (Tq,):
        raise ValueError(f"q_index must have shape ({Tq},), got {tuple(q_index.shape)}")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")
    if key_mask is not None and key_mask.shape != (B, k.shape[2]):
        raise ValueError(f"key_mask must have shape ({B}, {k.shape[2]}), got {tuple(key_mask.shape)}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_index: torch.Tensor | int,
              window: int | None = None, key_mask: torch.Tensor | None = None,
              scale: float | None = None) -> torch.Tensor:
    """Causal (optionally sliding-window) attention by absolute key index; Eqs. (4)-(5) of the paper.

    Query ``i`` sits at key index ``q_index[i]`` and attends keys ``j`` with
    ``q_index[i] - window < j <= q_index[i]`` (``window=None``: all ``j <= q_index[i]``).

    Args:
        q: ``[B, Hq, Tq, d]`` queries (fp32/bf16/fp16).
        k, v: ``[B, Hkv, Tk, d]`` keys and values; ``Hq`` a multiple of ``Hkv`` (GQA).
        q_index: ``[Tq]`` int64, ascending, each in ``[0, Tk)``; or an int s, for queries known on the host to sit
            at keys ``s .. s + Tq - 1`` (a training step, a prefill chunk). The int form reads nothing from the
            device: no host synchronisation, and ``torch.compile`` traces the call without a graph break. The
            tensor form reads its first and last entries on the host.
        window: window length w (the token itself included), or None for full causal.
        key_mask: ``[B, Tk]`` bool, False for padding keys that nobody may read.
        scale: softmax scale, default ``1/sqrt(d)``.

    Returns:
        ``[B, Hq, Tq, d]`` in the dtype of ``q``; under autocast, in the autocast dtype: q, k and v are cast to it
        first, as autocast does for SDPA, so that a bf16 training step can use the bf16-only windowed kernels.

    Raises:
        ValueError: on inconsistent shapes, an int ``q_index`` that puts a query past the keys, ``window < 1``, or a
        kernel forced by :func:`force_kernel` that cannot compute this call.

    The kernel is chosen from host values only (devices, dtypes, shapes, the first and last query index, window,
    key_mask or not) by :func:`_select`; under ``torch.compile`` that choice is made once, when Dynamo traces the
    call, and holds for the compiled graph (:func:`force_kernel`, :func:`prefer_kernels` and
    ``SUITE_DISABLE_KERNELS`` apply to calls traced after them: ``torch._dynamo.reset()`` re-traces). The choice
    needs concrete sizes: compile with ``dynamic=False`` where shapes change between calls (a symbolic size makes
    Dynamo refuse :func:`_select`: "assume_constant_result argument conversion failed").
    """
    _check(q, k, v, q_index, window, key_mask)
    if torch.is_autocast_enabled(q.device.type):  # fp32 q/k (RoPE's fp32 tables) would rule out fa2 and FLA
        dt = torch.get_autocast_dtype(q.device.type)
        q, k, v = q.to(dt), k.to(dt), v.to(dt)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    Tq = q.shape[2]
    if isinstance(q_index, int):  # the first and last query's key index, on the host
        first, last = q_index, q_index + Tq - 1
    else:
        first, last = int(q_index[0]), int(q_index[-1])
    lo = window_start(first, window)
    if lo > 0:  # keys no query can reach (e.g. decode with a window): drop them before any kernel runs
        k, v, key_mask = k[:, :, lo:], v[:, :, lo:], None if key_mask is None else key_mask[:, lo:]
        q_index, first, last = q_index - lo, first - lo, last - lo  # an int stays an int
    kernel = _select(q.device.type, q.dtype, k.dtype, tuple(q.shape), tuple(k.shape), first, last, window,
                     key_mask is not None)
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
    if kernel == "torch-fa2":
        return _fa2(q, k, v, window, scale)
    if kernel == "sdpa-cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=Tq > 1, scale=scale,
                                                  enable_gqa=q.shape[1] != k.shape[1])
    return _blocked(q, k, v, q_index, window, key_mask, scale)


@dataclass(frozen=True)
class _Call:
    """What decides which kernel may serve an :func:`attention` call: the device, q's and k's dtypes and shapes
    (``[B, Hq, Tq, d]``, ``[B, Hkv, Tk, d]``), the first and last query's key index, the window, and whether a key
    mask is given."""

    device_type: str
    q_dtype: torch.dtype
    k_dtype: torch.dtype
    q_shape: tuple[int, int, int, int]
    k_shape: tuple[int, int, int, int]
    first: int
    last: int
    window: int | None
    masked: bool


@torch.compiler.assume_constant_result
def _select(device_type: str, q_dtype: torch.dtype, k_dtype: torch.dtype, q_shape: tuple, k_shape: tuple, first: int,
            last: int, window: int | None, masked: bool) -> str:
    """The kernel of one :func:`attention` call (after trimming unreachable keys), recorded in :func:`kernels_used`:
    the forced one (:func:`force_kernel`; ValueError when it cannot serve the call) or the first of the current
    order that serves it (:func:`_pick`). ``first``, ``last``: the first and last query's key index.

    A host decision on host values only: eager, it runs on every call; under ``torch.compile`` Dynamo runs it while
    tracing (``assume_constant_result``) and keeps its answer as a constant of the graph, so neither the choice nor
    the usage count (a mutation of a module global) is traced, and nothing here becomes a guard."""
    call = _Call(device_type, q_dtype, k_dtype, q_shape, k_shape, first, last, window, masked)
    if _FORCE is None:
        kernel = _pick(call)
    else:
        kernel = _FORCE
        why = _cannot_serve(kernel, call)
        if why:
            raise ValueError(f"forced kernel {kernel!r} cannot serve q {call.q_shape}, k {call.k_shape}, "
                             f"q_index {first}..{last}, window {window}: {why}")
    _USED[kernel] += 1
    return kernel


def disabled_kernels() -> set[str]:
    """Kernels listed in the environment variable ``SUITE_DISABLE_KERNELS`` (never ``blocked``)."""
    return {k.strip() for k in os.environ.get("SUITE_DISABLE_KERNELS", "").split(",") if k.strip()} - {"blocked"}


def _cannot_serve(kernel: str, call: _Call) -> str:
    """Why ``kernel`` cannot compute this call exactly ("" when it can)."""
    if kernel == "blocked":
        return ""
    if kernel in disabled_kernels():
        return "it is disabled by SUITE_DISABLE_KERNELS"
    Tq, Tk, window = call.q_shape[2], call.k_shape[2], call.window
    if call.masked:
        return "it takes no key_mask (padding)"
    if call.last != Tk - 1 or call.first != Tk - Tq:
        return "its causal mask is aligned for queries at the last Tq keys only"
    half = call.q_dtype in (torch.float16, torch.bfloat16)
    cuda = call.device_type == "cuda"
    if kernel in ("sdpa-flash", "sdpa-cudnn"):
        if window is not None and window < Tk:
            return "SDPA's is_causal has no sliding window"
        if Tq not in (1, Tk):
            return "SDPA's is_causal aligns top-left when Tq != Tk"
        if kernel == "sdpa-flash":
            return ""
    if kernel == "sdpa-flash-lse":
        if window is not None and window < Tk:
            return "it computes full causal attention only (no window)"
        return "" if not cuda or half else "PyTorch's CUDA flash kernel needs fp16/bf16"
    if not cuda or not half:
        return "it needs CUDA fp16/bf16 tensors"
    if kernel == "sdpa-cudnn":
        return ""
    if kernel == "flash-attn":
        return "" if _flash_attn_func is not None else "flash_attn is not importable"
    if kernel == "torch-fa2":
        return _fa2_shape_problem(call.q_shape[3], call.q_dtype, call.k_dtype) or \
            ("" if _fa2_available() else "this torch has no aten::_flash_attention_forward with window arguments")
    if Tq != Tk:
        return "FLA's parallel_attn needs Tq == Tk"
    if fla_offsets_overflow(Tq, call.q_shape[1], call.q_shape[3]):
        return "FLA's parallel_attn indexes queries with int32 offsets (T * Hq * d >= 2^31)"
    return "" if _fla_window() is not None else "FLA is not importable"


def _pick(call: _Call) -> str:
    """The first kernel of the current order that serves the call exactly; always "blocked" off CUDA."""
    if call.device_type != "cuda":
        return "blocked"
    order = _ORDER_WINDOW if call.window is not None and call.window < call.k_shape[2] else _ORDER
    return next(name for name in order if not _cannot_serve(name, call))


def _blocked(q, k, v, q_index, window, key_mask, scale):
    """Reference-grade path: query blocks over the key span they can reach; works on any device. ``q_index``: a
    ``[Tq]`` tensor (each block's key span read from it on the host) or an int s (queries at keys s .. s + Tq - 1,
    the spans computed on the host)."""
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
        if isinstance(q_index, int):
            first, stop = q_index + start, q_index + min(start + block, Tq)
            idx = torch.arange(first, stop, device=q.device)
            lo, hi = window_start(first, window), stop
        else:
            idx = q_index[start:start + block]
            lo = window_start(int(idx[0]), window)
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


_CU_SEQLENS: dict = {}  # (B, step, device) -> int32 [B + 1] offsets, built once (outside graph capture)


def _cu_seqlens(B: int, step: int, device) -> torch.Tensor:
    key = (B, step, str(device))
    if key not in _CU_SEQLENS:
        _CU_SEQLENS[key] = torch.arange(0, (B + 1) * step, step, dtype=torch.int32, device=device)
    return _CU_SEQLENS[key]


def fa2_decode_args(B: int, cap: int, L: int, window: int | None, device) -> dict:
    """Arguments of FlashAttention-2's variable-length forward for :func:`decode_attention` (besides q, k, v,
    scale and ``seqused_k = used``): the B queries packed one per sequence (``cu_seqlens_q = 0, 1, .., B``),
    the caches flattened to ``[B * cap, Hkv, d]`` with sequence b starting at row ``b * cap``
    (``cu_seqlens_k = 0, cap, .., B * cap``), ``max_q = 1``, ``max_k = L``, no causal flag (one query per
    sequence sits at its last valid key, so causal adds nothing), and ``window_size_left = w - 1``,
    ``window_size_right = 0`` for a window w < L. FA2 reads ``seqused_k[b]`` keys of sequence b and aligns its
    query bottom-right to them, so the query sees keys ``used[b] - w .. used[b] - 1``."""
    return {"cu_seqlens_q": _cu_seqlens(B, 1, device), "cu_seqlens_k": _cu_seqlens(B, cap, device), "max_q": 1,
            "max_k": L, "is_causal": False,
            "window": {} if window is None or window >= L else {"window_size_left": int(window) - 1,
                                                                "window_size_right": 0}}


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, used: torch.Tensor, L: int,
                     window: int | None = None, scale: float | None = None) -> torch.Tensor:
    """One new query per sequence over the first ``L`` slots of a token-major KV cache (a decode step).

    Static shapes and no host synchronisation, so a CUDA graph can capture it; which keys are valid comes
    from the device tensor ``used``.

    Args:
        q: ``[B, Hq, 1, d]`` the new token's query (fp32/bf16/fp16).
        k_cache, v_cache: ``[B, capacity, Hkv, d]`` token-major caches in q's dtype, ``capacity >= L``.
        used: ``[B]`` int32 on q's device; sequence b's valid keys are ``0 .. used[b] - 1`` and its query sits
            at key ``used[b] - 1`` (its own key already written). ``1 <= used[b] <= L``.
        L: host int bounding ``used`` (the key-length bucket); slots ``>= L`` are never read.
        window: attend only keys ``used[b] - window .. used[b] - 1`` (None: all valid keys).
        scale: softmax scale, default ``1/sqrt(d)``.

    Returns:
        ``[B, Hq, 1, d]`` in q's dtype.

    Kernels: ``torch-fa2`` (CUDA fp16/bf16: FlashAttention-2's variable-length forward with ``seqused_k``,
    split-KV for GQA without a window; bottom-right aligned to ``used[b]``), else ``blocked`` (a masked
    matmul over the L slots, softmax in fp32; slots past ``used`` get weight exactly 0 but are read, so they
    must hold finite values). A kernel forced by :func:`force_kernel` that cannot serve the call raises.

    Raises:
        ValueError: on inconsistent shapes, ``L`` outside ``[1, capacity]``, ``window < 1``.
    """
    if q.dim() != 4 or q.shape[2] != 1 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"decode_attention expects q [B,Hq,1,d], caches [B,capacity,Hkv,d]; got q {tuple(q.shape)}, "
                         f"k {tuple(k_cache.shape)}, v {tuple(v_cache.shape)}")
    B, Hq, _, d = q.shape
    cap, Hkv = k_cache.shape[1], k_cache.shape[2]
    if k_cache.shape[0] != B or k_cache.shape[3] != d or Hq % Hkv:
        raise ValueError(f"q {tuple(q.shape)} and cache {tuple(k_cache.shape)} disagree in batch, head_dim or GQA")
    if used.shape != (B,):
        raise ValueError(f"used must have shape ({B},), got {tuple(used.shape)}")
    if not 1 <= L <= cap:
        raise ValueError(f"L={L} must be in [1, capacity={cap}]")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    fa2_ok = (q.is_cuda and q.dtype in (torch.float16, torch.bfloat16) and k_cache.dtype == q.dtype
              and v_cache.dtype == q.dtype and d % 8 == 0 and d <= 256 and k_cache.is_contiguous()
              and v_cache.is_contiguous() and _fa2_available() and "torch-fa2" not in disabled_kernels())
    kernel = "torch-fa2" if fa2_ok else "blocked"
    if _FORCE is not None and _FORCE != kernel:
        raise ValueError(f"forced kernel {_FORCE!r} cannot serve decode_attention (q {tuple(q.shape)}, "
                         f"cache {tuple(k_cache.shape)}, {q.dtype} on {q.device}); it would use {kernel!r}")
    _USED[kernel] += 1
    if kernel == "torch-fa2":
        a = fa2_decode_args(B, cap, L, window, q.device)
        out = torch.ops.aten._flash_attention_forward(
            q.reshape(B, Hq, d), k_cache.flatten(0, 1), v_cache.flatten(0, 1), a["cu_seqlens_q"], a["cu_seqlens_k"],
            a["max_q"], a["max_k"], 0.0, a["is_causal"], False, scale=scale, seqused_k=used, **a["window"])[0]
        return out.reshape(B, Hq, 1, d)
    keys = torch.arange(L, device=q.device)
    valid = keys[None, :] < used[:, None].long()
    if window is not None:
        valid &= keys[None, :] >= used[:, None].long() - window
    k = k_cache[:, :L].transpose(1, 2)  # [B, Hkv, L, d]
    v = v_cache[:, :L].transpose(1, 2)
    qg = (q * scale).reshape(B, Hkv, Hq // Hkv, d)  # query head h reads KV head h // G
    acc = torch.promote_types(q.dtype, torch.float32)  # fp32 for bf16 caches; fp64 stays fp64
    scores = torch.matmul(qg, k.transpose(-1, -2)).to(acc)  # [B, Hkv, G, L]
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return torch.matmul(probs, v).reshape(B, Hq, 1, d)


def decode_attention_split(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           masked_out: torch.Tensor) -> torch.Tensor:
    """The decode engine's matmul route (static shapes, CUDA-graph safe): q [B, H, 1, d] over keys k [B, Hkv, L, d];
    bool ``masked_out`` [L] drops keys.

    v is either [B, Hkv, L, d] or chunk-major [S, B, Hkv, c, d] with S * c = L; the latter splits the
    value product over the S chunks (split-K) and sums the partial products in fp32 (fp64 for fp64 inputs). Scores are
    rounded to the cache dtype before the softmax (computed in fp32 on CUDA). Returns [B, H, 1, d].
    """
    B, H, _, d = q.shape
    Hkv = k.shape[1]
    qg = (q * (1.0 / math.sqrt(d))).reshape(B, Hkv, H // Hkv, d)  # query head h reads KV head h // G (GQA)
    scores = torch.matmul(qg, k.transpose(-1, -2))  # [B, Hkv, G, L]
    scores.masked_fill_(masked_out, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if v.dim() == 5:
        S, c = v.shape[0], v.shape[3]
        parts = torch.matmul(probs.view(B, Hkv, -1, S, c).permute(3, 0, 1, 2, 4), v)  # [S, B, Hkv, G, d]
        out = parts.sum(0, dtype=torch.promote_types(v.dtype, torch.float32))  # fp64 stays fp64
    else:
        out = torch.matmul(probs, v)
    return out.to(q.dtype).reshape(B, H, 1, d)
