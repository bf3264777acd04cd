"""The per-layer step of the inference runtime: one layer's math as two functions around the attention call.

* ``attn_in``: RMSNorm -> Q/K/V projection and q/k-norm (:func:`models.attention.qkv_rows`) -> the streams'
  scale-offsets (:func:`models.attention.two_stream_scale_offset`, Eqs. 4-5) -> RoPE, giving q ``[B, H, R, d]`` and
  k, v ``[B, Hkv, T, d]`` (views of token-major memory, what FlashAttention and FLA read without a copy);
* ``attn_out``: ``h + o W_O``, then ``mlp_res``: ``h + SwiGLU(RMSNorm(h))`` (:func:`models.backbone.swiglu`).

Prefill, chunked prefill, decode and the sequence-parallel prefill (:mod:`models.runtime`) all run these; the
model's own forward calls the same projection, scale-offset, RoPE and SwiGLU functions through its modules. Two
options, not code paths: ``fused`` runs the Q/K/V and gate/up projections as one GEMM each over weights that
:func:`fused_weight` concatenates in place (the module weights become row slices of one tensor, so no memory is
added and later ``load_state_dict`` calls still reach them); ``compiled`` wraps each function in
``torch.compile(fullgraph=True)`` so Inductor fuses the element-wise work (norms, RoPE, scale-offset, SiLU, the
residuals) into a few kernels. The functions take the weights as arguments, so one compiled graph serves every layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models.attention import qkv_rows, two_stream_scale_offset
from models.backbone import apply_rope_token_major, swiglu

ROWS = ("base", "out", "base+out")


# ----------------------------------------------------------------------------------------------------------- weights

def fused_weight(owner: nn.Module, names: tuple[str, ...]) -> torch.Tensor:
    """One ``[sum(out_features), in_features]`` tensor whose row slices are the weights of the bias-free
    ``nn.Linear`` children ``names`` of ``owner`` (e.g. ``("q_proj", "k_proj", "v_proj")``).

    The first call copies the weights into the new tensor and rebinds each Linear's weight as a new Parameter on its
    slice (values unchanged, no extra memory once the old tensors are freed; ``load_state_dict`` still reaches them,
    but an optimizer built before holds the old Parameters: build it after fusing); later calls return the same tensor
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
class MLPWeights:
    ln1: torch.Tensor  # the layer's input norm (a recurrent layer's mixer runs on its output)
    ln2: torch.Tensor
    gate_up: torch.Tensor | tuple  # [2 F, D] (fused) or (W_gate, W_up)
    down: torch.Tensor


@dataclass
class AttnWeights:
    """The tensors one attention layer's step reads (the model's parameters or views of them)."""

    ln1: torch.Tensor
    qkv: torch.Tensor | tuple  # [(H + 2 Hkv) d, D] (fused) or (W_Q, W_K, W_V)
    qkv_bias: torch.Tensor | tuple | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    so: tuple | None  # (alpha, beta, alpha', beta'), each [H, d]; None without scale-offset
    o: torch.Tensor
    mlp: MLPWeights
    window: int | None


def mlp_weights(layer, fused: bool) -> MLPWeights:
    mlp = layer.mlp
    gate_up = fused_weight(mlp, ("gate_proj", "up_proj")) if fused else (mlp.gate_proj.weight, mlp.up_proj.weight)
    return MLPWeights(layer.input_layernorm.weight, layer.post_attention_layernorm.weight, gate_up,
                      mlp.down_proj.weight)


def attn_weights(layer, fused: bool) -> AttnWeights:
    """The step's weights of a :class:`models.backbone.Block` whose mixer is :class:`models.attention.Attention`."""
    m = layer.mixer
    if m.o_proj.bias is not None:  # attention_bias=True; "qkv" (Qwen2's layout) runs
        raise ValueError("the inference runtime's layer step has no output-projection bias (attention_bias=True); "
                         "run the model's own forward")
    qkv, bias = (fused_weight(m, ("q_proj", "k_proj", "v_proj")), None) if fused else m.qkv_weights()
    return AttnWeights(layer.input_layernorm.weight, qkv, bias,
                       m.q_norm.weight if m.q_norm is not None else None,
                       m.k_norm.weight if m.k_norm is not None else None,
                       m.scale_offsets(), m.o_proj.weight, mlp_weights(layer, fused), m.window)


def is_attention(mixer) -> bool:
    return all(hasattr(mixer, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj", "window"))


# ---------------------------------------------------------------------------------------------------- layer math

def make_attn_in(H: int, Hkv: int, d: int, eps: float, qk_eps: float, rows: str):
    """The layer's work before attention, as a function of tensors only (what ``torch.compile`` traces).

    ``rows`` says what the R input rows are: ``"base"`` (T = R base rows: q, k, v of every row, the
    base-stream scale-offset), ``"out"`` (R output-stream rows: q only, the output scale-offset, k = v = None)
    or ``"base+out"`` (a decode step of a two-stream model: row 0 is the base row, the rest output rows).

    Returned function: ``attn_in(h, ln1, w_qkv, b_qkv, q_norm, k_norm, so, cos, sin)`` with h ``[B, R, D]``,
    cos/sin ``[B, R, d]`` (each row's RoPE position) -> q ``[B, H, R, d]``, k, v ``[B, Hkv, T, d]`` (T = R, 0 rows
    or 1 row), all in h's dtype.
    """
    if rows not in ROWS:
        raise ValueError(f"rows must be one of {ROWS}, got {rows!r}")

    def attn_in(h, ln1, w_qkv, b_qkv, q_norm, k_norm, so, cos, sin):
        B, R, D = h.shape
        n_base = {"base": R, "out": 0, "base+out": 1}[rows]
        x = F.rms_norm(h, (D,), ln1, eps)
        q, k, v = qkv_rows(x, w_qkv, b_qkv, q_norm, k_norm, n_base, H, Hkv, d, qk_eps)
        if so is not None:  # one stream's rows are returned as they are (no torch.cat copy)
            q_base, q_out = two_stream_scale_offset(q, n_base, *so)
            q = q_base if rows == "base" else q_out if rows == "out" else torch.cat([q_base, q_out], dim=1)
        q = apply_rope_token_major(q, cos, sin).transpose(1, 2)
        if k is not None:
            k = apply_rope_token_major(k, cos[:, :n_base], sin[:, :n_base]).transpose(1, 2)
            v = v.transpose(1, 2)
        return q, k, v

    return attn_in


def make_mlp_res(eps: float):
    """``mlp_res(h, ln2, w_gate_up, w_down) = h + SwiGLU(RMSNorm(h))``; h ``[B, R, D]``."""

    def mlp_res(h, ln2, w_gu, w_down):
        return h + swiglu(F.rms_norm(h, (h.shape[-1],), ln2, eps), w_gu, w_down)

    return mlp_res


def make_attn_out(eps: float):
    """``attn_out(h, o, w_o, ln2, w_gate_up, w_down)``: h + o W_O, then :func:`make_mlp_res`'s residual MLP.

    h ``[B, R, D]``, o ``[B, R, H * d]`` (attention output, token-major) -> ``[B, R, D]``.
    """
    mlp_res = make_mlp_res(eps)

    def attn_out(h, o, w_o, ln2, w_gu, w_down):
        return mlp_res(h + F.linear(o, w_o), ln2, w_gu, w_down)

    return attn_out


def make_norm(eps: float):
    def norm(h, w):
        return F.rms_norm(h, (h.shape[-1],), w, eps)

    return norm


def token_major(o: torch.Tensor) -> torch.Tensor:
    """Attention output ``[B, H, R, d]`` -> ``[B, R, H * d]`` (free when the kernel wrote it token-major)."""
    B, H, R, d = o.shape
    return o.transpose(1, 2).reshape(B, R, H * d)


class LayerStep:
    """The per-layer step of one model: ``attn_in``, ``attn_out``, ``mlp_res`` and ``norm``, with two options.

    Args:
        model: a :class:`models.backbone.SuiteForCausalLM`.
        fused: one GEMM for Q/K/V and one for gate/up over weights concatenated in place (:func:`fused_weight`);
            needs bias-free projections. False: the modules' own weights, three and two GEMMs.
        compiled: wrap each function in ``torch.compile(fullgraph=True)`` (``backend``: "inductor" on the GPU; the
            CPU tests use "eager", which traces but does not generate code). The row dimension of prefill calls is
            marked dynamic, so one compilation serves every length.

    ``weights[i]`` holds layer i's tensors: :class:`AttnWeights` for attention layers, :class:`MLPWeights` for the
    others (recurrent mixers run as modules; only their MLP half is a step function).
    """

    def __init__(self, model, fused: bool = False, compiled: bool = False, backend: str = "inductor"):
        c = model.config
        self.fused, self.compiled, self.backend = bool(fused), bool(compiled), backend
        self._spec = (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps, c.rms_norm_eps)
        self.eps = c.rms_norm_eps
        self._fns: dict = {}
        self.weights = [attn_weights(layer, fused) if is_attention(layer.mixer) else mlp_weights(layer, fused)
                        for layer in model.model.layers]
        if compiled:
            import torch._dynamo

            cfg = torch._dynamo.config  # one compiled graph per (function, shape class): raise the per-code limits
            cfg.cache_size_limit = max(cfg.cache_size_limit, 64)
            if hasattr(cfg, "accumulated_cache_size_limit"):
                cfg.accumulated_cache_size_limit = max(cfg.accumulated_cache_size_limit, 512)

    def with_compiled(self, compiled: bool) -> LayerStep:
        """The same step with ``compiled`` switched (weights shared; a compiled one keeps its graphs)."""
        other = LayerStep.__new__(LayerStep)
        other.__dict__.update(self.__dict__, compiled=bool(compiled), _fns={})
        return other

    def _fn(self, key, make):
        if key not in self._fns:
            fn = make()
            self._fns[key] = torch.compile(fn, fullgraph=True, backend=self.backend) if self.compiled else fn
        return self._fns[key]

    def _dynamic_rows(self, *tensors) -> None:
        """Mark dim 1 (rows) of prefill inputs dynamic, so a new length reuses the compiled graph."""
        if self.compiled:
            for t in tensors:
                if t is not None and t.dim() >= 2 and t.shape[1] > 1:
                    torch._dynamo.maybe_mark_dynamic(t, 1)

    def attn_in(self, i: int, rows: str, h, cos, sin, dynamic: bool = True):
        """Layer i's q ``[B, H, R, d]`` and (base rows) k, v ``[B, Hkv, T, d]``, rotated, of rows h ``[B, R, D]``."""
        w = self.weights[i]
        H, Hkv, d, eps, qk_eps = self._spec
        fn = self._fn(("attn_in", rows), lambda: make_attn_in(H, Hkv, d, eps, qk_eps, rows))
        if dynamic:
            self._dynamic_rows(h, cos, sin)
        return fn(h, w.ln1, w.qkv, w.qkv_bias, w.q_norm, w.k_norm, w.so, cos, sin)

    def attn_out(self, i: int, h, o, dynamic: bool = True):
        """``h + o W_O`` and the residual MLP of layer i; o ``[B, R, H * d]`` token-major."""
        w = self.weights[i]
        fn = self._fn("attn_out", lambda: make_attn_out(self.eps))
        if dynamic:
            self._dynamic_rows(h, o)
        return fn(h, o, w.o, w.mlp.ln2, w.mlp.gate_up, w.mlp.down)

    def mlp_res(self, i: int, h, dynamic: bool = True):
        w = self.weights[i]
        m = w.mlp if isinstance(w, AttnWeights) else w
        fn = self._fn("mlp_res", lambda: make_mlp_res(self.eps))
        if dynamic:
            self._dynamic_rows(h)
        return fn(h, m.ln2, m.gate_up, m.down)

    def norm_in(self, i: int, h, dynamic: bool = True):
        """Layer i's input RMSNorm of rows h: what a recurrent layer's mixer (run as a module) reads."""
        fn = self._fn("norm", lambda: make_norm(self.eps))
        if dynamic:
            self._dynamic_rows(h)
        return fn(h, self.weights[i].ln1)
