"""Analytic cost model of prefill, decode and E2E generation (paper Sec. 4.5-4.6, Fig. 4, Table 4).

Times are predicted from FLOPs and bytes with *measured* kernel rates (:class:`Rates`; defaults are
figures measured on one H200, overridable by what a GPU run measures, ``rates.json``):

* dense projections, FFN and LM head: FLOPs / dense-GEMM rate;
* full causal attention (Transformer): FLOPs / SDPA-flash rate; FLOPs = 4 * Hq * d * (causal query-key pairs);
* window attention (Orthros base stream, w keys per query): FLOPs / window-kernel rate;
* single-query attention (Orthros output token, decode): bytes of K/V read / HBM bandwidth;
* element-wise work (norms, RoPE, residuals, SwiGLU gate): a rough count of bf16 passes / HBM bandwidth;
* decode steps (:func:`decode_step_time`) are HBM bound: (weight bytes + K/V bytes read) / HBM bandwidth;
* decode under load (:func:`decode_step_predict`, any batch): per phase the larger of its bytes over HBM bandwidth
  and its FLOPs over the kernel rate (weight GEMMs: dense-GEMM rate; attention: SDPA rate), summed, plus a fixed
  cost per kernel the step launches (``kernel_overhead_s``). Orthros puts 2 rows per sequence through the GEMMs,
  the Transformer 1, so at a batch large enough for the GEMMs to leave the memory-bound regime the second row costs.

Orthros prefill (regime "Prefill", T_out = 1) follows :class:`models.backbone.SuiteForCausalLM`:
T base rows (window attention, build K/V) plus one output row (full attention over the T keys).

On N GPUs (:func:`prefill_time` with ``gpus``) the model follows :mod:`models.runtime.seq_parallel`: compute
splits evenly (head-tail chunks balance the Transformer's causal pairs), plus per layer the collectives at
the link bandwidth and latency of :class:`Rates` (not overlapped with compute) and, for the Transformer,
the HBM traffic that context parallelism adds (all-gathered K/V reassembled, K/V repeated to the query
heads for the flash kernel, the log-sum-exp merge of two partial outputs).
An Orthros decode step processes two rows per sequence (one base, one output) but reads the weights once;
the output row reads the whole K/V history and the base row the last w keys.

Run ``python -m suite.cost_model --out results/gpu/cost_model.csv`` for the prediction table.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from models.sizes import get_size
from suite.archs import PAPER_WINDOW

ARCHS = ("transformer", "orthros")
BYTES_BF16 = 2


@dataclass(frozen=True)
class Shape:
    """Backbone shape: hidden D, layers L, query heads Hq, KV heads Hkv, head dim d, FFN width F, vocab V."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int

    @classmethod
    def from_size(cls, name: str) -> "Shape":
        """Shape of a named size in :mod:`models.sizes` (``"qwen3_8b"``); ValueError for unknown names."""
        s = get_size(name)
        return cls(s.hidden_size, s.num_hidden_layers, s.num_attention_heads, s.num_key_value_heads,
                   s.head_dim or s.hidden_size // s.num_attention_heads, s.intermediate_size, s.ref_vocab)

    @classmethod
    def from_config(cls, config) -> "Shape":
        """Shape of a :class:`models.backbone.SuiteConfig`."""
        return cls(config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                   config.num_key_value_heads, config.head_dim, config.intermediate_size, config.vocab_size)

    def layer_params(self) -> int:
        """Weights of one layer (Q, K, V, O, gate/up/down, two norms)."""
        qo = 2 * self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        return qo + kv + 3 * self.hidden * self.ffn + 2 * self.hidden

    def weight_bytes_per_step(self, bytes_per_el: int = BYTES_BF16) -> int:
        """Bytes of weights one decode step reads: all layers, final norm, LM head (not the embedding table)."""
        return bytes_per_el * (self.layers * self.layer_params() + self.hidden + self.hidden * self.vocab)

    def kv_bytes_per_token(self, bytes_per_el: int = BYTES_BF16) -> int:
        """K/V cache bytes of one token over all layers."""
        return bytes_per_el * 2 * self.kv_heads * self.head_dim * self.layers


@dataclass(frozen=True)
class Rates:
    """Kernel rates. Defaults: measured on one H200; TFLOP/s and bytes/s.

    gemm_tflops: dense GEMMs of one Qwen3-8B layer at 128K (73.6 ms, 687 TFLOP/s).
    attn_tflops: torch SDPA flash, causal, 128K (564 TFLOP/s).
    window_tflops: FLA ``parallel_attn(window_size=128)`` at 128K: 2.90 ms for 2.75e11 FLOPs (95 TFLOP/s).
    hbm_bytes_per_s: copy bandwidth (read + write bytes per second), 4.3e12.
    link_bytes_per_s, link_latency_s: GPU-to-GPU link for sequence parallelism (NVLink 4, assumed,
        not measured): 450 GB/s per direction received by each rank, 20 us per collective.
    kernel_overhead_s: time per kernel of a CUDA-graph decode step beyond its bytes, 3.4 us: fitted to the batch-2
        decode rows of ``results/gpu/e2e.csv`` at commit 22ef7c3, (step - HBM bound) / kernels per step = 3.46 us
        (Orthros, 884 kernels) and 3.33 us (Transformer, 702), before any decode-under-load cell was measured.
    """

    gemm_tflops: float = 687.0
    attn_tflops: float = 564.0
    window_tflops: float = 95.0
    hbm_bytes_per_s: float = 4.3e12
    link_bytes_per_s: float = 450e9
    link_latency_s: float = 20e-6
    kernel_overhead_s: float = 3.4e-6

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"rate {name} must be a positive number, got {value!r}")

    @classmethod
    def load(cls, path: str | Path) -> "Rates":
        """Rates from a JSON file of ``{field: value}`` (unknown keys are ignored, missing keep defaults)."""
        data = json.loads(Path(path).read_text())
        known = {k: float(v) for k, v in data.items() if k in cls.__dataclass_fields__}
        return replace(cls(), **known)


def _check(T: int, arch: str, window: int | None = None, batch: int = 1) -> None:
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"sequence length must be a positive integer, got {T!r}")
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r} for the cost model; known: {', '.join(ARCHS)}")
    if arch == "orthros" and (window is None or window < 1):
        raise ValueError(f"Orthros needs a window >= 1, got {window!r}")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")


def causal_pairs(T: int, window: int | None = None) -> int:
    """Query-key pairs of causal attention over T tokens: sum_t min(t + 1, w) (all t + 1 if w is None)."""
    if window is None or window >= T:
        return T * (T + 1) // 2
    return window * (window + 1) // 2 + (T - window) * window


def dense_flops(shape: Shape, rows_q: int, rows_kv: int) -> int:
    """FLOPs of one layer's dense work: Q, O and FFN on ``rows_q`` rows, K and V on ``rows_kv`` rows."""
    D, qd, kvd = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    per_q_row = 2 * D * qd * 2 + 2 * 3 * D * shape.ffn  # q_proj + o_proj + gate/up/down
    return rows_q * per_q_row + rows_kv * 2 * 2 * D * kvd


def attn_flops(shape: Shape, pairs: int) -> int:
    """FLOPs of attention over ``pairs`` query-key pairs: QK^T and PV, 2 FLOPs per multiply-add each."""
    return 4 * shape.heads * shape.head_dim * pairs


def prefill_flops(shape: Shape, T: int, arch: str, window: int | None = PAPER_WINDOW, batch: int = 1) -> dict:
    """FLOPs of a full-model prefill of ``batch`` sequences of T tokens, logits for the last token only.

    Returns a dict with ``dense``, ``window_attn``, ``full_attn``, ``query_attn`` (Orthros's output
    token), ``lm_head`` and ``total`` (all FLOPs, all layers).

    Raises:
        ValueError: T < 1, unknown arch, Orthros without a window, batch < 1.
    """
    _check(T, arch, window, batch)
    L = shape.layers
    out = dict(dense=0, window_attn=0, full_attn=0, query_attn=0, lm_head=2 * shape.hidden * shape.vocab)
    if arch == "transformer":
        out["dense"] = L * dense_flops(shape, T, T)
        out["full_attn"] = L * attn_flops(shape, causal_pairs(T))
    else:
        out["dense"] = L * dense_flops(shape, T + 1, T)
        out["window_attn"] = L * attn_flops(shape, causal_pairs(T, window))
        out["query_attn"] = L * attn_flops(shape, T)
    out = {k: v * batch for k, v in out.items()}
    out["total"] = sum(out.values())
    return out


def train_flops(shape: Shape, T: int, arch: str, window: int | None = None, batch: int = 1) -> int:
    """FLOPs of one training step (forward + backward, 3x the forward) on ``batch`` sequences of T tokens with the
    next-token loss at every position (the PT regime). A Transformer (``window``: SWA) runs each layer's projections,
    FFN and attention on T rows; Orthros runs Q, O and FFN on both streams (2T rows), K and V on the base stream, the
    base stream's window attention and the output stream's full causal attention. Raises ValueError as
    :func:`prefill_flops`."""
    _check(T, arch, window, batch)
    if arch == "transformer":
        layer = dense_flops(shape, T, T) + attn_flops(shape, causal_pairs(T, window))
    else:
        layer = dense_flops(shape, 2 * T, T) + attn_flops(shape, causal_pairs(T, window) + causal_pairs(T))
    return 3 * batch * (shape.layers * layer + T * 2 * shape.hidden * shape.vocab)


def elementwise_bytes(shape: Shape, rows: int, arch: str, fused: bool = False) -> float:
    """Rough bytes moved by element-wise kernels of one layer over ``rows`` rows (bf16).

    Eager PyTorch (``fused=False``), counted passes (read + write) per row: 10 x D (two norms, two residual
    adds), 5 x F (SiLU, gate product), 12 x (Hq + Hkv) x d (RoPE, transposes), 2 x Hq x d (attention output
    layout), plus 3 x Hq x d for Orthros's query scale-offset.
    Fused (:mod:`models.runtime.layer`, fused and compiled): 9 x D (norm; residual + norm; residual), 3 x F (SiLU
    * up in one pass), 2 x (Hq + Hkv) x d (q/k norm, scale-offset and RoPE in one pass), 2 x Hq x d (attention output
    layout). An estimate, not a measurement.
    """
    qd, kd = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    if fused:
        passes = 9 * shape.hidden + 3 * shape.ffn + 2 * (qd + kd) + 2 * qd
    else:
        passes = 10 * shape.hidden + 5 * shape.ffn + 12 * (qd + kd) + 2 * qd + (3 * qd if arch == "orthros" else 0)
    return BYTES_BF16 * passes * rows


MERGE_BYTES_PER_EL = 34  # sdpa-flash-lse merge: two bf16 partials to fp32 (2+4 each), lerp (4+4+4), back to bf16 (4+2)


def prefill_time(shape: Shape, T: int, arch: str, gpus: int = 1, rates: Rates | None = None,
                 window: int | None = PAPER_WINDOW, batch: int = 1, fused: bool = False) -> dict:
    """Predicted prefill seconds, by component, on ``gpus`` GPUs with sequence (context) parallelism.

    ``fused``: element-wise work as the fused (compiled) path moves it (:func:`elementwise_bytes`).

    Dense, element-wise and attention work split evenly over the GPUs (ideal load balance). On N > 1 GPUs,
    per layer (:mod:`models.runtime.seq_parallel`; collectives are not overlapped with compute):

    * Orthros: two all_gathers of the (w-1)-token K/V halo (each rank receives N-1 tails) and two
      all_reduces merging the output token's partial softmax (fp32): ``comm_s``.
    * Transformer: two all_gathers of every rank's K and V (each rank receives (N-1)/N of the T tokens'
      K/V): ``comm_s``; and ``cp_s``, the HBM bytes context parallelism adds: the gathered K/V reassembled
      (2 x T tokens' K/V), the K/V of ~T keys repeated to Hq heads for the flash kernel (read Hkv + write Hq
      heads, K and V), and the log-sum-exp merge of two partial outputs over the T/N queries
      (``MERGE_BYTES_PER_EL`` per output element).

    Returns dict with ``dense_s``, ``attn_s``, ``elementwise_s``, ``lm_head_s``, ``comm_s``, ``cp_s``, ``total_s``.

    Raises:
        ValueError: bad T/arch/window/batch, or gpus < 1.
    """
    if not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a positive integer, got {gpus!r}")
    rates = rates or Rates()
    f = prefill_flops(shape, T, arch, window, batch)
    gemm, hbm, link, lat = rates.gemm_tflops * 1e12, rates.hbm_bytes_per_s, rates.link_bytes_per_s, rates.link_latency_s
    kv_tok_layer = shape.kv_bytes_per_token() / shape.layers
    rows = T + (1 if arch == "orthros" else 0)
    L, qd = shape.layers, shape.heads * shape.head_dim
    out = {
        "dense_s": f["dense"] / gpus / gemm,
        "elementwise_s": L * batch * elementwise_bytes(shape, rows, arch, fused) / gpus / hbm,
        "lm_head_s": max(f["lm_head"] / gemm, BYTES_BF16 * shape.hidden * shape.vocab / hbm),
        "comm_s": 0.0,
        "cp_s": 0.0,
    }
    if arch == "transformer":
        out["attn_s"] = f["full_attn"] / gpus / (rates.attn_tflops * 1e12)
        if gpus > 1:
            gathered = batch * T * kv_tok_layer * (gpus - 1) / gpus
            out["comm_s"] = L * (gathered / link + 2 * lat) + lat  # + the logits broadcast
            repeat = batch * T * 2 * (shape.heads + shape.kv_heads) * shape.head_dim * BYTES_BF16
            merge = batch * T / gpus * qd * MERGE_BYTES_PER_EL
            out["cp_s"] = L * (2 * batch * T * kv_tok_layer + repeat + merge) / hbm
    else:
        attn = f["window_attn"] / gpus / (rates.window_tflops * 1e12)
        out["attn_s"] = attn + L * batch * T * kv_tok_layer / gpus / hbm  # output token reads all K/V once
        if gpus > 1:
            halo = batch * (gpus - 1) * (window - 1) * kv_tok_layer
            merge = batch * shape.heads * (shape.head_dim + 2) * 4  # fp32 partial output, max, sum-exp
            out["comm_s"] = L * ((halo + 2 * merge) / link + 4 * lat)
    out["total_s"] = sum(v for k, v in out.items() if k != "total_s")
    return out


def seq_parallel_speedup(shape: Shape, T: int, arch: str, gpus: int, rates: Rates | None = None,
                         window: int | None = PAPER_WINDOW) -> float:
    """Predicted same-arch speedup of ``gpus`` GPUs over one: prefill_time(1) / prefill_time(gpus)."""
    one = prefill_time(shape, T, arch, 1, rates, window)["total_s"]
    return one / prefill_time(shape, T, arch, gpus, rates, window)["total_s"]


def decode_step_bytes(shape: Shape, context: int, batch: int, arch: str, window: int | None = PAPER_WINDOW) -> int:
    """HBM bytes one decode step reads: weights once + K/V of ``context + 1`` keys per sequence
    (Orthros adds its base token's min(w, context + 1) keys)."""
    _check(context + 1, arch, window, batch)
    keys = context + 1 + (min(window, context + 1) if arch == "orthros" else 0)
    return shape.weight_bytes_per_step() + batch * keys * shape.kv_bytes_per_token()


def decode_step_time(shape: Shape, context: int, batch: int, arch: str, rates: Rates | None = None,
                     window: int | None = PAPER_WINDOW) -> float:
    """Seconds of one HBM-bound decode step with ``context`` tokens already cached (one new token per sequence)."""
    rates = rates or Rates()
    return decode_step_bytes(shape, context, batch, arch, window) / rates.hbm_bytes_per_s


def decode_rows(batch: int, arch: str) -> int:
    """Rows one decode step puts through the weight GEMMs: 2 per sequence for Orthros (base + output), else 1."""
    return batch * (2 if arch == "orthros" else 1)


def decode_step_flops(shape: Shape, context: int, batch: int, arch: str, window: int | None = PAPER_WINDOW) -> dict:
    """FLOPs of one decode step with ``context`` tokens cached: ``gemm`` (every layer's projections and FFN on all
    :func:`decode_rows`, as the fused step runs them, and the LM head on one row per sequence) and ``attn`` (each
    sequence's new query over its ``context + 1`` keys, plus Orthros's base query over its last
    ``min(w, context + 1)``)."""
    _check(context + 1, arch, window, batch)
    rows = decode_rows(batch, arch)
    keys = context + 1 + (min(window, context + 1) if arch == "orthros" else 0)
    gemm = shape.layers * dense_flops(shape, rows, rows) + batch * 2 * shape.hidden * shape.vocab
    return {"gemm": gemm, "attn": shape.layers * batch * attn_flops(shape, keys)}


def decode_step_predict(shape: Shape, context: int, batch: int, arch: str, kernels_per_step: int,
                        rates: Rates | None = None, window: int | None = PAPER_WINDOW) -> dict:
    """Predicted decode step (seconds) at ``batch`` sequences of ``context`` cached tokens.

    ``gemm_s`` = max(weight bytes / HBM, GEMM FLOPs / gemm rate), ``attn_s`` = max(K/V bytes / HBM, attention FLOPs /
    attention rate), ``overhead_s`` = ``kernels_per_step`` x ``rates.kernel_overhead_s``; ``predicted_s`` is their sum.
    Also the two bounds of the whole step: ``hbm_bound_s`` (all bytes / HBM, as :func:`decode_step_time`) and
    ``compute_bound_s`` (all FLOPs at the phases' rates).
    """
    rates = rates or Rates()
    if not isinstance(kernels_per_step, int) or kernels_per_step < 0:
        raise ValueError(f"kernels_per_step must be a non-negative integer, got {kernels_per_step!r}")
    weights = shape.weight_bytes_per_step()
    kv = decode_step_bytes(shape, context, batch, arch, window) - weights
    f = decode_step_flops(shape, context, batch, arch, window)
    hbm = rates.hbm_bytes_per_s
    gemm_c, attn_c = f["gemm"] / (rates.gemm_tflops * 1e12), f["attn"] / (rates.attn_tflops * 1e12)
    gemm_s, attn_s = max(weights / hbm, gemm_c), max(kv / hbm, attn_c)
    overhead_s = kernels_per_step * rates.kernel_overhead_s
    return {"gemm_s": gemm_s, "attn_s": attn_s, "overhead_s": overhead_s, "predicted_s": gemm_s + attn_s + overhead_s,
            "hbm_bound_s": (weights + kv) / hbm, "compute_bound_s": gemm_c + attn_c,
            "gemm_flops": f["gemm"], "attn_flops": f["attn"], "weight_bytes": weights, "kv_bytes": kv}


def e2e(shape: Shape, input_len: int, output_len: int, batch: int, arch: str, rates: Rates | None = None,
        window: int | None = PAPER_WINDOW) -> dict:
    """Predicted generation of ``output_len`` tokens per sequence after an ``input_len`` prompt, batch ``batch``.

    TTFT = prefill of the batch (it yields the first token); then output_len - 1 decode steps.
    Returns dict ``ttft_s``, ``e2e_s``, ``output_tok_s`` = batch*output_len/E2E and
    ``decode_tok_s`` = batch*output_len/(E2E - TTFT) (Table 4's definitions; the last is inf for output_len = 1).

    Raises:
        ValueError: non-positive lengths or batch, unknown arch.
    """
    if not isinstance(output_len, int) or output_len < 1:
        raise ValueError(f"output_len must be a positive integer, got {output_len!r}")
    rates = rates or Rates()
    ttft = prefill_time(shape, input_len, arch, 1, rates, window, batch)["total_s"]
    steps = output_len - 1
    # decode bytes are affine in the context, so the sum over steps is the step at the mean context times steps
    weights = shape.weight_bytes_per_step()
    if steps:
        first = decode_step_bytes(shape, input_len, batch, arch, window) - weights
        last = decode_step_bytes(shape, input_len + steps - 1, batch, arch, window) - weights
        decode = steps * (weights + (first + last) / 2) / rates.hbm_bytes_per_s
    else:
        decode = 0.0
    total = ttft + decode
    return {"ttft_s": ttft, "e2e_s": total, "output_tok_s": batch * output_len / total,
            "decode_tok_s": batch * output_len / decode if decode else float("inf")}


# Paper values (Table 4, Fig. 4) that the prediction table prints side by side.
PAPER_PREFILL_SPEEDUP = {(1, 131072): 3.5, (8, 1048576): 21.9}
PAPER_E2E = {  # (input, output): (TTFT speedup, E2E speedup)
    (131072, 128): (4.54, 3.45), (130048, 1024): (4.40, 1.80), (122880, 8192): (4.46, 1.12)}


def prediction_rows(shape: Shape, rates: Rates, window: int = PAPER_WINDOW, size: str = "qwen3_8b") -> list[dict]:
    """Rows of the prediction table: prefill speedup vs length (8K..1M) on 1 and 8 GPUs, and E2E rows."""
    rows = []
    for gpus in (1, 8):
        for k in range(8):
            T = 8192 << k
            t = prefill_time(shape, T, "transformer", gpus, rates, None)["total_s"]
            o = prefill_time(shape, T, "orthros", gpus, rates, window)["total_s"]
            headline = (gpus, T) == (8, 1048576)
            rows.append(dict(quantity="prefill_speedup", condition="headline 21.9x" if headline else "",
                             gpus=gpus, batch=1, input_len=T, output_len=0, transformer_s=t, orthros_s=o,
                             speedup=t / o, paper_value=PAPER_PREFILL_SPEEDUP.get((gpus, T))))
    for (inp, out), (paper_ttft, paper_e2e) in PAPER_E2E.items():
        t = e2e(shape, inp, out, 2, "transformer", rates, None)
        o = e2e(shape, inp, out, 2, "orthros", rates, window)
        headline = "headline 3.45x" if out == 128 else ""
        for q, key, paper in (("ttft_speedup", "ttft_s", paper_ttft), ("e2e_speedup", "e2e_s", paper_e2e)):
            rows.append(dict(quantity=q, condition=headline if q == "e2e_speedup" else "", gpus=1, batch=2,
                             input_len=inp, output_len=out, transformer_s=t[key], orthros_s=o[key],
                             speedup=t[key] / o[key], paper_value=paper))
        for q in ("output_tok_s", "decode_tok_s"):
            rows.append(dict(quantity=q, condition="", gpus=1, batch=2, input_len=inp, output_len=out,
                             transformer_s=None, orthros_s=None, transformer_value=t[q], orthros_value=o[q],
                             speedup=o[q] / t[q], paper_value=None))
    for row in rows:
        row.update(shape=size, window=window, method="cost-model prediction", status="ok",
                   rates=json.dumps(asdict(rates), sort_keys=True))
    return rows


def main(argv=None) -> None:
    from suite.cli import in_file, out_file, positive_int, usage_errors
    from suite.common import size_name
    from suite.provenance import provenance, write_csv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=out_file, required=True, help="CSV to write (e.g. results/gpu/cost_model.csv)")
    ap.add_argument("--size", type=size_name, default="qwen3_8b")
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW)
    ap.add_argument("--rates", type=in_file, default=None,
                    help="JSON of measured rates (prefill_gpu writes rates.json)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    with usage_errors(ap):  # a rates file that is not JSON
        rates = Rates.load(args.rates) if args.rates else Rates()
    rows = prediction_rows(Shape.from_size(args.size), rates, args.window, args.size)
    prov = provenance("gpu", None, "bf16", "cost-model", "cpu", time.perf_counter() - start)
    prov["device"] = "model of one H200 (rates: " + (args.rates or "built-in defaults") + ")"
    write_csv([{**r, **prov} for r in rows], args.out)
    print(f"{'quantity':16} {'gpus':>4} {'in':>8} {'out':>5} {'pred':>7} {'paper':>6}  condition")
    for r in rows:
        paper = "" if r["paper_value"] is None else f"{r['paper_value']:.2f}"
        print(f"{r['quantity']:16} {r['gpus']:4d} {r['input_len']:8d} {r['output_len']:5d} {r['speedup']:7.2f} "
              f"{paper:>6}  {r['condition']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
