"""Single-GPU prefill sweep at the Qwen3-8B shape (paper Sec. 4.5, Fig. 4 left): Orthros vs Transformer.

Random-weight bf16 models (``models.registry``) run a full-model prefill (regime "Prefill": Orthros
with ``logits_to_keep=1``, T_out = 1; the Transformer also computes logits for the last token only)
under ``torch.inference_mode`` with the KV cache kept, at 8K..128K tokens. Beyond what fits, one
layer is timed at 256K..1M tokens and multiplied by the layer count (method "one-layer x n_layers";
the token-wise FFN half of the layer is timed on a 128K-row chunk and scaled).

``peak_mem_gib`` is ``torch.cuda.max_memory_allocated`` during the run (weights, activations, KV cache),
minus the weights of the other models kept on the GPU meanwhile; ``kv_cache_gib`` is the cache alone.

Also measured, first: an 8192^3 bf16 matmul (the MFU reference), the dense GEMMs of one layer, the
SDPA causal kernel and the window kernel at each length, and copy bandwidth; they are written to
``rates.json`` for the cost model (:mod:`suite.cost_model`), whose predictions with these rates
are printed next to the measured speedups, and whose 8-GPU predictions are added as rows
(method "cost-model prediction"). Pass/fail rows go to ``targets.csv`` beside it (source ``prefill.csv``): the
compiled path's check (method "path check"), and the targets (method "target"): Orthros 128K speedup >= 4.0x;
Orthros 128K MFU >= 0.80; measured speedups within 15% of the model.

Paths (``--paths``, column ``path``): ``eager`` is the model's own forward; ``compiled`` is
:class:`models.runtime.prefill.PrefillRunner` with ``torch.compile``-fused element-wise work (fused QKV and
gate/up GEMMs, one pass for norms/RoPE/scale-offset/SwiGLU). With both, each attention model is timed on
both at ``--select-len`` (method "path selection"), the faster path runs the sweep (method "full-model"),
and the other path is timed again at ``--compare-lens`` (method "full-model (<path>, comparison)").
Every architecture gets the same choice procedure, so the ratio stays fair. ``--prefer-full`` /
``--prefer-window`` (or ``--attn-choice attn_choice.json`` from :mod:`suite.bench.attn_kernels`) put the
fastest verified attention kernels first (:func:`models.kernels.prefer_kernels`).

Run on the H200: ``python -m suite.bench.prefill_gpu --out-dir results/gpu``. CPU smoke run:
``--device cpu --dtype float32 --size 1M --lengths 64,128 --layer-lengths 256 --matmul-n 128``.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from models import kernels
from models.backbone import MixerContext, rope_cos_sin, rope_frequencies
from models.runtime.prefill import PrefillRunner
from suite import cost_model as cm
from suite.archs import ORTHROS_ARCHS, PAPER_WINDOW
from suite.bench.bench_models import build_bench_model
from suite.bench.gpu_common import (
    PAIRS,
    RowWriter,
    common_columns,
    copy_bandwidth,
    errors,
    free,
    model_kernels,
    peak_gib,
    reset_peak,
    time_ms,
)
from suite.cli import device_name, in_file, int_list, out_folder, positive_float, positive_int, usage_errors
from suite.common import DTYPES, arch_names, kernel_names, kernels_summary, size_name

# two bf16 implementations of the same model differ by ~1e-2 in relative logit error on random weights (a CPU
# run at 6 layers: bf16 model vs fp32 model 1.4e-2, bf16 fused runner vs bf16 model 1.1e-2); an error in the
# math (a missed scale-offset, RoPE, window) moves the logits by O(1)
PATH_CHECK_REL = 0.1


def measure_rates(shape: cm.Shape, device, dtype, T: int, matmul_n: int, window: int) -> dict:
    """Kernel rates of this device (TFLOP/s, bytes/s) in the :class:`cost_model.Rates` fields, plus
    ``matmul_tflops``."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype, generator=g)
    b = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype, generator=g)
    matmul = 2 * matmul_n**3 / time_ms(lambda: a @ b, device, 10, 3) / 1e9
    del a, b
    D, qd, kvd = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    x = torch.randn(T, D, device=device, dtype=dtype, generator=g)
    ws = [torch.randn(o, i, device=device, dtype=dtype, generator=g) * 0.02
          for o, i in ((qd, D), (kvd, D), (kvd, D), (D, qd), (shape.ffn, D), (shape.ffn, D), (D, shape.ffn))]

    def layer_gemms():
        q = F.linear(x, ws[0]), F.linear(x, ws[1]), F.linear(x, ws[2])
        o = F.linear(q[0], ws[3])
        up = F.linear(x, ws[4]) * F.linear(x, ws[5])
        return o, F.linear(up, ws[6])

    gemm = cm.dense_flops(shape, T, T) / time_ms(layer_gemms, device, 3, 1) / 1e9
    del x, ws
    hbm = copy_bandwidth(device)
    win = attention_kernel(shape, T, device, dtype, window)
    full = attention_kernel(shape, T, device, dtype, None)
    free(device)
    return {"matmul_tflops": matmul, "gemm_tflops": gemm, "hbm_bytes_per_s": hbm, "window_tflops": win["tflops"],
            "attn_tflops": full["tflops"], "rates_seq_len": T}


def attention_kernel(shape: cm.Shape, T: int, device, dtype, window: int | None) -> dict:
    """One attention call at the model's head layout through ``models.kernels`` (full causal or window): ms,
    TFLOP/s, kernel."""
    g = torch.Generator(device=device).manual_seed(1)
    q = torch.randn(1, shape.heads, T, shape.head_dim, device=device, dtype=dtype, generator=g)
    k = torch.randn(1, shape.kv_heads, T, shape.head_dim, device=device, dtype=dtype, generator=g)
    v = torch.randn_like(k)
    idx = torch.arange(T, device=device)
    kernels.reset_usage()
    ms = time_ms(lambda: kernels.attention(q, k, v, idx, window), device, 3 if T <= 65536 else 2, 1)
    flops = cm.attn_flops(shape, cm.causal_pairs(T, window))
    return {"ms": ms, "tflops": flops / ms / 1e9, "kernel": kernels_summary()}


def full_prefill(model, T: int, device, repeats: int, warmup: int, runner: PrefillRunner | None = None) -> dict:
    """Full-model prefill of one random sequence of T tokens with the KV cache kept: ms, peak GiB, KV GiB.

    ``runner``: the fused path (:class:`models.runtime.prefill.PrefillRunner`); None: the model's own forward.
    """
    ids = torch.randint(0, model.config.vocab_size, (1, T), device=device)
    kv = {}

    def run():
        kv.pop("cache", None)
        if runner is not None:
            out = runner.run(ids, n_out=1)
            kv["cache"] = out.kv
            kv["bytes"] = out.kv.nbytes()
            return out.logits
        out = model(ids, use_cache=True, logits_to_keep=1)
        kv["cache"] = out.cache
        kv["bytes"] = out.cache.memory_bytes()
        return out.logits

    free(device)
    reset_peak(device)
    kernels.reset_usage()
    ms = time_ms(run, device, repeats, warmup)
    result = {"ms": ms, "peak_mem_gib": peak_gib(device), "kv_cache_gib": kv["bytes"] / 2**30,
              "kernel": model_kernels(model, device)}
    kv.clear()
    free(device)
    return result


def one_layer_prefill(model, T: int, device, chunk: int) -> dict:
    """Prefill time of layer 0 at T tokens x n_layers: the mixer half at full length, the FFN half on a chunk."""
    cfg, layer = model.config, model.model.layers[0]
    dtype = next(model.parameters()).dtype
    rows = T + (1 if model.two_stream else 0)
    positions = torch.arange(T, device=device)[None]
    ctx = MixerContext(positions=positions, q_index=positions[0], out_index=torch.tensor([T - 1], device=device),
                       key_mask=None, attention_mask=None, cache=None,
                       rope=rope_cos_sin(positions, rope_frequencies(cfg, device), dtype))
    h = torch.randn(1, rows, cfg.hidden_size, device=device, dtype=dtype)
    hc = h[:, :min(chunk, rows)].clone()
    free(device)
    reset_peak(device)
    kernels.reset_usage()
    long = T > 262144  # kernels are warm from the shorter lengths; a 1M Transformer layer takes ~16 s
    mixer_ms = time_ms(lambda: layer.mixer_residual(h, ctx), device, 1 if long else 2, 0 if long else 1)
    ffn_ms = time_ms(lambda: layer.mlp_residual(hc), device, 3, 1)
    result = {"ms": (mixer_ms + ffn_ms * rows / hc.shape[1]) * cfg.num_hidden_layers,
              "peak_mem_gib": peak_gib(device), "kernel": kernels_summary()}
    del h, hc, ctx
    free(device)
    return result


def _predicted_ms(shape, T, arch, gpus, rates, window, fused: bool = False) -> float | None:
    if arch not in cm.ARCHS:
        return None
    return 1e3 * cm.prefill_time(shape, T, arch, gpus, rates, window if arch in ORTHROS_ARCHS else None,
                                 fused=fused)["total_s"]


def _lengths(text: str) -> list[int]:
    """argparse ``type=`` of a length list that may be empty (``--layer-lengths ''``: none)."""
    return int_list(text, allow_empty=True, error=argparse.ArgumentTypeError)


def _paths(text: str) -> list[str]:
    paths = [p for p in text.split(",") if p]
    if not paths or any(p not in ("eager", "compiled") for p in paths):
        raise argparse.ArgumentTypeError(f"list eager and/or compiled, got {text!r}")
    return paths


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--size", type=size_name, default="qwen3_8b")
    ap.add_argument("--archs", type=arch_names, default="transformer,orthros",
                    help="comma list; pairs transformer/orthros, linear_hybrid/orthros_h")
    ap.add_argument("--lengths", type=_lengths, default="8192,16384,32768,65536,131072")
    ap.add_argument("--layer-lengths", type=_lengths, default="262144,524288,1048576")
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW)
    ap.add_argument("--matmul-n", type=positive_int, default=8192)
    ap.add_argument("--ffn-chunk", type=positive_int, default=131072)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--budget-s", type=positive_float, default=240.0, help="skip what remains after this many seconds")
    ap.add_argument("--rates", type=in_file, default=None, help="load rates.json instead of measuring")
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu")
    ap.add_argument("--append", action="store_true", help="keep rows of other models in prefill.csv")
    ap.add_argument("--paths", type=_paths, default="eager",
                    help="comma list of eager, compiled (see module docstring)")
    ap.add_argument("--select-len", type=positive_int, default=32768, help="length at which the paths are compared")
    ap.add_argument("--compare-lens", type=_lengths, default="131072",
                    help="lengths at which the other path is timed too")
    ap.add_argument("--prefer-full", type=kernel_names, default="",
                    help="kernels to try first for full causal / one-query calls")
    ap.add_argument("--prefer-window", type=kernel_names, default="",
                    help="kernels to try first for sliding-window calls")
    ap.add_argument("--attn-choice", type=in_file, default=None, help="attn_choice.json of suite.bench.attn_kernels")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the compiled path")
    ap.add_argument("--keep-from", type=in_file, default=None, help="an earlier prefill.csv whose rows of "
                    "--keep-methods at lengths not measured now are carried over (with their own provenance columns)")
    ap.add_argument("--keep-methods", default="one-layer x n_layers", help="comma list of methods to carry over")
    args = ap.parse_args(argv)
    archs, lengths, layer_lengths, paths = args.archs, args.lengths, args.layer_lengths, args.paths
    if not lengths and not args.rates:
        ap.error("--lengths '' needs --rates (the rates are measured at the longest length)")
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    compare_lens = args.compare_lens
    prefer_full, prefer_window = args.prefer_full, args.prefer_window
    with usage_errors(ap):  # a choice file that is not JSON or names no known kernel
        if args.attn_choice:
            choice = json.loads(Path(args.attn_choice).read_text())
            prefer_full = prefer_full or [k for k in [choice.get("full")] if k and k != "blocked"]
            prefer_window = prefer_window or [k for k in [choice.get("window")] if k and k != "blocked"]
        kernels.prefer_kernels(prefer_full, prefer_window)
    attn_prefer = f"full:{'>'.join(prefer_full) or 'default'} window:{'>'.join(prefer_window) or 'default'}"
    print(f"[prefill_gpu] paths {paths}; attention preference {attn_prefer}", flush=True)
    start = time.perf_counter()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    shape_of = {}
    ref_model_shape = cm.Shape.from_size(args.size)
    rates_path = Path(args.rates) if args.rates else out_dir / "rates.json"
    if args.rates:
        measured = json.loads(rates_path.read_text())
    else:
        print(f"[prefill_gpu] measuring kernel rates at T={max(lengths)} ...", flush=True)
        measured = measure_rates(ref_model_shape, device, dtype, max(lengths), args.matmul_n, args.window)
        rates_path.write_text(json.dumps(measured, indent=1))
    print("[prefill_gpu] rates: " + ", ".join(f"{k}={v:.4g}" for k, v in measured.items()), flush=True)
    rates = cm.Rates.load(rates_path)
    matmul = measured["matmul_tflops"]

    common = common_columns(device, args.dtype)
    keep = (lambda r: r["arch"] not in archs) if args.append else None
    writer = RowWriter(out_dir / "prefill.csv", common, keep=keep)
    if args.keep_from:
        from suite.provenance import read_csv

        methods = {m for m in args.keep_methods.split(",") if m}
        writer.old += [r for r in read_csv(args.keep_from).to_dict("records")
                       if r.get("method") in methods and int(r.get("seq_len") or 0) not in layer_lengths
                       and r.get("status") == "ok"]
    base = dict(shape=args.size, gpus=1)
    kernel_rates = {}  # (T, window) -> attention kernel measurement
    measured_ms = {}  # (arch, T, method) -> ms
    measured_path = {}  # (arch, T, method) -> path

    with torch.inference_mode():
        for T in lengths:
            for w in (None, args.window):
                if time.perf_counter() - start < args.budget_s:
                    kernel_rates[(T, w)] = attention_kernel(ref_model_shape, T, device, dtype, w)
        models = {}
        for arch in archs:  # all models stay on the GPU (~16 GiB each at Qwen3-8B shape, bf16)
            overrides = {"window_size": args.window} if arch in ORTHROS_ARCHS else {}
            try:
                models[arch] = build_bench_model(arch, args.size, device, dtype, max(lengths + layer_lengths) + 1,
                                                 **overrides)
                shape_of[arch] = cm.Shape.from_config(models[arch].config)
            except Exception as err:  # unregistered arch, FLA missing, out of memory
                for T in lengths:
                    writer.add(arch=arch, **base, seq_len=T, method="full-model",
                               status=f"not run: {type(err).__name__}: {err}"[:300])
        weight_gib = {a: sum(p.numel() * p.element_size() for p in m.parameters()) / 2**30 for a, m in models.items()}
        runners, chosen = {}, {}
        for arch, model in models.items():
            chosen[arch] = "eager"
            if "compiled" in paths:
                try:
                    runners[arch] = PrefillRunner(model, compiled=True, backend_name=args.compile_backend)
                except ValueError as err:  # recurrent layers: only the model's own forward
                    print(f"[prefill_gpu] {arch}: compiled path not available ({err})", flush=True)
            if paths == ["compiled"] and arch in runners:
                chosen[arch] = "compiled"

        def measure(arch, model, T, path, reps, warm):
            r = full_prefill(model, T, device, reps, warm, runners[arch] if path == "compiled" else None)
            if r["peak_mem_gib"] is not None:  # not counting the other models parked on the GPU
                r["peak_mem_gib"] -= sum(g for a, g in weight_gib.items() if a != arch)
            return r

        def add_row(arch, T, method, path, r):
            shape = shape_of[arch]
            tflops = mfu = None
            if arch in cm.ARCHS:
                window = args.window if arch in ORTHROS_ARCHS else None
                tflops = cm.prefill_flops(shape, T, arch, window)["total"] / r["ms"] / 1e9
                mfu = tflops / matmul
            kr = kernel_rates.get((T, None if arch in ("transformer", "linear_hybrid") else args.window))
            kernel = r["kernel"] + (f"+fused:{args.compile_backend}" if path == "compiled" else "")
            row = writer.add(arch=arch, **base, seq_len=T, ms=r["ms"], tflops=tflops, mfu=mfu,
                             peak_mem_gib=r["peak_mem_gib"], kv_cache_gib=r["kv_cache_gib"], kernel=kernel,
                             attn_kernel_tflops=kr["tflops"] if kr else None, method=method, path=path,
                             attn_prefer=attn_prefer, status="ok")
            print(f"[prefill_gpu] {arch:13} T={T:8d} {method:34} {r['ms']:10.1f} ms  {(tflops or 0):6.1f} TFLOP/s  "
                  f"MFU {(mfu or 0):5.3f}  peak {row['peak_mem_gib'] or 0:6.1f} GiB  {kernel}", flush=True)

        # the compiled path must compute what the model computes: logits of both paths at a short length
        for arch, model in list(models.items()):
            if arch not in runners:
                continue
            T_check = min(4096, max(lengths))
            ids = torch.randint(0, model.config.vocab_size, (1, T_check), device=device)
            try:
                want = model(ids, logits_to_keep=1).logits.float()
                got = runners[arch].run(ids, n_out=1).logits.float()
                rel = errors(got, want, torch.float32)["rel_err"]
                ok = bool(torch.isfinite(got).all()) and rel <= PATH_CHECK_REL
                status = "pass" if ok else "fail"
            except Exception as err:
                rel, ok, status = float("nan"), False, f"fail: {type(err).__name__}: {err}"[:300]
            writer.target(arch=arch, **base, seq_len=T_check, method="path check", path="compiled",
                          target=f"compiled-path logits vs model forward, relative error <= {PATH_CHECK_REL}",
                          value=rel, threshold=PATH_CHECK_REL, status=status)
            print(f"[prefill_gpu] {arch}: compiled path vs model forward at T={T_check}: rel {rel:.2e} {status}",
                  flush=True)
            if not ok:
                runners.pop(arch)
                chosen[arch] = "eager"
            free(device)
        # path selection: every attention model on every path at one length, the faster path runs the sweep
        if len(paths) > 1:
            for arch, model in models.items():
                if arch not in runners:
                    continue
                found = {}
                for path in paths:
                    if time.perf_counter() - start > args.budget_s:
                        break
                    try:
                        r = measure(arch, model, args.select_len, path, 2, 1)
                    except Exception as err:  # a compile failure keeps the eager path
                        free(device)
                        writer.add(arch=arch, **base, seq_len=args.select_len, method="path selection", path=path,
                                   status=f"not run: {type(err).__name__}: {err}"[:300])
                        continue
                    found[path] = r["ms"]
                    add_row(arch, args.select_len, "path selection", path, r)
                if found:
                    chosen[arch] = min(found, key=found.get)
            print(f"[prefill_gpu] chosen paths: {chosen}", flush=True)
        # length-major order: if the time budget runs out, what is lost is the longest lengths of every model
        for method, Ts in (("full-model", lengths), ("one-layer x n_layers", layer_lengths)):
            for i, T in enumerate(Ts):
                for arch, model in models.items():
                    if arch not in cm.ARCHS and method != "full-model":
                        writer.add(arch=arch, **base, seq_len=T, method=method,
                                   status="not run: hybrid layers differ, one-layer scaling does not apply")
                        continue
                    if time.perf_counter() - start > args.budget_s:
                        writer.add(arch=arch, **base, seq_len=T, method=method,
                                   status=f"not run: time budget {args.budget_s:.0f}s spent")
                        continue
                    shape = shape_of[arch]
                    path = chosen[arch] if method == "full-model" else "eager"
                    try:
                        if method == "full-model":
                            # FLA kernels autotune per length bucket on first use: hybrids always warm up
                            warm = 1 if (i == 0 or T <= 32768 or arch not in cm.ARCHS) else 0
                            reps = args.repeats if T <= 32768 else max(1, args.repeats - 1)
                            r = measure(arch, model, T, path, reps, warm)
                        else:
                            r = one_layer_prefill(model, T, device, args.ffn_chunk)
                            r["kv_cache_gib"] = T * shape.kv_bytes_per_token() / 2**30
                            if r["peak_mem_gib"] is not None:
                                r["peak_mem_gib"] -= sum(g for a, g in weight_gib.items() if a != arch)
                    except Exception as err:  # out of memory, a kernel refusing a shape
                        free(device)
                        writer.add(arch=arch, **base, seq_len=T, method=method, path=path,
                                   status=f"not run: {type(err).__name__}: {err}"[:300])
                        continue
                    measured_ms[(arch, T, method)] = r["ms"]
                    measured_path[(arch, T, method)] = path
                    add_row(arch, T, method, path, r)
                    other = [p for p in paths if p != path and (p == "eager" or arch in runners)]
                    if method == "full-model" and T in compare_lens and other:
                        if time.perf_counter() - start > args.budget_s:
                            continue
                        try:
                            r = measure(arch, model, T, other[0], 1, 0)
                        except Exception as err:
                            free(device)
                            writer.add(arch=arch, **base, seq_len=T, method=f"full-model ({other[0]}, comparison)",
                                       path=other[0], status=f"not run: {type(err).__name__}: {err}"[:300])
                            continue
                        add_row(arch, T, f"full-model ({other[0]}, comparison)", other[0], r)
        runners.clear()
        models.clear()
        free(device)

    # speedups, cost-model comparison and 8-GPU predictions
    summary = []
    for baseline, ours in PAIRS.items():
        if baseline not in archs or ours not in archs:
            continue
        for (arch, T, method), ms in sorted(measured_ms.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            if arch != ours or (baseline, T, method) not in measured_ms:
                continue
            speed = measured_ms[(baseline, T, method)] / ms
            pred = None
            if baseline == "transformer":
                kr_full, kr_win = kernel_rates.get((T, None)), kernel_rates.get((T, args.window))
                r = replace(rates, **({"attn_tflops": kr_full["tflops"]} if kr_full else {}),
                            **({"window_tflops": kr_win["tflops"]} if kr_win else {}))
                shape = shape_of[ours]
                fused_b = measured_path.get((baseline, T, method)) == "compiled"
                fused_o = measured_path.get((ours, T, method)) == "compiled"
                pred = (_predicted_ms(shape, T, baseline, 1, r, None, fused_b)
                        / _predicted_ms(shape, T, ours, 1, r, args.window, fused_o))
            summary.append(dict(pair=f"{ours} vs {baseline}", seq_len=T, method=method, speedup=speed, predicted=pred))
    for s in summary:
        for row in writer.rows:
            if row["arch"] == s["pair"].split()[0] and row["seq_len"] == s["seq_len"] and row["method"] == s["method"]:
                row.update(speedup=s["speedup"], predicted_speedup=s["predicted"])
    if "orthros" in shape_of:
        shape = shape_of["orthros"]
        for arch in ("transformer", "orthros"):
            for k in range(8):
                T = 8192 << k
                writer.add(arch=arch, **{**base, "gpus": 8}, seq_len=T,
                           ms=_predicted_ms(shape, T, arch, 8, rates, args.window),
                           method="cost-model prediction", status="ok")
    if "transformer" in archs and "orthros" in archs:
        T128 = max(lengths)
        s128 = next((s for s in summary if s["seq_len"] == T128 and s["method"] == "full-model"
                     and s["pair"].split()[0] == "orthros"), None)
        mfu128 = next((r["mfu"] for r in writer.rows if r["arch"] == "orthros" and r["seq_len"] == T128
                       and r["method"] == "full-model" and r.get("mfu") is not None), None)
        mfu128_t = next((r["mfu"] for r in writer.rows if r["arch"] == "transformer" and r["seq_len"] == T128
                         and r["method"] == "full-model" and r.get("mfu") is not None), None)
        devs = [abs(s["speedup"] / s["predicted"] - 1) for s in summary if s["predicted"]]
        paths_128 = (f"transformer {measured_path.get(('transformer', T128, 'full-model'), '-')}, "
                     f"orthros {measured_path.get(('orthros', T128, 'full-model'), '-')}")
        targets = [(f"orthros prefill speedup vs transformer at T={T128} (paths: {paths_128}; attention {attn_prefer})",
                    s128 and s128["speedup"], 4.0, ">=", "orthros"),
                   (f"orthros prefill MFU at T={T128} (vs measured {args.matmul_n}^3 matmul)", mfu128, 0.80, ">=",
                    "orthros"),
                   ("max |measured/predicted speedup - 1| over lengths", max(devs) if devs else None, 0.15, "<=",
                    "orthros")]
        for name, value, threshold, op, arch in targets:
            if value is None:
                status = "not run: measurement missing"
            else:
                ok = value >= threshold if op == ">=" else value <= threshold
                status = "pass" if ok else "fail"
            row = writer.target(arch=arch, **base, seq_len=T128, method="target", target=f"{name} {op} {threshold}",
                                value=value, threshold=threshold, status=status)
            print(f"target: {row['target']}: value={value} -> {status}")
        print(f"[prefill_gpu] MFU at T={T128}: orthros {mfu128}, transformer {mfu128_t} ({paths_128})", flush=True)
    writer.write()  # speedup columns were filled in place

    print(f"\n{'pair':24} {'T':>8} {'method':21} {'speedup':>8} {'model':>7}")
    for s in summary:
        pred = f"{s['predicted']:7.2f}" if s["predicted"] else "      -"
        print(f"{s['pair']:24} {s['seq_len']:8d} {s['method']:21} {s['speedup']:8.2f} {pred}")
    print(f"[prefill_gpu] wrote {writer.path} in {time.perf_counter() - start:.0f}s")
    kernels.prefer_kernels()
    return writer.rows


if __name__ == "__main__":
    main()
