"""Everything of the baselines that depends on flash-linear-attention's internals, behind one version check.

FLA's public surface is its layers (``fla.layers.GatedDeltaNet``, ``GatedLinearAttention``,
``MultiScaleRetention``: :mod:`baselines.fla_mixers` builds and calls them). Two parts of the suite go below it,
and both live here only:

* :func:`install`, the CPU route: it swaps functions in FLA's module globals and methods of FLA classes (below);
* :func:`gdn_two_stream`, Orthros-H's GDN layer: it re-runs FLA's ``GatedDeltaNet`` computation from the layer's
  own attributes (projections, short convolutions, ``A_log``, ``dt_bias``, head sizes, output norm) and the
  gated-delta-rule ops of FLA's module globals, with the kernels' flags and state layout;

plus :func:`read_state` and :func:`retnet_rotary_hook`, which rely on the same conventions and attributes.
Neither module globals nor layer attributes are FLA API: a release may rename, re-sign or re-layout them, and
a patch that no longer matches fails silently (the original kernel runs, or a wrong tensor is read).
:func:`models.fla_check.check_fla_version` (the one check, shared with the ``fla-window`` attention kernel of
:mod:`models.kernels`) therefore refuses any FLA version the suite was not checked against (``CHECKED_FLA_VERSIONS``
there), naming the installed and the checked versions; :func:`install`, which every FLA mixer build calls first
(``baselines.fla_mixers``), runs it. To move to a new FLA release, follow :mod:`models.fla_check`.

CPU route. FLA 0.6 has no CPU backend: every layer forward raises ``RuntimeError: 0 active drivers`` on CPU,
from its Triton kernels and also from its Triton norms, short convolution and rotary embedding
(platform facts). :func:`install` swaps, at the op level, the functions the layers call for
wrappers that run the reference whenever the input tensors live on the CPU and call the original
Triton function otherwise. CUDA runs are untouched unless :func:`force_naive` is active (the GPU
cross-check in ``benchmarks/fla_vs_naive.py`` uses it to run the references on the GPU).

Routes (FLA's references, ``fla/ops/*/naive.py``):

* GLA ``chunk_gla`` / ``fused_recurrent_gla``: ``naive_recurrent_gla``.
* GDN ``chunk_gated_delta_rule``: ``naive_chunk_gated_delta_rule`` (chunk 16: the same math as
  the kernels' 64 with fewer sequential steps on CPU);
  ``fused_recurrent_gated_delta_rule``: ``naive_recurrent_gated_delta_rule``. The fused gate
  (``-exp(A_log) * softplus(a + dt_bias)``, FLA's ``naive_gdn_gate``), beta sigmoid and q/k L2 norm
  (eps 1e-6) are applied first, as the kernels do with their ``*_in_kernel`` flags.
* RetNet ``chunk/fused_chunk/parallel_retention``: ``naive_chunk_simple_gla`` (chunk 16) and
  ``fused_recurrent_retention``: ``naive_recurrent_simple_gla``, both with FLA's per-head decay
  ``log(1 - 2^(-5-h))`` (retention is simple GLA with a fixed gate).
* ``ShortConvolution`` / ``causal_conv1d``: ``F.conv1d`` with the cache convention of FLA's update
  kernel (``[N, D, W]``, the last W inputs, newest last).
* ``RMSNorm`` / ``FusedRMSNormGated``: fp32 torch norms (gate: ``silu`` or ``sigmoid``).
* ``rotary_embedding``: FLA's ``rotary_embedding_ref`` at explicit positions.

Conventions kept: inputs ``[B, T, H, d]`` (not head-first); states ``[N, H, K, V]``, or
``[N, H, V, K]`` when the caller passes ``state_v_first=True`` (GLA and GDN layers do); final
states fp32; ``cu_seqlens`` (packed left-padded batches) is served by running each sequence alone.
"""
from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from einops import rearrange

from models.fla_check import check_fla_version

_INSTALLED = False
CPU_CHUNK = 16  # chunk length of the chunked references on CPU (any length gives the same result)
_FORCE = False


@contextlib.contextmanager
def force_naive():
    """Within this block the references serve CUDA tensors too (for GPU cross-checks)."""
    global _FORCE
    previous, _FORCE = _FORCE, True
    try:
        yield
    finally:
        _FORCE = previous


def _use_naive(t: torch.Tensor) -> bool:
    return _FORCE or t.device.type == "cpu"


def _routed(original, naive):
    @functools.wraps(original)
    def route(*args, **kwargs):
        first = args[0] if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
        return (naive if _use_naive(first) else original)(*args, **kwargs)

    route.__fla_original__ = original
    return route


# ---------------------------------------------------------------- recurrent ops

def _per_sequence(fn, seqs: dict, initial_state, output_final_state, cu_seqlens, state_v_first):
    """Run ``fn`` per packed sequence (``cu_seqlens``) or on the batch, converting state layouts."""
    def to_kv(h):
        return None if h is None else (h.transpose(-1, -2) if state_v_first else h).float()

    def from_kv(h):
        return None if h is None else (h.transpose(-1, -2).contiguous() if state_v_first else h)

    if cu_seqlens is None:
        o, h = fn(**seqs, initial_state=to_kv(initial_state), output_final_state=output_final_state)
        return o, from_kv(h) if output_final_state else None
    bounds = cu_seqlens.tolist()
    outs, states = [], []
    for n, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        h0 = None if initial_state is None else initial_state[n:n + 1]
        o, h = fn(**{k: v[:, start:end] for k, v in seqs.items()}, initial_state=to_kv(h0),
                  output_final_state=output_final_state)
        outs.append(o)
        states.append(h)
    return torch.cat(outs, 1), (from_kv(torch.cat(states, 0)) if output_final_state else None)


def _gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False, state_v_first=False,
         cu_seqlens=None):
    from fla.ops.gla.naive import naive_recurrent_gla

    if scale is not None:  # the reference hard-codes K^-0.5
        q = q * (scale * q.shape[-1] ** 0.5)
    if g is None:
        g = torch.zeros_like(k)
    o, h = _per_sequence(lambda q, k, v, gk, **kw: naive_recurrent_gla(q, k, v, gk, **kw),
                         dict(q=q, k=k, v=v, gk=g), initial_state, output_final_state, cu_seqlens, state_v_first)
    return o.to(v.dtype), h


def chunk_gla_cpu(q, k, v, g, scale=None, initial_state=None, output_final_state=False, state_v_first=False,
                  cu_seqlens=None, **_):
    return _gla(q, k, v, g, scale, initial_state, output_final_state, state_v_first, cu_seqlens)


def fused_recurrent_gla_cpu(q, k, v, gk=None, gv=None, scale=None, initial_state=None, output_final_state=False,
                            reverse=False, state_v_first=False, cu_seqlens=None, **_):
    if gv is not None or reverse:
        raise NotImplementedError("the CPU GLA route supports key gates only, forward direction")
    return _gla(q, k, v, gk, scale, initial_state, output_final_state, state_v_first, cu_seqlens)


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """fp32 ``x / sqrt(sum(x^2) + eps)`` over the last dim, as FLA's ``use_qk_l2norm_in_kernel``."""
    return x.float() * torch.rsqrt(x.float().pow(2).sum(-1, keepdim=True) + eps)


def _gdn_inputs(q, k, v, g, beta, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                use_gate_in_kernel, A_log, dt_bias):
    from fla.ops.gated_delta_rule.gate import naive_gdn_gate

    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    if use_beta_sigmoid_in_kernel:
        beta = beta.float().sigmoid() * (2.0 if allow_neg_eigval else 1.0)
    if use_gate_in_kernel:
        g = naive_gdn_gate(g, A_log, dt_bias)
    if v.shape[2] != q.shape[2]:  # grouped value heads: value head i reads q/k head i // (HV / H)
        q, k = (x.repeat_interleave(v.shape[2] // q.shape[2], dim=2) for x in (q, k))
    return q, k, g, beta


def chunk_gated_delta_rule_cpu(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                               allow_neg_eigval=False, state_v_first=False, cu_seqlens=None, use_gate_in_kernel=False,
                               A_log=None, dt_bias=None, chunk_size=None, **_):
    from fla.ops.gated_delta_rule.naive import naive_chunk_gated_delta_rule

    dtype = v.dtype
    q, k, g, beta = _gdn_inputs(q, k, v, g, beta, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel,
                                allow_neg_eigval, use_gate_in_kernel, A_log, dt_bias)
    o, h = _per_sequence(
        lambda q, k, v, g, beta, **kw: naive_chunk_gated_delta_rule(
            q, k, v, g, beta, chunk_size=chunk_size or CPU_CHUNK, scale=scale, **kw),
        dict(q=q, k=k, v=v, g=g, beta=beta), initial_state, output_final_state, cu_seqlens, state_v_first)
    return o.to(dtype), h


def fused_recurrent_gated_delta_rule_cpu(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None,
                                         initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False,
                                         use_gate_in_kernel=False, A_log=None, dt_bias=None,
                                         use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                         state_v_first=False, cu_seqlens=None, **_):
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    if gk is not None or gv is not None or g is None or beta is None:
        raise NotImplementedError("the CPU GDN route needs a scalar gate g and beta (no gk/gv)")
    dtype = v.dtype
    q, k, g, beta = _gdn_inputs(q, k, v, g, beta, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel,
                                allow_neg_eigval, use_gate_in_kernel, A_log, dt_bias)
    o, h = _per_sequence(
        lambda q, k, v, g, beta, **kw: naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale=scale, **kw),
        dict(q=q, k=k, v=v, g=g, beta=beta), initial_state, output_final_state, cu_seqlens, state_v_first)
    return o.to(dtype), h


def retention_decay(num_heads: int, device=None) -> torch.Tensor:
    """RetNet's per-head log decay ``log(1 - 2^(-5-h))``, [H] fp32 (as in FLA's retention ops)."""
    return (1 - 2.0 ** (-5.0 - torch.arange(num_heads, dtype=torch.float, device=device))).log()


def _retention(recurrent: bool, q, k, v, scale=None, initial_state=None, output_final_state=False,
               state_v_first=False, cu_seqlens=None):
    from fla.ops.simple_gla.naive import naive_chunk_simple_gla, naive_recurrent_simple_gla

    g = retention_decay(q.shape[2], q.device).expand(*q.shape[:3])
    if recurrent:
        def fn(q, k, v, g, **kw):
            return naive_recurrent_simple_gla(q, k, v, g, scale=scale, **kw)
    else:
        def fn(q, k, v, g, **kw):
            return naive_chunk_simple_gla(q, k, v, g, scale=scale, chunk_size=CPU_CHUNK, **kw)
    o, h = _per_sequence(fn, dict(q=q, k=k, v=v, g=g), initial_state, output_final_state, cu_seqlens,
                         state_v_first)
    return o.to(v.dtype), h


def chunk_retention_cpu(q, k, v, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
                        **_):
    return _retention(False, q, k, v, scale, initial_state, output_final_state, False, cu_seqlens)


def parallel_retention_cpu(q, k, v, scale=None, output_attentions=False, cu_seqlens=None):
    if output_attentions:
        raise NotImplementedError("the CPU retention route returns no attention scores")
    return _retention(False, q, k, v, scale, None, False, False, cu_seqlens)


def fused_recurrent_retention_cpu(q, k, v, scale=None, initial_state=None, output_final_state=False, reverse=False,
                                  state_v_first=False, cu_seqlens=None, **_):
    if reverse:
        raise NotImplementedError("the CPU retention route runs forward only")
    return _retention(True, q, k, v, scale, initial_state, output_final_state, state_v_first, cu_seqlens)


# ---------------------------------------------------------------- conv, norms, rotary

def causal_conv1d_cpu(x, weight=None, bias=None, residual=None, initial_state=None, output_final_state=False,
                      activation=None, cu_seqlens=None, **_):
    """Depthwise causal conv. x [B, T, D]; weight [D, W]; state [N, D, W] = the last W inputs."""
    D, W = weight.shape

    def run(x, state):  # x [n, T, D], state [n, D, W] or None
        prev = x.new_zeros(x.shape[0], W - 1, D) if state is None else state[:, :, 1:].transpose(1, 2).to(x.dtype)
        full = torch.cat([prev, x], 1)
        y = F.conv1d(full.transpose(1, 2), weight[:, None].to(x.dtype), bias, groups=D).transpose(1, 2)
        return y, full[:, -W:].transpose(1, 2).contiguous()

    if cu_seqlens is None:
        y, final = run(x, initial_state)
    else:
        bounds = cu_seqlens.tolist()
        parts = [run(x[:, s:e], None if initial_state is None else initial_state[n:n + 1])
                 for n, (s, e) in enumerate(zip(bounds[:-1], bounds[1:]))]
        y, final = torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 0)
    if activation in ("silu", "swish"):
        y = F.silu(y)
    if residual is not None:
        y = y + residual
    return y, (final if output_final_state else None)


def short_convolution_forward_cpu(self, x, residual=None, mask=None, cache=None, output_final_state=False,
                                  cu_seqlens=None, **_):
    if mask is not None:
        x = x * mask.unsqueeze(-1)
    return causal_conv1d_cpu(x, self.weight[:, 0], self.bias, residual, cache, output_final_state,
                             self.activation, cu_seqlens)


def _rms(x, weight, eps):
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight.float()


def rms_norm_forward_cpu(self, x, residual=None, prenorm=False, residual_in_fp32=False):
    if residual is not None or prenorm:
        raise NotImplementedError("the CPU RMSNorm route has no fused residual")
    return _rms(x, self.weight, self.eps).to(x.dtype)


def rms_norm_gated_forward_cpu(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
    if residual is not None or prenorm:
        raise NotImplementedError("the CPU gated RMSNorm route has no fused residual")
    gate = F.silu(g.float()) if self.activation in ("swish", "silu") else torch.sigmoid(g.float())
    return (_rms(x, self.weight, self.eps) * gate).to(x.dtype)


def rotary_embedding_cpu(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None, **_):
    """x [B, T, H, D]; cos/sin [max_len, ro_dim/2]; positions start at seqlen_offsets (int or [N])."""
    from fla.modules.rotary.ops import rotary_embedding_ref

    B, T = x.shape[:2]
    offsets = torch.as_tensor(seqlen_offsets, device=x.device).long()
    if cu_seqlens is None:
        pos = torch.arange(T, device=x.device) + offsets.reshape(-1, 1)  # [1 or B, T]
    else:
        lens = cu_seqlens.diff().long()
        seq = torch.repeat_interleave(torch.arange(len(lens), device=x.device), lens)
        pos = (torch.arange(T, device=x.device) - cu_seqlens.long()[seq] + offsets.expand(len(lens))[seq])[None]
    return rotary_embedding_ref(x, cos[pos], sin[pos], interleaved=interleaved)


# ---------------------------------------------------------------- installation

def _patch_function(module, name: str, naive) -> None:
    current = getattr(module, name)
    if not hasattr(current, "__fla_original__"):
        setattr(module, name, _routed(current, naive))


def _patch_method(cls, name: str, naive) -> None:
    current = getattr(cls, name)
    if hasattr(current, "__fla_original__"):
        return

    @functools.wraps(current)
    def route(self, x, *args, **kwargs):
        return (naive if _use_naive(x) else current)(self, x, *args, **kwargs)

    route.__fla_original__ = current
    setattr(cls, name, route)


def install() -> None:
    """Route FLA's GLA, GDN and RetNet layers to the references on CPU (idempotent), after
    :func:`check_fla_version`. Raises RuntimeError on an FLA version this module was not checked against."""
    global _INSTALLED
    check_fla_version()
    if _INSTALLED:
        return
    import fla.layers.gated_deltanet as gdn
    import fla.layers.gla as gla
    import fla.layers.multiscale_retention as retnet
    import fla.modules.rotary.ops as rotary
    from fla.modules import FusedRMSNormGated, RMSNorm, ShortConvolution

    _patch_function(gla, "chunk_gla", chunk_gla_cpu)
    _patch_function(gla, "fused_recurrent_gla", fused_recurrent_gla_cpu)
    _patch_function(gdn, "chunk_gated_delta_rule", chunk_gated_delta_rule_cpu)
    _patch_function(gdn, "fused_recurrent_gated_delta_rule", fused_recurrent_gated_delta_rule_cpu)
    _patch_function(gdn, "causal_conv1d", causal_conv1d_cpu)
    _patch_function(retnet, "chunk_retention", chunk_retention_cpu)
    _patch_function(retnet, "fused_chunk_retention", chunk_retention_cpu)
    _patch_function(retnet, "parallel_retention", parallel_retention_cpu)
    _patch_function(retnet, "fused_recurrent_retention", fused_recurrent_retention_cpu)
    _patch_function(rotary, "rotary_embedding", rotary_embedding_cpu)
    _patch_method(ShortConvolution, "forward", short_convolution_forward_cpu)
    _patch_method(RMSNorm, "forward", rms_norm_forward_cpu)
    _patch_method(FusedRMSNormGated, "forward", rms_norm_gated_forward_cpu)
    _INSTALLED = True


# ---------------------------------------------------------------- GDN internals (Orthros-H, RetNet)

def read_state(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """GDN output of queries q [B, 1, H, K] reading the state [B, H, V, K] (state_v_first layout):
    ``S (q / ||q|| * K^-0.5)`` in fp32, as FLA's kernels with ``use_qk_l2norm_in_kernel`` -> [B, 1, H, V]."""
    q = l2norm(q) * q.shape[-1] ** -0.5
    if state.shape[1] != q.shape[2]:  # grouped value heads: value head i reads query head i // (HV / H)
        q = q.repeat_interleave(state.shape[1] // q.shape[2], dim=2)
    return torch.einsum("bhvk,bthk->bthv", state.float(), q)


def gdn_two_stream(layer, x: torch.Tensor, n_base: int, out_index: torch.Tensor, out_is_last: bool, state=None,
                   conv=(None, None, None), use_cache: bool = False, training: bool = False):
    """FLA ``GatedDeltaNet`` ``layer`` over two-stream rows ``x`` [B, T + T_out, D] (T = ``n_base``).

    Base rows: FLA's GatedDeltaNet computation (short conv on q/k/v, gated delta rule from ``state``, the
    recurrent state [B, H, V, K] or None). Output row j, at base position ``out_index[j]`` = t: the query
    ``q' = silu(x' W_Q)`` skips the short convolution and reads S_t, the state right after base token t was
    written. Gate, norm and W_O are shared. The read is exact: the same gated-delta-rule op runs a second time
    with the base keys, values, gates and initial state and the output queries at their positions (zeros
    elsewhere); with ``out_is_last`` and one output row it is ``S_T q'`` from the op's final state instead.

    ``conv``: the q, k and v short-conv states (None for a fresh sequence). Returns
    ``(out [B, T + T_out, D], new_state, conv_states)``; ``new_state`` is None unless ``use_cache`` or the
    last-row read needs it, ``conv_states`` (a list) hold states only with ``use_cache``.
    """
    import fla.layers.gated_deltanet as gdn_module  # looked up per call: the CPU route patches it

    L, T = layer, n_base
    conv = list(conv)
    xb, xo = x[:, :T], x[:, T:]
    q, conv[0] = L.q_conv1d(x=L.q_proj(xb), cache=conv[0], output_final_state=use_cache)
    k, conv[1] = L.k_conv1d(x=L.k_proj(xb), cache=conv[1], output_final_state=use_cache)
    v, conv[2] = L.v_conv1d(x=L.v_proj(xb), cache=conv[2], output_final_state=use_cache)
    q, k = (rearrange(t, "... (h d) -> ... h d", d=L.head_k_dim) for t in (q, k))
    v = rearrange(v, "... (h d) -> ... h d", d=L.head_v_dim)
    q_cross = rearrange(F.silu(L.q_proj(xo)), "... (h d) -> ... h d", d=L.head_k_dim)
    q_out = q.new_zeros(q.shape).index_copy(1, out_index, q_cross.to(q.dtype))

    recurrent = not torch.is_grad_enabled() and T <= 64 and not training
    op = gdn_module.fused_recurrent_gated_delta_rule if recurrent else gdn_module.chunk_gated_delta_rule
    common = dict(k=k, v=v, g=L.a_proj(xb), beta=L.b_proj(xb), initial_state=state,
                  use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                  allow_neg_eigval=L.allow_neg_eigval, state_v_first=True, use_gate_in_kernel=True,
                  A_log=L.A_log, dt_bias=L.dt_bias)
    last_only = out_is_last and xo.shape[1] == 1
    o_base, new_state = op(q=q, output_final_state=use_cache or last_only, **common)
    if last_only:
        o_cross = read_state(new_state, q_cross).to(o_base.dtype)
    else:
        o_cross = op(q=q_out, output_final_state=False, **common)[0][:, out_index]
    o = torch.cat([o_base, o_cross], dim=1)
    g = rearrange(L.g_proj(x), "... (h d) -> ... h d", d=L.head_v_dim)
    return L.o_proj(rearrange(L.o_norm(o, g), "b t h d -> b t (h d)")), new_state, conv


def retnet_rotary_hook(layer) -> None:
    """Let the backbone's ``_init_weights`` rebuild a ``MultiScaleRetention`` layer's rotary table: a
    non-persistent buffer, which ``from_pretrained`` leaves uninitialised otherwise."""
    layer.rotary.reset_suite_parameters = layer.rotary.reset_parameters
