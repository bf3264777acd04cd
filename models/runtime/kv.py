"""K/V stores of the inference runtime: what a prefill writes and reads back, per layer.

* :class:`DenseKV`: ``[B, Hkv, T, d]`` in the model dtype (the layout of ``SuiteCache``), or stored in bf16 under a
  float32 model;
* :class:`FP8KV`: float8_e4m3fn with one fp32 scale per (KV head, block of tokens), for a 1M-token prefill;
* :class:`StaticKV`: the decode engine's preallocated cache (:mod:`models.runtime.decode`), token-major for
  FlashAttention-2 decode or K head-major with V chunk-major for the split-K matmul decode.

Each has ``write(layer, start, k, v)`` (returns k, v as a reader will see them) and ``read(layer, lo, hi)``, k and v
``[B, Hkv, n, d]``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn


class DenseKV:
    """K/V cache per layer ``[B, Hkv, T, d]`` (the layout of ``SuiteCache``), stored in ``store_dtype`` (default: the
    model dtype ``dtype``) and read back in ``dtype``: ``store_dtype=torch.bfloat16`` under a float32 model is a bf16
    cache whose values readers see rounded to bf16."""

    kind = "dense"

    def __init__(self, n_layers: int, B: int, Hkv: int, T: int, d: int, dtype, device, store_dtype=None):
        store = store_dtype or dtype
        self.dtype = dtype
        self.k = [torch.empty(B, Hkv, T, d, dtype=store, device=device) for _ in range(n_layers)]
        self.v = [torch.empty(B, Hkv, T, d, dtype=store, device=device) for _ in range(n_layers)]

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Store k, v ``[B, Hkv, n, d]`` at positions ``start ..``; returns them as a reader will see them."""
        n = k.shape[2]
        self.k[layer][:, :, start:start + n].copy_(k)
        self.v[layer][:, :, start:start + n].copy_(v)
        return self.read(layer, start, start + n)

    def read(self, layer: int, lo: int, hi: int):
        """Views of the store in the model dtype (copies when the store holds another dtype)."""
        return self.k[layer][:, :, lo:hi].to(self.dtype), self.v[layer][:, :, lo:hi].to(self.dtype)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


def fp8_quantize(x: torch.Tensor, block: int):
    """x ``[B, H, n, d]`` -> (float8_e4m3fn ``[B, H, n, d]``, fp32 scales ``[B, H, ceil(n / block)]``).

    One scale per (head, block of ``block`` tokens): ``max|x| / 448`` over the block (floored at 1e-12), so
    each block uses the full e4m3 range; values are divided by it, clamped to +-448 and rounded to e4m3.
    """
    B, H, n, d = x.shape
    nb = -(-n // block)
    xf = x.float()
    if nb * block != n:
        xf = F.pad(xf, (0, 0, 0, nb * block - n))
    xb = xf.view(B, H, nb, block, d)
    scale = (xb.abs().amax(dim=(3, 4)) / FP8_MAX).clamp_min(1e-12)
    x8 = (xb / scale[..., None, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return x8.view(B, H, nb * block, d)[:, :, :n], scale


def fp8_dequantize(x8: torch.Tensor, scale: torch.Tensor, block: int, dtype) -> torch.Tensor:
    """Inverse of :func:`fp8_quantize` for tokens starting at a block boundary: ``[B, H, n, d]`` in ``dtype``."""
    B, H, n, d = x8.shape
    nb = -(-n // block)
    xf = x8.float()
    if nb * block != n:
        xf = F.pad(xf, (0, 0, 0, nb * block - n))
    out = xf.view(B, H, nb, block, d) * scale[:, :, :nb, None, None]
    return out.view(B, H, nb * block, d)[:, :, :n].to(dtype)


class FP8KV:
    """K/V cache in float8_e4m3fn with one fp32 scale per (KV head, block of ``block`` tokens), per layer.

    Writes must start at block boundaries (prefill chunks are multiples of ``block``). Readers get
    dequantized copies in ``dtype``, read ``span`` tokens at a time (bounded temporaries at 1M tokens).
    """

    kind = "fp8"

    def __init__(self, n_layers: int, B: int, Hkv: int, T: int, d: int, dtype, device, block: int = 4096,
                 span: int | None = None):
        if block < 1:
            raise ValueError(f"FP8KV: block={block} must be >= 1")
        span = span if span is not None else max(block, 65536 // block * block)  # ~64K tokens, whole blocks
        if span % block:
            raise ValueError(f"FP8KV: block={block} must divide span={span}")
        nb = -(-T // block)
        self.block, self.span, self.dtype = block, span, dtype
        self.k = [torch.empty(B, Hkv, T, d, dtype=FP8, device=device) for _ in range(n_layers)]
        self.v = [torch.empty(B, Hkv, T, d, dtype=FP8, device=device) for _ in range(n_layers)]
        self.ks = [torch.empty(B, Hkv, nb, dtype=torch.float32, device=device) for _ in range(n_layers)]
        self.vs = [torch.empty(B, Hkv, nb, dtype=torch.float32, device=device) for _ in range(n_layers)]

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        if start % self.block:
            raise ValueError(f"FP8KV.write at {start}: writes must start at a multiple of block={self.block}")
        n, b0 = k.shape[2], start // self.block
        out = []
        for t, store, scales in ((k, self.k, self.ks), (v, self.v, self.vs)):
            t8, s = fp8_quantize(t, self.block)
            store[layer][:, :, start:start + n].copy_(t8)
            scales[layer][:, :, b0:b0 + s.shape[2]].copy_(s)
            out.append(fp8_dequantize(t8, s, self.block, self.dtype))
        return out[0], out[1]

    def read(self, layer: int, lo: int, hi: int):
        B, Hkv, _, d = self.k[layer].shape
        out = []
        for store, scales in ((self.k, self.ks), (self.v, self.vs)):
            buf = torch.empty(B, Hkv, hi - lo, d, dtype=self.dtype, device=store[layer].device)
            first = lo // self.block * self.block
            for s in range(first, hi, self.span):
                e = min(s + self.span, hi)
                part = fp8_dequantize(store[layer][:, :, s:e], scales[layer][:, :, s // self.block:],
                                      self.block, self.dtype)
                a = max(s, lo)
                buf[:, :, a - lo:e - lo].copy_(part[:, :, a - s:])
            out.append(buf)
        return out[0], out[1]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v + self.ks + self.vs)


class StaticKV:
    """The decode engine's K/V cache, preallocated for ``capacity`` tokens; None for layers without attention.

    ``layout="fa2"``: K and V token-major, ``[B, capacity, Hkv, d]`` (what FlashAttention-2's decode reads).
    ``layout="matmul"``: K ``[B, Hkv, capacity, d]`` and V chunk-major ``[capacity / chunk, B, Hkv, chunk, d]``, so
    the first S chunks are one uniformly strided batch for the split-K value product (no copy of V).
    Slots past the current length hold zeros (:meth:`zero_tail`), so a masked key contributes exactly 0.
    """

    def __init__(self, attention: list[bool], B: int, Hkv: int, capacity: int, d: int, dtype, device,
                 layout: str = "matmul", chunk: int = 1024):
        if layout not in ("matmul", "fa2"):
            raise ValueError(f"layout must be 'matmul' or 'fa2', got {layout!r}")
        self.layout, self.chunk = layout, chunk
        if layout == "fa2":
            self.k = [torch.zeros(B, capacity, Hkv, d, device=device, dtype=dtype) if a else None for a in attention]
            self.v = [torch.zeros_like(t) if t is not None else None for t in self.k]
        else:
            self.k = [torch.zeros(B, Hkv, capacity, d, device=device, dtype=dtype) if a else None for a in attention]
            self.v = [torch.zeros(capacity // chunk, B, Hkv, chunk, d, device=device, dtype=dtype) if a else None
                      for a in attention]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)

    def write(self, i: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v ``[B, Hkv, n, d]`` at positions ``start .. start + n - 1`` of layer i; returns them."""
        n = k.shape[2]
        if self.layout == "fa2":
            self.k[i][:, start:start + n].copy_(k.transpose(1, 2))
            self.v[i][:, start:start + n].copy_(v.transpose(1, 2))
            return k, v
        self.k[i][:, :, start:start + n].copy_(k)
        c, p = self.chunk, start
        while p < start + n:  # V is chunk-major: one copy per c-chunk the range touches
            e = min((p // c + 1) * c, start + n)
            self.v[i][p // c, :, :, p % c:p % c + (e - p)].copy_(v[:, :, p - start:e - start])
            p = e
        return k, v

    def read(self, i: int, lo: int, hi: int):
        """Layer i's k, v at positions ``lo .. hi - 1`` as ``[B, Hkv, hi - lo, d]`` (views, or a copy of chunked V)."""
        if self.layout == "fa2":
            return self.k[i][:, lo:hi].transpose(1, 2), self.v[i][:, lo:hi].transpose(1, 2)
        c = self.chunk
        c0, c1 = lo // c, -(-hi // c)
        v = self.v[i][c0:c1].permute(1, 2, 0, 3, 4).flatten(2, 3)
        return self.k[i][:, :, lo:hi], v[:, :, lo - c0 * c:hi - c0 * c]

    def zero_tail(self, i: int, T: int) -> None:
        """Zero layer i's slots from position T on (masked keys must hold finite values)."""
        if self.layout == "fa2":
            self.k[i][:, T:].zero_()
            self.v[i][:, T:].zero_()
            return
        self.k[i][:, :, T:].zero_()
        c = self.chunk
        if T % c:
            self.v[i][T // c, :, :, T % c:].zero_()
        self.v[i][-(-T // c):].zero_()
