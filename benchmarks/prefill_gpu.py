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
``--prefer-window`` (or ``--attn-choice attn_choice.json`` from :mod:`benchmarks.attn_kernels`) put the
fastest verified attention kernels first (:func:`models.kernels.prefer_kernels`).

Run on the H200: ``python -m benchmarks.prefill_gpu --out-dir results/gpu``. CPU smoke run:
``--device cpu --dtype float32 --size 1M --lengths 64,128 --layer-lengths 256 --matmul-n 128``.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.bench_models import build_bench_model
from benchmarks.gpu_common import (
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
from models import kernels
from models.backbone import MixerContext, rope_cos_sin, rope_frequencies
from models.runtime.prefill import PrefillRunner
from suite import cost_model as cm
from suite.archs import ORTHROS_ARCHS, PAPER_WINDOW
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


def _failure(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"


def build_parser() -> argparse.ArgumentParser:
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
    ap.add_argument("--attn-choice", type=in_file, default=None, help="attn_choice.json of benchmarks.attn_kernels")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the compiled path")
    ap.add_argument("--keep-from", type=in_file, default=None, help="an earlier prefill.csv whose rows of "
                    "--keep-methods at lengths not measured now are carried over (with their own provenance columns)")
    ap.add_argument("--keep-methods", default="one-layer x n_layers", help="comma list of methods to carry over")
    return ap


def prefer_attention(ap: argparse.ArgumentParser, args) -> str:
    """Put the preferred attention kernels first (``--prefer-*``, else ``--attn-choice``); their label for the rows."""
    prefer_full, prefer_window = args.prefer_full, args.prefer_window
    with usage_errors(ap):  # a choice file that is not JSON or names no known kernel
        if args.attn_choice:
            choice = json.loads(Path(args.attn_choice).read_text())
            prefer_full = prefer_full or [k for k in [choice.get("full")] if k and k != "blocked"]
            prefer_window = prefer_window or [k for k in [choice.get("window")] if k and k != "blocked"]
        kernels.prefer_kernels(prefer_full, prefer_window)
    return f"full:{'>'.join(prefer_full) or 'default'} window:{'>'.join(prefer_window) or 'default'}"


def load_rates(args, device, dtype, out_dir: Path) -> tuple[cm.Rates, float]:
    """The cost model's rates (``--rates``, else measured here at the longest length into rates.json) and the
    matmul TFLOP/s that MFU is taken against."""
    rates_path = Path(args.rates) if args.rates else out_dir / "rates.json"
    if args.rates:
        measured = json.loads(rates_path.read_text())
    else:
        T = max(args.lengths)
        print(f"[prefill_gpu] measuring kernel rates at T={T} ...", flush=True)
        measured = measure_rates(cm.Shape.from_size(args.size), device, dtype, T, args.matmul_n, args.window)
        rates_path.write_text(json.dumps(measured, indent=1))
    print("[prefill_gpu] rates: " + ", ".join(f"{k}={v:.4g}" for k, v in measured.items()), flush=True)
    return cm.Rates.load(rates_path), measured["matmul_tflops"]


def open_writer(args, device, out_dir: Path) -> RowWriter:
    """prefill.csv: ``--append`` keeps other models' rows, ``--keep-from`` carries over earlier rows of
    ``--keep-methods`` at lengths not measured now."""
    common = common_columns(device, args.dtype)
    keep = (lambda r: r["arch"] not in args.archs) if args.append else None
    writer = RowWriter(out_dir / "prefill.csv", common, keep=keep)
    if args.keep_from:
        from suite.provenance import read_csv

        methods = {m for m in args.keep_methods.split(",") if m}
        writer.old += [r for r in read_csv(args.keep_from).to_dict("records")
                       if r.get("method") in methods and int(r.get("seq_len") or 0) not in args.layer_lengths
                       and r.get("status") == "ok"]
    return writer


@dataclass
class Sweep:
    """One prefill sweep: the models kept on the device, the path each runs, and what was measured."""

    args: argparse.Namespace
    device: torch.device
    dtype: torch.dtype
    writer: RowWriter
    start: float
    matmul: float  # TFLOP/s of the reference matmul: MFU's denominator
    attn_prefer: str
    base: dict = field(init=False)
    kernel_rates: dict = field(default_factory=dict)  # (T, window) -> attention kernel measurement
    measured_ms: dict = field(default_factory=dict)  # (arch, T, method) -> ms
    measured_path: dict = field(default_factory=dict)  # (arch, T, method) -> path
    shape_of: dict = field(default_factory=dict)  # arch -> cm.Shape
    models: dict = field(default_factory=dict)
    weight_gib: dict = field(default_factory=dict)
    runners: dict = field(default_factory=dict)  # arch -> PrefillRunner of the compiled path
    chosen: dict = field(default_factory=dict)  # arch -> path of the full-model sweep

    def __post_init__(self):
        self.base = dict(shape=self.args.size, gpus=1)

    def spent(self) -> float:
        return time.perf_counter() - self.start

    def run(self) -> None:
        self.time_attention_kernels()
        self.build_models()
        self.build_runners()
        self.check_compiled_path()
        if len(self.args.paths) > 1:
            self.select_paths()
        self.sweep_lengths()
        self.runners.clear()
        self.models.clear()
        free(self.device)

    def time_attention_kernels(self) -> None:
        shape = cm.Shape.from_size(self.args.size)
        for T in self.args.lengths:
            for w in (None, self.args.window):
                if self.spent() < self.args.budget_s:
                    self.kernel_rates[(T, w)] = attention_kernel(shape, T, self.device, self.dtype, w)

    def build_models(self) -> None:
        """All models stay on the device (~16 GiB each at Qwen3-8B shape, bf16); one that cannot be built gets
        "not run" rows."""
        a = self.args
        for arch in a.archs:
            overrides = {"window_size": a.window} if arch in ORTHROS_ARCHS else {}
            try:
                self.models[arch] = build_bench_model(arch, a.size, self.device, self.dtype,
                                                      max(a.lengths + a.layer_lengths) + 1, **overrides)
                self.shape_of[arch] = cm.Shape.from_config(self.models[arch].config)
            except Exception as err:  # unregistered arch, FLA missing, out of memory
                for T in a.lengths:
                    self.not_run(arch, T, "full-model", _failure(err))
        self.weight_gib = {a: sum(p.numel() * p.element_size() for p in m.parameters()) / 2**30
                           for a, m in self.models.items()}

    def build_runners(self) -> None:
        for arch, model in self.models.items():
            self.chosen[arch] = "eager"
            if "compiled" in self.args.paths:
                try:
                    self.runners[arch] = PrefillRunner(model, compiled=True, backend_name=self.args.compile_backend)
                except ValueError as err:  # recurrent layers: only the model's own forward
                    print(f"[prefill_gpu] {arch}: compiled path not available ({err})", flush=True)
            if self.args.paths == ["compiled"] and arch in self.runners:
                self.chosen[arch] = "compiled"

    def check_compiled_path(self) -> None:
        """A model whose compiled path fails its check runs eager."""
        for arch in [a for a in self.models if a in self.runners]:
            if not self.path_check(arch):
                self.runners.pop(arch)
                self.chosen[arch] = "eager"
            free(self.device)

    def path_check(self, arch: str) -> bool:
        """The compiled path must compute what the model computes: logits of both paths at a short length."""
        model = self.models[arch]
        T_check = min(4096, max(self.args.lengths + self.args.layer_lengths))  # --lengths '' times layers only
        ids = torch.randint(0, model.config.vocab_size, (1, T_check), device=self.device)
        try:
            want = model(ids, logits_to_keep=1).logits.float()
            got = self.runners[arch].run(ids, n_out=1).logits.float()
            rel = errors(got, want, torch.float32)["rel_err"]
            ok = bool(torch.isfinite(got).all()) and rel <= PATH_CHECK_REL
            status = "pass" if ok else "fail"
        except Exception as err:
            rel, ok, status = float("nan"), False, f"fail: {_failure(err)}"[:300]
        self.writer.target(arch=arch, **self.base, seq_len=T_check, method="path check", path="compiled",
                           target=f"compiled-path logits vs model forward, relative error <= {PATH_CHECK_REL}",
                           value=rel, threshold=PATH_CHECK_REL, status=status)
        print(f"[prefill_gpu] {arch}: compiled path vs model forward at T={T_check}: rel {rel:.2e} {status}",
              flush=True)
        return ok

    def select_paths(self) -> None:
        """Every model with a compiled path, on every path at ``--select-len``: the faster path runs the sweep."""
        for arch in self.models:
            if arch not in self.runners:
                continue
            found = self.time_paths(arch)
            if found:
                self.chosen[arch] = min(found, key=found.get)
        print(f"[prefill_gpu] chosen paths: {self.chosen}", flush=True)

    def time_paths(self, arch: str) -> dict:
        """path -> ms at ``--select-len`` (rows of method "path selection")."""
        T, found = self.args.select_len, {}
        for path in self.args.paths:
            if self.spent() > self.args.budget_s:
                break
            try:
                r = self.measure(arch, T, path, 2, 1)
            except Exception as err:  # a compile failure keeps the eager path
                free(self.device)
                self.not_run(arch, T, "path selection", _failure(err), path=path)
                continue
            found[path] = r["ms"]
            self.add_row(arch, T, "path selection", path, r)
        return found

    def sweep_lengths(self) -> None:
        # length-major order: if the time budget runs out, what is lost is the longest lengths of every model
        for method, Ts in (("full-model", self.args.lengths), ("one-layer x n_layers", self.args.layer_lengths)):
            for i, T in enumerate(Ts):
                for arch in self.models:
                    self.time_point(arch, T, method, first=i == 0)

    def time_point(self, arch: str, T: int, method: str, first: bool) -> None:
        """One model at one length: its row (or why not run), then the other path at ``--compare-lens``."""
        if arch not in cm.ARCHS and method != "full-model":
            self.not_run(arch, T, method, "hybrid layers differ, one-layer scaling does not apply")
            return
        if self.spent() > self.args.budget_s:
            self.not_run(arch, T, method, f"time budget {self.args.budget_s:.0f}s spent")
            return
        path = self.chosen[arch] if method == "full-model" else "eager"
        try:
            r = self.time_full(arch, T, path, first) if method == "full-model" else self.time_one_layer(arch, T)
        except Exception as err:  # out of memory, a kernel refusing a shape
            free(self.device)
            self.not_run(arch, T, method, _failure(err), path=path)
            return
        self.measured_ms[(arch, T, method)] = r["ms"]
        self.measured_path[(arch, T, method)] = path
        self.add_row(arch, T, method, path, r)
        other = [p for p in self.args.paths if p != path and (p == "eager" or arch in self.runners)]
        if method == "full-model" and T in self.args.compare_lens and other:
            self.compare_path(arch, T, other[0])

    def time_full(self, arch: str, T: int, path: str, first: bool) -> dict:
        # FLA kernels autotune per length bucket on first use: hybrids always warm up
        warm = 1 if (first or T <= 32768 or arch not in cm.ARCHS) else 0
        reps = self.args.repeats if T <= 32768 else max(1, self.args.repeats - 1)
        return self.measure(arch, T, path, reps, warm)

    def time_one_layer(self, arch: str, T: int) -> dict:
        r = one_layer_prefill(self.models[arch], T, self.device, self.args.ffn_chunk)
        r["kv_cache_gib"] = T * self.shape_of[arch].kv_bytes_per_token() / 2**30
        self.own_peak(arch, r)
        return r

    def compare_path(self, arch: str, T: int, path: str) -> None:
        if self.spent() > self.args.budget_s:
            return
        method = f"full-model ({path}, comparison)"
        try:
            r = self.measure(arch, T, path, 1, 0)
        except Exception as err:
            free(self.device)
            self.not_run(arch, T, method, _failure(err), path=path)
            return
        self.add_row(arch, T, method, path, r)

    def measure(self, arch: str, T: int, path: str, reps: int, warm: int) -> dict:
        r = full_prefill(self.models[arch], T, self.device, reps, warm,
                         self.runners[arch] if path == "compiled" else None)
        self.own_peak(arch, r)
        return r

    def own_peak(self, arch: str, r: dict) -> None:
        """Peak memory not counting the other models parked on the device."""
        if r["peak_mem_gib"] is not None:
            r["peak_mem_gib"] -= sum(g for a, g in self.weight_gib.items() if a != arch)

    def add_row(self, arch: str, T: int, method: str, path: str, r: dict) -> None:
        a = self.args
        tflops = mfu = None
        if arch in cm.ARCHS:
            window = a.window if arch in ORTHROS_ARCHS else None
            tflops = cm.prefill_flops(self.shape_of[arch], T, arch, window)["total"] / r["ms"] / 1e9
            mfu = tflops / self.matmul
        kr = self.kernel_rates.get((T, None if arch in ("transformer", "linear_hybrid") else a.window))
        kernel = r["kernel"] + (f"+fused:{a.compile_backend}" if path == "compiled" else "")
        row = self.writer.add(arch=arch, **self.base, seq_len=T, ms=r["ms"], tflops=tflops, mfu=mfu,
                              peak_mem_gib=r["peak_mem_gib"], kv_cache_gib=r["kv_cache_gib"], kernel=kernel,
                              attn_kernel_tflops=kr["tflops"] if kr else None, method=method, path=path,
                              attn_prefer=self.attn_prefer, status="ok")
        print(f"[prefill_gpu] {arch:13} T={T:8d} {method:34} {r['ms']:10.1f} ms  {(tflops or 0):6.1f} TFLOP/s  "
              f"MFU {(mfu or 0):5.3f}  peak {row['peak_mem_gib'] or 0:6.1f} GiB  {kernel}", flush=True)

    def not_run(self, arch: str, T: int, method: str, reason: str, **columns) -> None:
        self.writer.add(arch=arch, **self.base, seq_len=T, method=method, **columns,
                        status=f"not run: {reason}"[:300])


def speedups(sweep: Sweep, rates: cm.Rates) -> list[dict]:
    """Measured speedup of each pair at each length and method; for the Transformer pair also the cost model's."""
    summary, measured_ms = [], sweep.measured_ms
    for baseline, ours in PAIRS.items():
        if baseline not in sweep.args.archs or ours not in sweep.args.archs:
            continue
        for (arch, T, method), ms in sorted(measured_ms.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            if arch != ours or (baseline, T, method) not in measured_ms:
                continue
            speed = measured_ms[(baseline, T, method)] / ms
            pred = predicted_speedup(sweep, rates, baseline, ours, T, method) if baseline == "transformer" else None
            summary.append(dict(pair=f"{ours} vs {baseline}", seq_len=T, method=method, speedup=speed, predicted=pred))
    return summary


def predicted_speedup(sweep: Sweep, rates: cm.Rates, baseline: str, ours: str, T: int, method: str) -> float:
    """The cost model's speedup at T with the attention kernel rates measured at T, on the paths measured."""
    window = sweep.args.window
    kr_full, kr_win = sweep.kernel_rates.get((T, None)), sweep.kernel_rates.get((T, window))
    r = replace(rates, **({"attn_tflops": kr_full["tflops"]} if kr_full else {}),
                **({"window_tflops": kr_win["tflops"]} if kr_win else {}))
    shape = sweep.shape_of[ours]
    fused_b = sweep.measured_path.get((baseline, T, method)) == "compiled"
    fused_o = sweep.measured_path.get((ours, T, method)) == "compiled"
    return (_predicted_ms(shape, T, baseline, 1, r, None, fused_b)
            / _predicted_ms(shape, T, ours, 1, r, window, fused_o))


def fill_speedups(rows: list[dict], summary: list[dict]) -> None:
    for s in summary:
        for row in rows:
            if row["arch"] == s["pair"].split()[0] and row["seq_len"] == s["seq_len"] and row["method"] == s["method"]:
                row.update(speedup=s["speedup"], predicted_speedup=s["predicted"])


def add_8gpu_predictions(sweep: Sweep, rates: cm.Rates) -> None:
    if "orthros" not in sweep.shape_of:
        return
    shape = sweep.shape_of["orthros"]
    for arch in ("transformer", "orthros"):
        for k in range(8):
            T = 8192 << k
            sweep.writer.add(arch=arch, **{**sweep.base, "gpus": 8}, seq_len=T,
                             ms=_predicted_ms(shape, T, arch, 8, rates, sweep.args.window),
                             method="cost-model prediction", status="ok")


def _full_model_mfu(rows: list[dict], arch: str, T: int) -> float | None:
    return next((r["mfu"] for r in rows if r["arch"] == arch and r["seq_len"] == T and r["method"] == "full-model"
                 and r.get("mfu") is not None), None)


def add_targets(sweep: Sweep, summary: list[dict]) -> None:
    """Pass/fail rows at the longest length: Orthros speedup >= 4.0, Orthros MFU >= 0.80, cost model within 15%."""
    T128, writer = max(sweep.args.lengths), sweep.writer
    s128 = next((s for s in summary if s["seq_len"] == T128 and s["method"] == "full-model"
                 and s["pair"].split()[0] == "orthros"), None)
    mfu128 = _full_model_mfu(writer.rows, "orthros", T128)
    mfu128_t = _full_model_mfu(writer.rows, "transformer", T128)
    devs = [abs(s["speedup"] / s["predicted"] - 1) for s in summary if s["predicted"]]
    paths_128 = (f"transformer {sweep.measured_path.get(('transformer', T128, 'full-model'), '-')}, "
                 f"orthros {sweep.measured_path.get(('orthros', T128, 'full-model'), '-')}")
    targets = [(f"orthros prefill speedup vs transformer at T={T128} (paths: {paths_128}; "
                f"attention {sweep.attn_prefer})", s128 and s128["speedup"], 4.0, ">=", "orthros"),
               (f"orthros prefill MFU at T={T128} (vs measured {sweep.args.matmul_n}^3 matmul)", mfu128, 0.80, ">=",
                "orthros"),
               ("max |measured/predicted speedup - 1| over lengths", max(devs) if devs else None, 0.15, "<=",
                "orthros")]
    for name, value, threshold, op, arch in targets:
        if value is None:
            status = "not run: measurement missing"
        else:
            ok = value >= threshold if op == ">=" else value <= threshold
            status = "pass" if ok else "fail"
        row = writer.target(arch=arch, **sweep.base, seq_len=T128, method="target", target=f"{name} {op} {threshold}",
                            value=value, threshold=threshold, status=status)
        print(f"target: {row['target']}: value={value} -> {status}")
    print(f"[prefill_gpu] MFU at T={T128}: orthros {mfu128}, transformer {mfu128_t} ({paths_128})", flush=True)


def print_speedups(summary: list[dict]) -> None:
    print(f"\n{'pair':24} {'T':>8} {'method':21} {'speedup':>8} {'model':>7}")
    for s in summary:
        pred = f"{s['predicted']:7.2f}" if s["predicted"] else "      -"
        print(f"{s['pair']:24} {s['seq_len']:8d} {s['method']:21} {s['speedup']:8.2f} {pred}")


def main(argv=None) -> list[dict]:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.lengths and not args.rates:
        ap.error("--lengths '' needs --rates (the rates are measured at the longest length)")
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    attn_prefer = prefer_attention(ap, args)
    print(f"[prefill_gpu] paths {args.paths}; attention preference {attn_prefer}", flush=True)
    start = time.perf_counter()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    rates, matmul = load_rates(args, device, dtype, out_dir)
    sweep = Sweep(args, device, dtype, open_writer(args, device, out_dir), start, matmul, attn_prefer)
    with torch.inference_mode():
        sweep.run()

    summary = speedups(sweep, rates)
    fill_speedups(sweep.writer.rows, summary)
    add_8gpu_predictions(sweep, rates)
    if "transformer" in args.archs and "orthros" in args.archs and args.lengths:  # targets are full-model rows
        add_targets(sweep, summary)
    sweep.writer.write()  # speedup columns were filled in place
    print_speedups(summary)
    print(f"[prefill_gpu] wrote {sweep.writer.path} in {time.perf_counter() - start:.0f}s")
    kernels.prefer_kernels()
    return sweep.writer.rows


if __name__ == "__main__":
    main()
