"""A small KV-cache generation engine for the E2E benchmark (paper Sec. 4.6, Table 4).

Static, preallocated K/V cache (one ``[B, Hkv, max_len, d]`` pair per layer), greedy decoding, and
on CUDA one captured CUDA graph per key-length bucket, so Python launch overhead does not dominate
a decode step. The per-layer math is the model's own: the attention mixer's methods
(:meth:`models.attention.Attention.project`, ``attend`` and ``output`` in prefill, ``project_decode`` with the
``stacked_scale_offset`` in a decode step) and the block's ``mlp_residual``; prefill attention goes through
:func:`models.kernels.attention`. The benchmarks' models come from :func:`suite.bench.bench_models.build_bench_model`.

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

Options (all off by default; the default path is unchanged):

* ``decode_attn="fa2"``: K and V caches token-major (``[B, capacity, Hkv, d]``) and decode attention through
  :func:`models.kernels.decode_attention` (FlashAttention-2's variable-length kernel with ``seqused_k`` on
  CUDA: one split-KV kernel per row instead of the matmul/softmax/matmul chain).
* ``fused=True``: the per-layer element-wise work of prefill and decode runs as the fused functions of
  :mod:`suite.bench.fused` (fused QKV and gate/up GEMMs over in-place concatenated weights; on CUDA compiled
  by ``torch.compile`` unless ``compiled=False``), fewer kernels per decode step and fewer passes over the
  activations in prefill.
* ``prefill_chunk=C`` (needs ``fused``; attention-only models): the prompt is prefilled in chunks of C tokens,
  chunk-major (every layer of chunk 1, then chunk 2, ...), each chunk's queries attending the cached keys
  they can reach, bottom-right aligned (``T_q != T_k``, served on CUDA by ``torch-fa2``); the output row
  (Orthros) goes through the layers after the last chunk.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from models import kernels
from models.backbone import MixerContext, apply_rope, rope_cos_sin, rope_frequencies
from suite.bench import fused as fz

RECURRENT_LAYERS = ("GatedDeltaNet", "GatedLinearAttention")


def _check_mixers(model):
    """The layers' mixers; each must be attention or a recurrent FLA mixer (:class:`baselines.fla_mixers.FLAMixer`)."""
    mixers = [layer.mixer for layer in model.model.layers]
    for i, m in enumerate(mixers):
        # RetNet is left out: its rotary offset is a host integer that a captured graph would freeze
        if not fz.is_attention(m) and type(getattr(m, "layer", None)).__name__ not in RECURRENT_LAYERS:
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
        fused: run the fused per-layer functions of :mod:`suite.bench.fused` (rebinds the model's Q/K/V and
            gate/up weights as slices of concatenated tensors, in place).
        compiled: torch.compile the fused functions (default: ``fused`` and on CUDA).
        prefill_chunk: prefill chunk length (needs ``fused``; not with recurrent layers); None: one pass.

    Slots past the current length hold zeros (``prefill`` clears what an earlier run left there), so a
    masked key contributes exactly 0 to the value product, never 0 * NaN. The scale-offset parameters are
    read from the model at every ``prefill`` and ``decode`` call, so weights loaded after the engine was
    built are used (in place, as ``load_state_dict`` does; a captured CUDA graph holds parameter addresses).
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
            raise ValueError(f"chunk={chunk} must divide bucket={bucket}")
        self.model, self.mixers = model, _check_mixers(model)
        self.attention = [fz.is_attention(m) for m in self.mixers]
        if decode_attn not in ("matmul", "fa2"):
            raise ValueError(f"decode_attn must be 'matmul' or 'fa2', got {decode_attn!r}")
        if prefill_chunk is not None and (not fused or prefill_chunk < 1 or not all(self.attention)):
            raise ValueError(f"prefill_chunk={prefill_chunk} needs fused=True, a positive chunk and a model whose "
                             f"every layer is attention")
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
        Hkv, d = cfg.num_key_value_heads, cfg.head_dim
        # K: [B, Hkv, capacity, d]; V chunk-major: [capacity / chunk, B, Hkv, chunk, d], so that the first
        # S chunks are one uniformly strided batch for the split-K value product (no copy of V)
        if decode_attn == "fa2":  # token-major K and V: [B, capacity, Hkv, d]
            self.k = [torch.zeros(batch, self.capacity, Hkv, d, device=self.device, dtype=self.dtype) if a else None
                      for a in self.attention]
            self.v = [torch.zeros_like(t) if t is not None else None for t in self.k]
        else:
            self.k = [torch.zeros(batch, Hkv, self.capacity, d, device=self.device, dtype=self.dtype) if a else None
                      for a in self.attention]
            self.v = [torch.zeros(self.capacity // chunk, batch, Hkv, chunk, d, device=self.device, dtype=self.dtype)
                      if a else None for a in self.attention]
        self.states: list[dict | None] = [None] * len(self.mixers)  # recurrent layers: static state buffers
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=self.device)  # next input token
        self.pos = torch.zeros(1, dtype=torch.long, device=self.device)  # its position
        self.next_tok = torch.zeros_like(self.tok)
        self.logits = torch.zeros(batch, cfg.vocab_size, device=self.device, dtype=self.dtype)  # last step's
        self.length = 0  # tokens in the cache (host copy of pos)
        self._freqs = rope_frequencies(cfg, self.device)  # the config's RoPE: inverse frequencies (static) and scale
        # decode rows are [base, output]: their scale-offsets stacked in static buffers (the mixer's
        # stacked_scale_offset), refreshed by _load_scale_offset at every prefill/decode call (captured graphs read
        # these buffers)
        self._so = [tuple(t.detach() for t in m.stacked_scale_offset()) if self.two_stream and a and m.scale_offset
                    else None for m, a in zip(self.mixers, self.attention)]
        self.use_graphs = (self.device.type == "cuda") if use_graphs is None else use_graphs
        self._graphs: dict[int, tuple] = {}
        self._pool = None
        if self.fused:
            compiled = (self.device.type == "cuda") if compiled is None else compiled
            self._fns_by_mode = {compiled: fz.LayerFns(cfg, compiled, compile_backend)}
            self._fns = self._fns_by_mode[compiled]
            self._compile_backend = compile_backend
            self._w = [fz.attn_weights(layer) if a else fz.mlp_weights(layer)
                       for layer, a in zip(model.model.layers, self.attention)]

    def kv_bytes(self) -> int:
        """Bytes of the preallocated K/V cache (attention layers)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)

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

    def _load_scale_offset(self) -> None:
        """Copy the live scale-offset parameters (the mixer's ``stacked_scale_offset``) into the decode buffers."""
        for so, mix in zip(self._so, self.mixers):
            if so is not None:
                alpha, beta = mix.stacked_scale_offset()
                so[0].copy_(alpha)
                so[1].copy_(beta)

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
        if T + 1 > self.max_len:
            raise ValueError(f"prompt of {T} tokens leaves no room in max_len={self.max_len}")
        m = self.model
        self._load_scale_offset()
        if self.fused:
            logits = self._prefill_fused(input_ids.to(self.device))
            self._finish_prefill(logits, T)
            return logits
        h = m.model.embed_tokens(input_ids.to(self.device))
        q_index = torch.arange(T, device=self.device)
        cos, sin = rope_cos_sin(q_index.expand(B, T), self._freqs, h.dtype)
        if self.two_stream:
            h = torch.cat([h, h[:, -1:]], dim=1)
        for i, (layer, mix) in enumerate(zip(m.model.layers, self.mixers)):
            x = layer.input_layernorm(h)
            if not self.attention[i]:
                h = h + self._recurrent(i, mix, x, 0)
                h = layer.mlp_residual(h)
                continue
            q_base, q_out, k, v = mix.project(x, T)  # q_out: the last token's output row (two-stream), or empty
            k = apply_rope(k, cos, sin)
            if self.decode_attn == "fa2":
                self._write_kv(i, 0, k, v)
                self._zero_tail(i, T)
            else:
                self.k[i][:, :, :T].copy_(k)
                self.k[i][:, :, T:].zero_()
                self._store_v(self.v[i], v)
            o = mix.attend(q_base, q_out, k, v, (cos, sin), q_index, slice(T - 1, T))
            del q_base, q_out, k, v
            h = layer.mlp_residual(h + mix.output(o))
        logits = m.lm_head(m.model.norm(h[:, -1]))
        self._finish_prefill(logits, T)
        return logits

    def _finish_prefill(self, logits: torch.Tensor, T: int) -> None:
        self.tok.copy_(logits.argmax(-1, keepdim=True))
        self.pos.fill_(T)
        self.length = T
        self.logits.copy_(logits)

    # ---- cache access shared by both layouts (prefill side; decode writes are in _step)

    def _write_kv(self, i: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v ``[B, Hkv, n, d]`` at positions ``start .. start + n - 1`` of layer i's caches."""
        n = k.shape[2]
        if self.decode_attn == "fa2":
            self.k[i][:, start:start + n].copy_(k.transpose(1, 2))
            self.v[i][:, start:start + n].copy_(v.transpose(1, 2))
            return
        self.k[i][:, :, start:start + n].copy_(k)
        c = self.chunk
        p = start
        while p < start + n:  # V is chunk-major: one copy per c-chunk the range touches
            e = min((p // c + 1) * c, start + n)
            self.v[i][p // c, :, :, p % c:p % c + (e - p)].copy_(v[:, :, p - start:e - start])
            p = e

    def _read_kv(self, i: int, lo: int, hi: int):
        """Layer i's cached k, v at positions ``lo .. hi - 1`` as ``[B, Hkv, hi - lo, d]`` (views or copies)."""
        if self.decode_attn == "fa2":
            return self.k[i][:, lo:hi].transpose(1, 2), self.v[i][:, lo:hi].transpose(1, 2)
        c = self.chunk
        c0, c1 = lo // c, -(-hi // c)
        v = self.v[i][c0:c1].permute(1, 2, 0, 3, 4).flatten(2, 3)  # [B, Hkv, (c1 - c0) c, d], a copy
        return self.k[i][:, :, lo:hi], v[:, :, lo - c0 * c:hi - c0 * c]

    def _zero_tail(self, i: int, T: int) -> None:
        """Zero layer i's cache slots from position T on (masked keys must hold finite values)."""
        if self.decode_attn == "fa2":
            self.k[i][:, T:].zero_()
            self.v[i][:, T:].zero_()
            return
        self.k[i][:, :, T:].zero_()
        c = self.chunk
        if T % c:
            self.v[i][T // c, :, :, T % c:].zero_()
        self.v[i][-(-T // c):].zero_()

    def _prefill_fused(self, ids: torch.Tensor) -> torch.Tensor:
        """Prefill with the fused layer functions (and chunks, if ``prefill_chunk``): logits ``[B, vocab]``."""
        m, fns = self.model, self._fns
        B, T = ids.shape
        dev, freqs = self.device, self._freqs
        h = m.model.embed_tokens(ids)
        dtype = h.dtype
        last = torch.tensor([T - 1], device=dev)
        h_out = h[:, -1:].clone() if self.two_stream else None
        cos_o, sin_o = rope_cos_sin(last.expand(B, 1), freqs, dtype)
        C = T if self.prefill_chunk is None else min(self.prefill_chunk, T)
        chunks = [(s, min(s + C, T)) for s in range(0, T, C)]
        rope = {}
        if len(chunks) > 1:  # chunk-major: all layers of a chunk, then the next
            for s, e in chunks:
                cos, sin = rope_cos_sin(torch.arange(s, e, device=dev).expand(B, e - s), freqs, dtype)
                for i in range(len(self.mixers)):
                    h[:, s:e] = self._fused_base_rows(i, h[:, s:e], s, e, cos, sin)
        else:
            rope[0] = rope_cos_sin(torch.arange(T, device=dev).expand(B, T), freqs, dtype)
        for i, mix in enumerate(self.mixers):
            w = self._w[i]
            if not self.attention[i]:
                rows = torch.cat([h, h_out], dim=1) if self.two_stream else h
                fns.dynamic_rows(rows)
                out = self._recurrent(i, mix, fns.norm()(rows, m.model.layers[i].input_layernorm.weight), 0)
                rows = fz.call_mlp_res(fns, w, rows + out)
                h, h_out = (rows[:, :T], rows[:, T:]) if self.two_stream else (rows, None)
                continue
            if len(chunks) == 1:
                h = self._fused_base_rows(i, h, 0, T, *rope[0])
            if self.two_stream:
                q, _, _ = fz.call_attn_in(fns, w, "out", h_out, cos_o, sin_o, dynamic=False)
                k, v = self._read_kv(i, 0, T)
                o = kernels.attention(q, k, v, last, None)
                h_out = fz.call_attn_out(fns, w, h_out, fz.token_major(o), dynamic=False)
        for i, a in enumerate(self.attention):
            if a:
                self._zero_tail(i, T)
        final = h_out if self.two_stream else h[:, -1:]
        return m.lm_head(m.model.norm(final))[:, 0]

    def _fused_base_rows(self, i: int, hc: torch.Tensor, s: int, e: int, cos, sin) -> torch.Tensor:
        """Base rows ``s .. e - 1`` through attention layer i: K/V written at s, queries attend the cached keys
        they reach (bottom-right aligned), then o_proj and the MLP. Returns the new rows ``[B, e - s, D]``."""
        fns, w = self._fns, self._w[i]
        q, k, v = fz.call_attn_in(fns, w, "base", hc, cos, sin)
        self._write_kv(i, s, k, v)
        lo = kernels.window_start(s, w.window)
        if lo < s:  # earlier chunks' keys: read the span back from the cache (it holds this chunk's too)
            k, v = self._read_kv(i, lo, e)
        o = kernels.attention(q, k, v, torch.arange(s - lo, e - lo, device=self.device), w.window)
        return fz.call_attn_out(fns, w, hc, fz.token_major(o))

    def _store_v(self, cache: torch.Tensor, v: torch.Tensor) -> None:
        """Write v [B, Hkv, T, d] (positions 0..T-1) into a chunk-major V cache and zero positions T and up."""
        c, T = self.chunk, v.shape[2]
        full = T // c
        if full:
            cache[:full].copy_(v[:, :, :full * c].unflatten(2, (full, c)).permute(2, 0, 1, 3, 4))
        if T % c:
            cache[full, :, :, :T % c].copy_(v[:, :, full * c:])
            cache[full, :, :, T % c:].zero_()
            full += 1
        cache[full:].zero_()

    @staticmethod
    def _attend(q, k, v, masked_out):
        """Decode attention of q [B, H, 1, d] over keys k [B, Hkv, L, d]; bool ``masked_out`` [L] drops keys.

        v is either [B, Hkv, L, d] or chunk-major [S, B, Hkv, c, d] with S * c = L; the latter splits the
        value product over the S chunks (split-K) and sums the partial products in fp32. Scores are
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
            out = parts.sum(0, dtype=torch.float32)
        else:
            out = torch.matmul(probs, v)
        return out.to(q.dtype).reshape(B, H, 1, d)

    def _step(self, L: int) -> None:
        """One decode step over the first L cache slots; reads tok/pos, writes K/V at pos, logits, next token."""
        m = self.model
        B, c = self.batch, self.chunk
        h = m.model.embed_tokens(self.tok)  # [B, 1, D]
        if self.two_stream:
            h = torch.cat([h, h], dim=1)  # base row, output row
        self._rope = rope_cos_sin(self.pos.expand(B, 1), self._freqs, h.dtype)
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
        if self.fused:
            R = h.shape[1]
            rope_rows = tuple(t.expand(B, R, t.shape[-1]) for t in self._rope)
        for i, (layer, mix) in enumerate(zip(m.model.layers, self.mixers)):
            if not self.attention[i]:
                if self.fused:
                    out = self._recurrent(i, mix, self._fns.norm()(h, layer.input_layernorm.weight), self.length)
                    h = fz.call_mlp_res(self._fns, self._w[i], h + out, dynamic=False)
                    continue
                x = layer.input_layernorm(h)
                h = h + self._recurrent(i, mix, x, self.length)
                h = layer.mlp_residual(h)
                continue
            if self.fused:
                rows = "base+out" if self.two_stream else "base"
                q, k, v = fz.call_attn_in(self._fns, self._w[i], rows, h, *rope_rows, dynamic=False)
            else:
                q, k, v = mix.project_decode(layer.input_layernorm(h), self._rope, self._so[i])
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
                    outs.append(self._attend(q[:, :, :1], kcache.index_select(2, safe), v_win, w_out))
                if self.two_stream or w is None:  # full row: every key up to pos
                    outs.append(self._attend(q[:, :, -1:], kcache[:, :, :L], vcache[:L // c], full_out))
            o = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
            if self.fused:
                h = fz.call_attn_out(self._fns, self._w[i], h, fz.token_major(o), dynamic=False)
                continue
            h = layer.mlp_residual(h + mix.output(o))
        logits = m.lm_head(m.model.norm(h[:, -1]))
        self.logits.copy_(logits)
        self.next_tok.copy_(logits.argmax(-1, keepdim=True))

    def set_compiled(self, compiled: bool) -> None:
        """Switch the fused functions between compiled and eager; drops captured graphs (they re-capture).
        Raises ValueError for an engine built without ``fused``."""
        if not self.fused:
            raise ValueError("set_compiled needs an engine built with fused=True")
        if compiled not in self._fns_by_mode:
            self._fns_by_mode[compiled] = fz.LayerFns(self.model.config, compiled, self._compile_backend)
        if self._fns is not self._fns_by_mode[compiled]:
            self._fns = self._fns_by_mode[compiled]
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
        if not (self.fused and self._fns.compiled):
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
        from suite.bench.gpu_common import errors

        def rel(a, b):
            return errors(a, b, torch.float32)["rel_err"]

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

        compiled = self.fused and self._fns.compiled
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
        if self.length + n_steps > self.max_len:
            raise ValueError(f"{n_steps} steps after {self.length} tokens exceed max_len={self.max_len}")
        self._load_scale_offset()
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
