"""Fused element-wise work for the GPU benchmarks: opt-in building blocks; the models' own forward is untouched.

A Transformer / Orthros layer spends its memory traffic outside the GEMMs and the attention kernel in
norms, RoPE, the scale-offset, the SwiGLU gate and the residual adds (about 0.9 s of Orthros' 3.6 s
prefill at 128K on an H200). This module regroups one layer's math into two functions around the
attention call and lets ``torch.compile`` (Inductor) fuse each into a few kernels:

* :func:`make_attn_in`: RMSNorm -> one fused QKV GEMM -> q/k RMSNorm -> scale-offset -> RoPE, giving
  q ``[B, H, R, d]`` and k, v ``[B, Hkv, T, d]`` (views whose memory is token-major, what FlashAttention
  and FLA read without a copy);
* :func:`make_attn_out` (``o_proj`` -> residual -> RMSNorm -> one fused gate/up GEMM -> SiLU * up ->
  down -> residual) and :func:`make_mlp_res` (the same without ``o_proj``, for recurrent layers).

The math is the model's (same ops, same order: ``F.rms_norm``, ``alpha * q + beta`` before RoPE,
rotate-half RoPE, SiLU(gate) * up): the scale-offset and RoPE are the model's own functions
(:func:`models.attention.two_stream_scale_offset`, :func:`models.backbone.apply_rope_token_major`). What is this
module's own: the Q/K/V and gate/up GEMMs run as one GEMM each over weights that :func:`fused_weight`
concatenates *in place* (the module weights become row slices of one tensor, so no memory is added and later
``load_state_dict`` calls still reach them), the functions take the weights as arguments (one compiled graph serves
every layer), and RoPE is applied token-major before the head-major view (:meth:`models.attention.Attention.attend`
rotates head-major views), so q, k, v keep the token-major memory the kernels read without a copy.

:class:`PrefillRunner` runs a layer-major prefill with these functions, optionally in row chunks (each
chunk's attention is bottom-right aligned over the keys it can reach: the window halo, or every earlier
key), with the K/V cache kept in the model dtype (:class:`DenseKV`) or in FP8 (:class:`FP8KV`, e4m3 with
one fp32 scale per (KV head, block of tokens)). Attention goes through :mod:`models.kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models import kernels
from models.attention import two_stream_scale_offset
from models.backbone import apply_rope_token_major, rope_cos_sin, rope_frequencies

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn


# ----------------------------------------------------------------------------------------------------------- weights

def fused_weight(owner: nn.Module, names: tuple[str, ...]) -> torch.Tensor:
    """One ``[sum(out_features), in_features]`` tensor whose row slices are the weights of the bias-free
    ``nn.Linear`` children ``names`` of ``owner`` (e.g. ``("q_proj", "k_proj", "v_proj")``).

    The first call copies the weights into the new tensor and rebinds each Linear's weight as its slice
    (values unchanged, no extra memory once the old tensors are freed); later calls return the same tensor
    while the slices are still in place. Raises ValueError for a Linear with a bias or mismatched inputs.
    """
    key = "_suite_fused_" + "_".join(names)
    lins = [getattr(owner, n) for n in names]
    big = owner.__dict__.get(key)
    if big is not None and _are_slices(big, [lin.weight for lin in lins]):
        return big
    if any(lin.bias is not None for lin in lins):
        raise ValueError(f"fused_weight: {names} of {type(owner).__name__} have biases; only bias-free Linears fuse")
    if len({lin.weight.shape[1] for lin in lins}) != 1:
        raise ValueError(f"fused_weight: {names} have different input widths")
    with torch.inference_mode(False), torch.no_grad():
        big = torch.cat([lin.weight.detach() for lin in lins], 0)
        offset = 0
        for lin in lins:
            n = lin.weight.shape[0]
            lin.weight = nn.Parameter(big[offset:offset + n], requires_grad=lin.weight.requires_grad)
            offset += n
    owner.__dict__[key] = big  # a plain attribute: not a parameter, not in state_dict
    return big


def _are_slices(big: torch.Tensor, weights: list[torch.Tensor]) -> bool:
    offset = 0
    for w in weights:
        if w.data_ptr() != big[offset:].data_ptr() or w.shape[1] != big.shape[1] or not w.is_contiguous():
            return False
        offset += w.shape[0]
    return offset == big.shape[0]


@dataclass
class AttnWeights:
    """The tensors one attention layer's fused functions read (views of the model's parameters)."""

    ln1: torch.Tensor
    qkv: torch.Tensor  # [(H + 2 Hkv) d, D]
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    alpha: torch.Tensor | None  # [H, d] base-stream scale-offset (None: none)
    beta: torch.Tensor | None
    alpha_out: torch.Tensor | None  # output stream
    beta_out: torch.Tensor | None
    o: torch.Tensor
    mlp: "MLPWeights"
    window: int | None


@dataclass
class MLPWeights:
    ln2: torch.Tensor
    gate_up: torch.Tensor  # [2 F, D]
    down: torch.Tensor


def mlp_weights(layer) -> MLPWeights:
    return MLPWeights(layer.post_attention_layernorm.weight, fused_weight(layer.mlp, ("gate_proj", "up_proj")),
                      layer.mlp.down_proj.weight)


def attn_weights(layer) -> AttnWeights:
    """Fused weights of a :class:`models.backbone.Block` whose mixer is :class:`models.attention.Attention`."""
    m = layer.mixer
    so = m.scale_offset
    return AttnWeights(layer.input_layernorm.weight, fused_weight(m, ("q_proj", "k_proj", "v_proj")),
                       m.q_norm.weight if m.q_norm is not None else None,
                       m.k_norm.weight if m.k_norm is not None else None,
                       m.alpha if so else None, m.beta if so else None, m.alpha_out if so else None,
                       m.beta_out if so else None, m.o_proj.weight, mlp_weights(layer), m.window)


def is_attention(mixer) -> bool:
    return all(hasattr(mixer, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj", "window"))


# ---------------------------------------------------------------------------------------------------- layer math

def make_attn_in(H: int, Hkv: int, d: int, eps: float, qk_eps: float, qk_norm: bool, scale_offset: bool,
                 rows: str):
    """The layer's work before attention, as a function of tensors only (what ``torch.compile`` traces).

    ``rows`` says what the R input rows are: ``"base"`` (T = R base rows: q, k, v of every row, the
    base-stream scale-offset), ``"out"`` (R output-stream rows: q only, the output scale-offset, k = v = None)
    or ``"base+out"`` (a decode step of a two-stream model: row 0 is the base row, row 1 the output row).

    Returned function: ``attn_in(h, ln1, w_qkv, q_norm, k_norm, alpha, beta, alpha_out, beta_out, cos, sin)``
    with h ``[B, R, D]``, cos/sin ``[B, R, d]`` (each row's RoPE position) -> q ``[B, H, R, d]``,
    k, v ``[B, Hkv, T, d]`` (T = R, 0 rows or 1 row), all in h's dtype.
    """
    if rows not in ("base", "out", "base+out"):
        raise ValueError(f"rows must be 'base', 'out' or 'base+out', got {rows!r}")
    qd, kd = H * d, Hkv * d

    def attn_in(h, ln1, w_qkv, q_norm, k_norm, alpha, beta, alpha_out, beta_out, cos, sin):
        B, R, D = h.shape
        x = F.rms_norm(h, (D,), ln1, eps)
        if rows == "out":
            q = F.linear(x, w_qkv[:qd]).unflatten(-1, (H, d))
            k = v = None
        else:
            qkv = F.linear(x, w_qkv)
            q = qkv[..., :qd].unflatten(-1, (H, d))
            n = R if rows == "base" else 1
            k = qkv[:, :n, qd:qd + kd].unflatten(-1, (Hkv, d))
            v = qkv[:, :n, qd + kd:].unflatten(-1, (Hkv, d))
        if qk_norm:
            q = F.rms_norm(q, (d,), q_norm, qk_eps)
            if k is not None:
                k = F.rms_norm(k, (d,), k_norm, qk_eps)
        if scale_offset:  # one stream's rows are returned as they are (no torch.cat copy)
            so = (alpha, beta, alpha_out, beta_out)
            if rows == "base":
                q = two_stream_scale_offset(q, R, *so)[0]
            elif rows == "out":
                q = two_stream_scale_offset(q, 0, *so)[1]
            else:  # a decode step: row 0 its base row, the rest output rows
                q = torch.cat(two_stream_scale_offset(q, 1, *so), dim=1)
        q = apply_rope_token_major(q, cos, sin).transpose(1, 2)
        if k is not None:
            k = apply_rope_token_major(k, cos[:, :k.shape[1]], sin[:, :k.shape[1]]).transpose(1, 2)
            v = v.transpose(1, 2)
        return q, k, v

    return attn_in


def make_mlp_res(eps: float, ffn: int):
    """``mlp_res(h, ln2, w_gate_up, w_down) = h + down(SiLU(gate(x)) * up(x))``, x = RMSNorm(h); h ``[B, R, D]``."""

    def mlp_res(h, ln2, w_gu, w_down):
        x = F.rms_norm(h, (h.shape[-1],), ln2, eps)
        gu = F.linear(x, w_gu)
        return h + F.linear(F.silu(gu[..., :ffn]) * gu[..., ffn:], w_down)

    return mlp_res


def make_attn_out(eps: float, ffn: int):
    """``attn_out(h, o, w_o, ln2, w_gate_up, w_down)``: h + o W_O, then :func:`make_mlp_res`'s residual MLP.

    h ``[B, R, D]``, o ``[B, R, H * d]`` (attention output, token-major) -> ``[B, R, D]``.
    """
    mlp_res = make_mlp_res(eps, ffn)

    def attn_out(h, o, w_o, ln2, w_gu, w_down):
        return mlp_res(h + F.linear(o, w_o), ln2, w_gu, w_down)

    return attn_out


def make_norm(eps: float):
    def norm(h, w):
        return F.rms_norm(h, (h.shape[-1],), w, eps)

    return norm


class LayerFns:
    """The per-layer functions of one model, eager or compiled with ``torch.compile``.

    Args:
        config: the model's :class:`models.backbone.SuiteConfig`.
        compiled: wrap each function in ``torch.compile(fullgraph=True)`` (``backend``: "inductor" on the GPU;
            the CPU tests use "eager", which traces but does not generate code). The row dimension of
            prefill calls is marked dynamic, so one compilation serves every length.

    Each function is built once per (config, flags) and shared by all layers: the weights are arguments.
    """

    def __init__(self, config, compiled: bool = False, backend_name: str = "inductor"):
        c = config
        self.compiled = compiled
        self.backend_name = backend_name
        H, Hkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self._spec = (H, Hkv, d, c.rms_norm_eps, c.rms_norm_eps, bool(getattr(c, "qk_norm", False)))
        self._cache: dict = {}
        self.eps = c.rms_norm_eps
        if compiled:
            import torch._dynamo

            cfg = torch._dynamo.config  # one compiled graph per (function, shape class): raise the per-code limits
            cfg.cache_size_limit = max(cfg.cache_size_limit, 64)
            if hasattr(cfg, "accumulated_cache_size_limit"):
                cfg.accumulated_cache_size_limit = max(cfg.accumulated_cache_size_limit, 512)

    def _wrap(self, fn):
        if not self.compiled:
            return fn
        return torch.compile(fn, fullgraph=True, backend=self.backend_name)

    def attn_in(self, rows: str, scale_offset: bool):
        key = ("attn_in", rows, scale_offset)
        if key not in self._cache:
            H, Hkv, d, eps, qk_eps, qk_norm = self._spec
            self._cache[key] = self._wrap(make_attn_in(H, Hkv, d, eps, qk_eps, qk_norm, scale_offset, rows))
        return self._cache[key]

    def attn_out(self, ffn: int):
        key = ("attn_out", ffn)
        if key not in self._cache:
            self._cache[key] = self._wrap(make_attn_out(self.eps, ffn))
        return self._cache[key]

    def mlp_res(self, ffn: int):
        key = ("mlp_res", ffn)
        if key not in self._cache:
            self._cache[key] = self._wrap(make_mlp_res(self.eps, ffn))
        return self._cache[key]

    def norm(self):
        if "norm" not in self._cache:
            self._cache["norm"] = self._wrap(make_norm(self.eps))
        return self._cache["norm"]

    def dynamic_rows(self, *tensors) -> None:
        """Mark dim 1 (rows) of prefill inputs dynamic, so a new length reuses the compiled graph."""
        if self.compiled:
            for t in tensors:
                if t is not None and t.dim() >= 2 and t.shape[1] > 1:
                    torch._dynamo.maybe_mark_dynamic(t, 1)


def call_attn_in(fns: LayerFns, w: AttnWeights, rows: str, h, cos, sin, dynamic: bool = True):
    """Run :func:`make_attn_in`'s function for layer weights ``w`` on rows h ``[B, R, D]``."""
    fn = fns.attn_in(rows, w.alpha is not None)
    if dynamic:
        fns.dynamic_rows(h, cos, sin)
    return fn(h, w.ln1, w.qkv, w.q_norm, w.k_norm, w.alpha, w.beta, w.alpha_out, w.beta_out, cos, sin)


def call_attn_out(fns: LayerFns, w: AttnWeights, h, o, dynamic: bool = True):
    fn = fns.attn_out(w.mlp.down.shape[1])
    if dynamic:
        fns.dynamic_rows(h, o)
    return fn(h, o, w.o, w.mlp.ln2, w.mlp.gate_up, w.mlp.down)


def call_mlp_res(fns: LayerFns, m: MLPWeights, h, dynamic: bool = True):
    fn = fns.mlp_res(m.down.shape[1])
    if dynamic:
        fns.dynamic_rows(h)
    return fn(h, m.ln2, m.gate_up, m.down)


def token_major(o: torch.Tensor) -> torch.Tensor:
    """Attention output ``[B, H, R, d]`` -> ``[B, R, H * d]`` (free when the kernel wrote it token-major)."""
    B, H, R, d = o.shape
    return o.transpose(1, 2).reshape(B, R, H * d)


# ------------------------------------------------------------------------------------------------------ KV stores

class DenseKV:
    """K/V cache in the model dtype: per layer ``[B, Hkv, T, d]`` (the layout of ``SuiteCache``)."""

    kind = "dense"

    def __init__(self, n_layers: int, B: int, Hkv: int, T: int, d: int, dtype, device):
        self.k = [torch.empty(B, Hkv, T, d, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.empty(B, Hkv, T, d, dtype=dtype, device=device) for _ in range(n_layers)]

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Store k, v ``[B, Hkv, n, d]`` at positions ``start ..``; returns them as a reader will see them."""
        n = k.shape[2]
        self.k[layer][:, :, start:start + n].copy_(k)
        self.v[layer][:, :, start:start + n].copy_(v)
        return self.k[layer][:, :, start:start + n], self.v[layer][:, :, start:start + n]

    def read(self, layer: int, lo: int, hi: int):
        return self.k[layer][:, :, lo:hi], self.v[layer][:, :, lo:hi]

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
                 span: int = 65536):
        if block < 1 or span % block:
            raise ValueError(f"FP8KV: block={block} must be >= 1 and divide span={span}")
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


# --------------------------------------------------------------------------------------------------- the prefill

@dataclass
class PrefillResult:
    """logits ``[B, n_out, vocab]`` (model dtype) of the last ``n_out`` positions; the K/V store; kernels used."""

    logits: torch.Tensor
    kv: object
    kernels: dict


class PrefillRunner:
    """Layer-major prefill of a Transformer / SWA / Orthros model with the fused layer functions.

    Regime "Prefill" of the paper with ``n_out`` output positions (the last ``n_out`` tokens; 1 is what
    ``generate()`` does): Orthros runs T base rows (window attention, K/V written) and ``n_out`` output rows
    (full attention over the layer's K/V at their original positions, no K/V written); single-stream
    models take the logits of their last ``n_out`` rows.

    Args:
        model: a :class:`models.backbone.SuiteForCausalLM` whose every mixer is :class:`models.attention.Attention`.
        compiled: torch.compile the layer functions (:class:`LayerFns`).
        chunk: base rows per chunk (None: the whole sequence at once). Chunk c's queries attend the keys they
            can reach, bottom-right aligned: its own and, for a window w, the w - 1 before it; without a
            window every earlier key (read back from the store).
        backend_name: torch.compile backend.

    ``run(ids, n_out, kv)`` -> :class:`PrefillResult`. Raises ValueError for models with non-attention mixers,
    ``n_out`` outside ``[1, T]``, or a store whose shape does not fit.
    """

    def __init__(self, model, compiled: bool = False, chunk: int | None = None, backend_name: str = "inductor"):
        mixers = [layer.mixer for layer in model.model.layers]
        if not all(is_attention(m) for m in mixers):
            raise ValueError("PrefillRunner serves models whose every mixer is attention (transformer, swa, orthros)")
        if chunk is not None and chunk < 1:
            raise ValueError(f"chunk must be >= 1 or None, got {chunk}")
        self.model, self.chunk = model, chunk
        self.two_stream = bool(model.two_stream)
        self.weights = [attn_weights(layer) for layer in model.model.layers]
        self.fns = LayerFns(model.config, compiled, backend_name)
        self._freqs = None

    def new_kv(self, B: int, T: int, fmt: str = "dense", block: int = 4096):
        """An empty store for ``B`` sequences of ``T`` tokens: ``fmt`` "dense" (model dtype) or "fp8"."""
        c = self.model.config
        p = next(self.model.parameters())
        args = (c.num_hidden_layers, B, c.num_key_value_heads, T, c.head_dim, p.dtype, p.device)
        if fmt == "dense":
            return DenseKV(*args)
        if fmt == "fp8":
            return FP8KV(*args, block=block, span=max(block, 65536 // block * block))
        raise ValueError(f"unknown KV format {fmt!r}; known: dense, fp8")

    def _rope(self, positions: torch.Tensor, B: int, dtype):
        if self._freqs is None:
            self._freqs = rope_frequencies(self.model.config, positions.device)
        return rope_cos_sin(positions.expand(B, -1), self._freqs, dtype)

    @torch.inference_mode()
    def run(self, ids: torch.Tensor, n_out: int = 1, kv=None) -> PrefillResult:
        """Prefill ``ids`` [B, T] (int64); returns logits of the last ``n_out`` positions and the filled store."""
        m = self.model
        B, T = ids.shape
        if not 1 <= n_out <= T:
            raise ValueError(f"n_out={n_out} must be in [1, T={T}]")
        kv = kv if kv is not None else self.new_kv(B, T)
        if kv.k[0].shape[0] != B or kv.k[0].shape[2] < T:
            raise ValueError(f"KV store of shape {tuple(kv.k[0].shape)} does not fit B={B}, T={T}")
        dev = ids.device
        C = T if self.chunk is None else min(self.chunk, T)
        chunks = [(s, min(s + C, T)) for s in range(0, T, C)]
        kernels.reset_usage()
        h = m.model.embed_tokens(ids)  # [B, T, D], base rows
        dtype = h.dtype
        out_pos = torch.arange(T - n_out, T, device=dev)
        h_out = h[:, T - n_out:].clone() if self.two_stream else None
        cos_o, sin_o = self._rope(out_pos[None], B, dtype) if self.two_stream else (None, None)
        fns = self.fns
        for i, w in enumerate(self.weights):
            fresh = None
            for s, e in chunks:
                cos, sin = self._rope(torch.arange(s, e, device=dev)[None], B, dtype)
                hc = h[:, s:e]
                q, k, v = call_attn_in(fns, w, "base", hc, cos, sin)
                k, v = kv.write(i, s, k, v)
                lo = kernels.window_start(s, w.window)
                if lo < s:
                    k_old, v_old = kv.read(i, lo, s)
                    k, v = torch.cat([k_old, k], dim=2), torch.cat([v_old, v], dim=2)
                o = kernels.attention(q, k, v, torch.arange(s - lo, e - lo, device=dev), w.window)
                del q
                new = call_attn_out(fns, w, hc, token_major(o))
                if len(chunks) == 1:
                    h, fresh = new, (k, v)
                else:
                    h[:, s:e] = new
                del o, new
            if self.two_stream:
                q, _, _ = call_attn_in(fns, w, "out", h_out, cos_o, sin_o, dynamic=False)
                k, v = fresh if fresh is not None else kv.read(i, 0, T)
                o = kernels.attention(q, k, v, out_pos, None)
                h_out = call_attn_out(fns, w, h_out, token_major(o), dynamic=False)
            del fresh
        final = h_out if self.two_stream else h[:, T - n_out:]
        logits = m.lm_head(m.model.norm(final))
        return PrefillResult(logits, kv, kernels.kernels_used())

