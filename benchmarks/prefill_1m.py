"""A 1M-token Orthros prefill on one GPU with an FP8 K/V cache (beyond the paper).

Qwen3-8B shape (36 layers, 32/8 heads, d 4096, FFN 12288, vocab 151936), random bf16 weights, window 128.
At 1,048,576 tokens the bf16 K/V cache alone is 36 x 2 x 1M x 8 x 128 x 2 B = 151 GB > the H200's 141 GB,
so :class:`models.runtime.prefill.PrefillRunner` keeps it in FP8 (:class:`models.runtime.kv.FP8KV`: e4m3 with one
fp32 scale per (layer, KV head, 4096-token block), 75.5 GB) and runs layer-major in row chunks (64K rows:
QKV, window attention over the chunk plus its 127-key halo, o_proj and the FFN per chunk; the output token
goes through each layer after its last chunk, attending all 1M keys dequantized). Only the last token's
logits are computed (the LM head on one row).

Rows of ``prefill_1m_fp8.csv`` (row by row; ``method`` says what each is):

* ``check``: at ``--check-len`` (128K) with the last ``--n-out`` positions as output tokens, the chunked bf16
  runner vs the model's own forward (the bf16 noise floor of two implementations), and FP8 vs bf16 K/V
  (top-1 agreement of the logits, max |difference| and relative Frobenius error; values in units of the
  bf16 logits' RMS where named ``/rms``);
* ``full-model (fp8 kv, chunked)``: the 1M prefill: ms, tokens/s, TFLOP/s, MFU (vs ``--matmul-tflops`` or
  rates.json), peak memory (``torch.cuda.max_memory_allocated``), K/V bytes;
* the Transformer at 1M stays layer-wise: a row copied from ``--prefill-csv`` (method
  ``one-layer x n_layers``, labelled with its source), no new measurement;
* targets (into ``targets.csv`` beside it): FP8 top-1 agreement >= 0.99 (random weights; see the noise-floor row:
  bf16 vs bf16 already disagrees on random-weight logits whose top-2 gaps are tiny), FP8 max |dlogit| <= 0.4 x
  RMS(bf16 logits) (the stated bound: e4m3 rounds each element with ~3.6% RMS relative error; the max over ~78M
  logits of a roughly Gaussian error is ~6 sigma), and "1M single-GPU Orthros prefill completes".

GPU: ``python -m benchmarks.prefill_1m --out-dir $OUT``. CPU smoke: ``--device cpu --smoke``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchmarks.bench_models import build_bench_model
from benchmarks.gpu_common import RowWriter, common_columns, errors, free, peak_gib, reset_peak, timed
from models.runtime.prefill import PrefillRunner
from suite import cost_model as cm
from suite.archs import PAPER_WINDOW
from suite.cli import device_name, in_file, out_folder, positive_int, usage_errors
from suite.common import kernel_names, size_name
from suite.provenance import read_csv


def compare(x: torch.Tensor, y: torch.Tensor) -> dict:
    """Logits x vs reference y ``[B, n, vocab]``: top-1 agreement, max |x - y|, relative Frobenius error, and
    the max difference in units of y's RMS."""
    x, y = x.float(), y.float()
    rms = float(y.pow(2).mean().sqrt())
    err = errors(x, y, torch.float32)
    return {"top1_agreement": float((x.argmax(-1) == y.argmax(-1)).float().mean()), "max_abs": err["max_abs_err"],
            "rel_err": err["rel_err"], "logit_rms": rms, "max_abs_over_rms": err["max_abs_err"] / rms,
            "finite": bool(torch.isfinite(x).all())}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--size", type=size_name, default="qwen3_8b")
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW)
    ap.add_argument("--seq-len", type=positive_int, default=1048576)
    ap.add_argument("--check-len", type=positive_int, default=131072)
    ap.add_argument("--n-out", type=positive_int, default=512, help="output positions compared at --check-len")
    ap.add_argument("--chunk", type=positive_int, default=65536)
    ap.add_argument("--fp8-block", type=positive_int, default=4096)
    ap.add_argument("--compiled", choices=("auto", "on", "off"), default="auto", help="fused functions compiled")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--prefer-full", type=kernel_names, default="",
                    help="attention kernels to try first (full / one-query calls)")
    ap.add_argument("--prefer-window", type=kernel_names, default="",
                    help="attention kernels to try first (window calls)")
    ap.add_argument("--attn-choice", type=in_file, default=None,
                    help="attn_choice.json of benchmarks.attn_kernels (preferences)")
    ap.add_argument("--rates", type=in_file, default=None, help="rates.json (matmul_tflops for MFU)")
    ap.add_argument("--prefill-csv", default=None, help="prefill.csv holding the Transformer's one-layer 1M row (an "
                    "earlier step writes it; without it that row reads 'not run')")
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu")
    ap.add_argument("--smoke", action="store_true", help="tiny model and lengths (CPU plumbing check)")
    args = ap.parse_args(argv)
    if args.chunk % args.fp8_block:
        ap.error(f"--chunk {args.chunk} must be a multiple of --fp8-block {args.fp8_block}")
    device = torch.device(args.device)
    from models import kernels

    prefer_full, prefer_window = args.prefer_full, args.prefer_window
    with usage_errors(ap):  # a choice or rates file that is not JSON, or names no known kernel
        if args.attn_choice:
            choice = json.loads(Path(args.attn_choice).read_text())
            prefer_full = prefer_full or [k for k in [choice.get("full")] if k and k != "blocked"]
            prefer_window = prefer_window or [k for k in [choice.get("window")] if k and k != "blocked"]
        kernels.prefer_kernels(prefer_full, prefer_window)
        matmul = json.loads(Path(args.rates).read_text()).get("matmul_tflops") if args.rates else None
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    size, overrides = args.size, {"window_size": args.window}
    if args.smoke:
        size = "1M"
        overrides.update(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, intermediate_size=128)
    compiled = device.type == "cuda" if args.compiled == "auto" else args.compiled == "on"
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    writer = RowWriter(out_dir / "prefill_1m_fp8.csv", common_columns(device, "bfloat16" if dtype == torch.bfloat16
                                                                      else "float32"))
    torch.manual_seed(0)
    model = build_bench_model("orthros", size, device, dtype, args.seq_len + 1, **overrides)
    shape = cm.Shape.from_config(model.config)
    runner = PrefillRunner(model, compiled=compiled, chunk=args.chunk, backend_name=args.compile_backend)
    common = dict(arch="orthros", shape=args.size if not args.smoke else "smoke", window=args.window,
                  chunk=args.chunk, fp8_block=args.fp8_block, path="compiled" if compiled else "eager")

    def add_target(name, value, threshold, op):  # written at once: a run cut later keeps it
        status = ("not run: measurement missing" if value is None else
                  "pass" if (value >= threshold if op == ">=" else value <= threshold) else "fail")
        writer.target(arch="orthros", shape=common["shape"], method="target", target=f"{name} {op} {threshold}",
                      value=value, threshold=threshold, status=status)
        print(f"target: {name} {op} {threshold}: {value} -> {status}", flush=True)

    # 1. the whole prefill (first: the step runs last in perf_all.sh and may be cut) at --seq-len with the FP8 cache
    T = args.seq_len
    done = None
    try:
        ids = torch.randint(0, model.config.vocab_size, (1, T), device=device)
        warm = min(T, 2 * args.chunk)  # compile and autotune outside the timed run (a multiple of --fp8-block)
        with torch.inference_mode():
            runner.run(ids[:, :warm], n_out=1, kv=runner.new_kv(1, warm, "fp8", args.fp8_block))
        free(device)
        kv = runner.new_kv(1, T, "fp8", args.fp8_block)
        reset_peak(device)
        with timed(device) as clock:
            with torch.inference_mode():
                out = runner.run(ids, n_out=1, kv=kv)
        ms = 1e3 * clock.s
        flops = cm.prefill_flops(shape, T, "orthros", args.window)["total"]
        tflops = flops / ms / 1e9
        done = bool(torch.isfinite(out.logits).all())
        writer.add(**common, method="full-model (fp8 kv, chunked)", seq_len=T, n_out=1, ms=ms,
                   tokens_per_s=T / ms * 1e3, tflops=tflops, mfu=tflops / matmul if matmul else None,
                   peak_mem_gib=peak_gib(device),
                   kv_cache_gib=kv.nbytes() / 2**30, kv="fp8 e4m3, fp32 scale per (layer, KV head, block)",
                   kernel="+".join(sorted(out.kernels)),
                   status="ok" if done else "fail: non-finite logits")
        print(f"[prefill_1m] T={T}: {ms:.0f} ms, {tflops:.0f} TFLOP/s, peak {peak_gib(device)} GiB, "
              f"KV {kv.nbytes() / 2**30:.1f} GiB, kernels {out.kernels}", flush=True)
        del out, kv
    except Exception as err:
        writer.add(**common, method="full-model (fp8 kv, chunked)", seq_len=T,
                   status=f"not run: {type(err).__name__}: {err}"[:300])
        print(f"[prefill_1m] T={T} failed: {type(err).__name__}: {err}", flush=True)
    free(device)
    add_target(f"{T}-token Orthros prefill completes on one GPU (fp8 K/V, finite logits)",
               None if done is None else float(done), 1.0, ">=")

    # 2. logit error of FP8 vs bf16 K/V at the check length
    T, n_out = args.check_len, min(args.n_out, args.check_len)
    ids = torch.randint(0, model.config.vocab_size, (1, T), device=device)
    try:
        with torch.inference_mode():
            ref = model(ids, logits_to_keep=n_out).logits
            free(device)
            dense = runner.run(ids, n_out=n_out)
            bf16_logits, used = dense.logits, dense.kernels
            del dense
            free(device)
            fp8 = runner.run(ids, n_out=n_out, kv=runner.new_kv(1, T, "fp8", args.fp8_block))
            fp8_logits = fp8.logits
            del fp8
            free(device)
        floor, err = compare(bf16_logits, ref), compare(fp8_logits, bf16_logits)
        writer.add(**common, method="check", seq_len=T, n_out=n_out, kv="bf16 (chunked runner) vs model forward",
                   kernel="+".join(sorted(used)), **floor, status="ok")
        writer.add(**common, method="check", seq_len=T, n_out=n_out, kv="fp8 vs bf16 (chunked runner)",
                   kernel="+".join(sorted(used)), **err, status="ok" if err["finite"] else "fail: non-finite logits")
        print(f"[prefill_1m] T={T} bf16 runner vs model: {floor}\n[prefill_1m] fp8 vs bf16: {err}", flush=True)
        add_target("fp8 vs bf16 K/V: top-1 agreement of logits at T=%d (random weights)" % T, err["top1_agreement"],
                   0.99, ">=")
        add_target("fp8 vs bf16 K/V: max |dlogit| / rms(bf16 logits) at T=%d" % T, err["max_abs_over_rms"], 0.4, "<=")
        del ref, bf16_logits, fp8_logits
    except Exception as err:  # out of memory, a kernel refusing a shape
        writer.add(**common, method="check", seq_len=T, status=f"not run: {type(err).__name__}: {err}"[:300])
        add_target("fp8 vs bf16 K/V: top-1 agreement of logits (random weights)", None, 0.99, ">=")
        add_target("fp8 vs bf16 K/V: max |dlogit| / rms(bf16 logits)", None, 0.4, "<=")
    free(device)

    # 3. the Transformer at this length stays layer-wise: copied from prefill.csv with its source
    T = args.seq_len
    row = None
    if args.prefill_csv and Path(args.prefill_csv).exists():
        pre = read_csv(args.prefill_csv)
        hits = pre[(pre["arch"] == "transformer") & (pre["seq_len"] == T) & (pre["status"] == "ok")
                   & (pre["method"] == "one-layer x n_layers")]
        if len(hits):
            row = hits.iloc[-1]
    if row is not None:
        writer.add(arch="transformer", shape=common["shape"], method="one-layer x n_layers", seq_len=T,
                   ms=float(row["ms"]), kv="bf16 (one layer)", path=str(row.get("path", "eager")),
                   status=f"ok (copied from {args.prefill_csv}, commit {row.get('commit', '?')}; not measured here)")
    else:
        writer.add(arch="transformer", shape=common["shape"], method="one-layer x n_layers", seq_len=T,
                   status=f"not run: the Transformer at {T} tokens stays layer-wise; no one-layer row in "
                          f"{args.prefill_csv}")

    kernels.prefer_kernels()
    print(f"[prefill_1m] wrote {writer.path} in {time.perf_counter() - start:.0f}s", flush=True)
    return writer.rows


if __name__ == "__main__":
    main()
