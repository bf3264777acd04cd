"""End-to-end generation on one GPU (paper Sec. 4.6, Table 4): TTFT, E2E, output and decode-only throughput.

Random-weight Qwen3-8B-shape bf16 models run in :class:`models.runtime.decode.Engine` (static KV cache,
CUDA-graph decode steps, greedy), batch 2, at 128K/128, 127K/1K and 120K/8K (input/output tokens).
Definitions (as in :func:`suite.cost_model.e2e`): TTFT = prefill of the batch including the
first token; E2E = TTFT + the output_len - 1 decode steps; output tok/s = batch*output_len/E2E;
decode-only tok/s = batch*output_len/(E2E - TTFT). CUDA-graph capture happens before the timed
decode and is not counted.

Decode runs in full when output_len - 1 <= ``--full-decode-max`` (method "measured"); otherwise a
few steps are timed at the start, middle and end contexts and their mean times output_len - 1
(method "measured TTFT + timed decode steps x output_len"). Each decode-step time is compared with
its HBM bound (weight bytes + K/V bytes read) / measured copy bandwidth; a target row per model (in
``targets.csv`` beside ``e2e.csv``, with the engine's and the compiled path's checks) says pass when the worst ratio
is <= 1.3.

TTFT is the median of ``--ttft-repeats`` prefills of the same batch (column ``ttft_runs_s`` lists them):
FLA's fused gate-norm kernel (GDN layers) is autotuned per bucket of ``ceil(rows / 65536)`` rows, rows =
batch x (T + output rows) x GDN heads (column ``fla_norm_bucket``), so the first prefill at a new bucket
includes seconds of Triton compilation (the Orthros-H 127K/1K "outlier" of the committed table was the one
config whose bucket an earlier run had compiled). ``--fused`` runs the engine with the fused per-layer
functions (:mod:`models.runtime.layer`, compiled on CUDA), ``--decode-attn fa2`` with FlashAttention-2 decode
attention (:func:`models.kernels.decode_attention`); ``--attn-choice`` reads both defaults and the prefill
kernel preferences from :mod:`benchmarks.attn_kernels`' ``attn_choice.json``. Each model row records the
kernels one decode step launches (``decode_kernels_per_step``, counted with torch.profiler).

Run on the H200: ``python -m benchmarks.e2e_gpu --out-dir results/gpu``. CPU smoke run:
``--device cpu --dtype float32 --size 1M --configs 96/4,80/20 --bucket 16 --chunk 8 --full-decode-max 8``.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

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
    timed,
)
from models import kernels
from models.runtime.decode import Engine
from suite import cost_model as cm
from suite.archs import ORTHROS_ARCHS, PAPER_WINDOW
from suite.cli import (
    device_name,
    in_file,
    int_pairs,
    nonnegative_int,
    out_folder,
    positive_float,
    positive_int,
    usage_errors,
)
from suite.common import DTYPES, arch_names, size_name

ATTENTION_ARCHS = ("transformer", "swa", "orthros")  # no recurrent layers


def parse_configs(text: str) -> list[tuple[int, int]]:
    """argparse ``type=`` of ``--configs``: ``"131072/128,130048/1024"`` -> [(131072, 128), (130048, 1024)]."""
    return int_pairs(text, "/", "INPUT/OUTPUT token counts")


def _paper_e2e() -> dict:
    """Table 4 E2E seconds, ``(input, output) -> {model: e2e_s}``, from paper_tables/reported/."""
    from suite.reported import load_tables

    rows = load_tables()
    rows = rows[(rows["table"] == "Table 4") & (rows["metric"] == "e2e_s")]
    paper: dict = {}
    for r in rows.itertuples():
        paper.setdefault((int(r.input_len), int(r.output_len)), {})[r.model] = float(r.value)
    return paper


def fla_norm_bucket(model, batch: int, T: int) -> int | None:
    """The row bucket ``ceil(rows / 65536)`` of FLA's fused gate-norm kernel at a prefill of ``batch`` x T
    (rows = batch x (T + output rows) x GDN heads); a new bucket means a Triton compile + autotune on first use.
    None for a model without GDN layers."""
    heads = [m.layer.num_heads for m in (layer.mixer for layer in model.model.layers)
             if type(getattr(m, "layer", None)).__name__ == "GatedDeltaNet"]
    if not heads:
        return None
    rows = batch * (T + (1 if model.two_stream else 0)) * heads[0]
    return -(-rows // 65536)


def check_engine(device, steps: int = 40, archs=("orthros", "transformer"), **engine_kw) -> float:
    """Max |logit difference| between the engine (CUDA graphs on CUDA) and the uncached model forward.

    Tiny fp32 models of ``archs``, prompt 50, ``steps`` greedy steps crossing key-length buckets. The
    reference is the PT forward over all positions (for Orthros-H this takes its GDN layers' general
    output route, not the final-state read the engine uses). ``engine_kw``: Engine options under test
    (``fused``, ``decode_attn``, ...).
    """
    worst = 0.0
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for arch in archs:
            kw = {"window_size": 16} if arch in ORTHROS_ARCHS else {}
            torch.manual_seed(0)
            model = build_bench_model(arch, "1M", device, torch.float32, 256, **kw)  # q/k norm: its default
            engine = Engine(model, batch=2, max_len=50 + steps, bucket=32, chunk=16, **engine_kw)
            prompt = torch.randint(0, model.config.vocab_size, (2, 50), device=device)
            logits = [engine.prefill(prompt)] + engine.decode(steps - 1, keep_logits=True)
            seq = torch.cat([prompt] + [x.argmax(-1, keepdim=True) for x in logits], dim=1)
            with torch.inference_mode():
                for n in (0, steps // 2, steps - 1):
                    ref = model(seq[:, :50 + n]).logits[:, -1]
                    worst = max(worst, errors(logits[n], ref, torch.float32)["max_abs_err"])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return worst


def time_decode(engine: Engine, context: int, steps: int, device) -> float:
    """Mean ms of ``steps`` decode steps starting with ``context`` tokens cached (cache values are whatever is
    there)."""
    def seek():
        engine.length = context
        engine.pos.fill_(context)

    seek()
    engine.prepare(steps)
    engine.decode(1)  # warm this bucket's replay path
    seek()
    with timed(device) as clock:
        engine.decode(steps)
    return 1e3 * clock.s / steps


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--size", type=size_name, default="qwen3_8b")
    ap.add_argument("--archs", type=arch_names, default="transformer,orthros")
    ap.add_argument("--configs", type=parse_configs, default="131072/128,130048/1024,122880/8192",
                    help="INPUT/OUTPUT token counts, comma-separated")
    ap.add_argument("--batch", type=positive_int, default=2)
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW)
    ap.add_argument("--bucket", type=positive_int, default=2048)
    ap.add_argument("--chunk", type=positive_int, default=1024)
    ap.add_argument("--full-decode-max", type=nonnegative_int, default=1024, help="longest decode run in full")
    ap.add_argument("--sample-steps", type=positive_int, default=16)
    ap.add_argument("--check-steps", type=functools.partial(positive_int, minimum=2), default=40,
                    help="decode steps of the engine correctness check")
    ap.add_argument("--rates", type=in_file, default=None, help="rates.json with hbm_bytes_per_s (else measured here)")
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu")
    ap.add_argument("--append", action="store_true", help="keep the rows of other models in e2e.csv")
    ap.add_argument("--check-only", action="store_true", help="only (re)run the engine check row of --archs")
    ap.add_argument("--ttft-repeats", type=positive_int, default=3, help="prefills per config; TTFT is their median")
    ap.add_argument("--fused", choices=("on", "off"), default="off", help="fused per-layer functions in the engine")
    ap.add_argument("--compiled", choices=("auto", "on", "off"), default="auto",
                    help="torch.compile the fused functions (auto: on CUDA)")
    ap.add_argument("--decode-attn", choices=("matmul", "fa2", "auto"), default="matmul",
                    help="decode attention (auto: fa2 when attn_choice.json says it verified)")
    ap.add_argument("--attn-choice", type=in_file, default=None, help="attn_choice.json of benchmarks.attn_kernels")
    ap.add_argument("--prefill-chunk", type=nonnegative_int, default=0, help="chunked prefill (0: one pass)")
    ap.add_argument("--budget-s", type=positive_float, default=1e9, help="skip models/configs after this many seconds")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the fused functions")
    return ap


def read_inputs(ap: argparse.ArgumentParser, args) -> tuple[dict, float | None]:
    """``--attn-choice`` (its prefill kernel preferences applied) and the HBM bandwidth of ``--rates``."""
    with usage_errors(ap):  # a choice or rates file that is not JSON, or rates without the bandwidth
        choice = json.loads(Path(args.attn_choice).read_text()) if args.attn_choice else {}
        hbm = json.loads(Path(args.rates).read_text()).get("hbm_bytes_per_s", "missing") if args.rates else None
        if not isinstance(hbm, (int, float, type(None))) or (hbm is not None and hbm <= 0):
            raise ValueError(f"--rates {args.rates}: hbm_bytes_per_s is {hbm}, not a number > 0")
        kernels.prefer_kernels([k for k in [choice.get("full")] if k and k != "blocked"],
                               [k for k in [choice.get("window")] if k and k != "blocked"])
    return choice, hbm


def engine_options(args, choice: dict, device) -> dict:
    """The Engine's keyword arguments under test (``--decode-attn auto`` resolved with the choice file)."""
    decode_attn = args.decode_attn
    if decode_attn == "auto":
        decode_attn = "fa2" if choice.get("fa2_ok") and device.type == "cuda" else "matmul"
    fused = args.fused == "on"
    compiled = (device.type == "cuda") if args.compiled == "auto" else args.compiled == "on"
    return dict(decode_attn=decode_attn, fused=fused, compiled=compiled if fused else None,
                prefill_chunk=args.prefill_chunk or None, compile_backend=args.compile_backend)


def checked_archs(archs: list[str]) -> list[str]:
    """The models the engine check runs: the recurrent ones of ``archs``, else Orthros and the Transformer."""
    return [a for a in archs if a not in ATTENTION_ARCHS] or ["orthros", "transformer"]


def open_writer(args, device) -> RowWriter:
    """e2e.csv: ``--append`` keeps other models' rows, ``--check-only`` all but the engine check's."""
    check = "+".join(checked_archs(args.archs))  # the engine check's target row's arch
    keep = (lambda r: r["arch"] not in args.archs + [check]) if args.append else None
    if args.check_only:
        keep = lambda r: r["arch"] != check  # noqa: E731
    return RowWriter(Path(args.out_dir) / "e2e.csv", common_columns(device, args.dtype), keep=keep)


def engine_check_row(args, device, writer: RowWriter, engine_kw: dict) -> None:
    """The engine's decode vs the uncached forward on tiny fp32 models: a target row."""
    recurrent = [a for a in args.archs if a not in ATTENTION_ARCHS]
    checked = checked_archs(args.archs)
    check = "+".join(checked)
    # FLA's chunked prefill kernels use TF32 dot products, so the recurrent models' check gets a looser bound
    limit = 1e-2 if recurrent else 1e-3
    target = (f"cached engine decode (CUDA graphs on GPU; options {engine_kw}) == uncached model forward, "
              f"fp32 max |logit diff| <= {limit:g}")
    # the tiny fp32 check runs the fused functions eagerly (no compile); the compiled ones are checked against
    # their eager run on each benchmark model (Engine.check_compiled)
    check_kw = {k: (False if k == "compiled" and v else v) for k, v in engine_kw.items()
                if k != "prefill_chunk" or not recurrent}
    try:
        err = check_engine(device, args.check_steps, checked, **check_kw)
        status = "pass" if err <= limit else "fail"
    except Exception as exc:  # a kernel refusing the tiny shape: recorded, the benchmark goes on
        err, status = float("nan"), f"fail: {type(exc).__name__}: {exc}"[:300]
    writer.target(arch=check, shape="1M", batch=2, method="engine check", target=target, value=err, threshold=limit,
                  status=status)
    print(f"[e2e_gpu] engine check ({check}): max |logit diff| {err:.2e} {status}", flush=True)


def time_ttft(engine: Engine, ids, repeats: int, device) -> list[float]:
    """Seconds of ``repeats`` prefills of ``ids``; the last prefill's cache is the one decoded from."""
    runs = []
    for _ in range(repeats):
        with timed(device) as clock:
            engine.prefill(ids)
        runs.append(clock.s)
    return runs


def count_step_kernels(arch: str, engine: Engine) -> tuple[int | None, str]:
    try:
        n_kernels, kernel_unit = engine.step_kernels()
    except Exception as err:  # profiler unavailable: the row says so
        n_kernels, kernel_unit = None, f"not counted: {type(err).__name__}: {err}"[:200]
    print(f"[e2e_gpu] {arch}: one decode step launches {n_kernels} ({kernel_unit})", flush=True)
    return n_kernels, kernel_unit


@dataclass
class Bench:
    """One model after another in the Engine at every config; rows into ``writer``."""

    args: argparse.Namespace
    device: torch.device
    dtype: torch.dtype
    engine_kw: dict
    hbm: float  # bytes/s: the decode step's bound
    writer: RowWriter
    start: float

    @property
    def max_len(self) -> int:
        return max(i + o for i, o in self.args.configs)

    def engine_kw_of(self, arch: str) -> dict:
        kw = dict(self.engine_kw)
        if arch not in ATTENTION_ARCHS:
            kw["prefill_chunk"] = None  # recurrent layers: one-pass prefill
        return kw

    def measure_arch(self, arch: str) -> dict:
        """Rows of one model at every config and its decode-step target; (arch, T_in, T_out) -> (TTFT, E2E)."""
        a, results, ratios = self.args, {}, []
        engine = self.load(arch)
        if engine is None:
            return results
        path = self.warm_up(arch, engine)
        n_kernels, kernel_unit = count_step_kernels(arch, engine)
        for inp, outp in a.configs:
            if time.perf_counter() - self.start > a.budget_s:
                self.writer.add(arch=arch, shape=a.size, batch=a.batch, input_len=inp, output_len=outp,
                                status=f"not run: time budget {a.budget_s:.0f}s spent")
                continue
            ttft, e2e, ratio = self.measure_config(arch, engine, inp, outp, path, n_kernels, kernel_unit)
            results[(arch, inp, outp)] = (ttft, e2e)
            if ratio is not None:
                ratios.append(ratio)
        if ratios:
            worst = max(ratios)
            row = self.writer.target(arch=arch, shape=a.size, batch=a.batch, method="target",
                                     target="decode step / HBM bound <= 1.3 (worst config)", value=worst,
                                     threshold=1.3, status="pass" if worst <= 1.3 else "fail")
            print(f"target {arch}: {row['target']}: {worst:.2f} -> {row['status']}")
        del engine
        free(self.device)
        return results

    def load(self, arch: str) -> Engine | None:
        """The model in an Engine; None (its rows "not run") when it does not fit or the engine refuses it."""
        a = self.args
        window = a.window if arch in ORTHROS_ARCHS else None
        try:
            model = build_bench_model(arch, a.size, self.device, self.dtype, self.max_len + a.bucket,
                                      **({"window_size": window} if window else {}))
            return Engine(model, a.batch, self.max_len, bucket=a.bucket, chunk=a.chunk, **self.engine_kw_of(arch))
        except (ValueError, torch.cuda.OutOfMemoryError) as err:
            for inp, outp in a.configs:
                self.writer.add(arch=arch, batch=a.batch, input_len=inp, output_len=outp,
                                status=f"not run: {err}"[:300])
            return None

    def warm_up(self, arch: str, engine: Engine) -> str:
        """Compile / autotune with a short prefill and two decode steps, the compiled fused functions checked against
        their eager run; the prefill path label."""
        a, fused, compiled = self.args, self.engine_kw["fused"], self.engine_kw["compiled"]
        warm_ids = torch.randint(0, engine.model.config.vocab_size, (a.batch, min(4096, self.max_len // 2)))
        engine.prefill(warm_ids)
        engine.decode(2)
        if not (fused and compiled):
            return "fused eager" if fused else "eager"
        ok = self.check_compiled(arch, engine, warm_ids)
        path = "fused compiled" if ok else "fused eager (compiled check failed)"
        engine.prefill(warm_ids)
        engine.decode(2)
        return path

    def check_compiled(self, arch: str, engine: Engine, warm_ids) -> bool:
        """Compiled fused functions vs the same run eagerly: a target row; on failure the engine goes eager."""
        a = self.args
        limit_c = 0.1  # two bf16 implementations of the same math differ by ~1e-2 on random weights
        try:
            rel = engine.check_compiled(warm_ids.to(self.device))
            worst = max(rel.values())
            ok = worst <= limit_c
        except Exception as err:
            rel, worst, ok = {"error": f"{type(err).__name__}: {err}"[:200]}, float("nan"), False
        if not ok:  # wrong compiled code must not be timed: fall back to the eager fused functions
            engine.set_compiled(False)
        self.writer.target(arch=arch, shape=a.size, batch=a.batch, method="compiled check",
                           target=f"compiled fused functions vs the same run eagerly, prefill and decode logits rel <= "
                                  f"{limit_c} ({json.dumps(rel)})", value=worst, threshold=limit_c,
                           status="pass" if ok else "fail")
        print(f"[e2e_gpu] {arch}: compiled vs eager fused functions {rel} -> {'pass' if ok else 'FAIL'}", flush=True)
        return ok

    def measure_config(self, arch: str, engine: Engine, inp: int, outp: int, path: str, n_kernels, kernel_unit):
        """TTFT, E2E and the decode step vs its HBM bound at T_in/T_out: a row; (TTFT, E2E, step/bound or None)."""
        a, model, decode_attn = self.args, engine.model, self.engine_kw["decode_attn"]
        ids = torch.randint(0, model.config.vocab_size, (a.batch, inp))
        free(self.device)
        reset_peak(self.device)
        kernels.reset_usage()
        runs = time_ttft(engine, ids, a.ttft_repeats, self.device)
        ttft = statistics.median(runs)
        prefill_kernels = model_kernels(model, self.device)
        steps = outp - 1
        decode_s, method, step_ms = self.time_decode_steps(engine, inp, steps)
        # the bound at the mean context (bytes are affine in the context)
        bound_ms = self.hbm_bound_ms(arch, engine, inp + steps // 2)
        mean_step = sum(step_ms) / len(step_ms) if step_ms else None
        e2e = ttft + decode_s
        self.writer.add(arch=arch, shape=a.size, batch=a.batch, input_len=inp, output_len=outp, ttft_s=ttft,
                        e2e_s=e2e, output_tok_s=a.batch * outp / e2e,
                        decode_tok_s=a.batch * outp / decode_s if decode_s else None,
                        decode_step_ms=mean_step, hbm_bound_ms=bound_ms,
                        bound_ratio=mean_step / bound_ms if mean_step else None, kv_cache_gib=engine.kv_bytes() / 2**30,
                        state_gib=engine.state_bytes() / 2**30, peak_mem_gib=peak_gib(self.device), method=method,
                        kernel=prefill_kernels + (f"+fused:{a.compile_backend}" if path == "fused compiled" else "")
                        + "+decode:" + ("matmul" if decode_attn == "matmul" else
                                        "torch-fa2" if self.device.type == "cuda" else "blocked"),
                        ttft_runs_s=json.dumps([round(r, 4) for r in runs]),
                        fla_norm_bucket=fla_norm_bucket(model, a.batch, inp),
                        decode_kernels_per_step=n_kernels, kernel_count_unit=kernel_unit, decode_attn=decode_attn,
                        prefill_path=path,
                        prefill_chunk=a.prefill_chunk if self.engine_kw_of(arch).get("prefill_chunk") else None,
                        status="ok")
        print(f"[e2e_gpu] {arch:12} {inp:7d}/{outp:<5d} TTFT {ttft:7.2f}s (runs {[round(r, 2) for r in runs]})  "
              f"E2E {e2e:8.2f}s  step {(mean_step or 0):6.2f} ms (HBM bound {bound_ms:6.2f})  {method}", flush=True)
        return ttft, e2e, mean_step / bound_ms if mean_step else None

    def time_decode_steps(self, engine: Engine, inp: int, steps: int) -> tuple[float, str, list[float]]:
        """Decode seconds of the T_out - 1 steps, the method label and the step times (ms): in full up to
        ``--full-decode-max`` steps, else steps timed at the start, middle and end contexts."""
        a = self.args
        if steps == 0:
            return 0.0, "measured", []
        if steps <= a.full_decode_max:
            engine.prepare(steps)
            with timed(self.device) as clock:
                engine.decode(steps)
            return clock.s, "measured", [1e3 * clock.s / steps]
        n = min(a.sample_steps, steps)  # each timed run of n steps must end within the config's output
        last = inp + steps - n
        contexts = [inp, min(inp + steps // 2, last), last]
        step_ms = [time_decode(engine, c, n, self.device) for c in contexts]
        return sum(step_ms) / len(step_ms) * steps / 1e3, "measured TTFT + timed decode steps x output_len", step_ms

    def hbm_bound_ms(self, arch: str, engine: Engine, context: int) -> float:
        if arch in cm.ARCHS:  # the cost model's archs; the hybrids' bound comes from Engine.decode_bytes
            shape = cm.Shape.from_config(engine.model.config)
            window = self.args.window if arch in ORTHROS_ARCHS else None
            return 1e3 * cm.decode_step_bytes(shape, context, self.args.batch, arch, window) / self.hbm
        return 1e3 * engine.decode_bytes(context) / self.hbm


def print_ratios(configs: list[tuple[int, int]], results: dict) -> None:
    """TTFT and E2E ratios of each pair per config, next to the paper's E2E ratio."""
    paper = _paper_e2e()
    for base, ours in PAIRS.items():
        print(f"\n{base} -> {ours}: {'in/out':>13} {'TTFT x':>7} {'E2E x':>7} {'paper E2E x':>11}")
        for inp, outp in configs:
            if (base, inp, outp) in results and (ours, inp, outp) in results:
                (bt, be), (ot, oe) = results[(base, inp, outp)], results[(ours, inp, outp)]
                ref = paper.get((inp, outp), {})
                p_e2e = f"{ref[base] / ref[ours]:11.2f}" if base in ref and ours in ref else f"{'-':>11}"
                print(f"{'':>{len(base) + len(ours) + 6}}{inp:>7}/{outp:<5} {bt / ot:7.2f} {be / oe:7.2f} {p_e2e}")


def main(argv=None) -> list[dict]:
    ap = build_parser()
    args = ap.parse_args(argv)
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    choice, hbm = read_inputs(ap, args)
    engine_kw = engine_options(args, choice, device)
    print(f"[e2e_gpu] engine options {engine_kw}; attention preference {kernels.kernel_order()[:2]} / "
          f"{kernels.kernel_order(True)[:2]}", flush=True)
    start = time.perf_counter()
    hbm = hbm or copy_bandwidth(device)
    writer = open_writer(args, device)
    engine_check_row(args, device, writer, engine_kw)
    if args.check_only:
        return writer.rows

    bench = Bench(args, device, dtype, engine_kw, hbm, writer, start)
    results = {}
    torch.manual_seed(0)
    for arch in args.archs:
        results.update(bench.measure_arch(arch))
    print_ratios(args.configs, results)
    print(f"[e2e_gpu] wrote {writer.path} in {time.perf_counter() - start:.0f}s")
    kernels.prefer_kernels()
    return writer.rows


if __name__ == "__main__":
    main()
