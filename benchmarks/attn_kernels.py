"""Attention kernels on the GPU: correctness against the blocked reference, then timings.

Every attention shape the benchmarks issue, at the Qwen3-8B head layout (32 query heads, 8 KV heads, head
dim 128, bf16), through :mod:`models.kernels` with each kernel forced in turn:

* square full causal and window-128 prefill (``T_q == T_k``);
* chunked prefill, bottom-right aligned (``T_q != T_k``), with and without a window, including key lengths
  past 65,536;
* one query over every key (Orthros' output token at prefill) and over the last w keys;
* the decode step over a token-major cache (:func:`models.kernels.decode_attention`, two sequences with
  different valid lengths);
* engine checks: small bf16 GQA Orthros and Transformer through :class:`models.runtime.decode.Engine`, (a) with
  chunked prefill (the kernels used must not include ``blocked``) and (b) with ``decode_attn="fa2"``, each
  teacher-forced against the default engine.

Reference: the ``blocked`` path (the CPU path's code) run on the same GPU in fp32 on the upcast inputs.
Error: ||out - ref|| / ||ref||; a case fails above ``--tol`` (bf16 operands: 1e-3..1e-2 expected) or on
NaN. Then the timing table (median ms of CUDA-event-timed calls, TFLOP/s by the cost model's FLOP count;
decode rows report GB/s of K/V read), and ``attn_choice.json``: the fastest verified kernel for full
causal and for window attention, and whether the FA2 decode path verified.

Writes ``<out-dir>/attention_kernels.csv`` row by row. Exit status 3 (fail fast; ``--no-fail-fast`` exits 0)
when a prefill kernel the benchmarks use (``sdpa-flash``, ``fla-window``, ``torch-fa2``) or the chunked-prefill
engine disagrees with its reference, printing the failing cases. A failing FA2 decode path is not fatal: it is
switched off (``fa2_ok: false`` in attn_choice.json; the engine keeps its matmul decode attention).

GPU: ``python -m benchmarks.attn_kernels --out-dir $OUT``. CPU smoke: ``--device cpu --smoke``
(tiny shapes; only the kernels a CPU can run).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from benchmarks.gpu_common import RowWriter, common_columns, errors, sync, time_ms
from models import kernels
from suite import cost_model as cm
from suite.cli import device_name, in_file, out_folder, positive_float

NEW_KERNELS = ("torch-fa2",)  # what this issue adds; a disagreement stops the run (fail fast)
USED_KERNELS = ("sdpa-flash", "fla-window", "torch-fa2")  # what the benchmarks run by default


def _rel(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(rel_err, max_abs_err) of :func:`benchmarks.gpu_common.errors` in fp64 (reference norm floored at 1e-30);
    both NaN when ``out`` holds a non-finite value."""
    if not torch.isfinite(out).all():
        return float("nan"), float("nan")
    err = errors(out, ref, torch.float64, floor=1e-30)
    return err["rel_err"], err["max_abs_err"]


def _qkv(B, H, Hkv, Tq, Tk, d, device, dtype, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, H, Tq, d, device=device, dtype=dtype, generator=g)
    k = torch.randn(B, Hkv, Tk, d, device=device, dtype=dtype, generator=g)
    v = torch.randn(B, Hkv, Tk, d, device=device, dtype=dtype, generator=g)
    return q, k, v


def _reference(q, k, v, q_index, window):
    kernels.force_kernel("blocked")
    try:
        return kernels.attention(q.float(), k.float(), v.float(), q_index, window)
    finally:
        kernels.force_kernel(None)


def attention_cases(smoke: bool) -> list[dict]:
    """(name, B, Tq, Tk, q_index start, window) of the checked shapes; Tk past 65,536 where it matters."""
    if smoke:
        return [dict(name="square causal", B=1, Tq=64, Tk=64, window=None),
                dict(name="square window", B=1, Tq=64, Tk=64, window=8),
                dict(name="chunk causal (bottom-right)", B=2, Tq=16, Tk=80, window=None),
                dict(name="chunk window (bottom-right)", B=2, Tq=16, Tk=80, window=8),
                dict(name="one query, all keys", B=1, Tq=1, Tk=70, window=None),
                dict(name="one query, window", B=2, Tq=1, Tk=70, window=8)]
    return [dict(name="square causal", B=1, Tq=4096, Tk=4096, window=None),
            dict(name="square causal", B=1, Tq=65536, Tk=65536, window=None),
            dict(name="square window", B=1, Tq=4096, Tk=4096, window=128),
            dict(name="square window", B=1, Tq=65536, Tk=65536, window=128),
            dict(name="chunk causal (bottom-right)", B=2, Tq=1024, Tk=4096, window=None),
            dict(name="chunk causal (bottom-right)", B=1, Tq=2048, Tk=66560, window=None),
            dict(name="chunk window (bottom-right)", B=2, Tq=1024, Tk=4096, window=128),
            dict(name="chunk window (bottom-right)", B=1, Tq=4096, Tk=70000, window=128),
            dict(name="one query, all keys", B=2, Tq=1, Tk=65537, window=None),
            dict(name="one query, all keys", B=1, Tq=1, Tk=131072, window=None),
            dict(name="one query, window", B=2, Tq=1, Tk=70000, window=128)]


def check_attention(writer, device, dtype, smoke, tol) -> list[str]:
    """One row per (case, kernel that can serve it); returns the failures as text."""
    H, Hkv, d = (4, 2, 16) if smoke else (32, 8, 128)
    names = ["blocked"] if device.type != "cuda" else ["sdpa-flash", "fla-window", "torch-fa2", "sdpa-cudnn"]
    failures = []
    for n, case in enumerate(attention_cases(smoke)):
        B, Tq, Tk, window = case["B"], case["Tq"], case["Tk"], case["window"]
        q, k, v = _qkv(B, H, Hkv, Tq, Tk, d, device, dtype, seed=n)
        q_index = torch.arange(Tk - Tq, Tk, device=device)
        ref = _reference(q, k, v, q_index, window)
        for kernel in names:
            row = dict(part="check", case=case["name"], kernel=kernel, batch=B, q_len=Tq, k_len=Tk, window=window,
                       tolerance=tol)
            kernels.force_kernel(kernel)
            try:
                out = kernels.attention(q, k, v, q_index, window)
                sync(device)
            except ValueError as err:  # the kernel does not serve this shape: nothing to check
                kernels.force_kernel(None)
                if "cannot serve" in str(err):
                    continue
                raise
            except Exception as err:  # a kernel that cannot run here (missing library, unsupported GPU)
                writer.add(**row, status=f"not run: {type(err).__name__}: {err}"[:300])
                continue
            finally:
                kernels.force_kernel(None)
            rel, mx = _rel(out, ref)
            ok = rel <= tol
            writer.add(**row, rel_err=rel, max_abs_err=mx, passed=ok, status="pass" if ok else "fail")
            print(f"[attn_kernels] {case['name']:30} B={B} Tq={Tq:6d} Tk={Tk:6d} w={window} {kernel:11} "
                  f"rel={rel:.2e} {'pass' if ok else 'FAIL'}", flush=True)
            if not ok:
                failures.append(f"{kernel}: {case['name']} Tq={Tq} Tk={Tk} window={window} rel_err={rel}")
            del out
        del q, k, v, ref
    return failures


def _decode_inputs(B, H, Hkv, d, cap, used, device, dtype, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, H, 1, d, device=device, dtype=dtype, generator=g)
    kc = torch.randn(B, cap, Hkv, d, device=device, dtype=dtype, generator=g)
    vc = torch.randn(B, cap, Hkv, d, device=device, dtype=dtype, generator=g)
    return q, kc, vc, torch.tensor(used, dtype=torch.int32, device=device)


def check_decode(writer, device, dtype, smoke, tol) -> list[str]:
    """decode_attention's kernel vs its masked-matmul path in fp32, for both row kinds of a decode step."""
    H, Hkv, d = (4, 2, 16) if smoke else (32, 8, 128)
    cap, L, used = (96, 80, [70, 41]) if smoke else (69632, 67584, [66000, 40000])
    failures = []
    for window in (None, 8 if smoke else 128):
        q, kc, vc, u = _decode_inputs(2, H, Hkv, d, cap, used, device, dtype, seed=7)
        ref = kernels.decode_attention(q.float(), kc.float(), vc.float(), u, L, window)
        # independent check of the reference path: per sequence, the square-causal blocked kernel's last row
        for b, n_used in enumerate(used):
            lo = 0 if window is None else max(0, n_used - window)
            one = _reference(q[b:b + 1], kc[b:b + 1, lo:n_used].transpose(1, 2), vc[b:b + 1, lo:n_used].transpose(1, 2),
                             torch.tensor([n_used - 1 - lo], device=device), None)
            if _rel(ref[b:b + 1], one)[0] > 1e-5:
                failures.append(f"decode reference path disagrees with the blocked kernel for sequence {b}")
        kernels.reset_usage()
        row = dict(part="check", case="decode step (token-major cache)", batch=2, q_len=1, k_len=L, window=window,
                   tolerance=tol)
        try:
            out = kernels.decode_attention(q, kc, vc, u, L, window)
            sync(device)
        except Exception as err:
            writer.add(**row, kernel="torch-fa2", status=f"fail: {type(err).__name__}: {err}"[:300])
            failures.append(f"decode step raised {type(err).__name__}: {err}")
            continue
        kernel = "+".join(kernels.kernels_used())
        rel, mx = _rel(out, ref)
        ok = rel <= tol
        writer.add(**row, kernel=kernel, rel_err=rel, max_abs_err=mx, passed=ok, status="pass" if ok else "fail")
        print(f"[attn_kernels] decode step window={window} {kernel} rel={rel:.2e} {'pass' if ok else 'FAIL'}",
              flush=True)
        if not ok:
            failures.append(f"decode step ({kernel}) window={window} rel_err={rel}")
    return failures


def check_engine(writer, device, dtype, smoke, tol) -> list[str]:
    """Small bf16 GQA Orthros and Transformer through :class:`models.runtime.decode.Engine`, teacher-forced against
    the default engine: (a) chunked prefill (chunks of T_q != T_k over the cache) with the fused functions run
    eagerly; (b) FlashAttention-2 decode (``decode_attn="fa2"``). A failure of (a) reads "engine ...", of (b)
    "decode engine ..."; (a) must not use the blocked kernel on CUDA."""
    from benchmarks.bench_models import build_bench_model
    from models.runtime.decode import Engine

    failures = []
    kw = dict(vocab_size=1024, hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
              head_dim=32, intermediate_size=512)
    T, steps, chunk, w = (40, 6, 16, 8) if smoke else (4096, 24, 1024, 128)
    sizes = dict(bucket=64, chunk=16) if smoke else dict(bucket=2048, chunk=1024)
    variants = [("engine", f"chunked prefill ({chunk}), fused functions (eager)",
                 dict(fused=True, compiled=False, prefill_chunk=chunk)),
                ("decode engine", "fa2 decode attention", dict(decode_attn="fa2"))]
    for arch in ("orthros", "transformer"):
        extra = {"window_size": w} if arch == "orthros" else {}
        torch.manual_seed(0)
        model = build_bench_model(arch, "1M", device, dtype, T + steps + 64, **kw, **extra)
        prompt = torch.randint(0, 1024, (2, T), device=device)
        for tag, what, options in variants:
            row = dict(part="check", case=f"{tag} {arch}: {what} vs default engine", batch=2,
                       q_len=chunk if "prefill_chunk" in options else 1, k_len=T, window=extra.get("window_size"),
                       tolerance=tol)
            try:
                base = Engine(model, 2, T + steps, **sizes)
                eng = Engine(model, 2, T + steps, **sizes, **options)
                want = [base.prefill(prompt)]
                kernels.reset_usage()
                got = [eng.prefill(prompt)]
                prefill_kernels = dict(kernels.kernels_used())
                kernels.reset_usage()
                for _ in range(steps - 1):  # teacher-forced: both engines are fed the default engine's tokens
                    eng.tok.copy_(base.tok)
                    want += base.decode(1, keep_logits=True)
                    got += eng.decode(1, keep_logits=True)
                decode_kernels = dict(kernels.kernels_used())
            except Exception as err:
                writer.add(**row, kernel="torch-fa2", status=f"fail: {type(err).__name__}: {err}"[:300])
                failures.append(f"{tag} {arch} raised {type(err).__name__}: {err}")
                continue
            rel = max(_rel(g, x)[0] for g, x in zip(got, want))
            used = prefill_kernels if tag == "engine" else decode_kernels
            ran = "+".join(sorted(used))
            blocked = device.type == "cuda" and "blocked" in used
            ok = rel <= tol and not blocked
            writer.add(**row, kernel=ran, rel_err=rel, passed=ok,
                       status="pass" if ok else ("fail: blocked path used" if blocked else "fail"))
            print(f"[attn_kernels] {tag} {arch} ({what}): logits rel={rel:.2e} kernels {ran} "
                  f"{'pass' if ok else 'FAIL'}", flush=True)
            if not ok:
                failures.append(f"{tag} {arch}: rel_err={rel}, kernels {ran}")
            del eng, base
        del model
    return failures


def timings(writer, device, dtype, smoke, budget_s, start) -> dict:
    """Median ms per kernel at the benchmark shapes; returns {shape kind: [(ms, kernel), ...]}."""
    H, Hkv, d = (4, 2, 16) if smoke else (32, 8, 128)
    shape = cm.Shape(hidden=H * d, layers=1, heads=H, kv_heads=Hkv, head_dim=d, ffn=1, vocab=1)
    T = 256 if smoke else 131072
    C = 64 if smoke else 16384
    w = 8 if smoke else 128
    kinds = {"full": [], "window": []}
    names = ["blocked"] if device.type != "cuda" else ["sdpa-flash", "sdpa-cudnn", "torch-fa2", "fla-window"]
    cases = [("square causal", 1, T, T, None), ("square window", 1, T, T, w), ("chunk causal", 1, C, T, None),
             ("chunk window", 1, C, T, w), ("one query, all keys", 1, 1, T, None)]
    for name, B, Tq, Tk, window in cases:
        q, k, v = _qkv(B, H, Hkv, Tq, Tk, d, device, dtype, seed=11)
        q_index = torch.arange(Tk - Tq, Tk, device=device)
        if Tq == Tk:
            pairs = cm.causal_pairs(Tk, window)
        else:  # bottom-right: query i sees Tk - Tq + i + 1 keys (at most w)
            pairs = Tq * window if window is not None else cm.causal_pairs(Tk) - cm.causal_pairs(Tk - Tq)
        for kernel in names:
            if time.perf_counter() - start > budget_s:
                writer.add(part="time", case=name, kernel=kernel, batch=B, q_len=Tq, k_len=Tk, window=window,
                           status=f"not run: time budget {budget_s:.0f}s spent")
                continue
            kernels.force_kernel(kernel)
            try:
                ms = time_ms(lambda: kernels.attention(q, k, v, q_index, window), device, 5, 2)
            except ValueError as err:
                if "cannot serve" in str(err):
                    continue
                raise
            except Exception as err:
                writer.add(part="time", case=name, kernel=kernel, batch=B, q_len=Tq, k_len=Tk, window=window,
                           status=f"not run: {type(err).__name__}: {err}"[:300])
                continue
            finally:
                kernels.force_kernel(None)
            tflops = cm.attn_flops(shape, pairs) / ms / 1e9
            writer.add(part="time", case=name, kernel=kernel, batch=B, q_len=Tq, k_len=Tk, window=window, ms=ms,
                       tflops=tflops, status="ok")
            print(f"[attn_kernels] time {name:22} Tq={Tq:6d} Tk={Tk:6d} {kernel:11} {ms:9.3f} ms {tflops:7.1f} TFLOP/s",
                  flush=True)
            if name == "square causal":
                kinds["full"].append((ms, kernel))
            elif name == "square window":
                kinds["window"].append((ms, kernel))
        del q, k, v
    # decode step, batch 2: the engine's matmul attention vs decode_attention, full row and window row
    from models.runtime.decode import Engine

    cap = 512 if smoke else 133120
    L = cap
    n_used = L - min(1023, L // 4)  # a context just past a bucket boundary, as in the E2E configs
    for window in (None, w):
        q, kc, vc, u = _decode_inputs(2, H, Hkv, d, cap, [n_used, n_used], device, dtype, seed=13)
        kv_bytes = 2 * 2 * (n_used if window is None else window) * Hkv * d * kc.element_size()
        variants = [("decode_attention", lambda: kernels.decode_attention(q, kc, vc, u, L, window))]
        if window is None:
            k_hm = kc.transpose(1, 2).contiguous()  # the matmul engine's layouts: K head-major, V chunk-major
            c = min(1024, cap // 2)
            v_cm = vc.transpose(1, 2).reshape(2, Hkv, cap // c, c, d).permute(2, 0, 1, 3, 4).contiguous()
            mask = torch.arange(L, device=device) >= n_used
            variants.append(("engine matmul (_attend)", lambda: Engine._attend(q, k_hm, v_cm, mask)))
        for label, fn in variants:
            kernels.reset_usage()
            try:
                ms = time_ms(fn, device, 20, 3)
            except Exception as err:
                writer.add(part="time", case=f"decode step ({label})", kernel="?", batch=2, q_len=1, k_len=n_used,
                           window=window, status=f"not run: {type(err).__name__}: {err}"[:300])
                continue
            kernel = "+".join(kernels.kernels_used()) or "matmul"
            writer.add(part="time", case=f"decode step ({label})", kernel=kernel, batch=2, q_len=1, k_len=n_used,
                       window=window, ms=ms, gb_per_s=kv_bytes / ms / 1e6, status="ok")
            print(f"[attn_kernels] time decode {label:24} w={window} {kernel:11} {ms:8.4f} ms "
                  f"{kv_bytes / ms / 1e6:7.0f} GB/s", flush=True)
        del q, kc, vc
    return kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU smoke run)")
    ap.add_argument("--tol", type=positive_float, default=2e-2, help="relative error bound (bf16 operands)")
    ap.add_argument("--engine-tol", type=positive_float, default=5e-2,
                    help="relative logit error bound of the engine checks (two bf16 implementations)")
    ap.add_argument("--budget-s", type=positive_float, default=120.0, help="skip timings after this many seconds")
    ap.add_argument("--no-fail-fast", action="store_true", help="exit 0 even when a kernel disagrees")
    ap.add_argument("--checks-only", action="store_true", help="skip the timings (the choice of kernels then "
                    "comes from --choice-from, if given and verified here)")
    ap.add_argument("--choice-from", type=in_file, default=None,
                    help="an earlier attn_choice.json (with --checks-only)")
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    writer = RowWriter(out_dir / "attention_kernels.csv", common_columns(device, str(dtype).replace("torch.", "")))
    with torch.inference_mode():
        failures = check_attention(writer, device, dtype, args.smoke, args.tol)
        decode_failures = check_decode(writer, device, dtype, args.smoke, args.tol)
    engine_failures = check_engine(writer, device, dtype, args.smoke, args.engine_tol)
    failures += decode_failures + engine_failures
    # prefill kernels and the engine's chunked prefill stop the run; the FA2 decode path is optional: it is
    # switched off (fa2_ok false: the engine keeps its matmul decode attention) and the run goes on
    new_bad = [f for f in failures
               if any(f.startswith(k) for k in NEW_KERNELS + USED_KERNELS) or f.startswith("engine")]
    decode_bad = [f for f in failures if f.startswith("decode")]
    choice = {"full": None, "window": None, "fa2_ok": not decode_bad,
              "failed": sorted({f.split(":")[0] for f in failures if f.split(":")[0] in kernels.KERNELS})}
    bad = {f.split(":")[0] for f in failures}
    if not new_bad and not args.checks_only:
        with torch.inference_mode():
            kinds = timings(writer, device, dtype, args.smoke, args.budget_s, start)
        for kind, found in kinds.items():
            found = [(ms, k) for ms, k in found if k not in bad and math.isfinite(ms)]
            choice[kind] = min(found)[1] if found else None
    elif args.checks_only and args.choice_from:
        earlier = json.loads(Path(args.choice_from).read_text())
        for kind in ("full", "window"):
            k = earlier.get(kind)
            choice[kind] = k if k and k not in bad and (k != "torch-fa2" or choice["fa2_ok"]) else None
        choice["from"] = str(args.choice_from)
    (out_dir / "attn_choice.json").write_text(json.dumps(choice, indent=1))
    print(f"[attn_kernels] choice: {choice}; wrote {writer.path} in {time.perf_counter() - start:.0f}s", flush=True)
    if decode_bad:
        print("[attn_kernels] FA2 DECODE DISABLED (the engine keeps its matmul decode attention):\n  "
              + "\n  ".join(decode_bad), flush=True)
    if new_bad:
        print("[attn_kernels] KERNEL CHECK FAILED:\n  " + "\n  ".join(new_bad), flush=True)
        return 0 if args.no_fail_fast else 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
