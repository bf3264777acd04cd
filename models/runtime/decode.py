"""Decode (regime "Decode" of Sec. 3.2): a small KV-cache generation engine (the E2E benchmark, Sec. 4.6, Table 4).

Static, preallocated K/V cache (one ``[B, Hkv, max_len, d]`` pair per layer), greedy decoding, and
on CUDA one captured CUDA graph per key-length bucket, so Python launch overhead does not dominate
a decode step. Prefill is the runtime's :func:`models.runtime.prefill.prefill` into the engine's
:class:`models.runtime.kv.StaticKV`; a decode step runs the same per-layer step
(:class:`models.runtime.layer.LayerStep`) on one row per stream, with the decode attention of :mod:`models.kernels`.

Regimes (Sec. 3.2): Prefill runs T base rows plus (Orthros) one output row for the last token.
An Orthros decode step feeds the last generated token as one base row (writes its K/V, attends the
last w keys) and one output row (attends every key, gives the logits). A single-stream model
(Transformer, SWA) feeds one row that writes K/V and gives the logits.

Recurrent layers (GDN and the other FLA mixers; the GDN layers of Linear Hybrid and Orthros-H) keep
their state in static buffers: prefill and every decode step call the mixer itself with a cache slot
holding those buffers (FLA's fused-recurrent decode route) and copy the new state back in place, so
the step stays capturable. They hold no K/V.

Decode attention is written with static shapes so it can be captured: the output row attends the
first ``L`` cache slots (``L`` = position rounded up to a bucket) with a mask ``key <= position``,
scores by one GEMM per (sequence, KV head), the value product split into chunks (split-K, the
flash-decoding idea) so that a long context keeps the GPU busy. All sequences of a batch share one
prompt length (no padding).

Options (all off by default):

* ``decode_attn="fa2"``: K and V caches token-major (``[B, capacity, Hkv, d]``) and decode attention through
  :func:`models.kernels.decode_attention` (FlashAttention-2's variable-length kernel with ``seqused_k`` on
  CUDA: one split-KV kernel per row instead of the matmul/softmax/matmul chain).
* ``fused=True``: the step's fused QKV and gate/up GEMMs over in-place concatenated weights (on CUDA compiled by
  ``torch.compile`` unless ``compiled=False``): fewer kernels per decode step and fewer passes over the
  activations in prefill.
* ``prefill_chunk=C`` (attention-only models): each layer's prompt rows go in chunks of C tokens, each chunk's
  queries attending the cached keys they can reach, bottom-right aligned (``T_q != T_k``, served on CUDA by
  ``torch-fa2``).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from models import kernels
from models.backbone import MixerContext, rope_cos_sin, rope_frequencies
from models.runtime.kv import StaticKV
from models.runtime.layer import LayerStep, is_attention, token_major
from models.runtime.prefill import prefill

RECURRENT_LAYERS = ("GatedDeltaNet", "GatedLinearAttention")


def _check_mixers(model):
    """The layers' mixers; each must be attention or a recurrent FLA mixer (:class:`baselines.fla_mixers.FLAMixer`)."""
    mixers = [layer.mixer for layer in model.model.layers]
    for i, m in enumerate(mixers):
        # RetNet is left out: its rotary offset is a host integer that a captured graph would freeze
        if not is_attention(m) and type(getattr(m, "layer", None)).__name__ not in RECURRENT_LAYERS:
            raise ValueError(f"layer {i} mixer {type(m).__name__} is neither attention nor one of the FLA layers "
                             f"{RECURRENT_LAYERS}; the engine supports transformer, swa, orthros, gdn, gla, "
                             f"linear_hybrid and orthros_h")
    return mixers


class Engine:
    """Greedy generation with a static KV cache.

    Args:
        model: a :class:`models.backbone.SuiteForCausalLM` whose mixers are attention or recurrent FLA
            mixers (``two_stream`` decides Orthros / Orthros-H vs single-stream decoding), in eval mode,
            on its target device and dtype.
        batch: sequences per batch B.
        max_len: most tokens per sequence (prompt + generated); rounded up to ``bucket``.
        bucket: key-length granularity of decode attention (and of CUDA graphs).
        chunk: split-K chunk of the value product; must divide ``bucket``.
        use_graphs: capture CUDA graphs (default: on CUDA).
        decode_attn: ``"matmul"`` (default) or ``"fa2"`` (token-major caches, :func:`models.kernels.decode_attention`).
        fused: the step's fused GEMMs (:class:`models.runtime.layer.LayerStep`; rebinds the model's Q/K/V and
            gate/up weights as slices of concatenated tensors, in place).
        compiled: torch.compile the step's functions (default: ``fused`` and on CUDA); needs ``fused``.
        prefill_chunk: prefill chunk length (not with recurrent layers); None: one pass.

    Slots past the current length hold zeros (``prefill`` clears what an earlier run left there), so a
    masked key contributes exactly 0 to the value product, never 0 * NaN. The step reads the model's parameters
    (or, fused, views of them), so weights loaded in place after the engine was built (as ``load_state_dict``
    does) are used; a captured CUDA graph holds parameter addresses.
    The RoPE frequencies are the config's (:func:`models.backbone.rope_frequencies`), computed at construction.

    Raises:
        ValueError: unsupported mixers, bad sizes or option combinations.
    """

    def __init__(self, model, batch: int, max_len: int, bucket: int = 2048, chunk: int = 1024,
                 use_graphs: bool | None = None, decode_attn: str = "matmul", fused: bool = False,
                 compiled: bool | None = None, prefill_chunk: int | None = None,
                 compile_backend: str = "inductor"):
        if batch < 1 or max_len < 2:
            raise ValueError(f"batch must be >= 1 and max_len >= 2, got batch={batch}, max_len={max_len}")
        if bucket < 1 or chunk < 1 or bucket % chunk:
            raise ValueError(f"bucket={bucket} and chunk={chunk} must be >= 1, and chunk must divide bucket")
        self.model, self.mixers = model, _check_mixers(model)
        self.attention = [is_attention(m) for m in self.mixers]
        if decode_attn not in ("matmul", "fa2"):
            raise ValueError(f"decode_attn must be 'matmul' or 'fa2', got {decode_attn!r}")
        if prefill_chunk is not None and (prefill_chunk < 1 or not all(self.attention)):
            raise ValueError(f"prefill_chunk={prefill_chunk} needs a positive chunk and a model whose every layer is "
                             f"attention")
        if compiled and not fused:
            raise ValueError("compiled=True needs fused=True")
        self.decode_attn, self.fused, self.prefill_chunk = decode_attn, bool(fused), prefill_chunk
        cfg = model.config
        if max_len > cfg.max_position_embeddings:
            raise ValueError(f"max_len={max_len} exceeds max_position_embeddings={cfg.max_position_embeddings}")
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        self.two_stream = bool(model.two_stream)
        self.batch, self.bucket, self.chunk = batch, bucket, chunk
        self.capacity = math.ceil(max_len / bucket) * bucket
        self.max_len = max_len
        self.cache = StaticKV(self.attention, batch, cfg.num_key_value_heads, self.capacity, cfg.head_dim, self.dtype,
                              self.device, layout=decode_attn, chunk=chunk)
        self.k, self.v = self.cache.k, self.cache.v
        self.states: list[dict | None] = [None] * len(self.mixers)  # recurrent layers: static state buffers
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=self.device)  # next input token
        self.pos = torch.zeros(1, dtype=torch.long, device=self.device)  # its position
        self.next_tok = torch.zeros_like(self.tok)
        self.logits = torch.zeros(batch, cfg.vocab_size, device=self.device, dtype=self.dtype)  # last step's
        self.length = 0  # tokens in the cache (host copy of pos)
        self._freqs = rope_frequencies(cfg, self.device)  # the config's RoPE: inverse frequencies (static) and scale
        self.use_graphs = (self.device.type == "cuda") if use_graphs is None else use_graphs
        self._graphs: dict[int, tuple] = {}
        self._pool = None
        compiled = bool(fused and ((self.device.type == "cuda") if compiled is None else compiled))
        self._steps = {compiled: LayerStep(model, fused=fused, compiled=compiled, backend=compile_backend)}
        self.step = self._steps[compiled]

    def kv_bytes(self) -> int:
        """Bytes of the preallocated K/V cache (attention layers)."""
        return self.cache.nbytes()

    def state_bytes(self) -> int:
        """Bytes of the recurrent layers' states (recurrent + short-conv), 0 before the first prefill."""
        return sum(t.numel() * t.element_size() for st in self.states if st for t in st.values())

    def decode_bytes(self, context: int) -> int:
        """HBM bytes one decode step must move with ``context`` tokens cached: every weight but the
        embedding table once, K/V of ``context + 1`` keys per attention layer (plus the windowed base
        row's keys in a two-stream model), and each recurrent state read and written."""
        m = self.model
        weights = sum(p.numel() * p.element_size() for name, p in m.named_parameters() if "embed_tokens" not in name)
        kv_row = 2 * m.config.num_key_value_heads * m.config.head_dim * self.dtype.itemsize * self.batch  # K + V
        keys = 0
        for mix, a in zip(self.mixers, self.attention):
            if a:
                keys += context + 1
                if self.two_stream and mix.window is not None:
                    keys += min(mix.window, context + 1)
        return weights + keys * kv_row + 2 * self.state_bytes()

    def _slot_ctx(self, i: int, slot: dict, q_index: torch.Tensor):
        """Context for recurrent layer i on the new tokens at ``q_index`` [n] (T_out = 1, the last)."""
        n = q_index.shape[0]
        return MixerContext(positions=q_index.expand(self.batch, n), q_index=q_index,
                            out_index=q_index[-1:] - q_index[:1], key_mask=None, attention_mask=None,
                            cache=SimpleNamespace(layers={i: slot}), out_is_last=True)

    def _recurrent(self, i: int, mix, x, start: int):
        """Run recurrent layer i on rows x with its state; prefill (start == 0) (re)fills the static buffers.

        Decode (start > 0) reads positions from ``self.pos`` so that a captured graph stays valid.
        """
        n = x.shape[1] - (1 if self.two_stream else 0)
        if start == 0:
            slot = {}
            out = mix(x, self._slot_ctx(i, slot, torch.arange(n, device=self.device)))
            fresh = {k: v for k, v in slot.items() if isinstance(v, torch.Tensor)}
            if self.states[i] is None:
                self.states[i] = {k: v.clone() for k, v in fresh.items()}
            else:
                for k, v in fresh.items():
                    self.states[i][k].copy_(v)
            return out
        slot = dict(self.states[i], seen=start)
        out = mix(x, self._slot_ctx(i, slot, self.pos))
        for k, buf in self.states[i].items():
            if slot[k] is not buf:
                buf.copy_(slot[k])
        return out

    @torch.inference_mode()
    def prefill(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Run the prompt ``input_ids`` [B, T] (int64); returns logits of the last position [B, vocab].

        Resets the cache (K/V slots from T on are zeroed); sets the next input token to the greedy choice.
        Raises ValueError on a bad shape.
        """
        if input_ids.dim() != 2 or input_ids.shape[0] != self.batch:
            raise ValueError(f"input_ids must be [{self.batch}, T], got {tuple(input_ids.shape)}")
        B, T = input_ids.shape
        if T < 1:
            raise ValueError("input_ids hold no token (T = 0)")
        if T + 1 > self.max_len:
            raise ValueError(f"prompt of {T} tokens leaves no room in max_len={self.max_len}")

        def recurrent(i, x):
            return self._recurrent(i, self.mixers[i], x, 0)

        logits = prefill(self.model, self.step, input_ids.to(self.device), self.cache, 1, self.prefill_chunk,
                         recurrent, self._freqs)[:, 0]
        for i, a in enumerate(self.attention):
            if a:
                self.cache.zero_tail(i, T)
        self._finish_prefill(logits, T)
        return logits

    def _finish_prefill(self, logits: torch.Tensor, T: int) -> None:
        self.tok.copy_(logits.argmax(-1, keepdim=True))
        self.pos.fill_(T)
        self.length = T
        self.logits.copy_(logits)

    def _step(self, L: int) -> None:
        """One decode step over the first L cache slots; reads tok/pos, writes K/V at pos, logits, next token."""
        m, step = self.model, self.step
        B, c = self.batch, self.chunk
        h = m.model.embed_tokens(self.tok)  # [B, 1, D]
        if self.two_stream:
            h = torch.cat([h, h], dim=1)  # base row, output row
        R = h.shape[1]
        cos, sin = (t.expand(B, R, t.shape[-1]) for t in rope_cos_sin(self.pos.expand(B, 1), self._freqs, h.dtype))
        rows = "base+out" if self.two_stream else "base"
        # index math shared by all layers
        if self.decode_attn == "fa2":
            used = (self.pos + 1).to(torch.int32).expand(B).contiguous()  # keys 0 .. pos are valid
        else:
            full_out = torch.arange(L, device=self.device) > self.pos  # keys after pos: masked out
            pos_chunk, pos_off = self.pos // c, self.pos % c
            windows = {}
            for w in {mix.window for mix, a in zip(self.mixers, self.attention) if a and mix.window is not None}:
                idx = self.pos - w + 1 + torch.arange(w, device=self.device)
                safe = idx.clamp(min=0)
                windows[w] = (safe, safe // c, safe % c, idx < 0)
        for i, mix in enumerate(self.mixers):
            if not self.attention[i]:
                out = self._recurrent(i, mix, step.norm_in(i, h, dynamic=False), self.length)
                h = step.mlp_res(i, h + out, dynamic=False)
                continue
            q, k, v = step.attn_in(i, rows, h, cos, sin, dynamic=False)
            kcache, vcache = self.k[i], self.v[i]
            outs = []
            w = mix.window
            if self.decode_attn == "fa2":
                kcache.index_copy_(1, self.pos, k.transpose(1, 2))
                vcache.index_copy_(1, self.pos, v.transpose(1, 2))
                if self.two_stream or w is not None:  # windowed row: the last w keys
                    outs.append(kernels.decode_attention(q[:, :, :1], kcache, vcache, used, L, w))
                if self.two_stream or w is None:  # full row: every key up to pos
                    outs.append(kernels.decode_attention(q[:, :, -1:], kcache, vcache, used, L, None))
            else:
                kcache.index_copy_(2, self.pos, k)
                vcache[pos_chunk, :, :, pos_off] = v[:, :, 0][None]
                if self.two_stream or w is not None:  # windowed row: the last w keys
                    safe, w_chunk, w_off, w_out = windows[w]
                    v_win = vcache[w_chunk, :, :, w_off].permute(1, 2, 0, 3)  # [B, Hkv, w, d]
                    outs.append(kernels.decode_attention_split(q[:, :, :1], kcache.index_select(2, safe), v_win,
                                                               w_out))
                if self.two_stream or w is None:  # full row: every key up to pos
                    outs.append(kernels.decode_attention_split(q[:, :, -1:], kcache[:, :, :L], vcache[:L // c],
                                                               full_out))
            o = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
            h = step.attn_out(i, h, token_major(o), dynamic=False)
        logits = m.lm_head(m.model.norm(h[:, -1]))
        self.logits.copy_(logits)
        self.next_tok.copy_(logits.argmax(-1, keepdim=True))

    def set_compiled(self, compiled: bool) -> None:
        """Switch the step between compiled and eager; drops captured graphs (they re-capture).
        Raises ValueError for an engine built without ``fused``."""
        if not self.fused:
            raise ValueError("set_compiled needs an engine built with fused=True")
        if compiled not in self._steps:
            self._steps[compiled] = self.step.with_compiled(compiled)
        if self.step is not self._steps[compiled]:
            self.step = self._steps[compiled]
            self._graphs = {}

    @torch.inference_mode()
    def check_compiled(self, input_ids: torch.Tensor) -> dict:
        """Relative error of the compiled fused functions against the same functions run eagerly, on this
        model's shapes: prefill logits of ``input_ids`` and one decode step after it (run without a graph).

        Returns ``{"prefill_rel": ..., "decode_rel": ...}`` (Frobenius norms of the difference over the eager
        logits). Leaves the engine compiled, its cache holding the eager prefill of ``input_ids``.
        Raises ValueError for an engine without compiled fused functions.

        Both decode steps read the same input token (the prompt's last one), not each mode's greedy choice:
        on random weights the top-2 logits of a bf16 prefill are often closer than the two modes' rounding
        differences, so the greedy tokens can differ and the decode logits would then compare different inputs.
        """
        if not (self.fused and self.step.compiled):
            raise ValueError("check_compiled needs an engine with compiled fused functions")
        out = {}
        probe = input_ids[:, -1:].to(self.device)
        for mode in (True, False):
            self.set_compiled(mode)
            logits = self.prefill(input_ids).float()
            self.tok.copy_(probe)
            restore = self._keep_states()
            self._step(self._bucket())
            restore()
            out[mode] = (logits, self.logits.float().clone())
        self.set_compiled(True)
        def rel(a, b):  # ||a - b|| / ||b|| (Frobenius), in fp32
            a, b = a.float(), b.float()
            return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()

        return {"prefill_rel": rel(out[True][0], out[False][0]), "decode_rel": rel(out[True][1], out[False][1])}

    def _keep_states(self):
        """A function restoring the recurrent states as they are now (a test step advances them)."""
        saved = [{k: v.clone() for k, v in st.items()} if st else None for st in self.states]

        def restore():
            for st, kept in zip(self.states, saved):
                for k, v in (kept or {}).items():
                    st[k].copy_(v)

        return restore

    @torch.inference_mode()
    def step_kernels(self) -> tuple[int, str]:
        """Kernels one decode step launches at the current length, and what was counted.

        On CUDA: device kernels (and memcpy/memset) recorded by ``torch.profiler`` over one eager step (the
        CUDA graph replays exactly these). Elsewhere: aten operators dispatched (a proxy). The step's K/V
        write is idempotent; recurrent states are restored. Raises ValueError before the first prefill.
        """
        if self.length == 0:
            raise ValueError("call prefill() before step_kernels()")
        L = self._bucket()
        restore = self._keep_states()
        self._step(L)  # warm: compilation and autotuning stay out of the count
        restore()
        if self.device.type == "cuda":
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize(self.device)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                self._step(L)
                torch.cuda.synchronize(self.device)
            restore()
            n = sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
            return n, "CUDA kernels (torch.profiler)"
        from torch.utils._python_dispatch import TorchDispatchMode

        class Count(TorchDispatchMode):
            n = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                Count.n += 1
                return func(*args, **(kwargs or {}))

        compiled = self.fused and self.step.compiled
        if compiled:  # torch.compile does not run under a dispatch mode: count the same functions run eagerly
            self.set_compiled(False)
        try:
            with Count():
                self._step(L)
        finally:
            restore()
            if compiled:
                self.set_compiled(True)
        return Count.n, "aten ops (cpu)"

    def _bucket(self) -> int:
        return min(self.capacity, math.ceil((self.length + 1) / self.bucket) * self.bucket)

    def _graph(self, L: int):
        if L not in self._graphs:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            # warm-up runs: idempotent for K/V (same tok/pos, same K/V written) but not for recurrent
            # states, which each run advances; they are restored afterwards
            restore = self._keep_states()
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._step(L)
            torch.cuda.current_stream().wait_stream(stream)
            restore()
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                self._step(L)
            self._graphs[L] = graph
        return self._graphs[L]

    def prepare(self, n_steps: int) -> None:
        """Capture the graphs the next ``n_steps`` decode steps need (no-op without graphs)."""
        if not self.use_graphs:
            return
        saved, L = self.length, None
        with torch.inference_mode():
            for n in range(n_steps):
                self.length = saved + n
                if self._bucket() != L:
                    L = self._bucket()
                    self._graph(L)
        self.length = saved

    @torch.inference_mode()
    def decode(self, n_steps: int, keep_logits: bool = False) -> list[torch.Tensor]:
        """Run ``n_steps`` greedy decode steps; returns each step's logits [B, vocab] if ``keep_logits``.

        Raises ValueError if the cache would overflow ``max_len``.
        """
        if self.length == 0:
            raise ValueError("call prefill() before decode()")
        if n_steps < 0:
            raise ValueError(f"n_steps must be >= 0, got {n_steps}")
        if self.length + n_steps > self.max_len:
            raise ValueError(f"{n_steps} steps after {self.length} tokens exceed max_len={self.max_len}")
        kept = []
        for _ in range(n_steps):
            L = self._bucket()
            if self.use_graphs:
                self._graph(L).replay()
            else:
                self._step(L)
            self.tok.copy_(self.next_tok)
            self.pos.add_(1)
            self.length += 1
            if keep_logits:
                kept.append(self.logits.clone())
        return kept
