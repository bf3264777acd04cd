"""Decode under load: Orthros's and the Transformer's decode step against batch size at several contexts.

Beyond the paper's batch-2 condition; each cell is predicted by the cost model before it is timed.

The paper measures decode at batch 2 only (Table 4). An Orthros step puts 2 rows per sequence through the weight
GEMMs (base + output), the Transformer 1; both read the same K/V (the output row all of it, the base row its last w
keys). So the second row should stay nearly free while the step is memory bound, and cost once the GEMMs approach
the compute-bound regime: at large batch and short context.

Every cell runs the decode engine (:class:`models.runtime.decode.Engine`: fused per-layer step, CUDA graphs, the
FlashAttention-2 decode kernel where verified) on a random-weight Qwen3-8B-shape bf16 model whose K/V cache holds
``context`` tokens of random values (decode cost does not depend on the cached values, so no prefill is run;
random, not zero, data). Per cell: the kernels one step launches (``torch.profiler``), the cost model's prediction
(:func:`suite.cost_model.decode_step_predict` with this device's rates and that kernel count), then the mean step time
over ``--steps`` graph replays, median of ``--repeats`` runs. The batch sizes are powers of two up to the largest
batch whose K/V cache fits beside the weights (``--batches auto``), plus that largest batch.

Rows of ``decode_load.csv``: arch, context, batch, path (``fused eager`` / ``fused compiled``), decode_attn
(``fa2`` / ``matmul``), decode_step_ms, tok_s (sequences / step), predicted_ms with its phases (gemm_ms, attn_ms,
overhead_ms), hbm_bound_ms, compute_bound_ms, measured_over_predicted, kernels_per_step, kv_cache_gib, peak_mem_gib;
and the two phases timed alone on the cell's own tensors (``--phases``): gemm_alone_ms (every layer's weight GEMMs
and the LM head on the step's rows) and attn_alone_ms (every layer's full-context decode attention over the cell's
cache; Orthros's windowed base-row call is not in it). A cell that does not fit reads ``not run: ...``. Targets
(``targets.csv``): per arch, path and decode attention, the cost model within 15% on every cell.

GPU: ``python -m benchmarks.decode_load --rates results/gpu/rates.json --out-dir $OUT``. CPU smoke (plumbing only:
the predictions use GPU rates): ``--device cpu --dtype float32 --size 1M --contexts 64,128 --batches 1,2 --steps 2
--repeats 1 --paths eager --out-dir /tmp/decode_load``. ``--out-dir`` is required, so that no run overwrites the
committed ``results/gpu`` by default.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time
from argparse import ArgumentTypeError
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.bench_models import build_bench_model
from benchmarks.gpu_common import (
    RowWriter,
    common_columns,
    copy_bandwidth,
    free,
    peak_gib,
    reset_peak,
    sync,
    time_ms,
)
from models import kernels
from models.runtime.decode import Engine
from suite import cost_model as cm
from suite.archs import ORTHROS_ARCHS, PAPER_WINDOW
from suite.cli import (
    device_name,
    in_file,
    int_list,
    nonnegative_float,
    out_folder,
    positive_float,
    positive_int,
    positive_ints,
    usage_errors,
)
from suite.common import DTYPES, arch_names, size_name

ARCHS = cm.ARCHS  # the cost model's pair: transformer, orthros
TOLERANCE = 0.15  # the prefill's cost-model target, applied to every decode cell
CSV = "decode_load.csv"


def batch_list(text: str) -> list[int] | str:
    """argparse ``type=`` of ``--batches``: ``auto`` or positive integers, ``"1,2,4"``."""
    return "auto" if text.strip() == "auto" else int_list(text, "batch sizes", error=ArgumentTypeError)


def cost_model_archs(text: str) -> list[str]:
    """argparse ``type=`` of ``--archs``: architectures the cost model knows (:data:`suite.cost_model.ARCHS`)."""
    archs = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown or not archs:
        raise ArgumentTypeError(f"{', '.join(unknown) or 'none given'}: the decode-under-load sweep and its cost "
                                f"model take {', '.join(ARCHS)}")
    return arch_names(",".join(archs))


def auto_batches(fit: int, cap: int) -> list[int]:
    """Powers of two below ``min(fit, cap)``, then ``min(fit, cap)`` itself (none when nothing fits)."""
    top = min(fit, cap)
    out = [1 << k for k in range(top.bit_length()) if (1 << k) < top]
    return out + [top] if top >= 1 else []


def kv_bytes_per_sequence(model, capacity: int) -> int:
    """Bytes of one sequence's static K/V cache: every attention layer's K and V for ``capacity`` slots."""
    c = model.config
    per_slot = 2 * c.num_key_value_heads * c.head_dim * next(model.parameters()).element_size()
    return c.num_hidden_layers * capacity * per_slot


def step_workspace_bytes(model, batch: int) -> int:
    """A generous bound on what a decode step allocates besides the cache: logits in fp32 and the model dtype, and
    the activations of 2 rows per sequence (hidden and FFN width, a few buffers each)."""
    c = model.config
    return batch * (6 * c.vocab_size + 8 * 2 * (c.hidden_size + 2 * c.intermediate_size) * 4)


PATHS = {"eager": "fused eager", "compiled": "fused compiled"}


def path_names(text: str) -> list[str]:
    """argparse ``type=`` of ``--paths``: ``eager`` and / or ``compiled`` (the engine's fused step, compiled or not)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in PATHS for n in names):
        raise ArgumentTypeError(f"--paths takes eager and/or compiled, got {text!r}")
    return [PATHS[n] for n in names]


def attn_names(text: str) -> list[str]:
    """argparse ``type=`` of ``--decode-attn``: ``auto``, ``fa2`` and / or ``matmul``."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in ("auto", "fa2", "matmul") for n in names):
        raise ArgumentTypeError(f"--decode-attn takes auto, fa2 and/or matmul, got {text!r}")
    return names


def gemm_alone_ms(engine: Engine, device) -> float:
    """The step's weight GEMMs timed alone: layer 0's fused QKV, O, gate/up and down projections on the step's rows,
    times the layers, plus the LM head on one row per sequence (each layer's weights far exceed the L2 cache)."""
    w, m = engine.step.weights[0], engine.model
    rows = engine.batch * (2 if engine.two_stream else 1)
    g = torch.Generator(device=device).manual_seed(1)
    x = torch.randn(rows, m.config.hidden_size, device=device, dtype=engine.dtype, generator=g)
    attn_out = torch.randn(rows, w.o.shape[1], device=device, dtype=engine.dtype, generator=g)
    ffn = torch.randn(rows, w.mlp.down.shape[1], device=device, dtype=engine.dtype, generator=g)

    def layer():
        F.linear(x, w.qkv), F.linear(attn_out, w.o), F.linear(x, w.mlp.gate_up), F.linear(ffn, w.mlp.down)

    head = x[:engine.batch]
    return len(engine.mixers) * time_ms(layer, device, 10, 2) + time_ms(lambda: m.lm_head(head), device, 10, 2)


def attn_alone_ms(engine: Engine, context: int, device) -> float:
    """Every layer's full-context decode attention timed alone: one query per sequence and head over layer 0's cache
    holding ``context + 1`` keys, through the kernel the engine's ``decode_attn`` uses, times the layers."""
    cfg, B, L = engine.model.config, engine.batch, engine._bucket()
    g = torch.Generator(device=device).manual_seed(2)
    q = torch.randn(B, cfg.num_attention_heads, 1, cfg.head_dim, device=device, dtype=engine.dtype, generator=g)
    k, v = engine.k[0], engine.v[0]
    if engine.decode_attn == "fa2":
        used = torch.full((B,), context + 1, dtype=torch.int32, device=device)
        fn = functools.partial(kernels.decode_attention, q, k, v, used, L, None)
    else:
        masked = torch.arange(L, device=device) > context
        fn = functools.partial(kernels.decode_attention_split, q, k[:, :, :L], v[:L // engine.chunk], masked)
    return sum(engine.attention) * time_ms(fn, device, 10, 2)


@dataclass
class Cell:
    arch: str
    context: int
    batch: int
    path: str  # "fused eager" or "fused compiled"
    decode_attn: str  # "fa2" or "matmul"


class Sweep:
    """The cells of one run, written row by row."""

    def __init__(self, args, device, dtype, rates: cm.Rates, writer: RowWriter):
        self.args, self.device, self.dtype, self.rates, self.writer = args, device, dtype, rates, writer
        self.start = time.perf_counter()
        self.misses: dict[tuple[str, str], list[float]] = {}
        self.shape = None

    def capacity(self, context: int) -> int:
        a = self.args
        return -(-(context + a.steps + 2) // a.bucket) * a.bucket

    def engine(self, model, cell: Cell) -> Engine:
        a = self.args
        eng = Engine(model, cell.batch, cell.context + a.steps + 2, bucket=a.bucket, chunk=a.bucket,
                     decode_attn=cell.decode_attn, fused=True, compiled=cell.path == "fused compiled",
                     compile_backend=a.compile_backend)
        g = torch.Generator(device=self.device).manual_seed(cell.context + cell.batch)
        for t in [*eng.k, *eng.v]:
            if t is not None:
                t.normal_(generator=g)  # random cached keys and values, never zeros
        eng.tok.random_(0, model.config.vocab_size, generator=g)
        self.seek(eng, cell.context)
        return eng

    @staticmethod
    def seek(engine: Engine, context: int) -> None:
        engine.length = context
        engine.pos.fill_(context)

    def fits(self, model, context: int) -> int:
        """The largest batch whose cache and step workspace fit in the free device memory less ``--headroom-gib``."""
        per_seq = kv_bytes_per_sequence(model, self.capacity(context)) + step_workspace_bytes(model, 1)
        if self.device.type != "cuda":
            return self.args.max_batch
        free(self.device)
        avail = torch.cuda.mem_get_info(self.device)[0] - self.args.headroom_gib * 2**30
        return max(0, int(avail // per_seq))

    def time_steps(self, engine: Engine, context: int) -> float:
        """Mean ms of one decode step: ``--steps`` replays after a warm one, median over ``--repeats`` runs."""
        a, runs = self.args, []
        engine.prepare(a.steps + 1)
        for _ in range(a.repeats):
            self.seek(engine, context)
            engine.decode(1)
            sync(self.device)
            t0 = time.perf_counter()
            engine.decode(a.steps)
            sync(self.device)
            runs.append(1e3 * (time.perf_counter() - t0) / a.steps)
        self.seek(engine, context)
        return statistics.median(runs)

    def measure(self, model, cell: Cell) -> bool:
        """One cell's row; False when it did not fit (larger batches at this context are skipped)."""
        a = self.args
        keys = dict(arch=cell.arch, shape=a.size, context=cell.context, batch=cell.batch, path=cell.path,
                    window=a.window if cell.arch in ORTHROS_ARCHS else None, decode_attn=cell.decode_attn,
                    steps=a.steps, repeats=a.repeats)
        free(self.device)
        reset_peak(self.device)
        try:
            engine = self.engine(model, cell)
            n_kernels, unit = engine.step_kernels()
            window = a.window if cell.arch in ORTHROS_ARCHS else None
            pred = cm.decode_step_predict(self.shape, cell.context, cell.batch, cell.arch, n_kernels, self.rates,
                                          window)
            step_ms = self.time_steps(engine, cell.context)
            phases = ({"gemm_alone_ms": gemm_alone_ms(engine, self.device),
                       "attn_alone_ms": attn_alone_ms(engine, cell.context, self.device)} if a.phases else {})
        except torch.cuda.OutOfMemoryError as err:
            self.writer.add(**keys, status=f"not run: out of memory ({str(err).splitlines()[0][:160]})")
            return False
        ms = {k.replace("_s", "_ms"): 1e3 * v for k, v in pred.items() if k.endswith("_s")}
        ratio = step_ms / ms["predicted_ms"]
        self.misses.setdefault((cell.arch, cell.path, cell.decode_attn), []).append(ratio)
        self.writer.add(**keys, decode_step_ms=step_ms, tok_s=1e3 * cell.batch / step_ms, **ms,
                        measured_over_predicted=ratio, kernels_per_step=n_kernels, kernel_count_unit=unit,
                        kv_cache_gib=engine.kv_bytes() / 2**30, peak_mem_gib=peak_gib(self.device),
                        gemm_rows=cm.decode_rows(cell.batch, cell.arch), **phases, status="ok")
        alone = " ".join(f"{k.split('_')[0]} {v:.2f}" for k, v in phases.items())
        print(f"[decode_load] {cell.arch:11} {cell.path:14} {cell.decode_attn:6} ctx {cell.context:7d} "
              f"B {cell.batch:4d}: "
              f"{step_ms:8.2f} ms (predicted {ms['predicted_ms']:8.2f}, HBM bound {ms['hbm_bound_ms']:8.2f}, "
              f"x{ratio:.3f}) {n_kernels} kernels {alone}", flush=True)
        del engine
        free(self.device)
        return True

    def over_budget(self) -> bool:
        return time.perf_counter() - self.start > self.args.budget_s

    def context(self, arch: str, context: int) -> None:
        """Every batch of one arch at one context, smallest first."""
        a = self.args
        if self.over_budget():
            self.writer.add(arch=arch, shape=a.size, context=context,
                            status=f"not run: time budget {a.budget_s:.0f}s spent")
            return
        window = a.window if arch in ORTHROS_ARCHS else None
        torch.manual_seed(0)
        model = build_bench_model(arch, a.size, self.device, self.dtype, self.capacity(max(a.contexts)),
                                  **({"window_size": window} if window else {}))
        self.shape = cm.Shape.from_config(model.config)
        fit = self.fits(model, context)
        batches = auto_batches(fit, a.max_batch) if a.batches == "auto" else a.batches
        cells = [Cell(arch, context, b, path, attn) for b in batches for path in a.paths for attn in a.decode_attn]
        for cell in cells:
            if self.over_budget():
                self.writer.add(arch=arch, shape=a.size, context=context, batch=cell.batch, path=cell.path,
                                status=f"not run: time budget {a.budget_s:.0f}s spent")
                continue
            if cell.batch > fit:
                self.writer.add(arch=arch, shape=a.size, context=context, batch=cell.batch, path=cell.path,
                                status=f"not run: batch {cell.batch} needs more memory than is free (fits {fit})")
                continue
            if not self.measure(model, cell):
                fit = min(fit, cell.batch - 1)
        del model
        free(self.device)

    def targets(self) -> None:
        for (arch, path, attn), ratios in self.misses.items():
            worst = max(abs(r - 1) for r in ratios)
            self.writer.target(arch=arch, shape=self.args.size, method="target", path=path, decode_attn=attn,
                               target=f"decode step within {TOLERANCE:.0%} of the cost model on every cell "
                                      f"({len(ratios)} cells; worst |measured / predicted - 1|)",
                               value=worst, threshold=TOLERANCE, status="pass" if worst <= TOLERANCE else "fail")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda", help="cuda (the measurement) or cpu (a smoke run)")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--size", type=size_name, default="qwen3_8b", help="model shape (random weights)")
    ap.add_argument("--archs", type=cost_model_archs, default="transformer,orthros", help="transformer and/or orthros")
    ap.add_argument("--contexts", type=positive_ints, default="2048,8192,32768,131072",
                    help="cached tokens per sequence")
    ap.add_argument("--batches", type=batch_list, default="auto", help="'auto' or a list of batch sizes")
    ap.add_argument("--max-batch", type=positive_int, default=512, help="largest batch 'auto' tries")
    ap.add_argument("--paths", type=path_names, default="compiled",
                    help="the engine's fused step: eager and/or compiled (one compilation per batch size)")
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW, help="Orthros's window w")
    ap.add_argument("--steps", type=positive_int, default=16, help="decode steps per timed run")
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--bucket", type=positive_int, default=256, help="key-length bucket of the engine")
    ap.add_argument("--decode-attn", type=attn_names, default="auto",
                    help="decode attention kernels, fa2 and/or matmul; auto: fa2 where this torch has the "
                         "FlashAttention-2 op on CUDA, else matmul")
    ap.add_argument("--phases", action="store_true",
                    help="also time each cell's weight GEMMs and full-context attention alone")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--headroom-gib", type=nonnegative_float, default=4.0,
                    help="device memory kept free beyond the cache and the step's workspace")
    ap.add_argument("--rates", type=in_file, default=None,
                    help="rates.json (gemm_tflops, attn_tflops); the copy bandwidth is measured here either way")
    ap.add_argument("--out-dir", type=out_folder, required=True,
                    help="folder of decode_load.csv and targets.csv (results/gpu for the committed rows)")
    ap.add_argument("--budget-s", type=positive_float, default=1e9, help="skip cells after this many seconds")
    return ap


def main(argv=None) -> list[dict]:
    ap = build_parser()
    args = ap.parse_args(argv)
    with usage_errors(ap):  # a rates file that is not JSON, or a bad rate in it
        rates = cm.Rates.load(args.rates) if args.rates else cm.Rates()
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    auto = "fa2" if device.type == "cuda" and kernels._fa2_available() else "matmul"
    args.decode_attn = list(dict.fromkeys(auto if n == "auto" else n for n in args.decode_attn))
    hbm = copy_bandwidth(device)
    rates = dataclasses.replace(rates, hbm_bytes_per_s=hbm)
    print(f"[decode_load] copy bandwidth {hbm / 1e9:.1f} GB/s; rates {rates}; decode attention {args.decode_attn}",
          flush=True)
    writer = RowWriter(Path(args.out_dir) / CSV, common_columns(device, args.dtype))
    sweep = Sweep(args, device, dtype, rates, writer)
    for context in args.contexts:
        for arch in args.archs:
            sweep.context(arch, context)
    sweep.targets()
    print(f"[decode_load] wrote {writer.path} in {time.perf_counter() - sweep.start:.0f}s")
    return writer.rows


if __name__ == "__main__":
    main()
