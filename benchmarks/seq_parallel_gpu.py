"""Sequence-parallel prefill on N GPUs (torchrun), Orthros and the Transformer: ``results/gpu/seq_parallel.csv``.

``torchrun --standalone --nproc_per_node 2 -m benchmarks.seq_parallel_gpu --out results/gpu/seq_parallel.csv``

Random-weight models at the Qwen3-8B shape (bf16) run :func:`models.runtime.seq_parallel.prefill_any` (Orthros:
halo + merged output token; Transformer: all-gathered K/V over head-tail balanced chunks). Every
(arch, length) is timed twice by the same code: on rank 0 alone (a one-rank group; ``gpus`` = 1) and on all N
ranks (``gpus`` = N); ``speedup`` = ms(1) / ms(N) of the same arch. ``ms`` is rank 0's wall time of one
prefill (median of the repeats, CUDA synchronised). Lengths at or above ``--layer-wise-from`` (per arch) run
a one-layer model of the same shape, and ``ms`` is that time x the layer count (method
"layer-wise (one layer x n_layers)"); shorter ones run the whole model (method "full-model").

``predicted_ms`` / ``predicted_speedup`` come from :func:`suite.cost_model.prefill_time` with the
kernel rates of ``--rates`` (the single-GPU run's ``rates.json``) and the link bandwidth / latency of
:class:`~suite.cost_model.Rates`; a target row per measured multi-GPU row (``targets.csv`` beside the CSV)
passes when |speedup / predicted_speedup - 1| <= 0.15.
Rows for ``--predict-gpus`` (default 8) GPUs are cost-model predictions (method "cost-model prediction").
Rows are written as they come (a killed run keeps them); ``world_size`` is the ranks that ran the row (1 for the
predictions, computed by rank 0).

CPU smoke run (gloo): ``torchrun --nproc_per_node 2 -m benchmarks.seq_parallel_gpu --device cpu --dtype float32
--size 1M --lengths 64,128 --layer-wise-from transformer=128 --out /tmp/seq_parallel.csv``.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import torch
import torch.distributed as dist

from benchmarks.bench_models import build_bench_model
from benchmarks.gpu_common import RowWriter, common_columns, free, peak_gib, reset_peak, sync
from models import kernels
from models.runtime.seq_parallel import prefill_any
from suite import cost_model as cm
from suite.archs import ORTHROS_ARCHS, PAPER_WINDOW
from suite.cli import device_name, in_file, out_file, positive_float, positive_int, positive_ints
from suite.common import DTYPES, kernels_summary, size_name

FULL, LAYER_WISE = "full-model", "layer-wise (one layer x n_layers)"
TOLERANCE = 0.15
COLUMNS = ("arch", "gpus", "seq_len", "ms", "speedup", "predicted_speedup", "method", "status", "predicted_ms",
           "kernel", "peak_mem_gib", "shape", "window")  # measurement columns, in order


def _archs(text: str) -> list[str]:
    archs = [a for a in text.split(",") if a]
    bad = [a for a in archs if a not in cm.ARCHS]
    if bad or not archs:
        raise argparse.ArgumentTypeError(f"{bad or text!r} not supported; choose from {cm.ARCHS}")
    return archs


def _layer_wise(text: str) -> dict[str, int]:
    try:
        return parse_layer_wise(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_layer_wise(text: str) -> dict[str, int]:
    """``"transformer=262144,orthros=1048576"`` -> {arch: first length timed layer-wise}; ValueError naming a bad
    entry."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        arch, _, value = item.partition("=")
        try:
            out[arch] = int(value)
        except ValueError:
            raise ValueError(f"--layer-wise-from entry {item!r} is not ARCH=LENGTH") from None
    return out


def _time_ms(fn, device, group, repeats: int, warmup: int) -> float:
    """Median wall ms of ``fn()`` on this rank, each call started after a barrier of ``group``."""
    times = []
    for i in range(warmup + repeats):
        dist.barrier(group=group)
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if i >= warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def _rank0_says(flag: bool, device) -> bool:
    """Rank 0's ``flag`` on every rank (so all ranks take the same branch)."""
    t = torch.tensor([int(flag)], device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())


def _anyone(flag: bool, device) -> bool:
    t = torch.tensor([int(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", type=_archs, default="transformer,orthros")
    ap.add_argument("--lengths", type=positive_ints, default="131072,262144,524288,1048576")
    ap.add_argument("--layer-wise-from", type=_layer_wise, default="transformer=262144,orthros=1048576",
                    help="ARCH=T,...: lengths >= T of ARCH are timed as one layer x n_layers")
    ap.add_argument("--size", type=size_name, default="qwen3_8b")
    ap.add_argument("--window", type=positive_int, default=PAPER_WINDOW)
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--repeats", type=positive_int, default=2, help="timed calls (1 when one call is predicted > 5 s)")
    ap.add_argument("--budget-s", type=positive_float, default=240.0,
                    help="start no measurement after this many seconds")
    ap.add_argument("--timeout-s", type=positive_float, default=300.0,
                    help="collective timeout (a stuck rank ends the run)")
    ap.add_argument("--rates", type=in_file, default="results/gpu/rates.json", help="kernel rates JSON")
    ap.add_argument("--predict-gpus", type=positive_int, default=8)
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--out", type=out_file, default="results/gpu/seq_parallel.csv")
    args = ap.parse_args(argv)
    archs, lengths, layer_wise = args.archs, sorted(args.lengths), args.layer_wise_from

    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    own_group = not dist.is_initialized()
    if own_group:  # torchrun's environment (a plain `python -m` run is one rank)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        return _run(args, archs, lengths, layer_wise, device)
    finally:
        if own_group:
            dist.destroy_process_group()


def _run(args, archs, lengths, layer_wise, device) -> list[dict]:
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {1: dist.new_group([0]) if world > 1 else None, world: None}  # new_group: every rank calls it
    start = time.perf_counter()
    rates = cm.Rates.load(args.rates)
    shape = cm.Shape.from_size(args.size)
    writer = RowWriter(args.out, common_columns(device, args.dtype, args.profile)) if rank == 0 else None
    dtype = DTYPES[args.dtype]

    def add(world_size, **row):
        if writer is not None:
            writer.common["prov"]["world_size"] = world_size
            writer.add(**{**dict.fromkeys(COLUMNS), **row, "shape": args.size,
                          "window": args.window if row["arch"] in ORTHROS_ARCHS else None})

    for arch in archs:
        window = args.window if arch in ORTHROS_ARCHS else None
        models, warmed = {}, set()
        for T in lengths:
            method = LAYER_WISE if T >= layer_wise.get(arch, float("inf")) else FULL
            if method not in models:
                torch.manual_seed(0)  # the same weights on every rank
                layers = {"num_hidden_layers": 1} if method == LAYER_WISE else {}
                overrides = {"window_size": window} if arch in ORTHROS_ARCHS else {}
                models.pop(FULL if method == LAYER_WISE else LAYER_WISE, None)
                free(device)
                models[method] = build_bench_model(arch, args.size, device, dtype, max(lengths) + 1, **overrides,
                                                   **layers)
            model, scale = models[method], (shape.layers if method == LAYER_WISE else 1)
            ids = torch.randint(0, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(T))
            ids = ids.to(device)
            measured = {}
            for g in sorted({1, world}):
                pred_ms = 1e3 * cm.prefill_time(shape, T, arch, g, rates, window)["total_s"]
                common = dict(arch=arch, gpus=g, seq_len=T, method=method, predicted_ms=pred_ms)
                if not _rank0_says(time.perf_counter() - start < args.budget_s, device):
                    add(g, **common, status=f"not run: time budget {args.budget_s:.0f}s spent")
                    continue
                repeats = args.repeats if pred_ms / scale < 5000 else 1
                warmup = 0 if (method, g) in warmed else 1
                warmed.add((method, g))
                error, ms, kernel, peak = None, None, None, None
                try:
                    if rank < g:
                        reset_peak(device)
                        kernels.reset_usage()
                        ms = scale * _time_ms(lambda: prefill_any(model, ids, groups[g]), device, groups[g],
                                              repeats, warmup)
                        kernel, peak = kernels_summary(), peak_gib(device)
                except Exception as err:  # out of memory, a kernel refusing a shape
                    error = f"not run: {type(err).__name__}: {err}"[:300]
                    free(device)
                failed = _anyone(error is not None, device)
                if failed:
                    add(g, **common, status=error or "not run: failed on another rank")
                    continue
                if rank != 0:
                    continue
                measured[g] = ms
                row = dict(common, ms=ms, kernel=kernel, peak_mem_gib=peak, status="ok")
                extra = ""
                if g > 1 and 1 in measured:
                    speedup, predicted = measured[1] / ms, cm.seq_parallel_speedup(shape, T, arch, g, rates, window)
                    off = abs(speedup / predicted - 1)
                    row.update(speedup=speedup, predicted_speedup=predicted)
                    verdict = "pass" if off <= TOLERANCE else "fail"
                    writer.common["prov"]["world_size"] = g
                    writer.target(arch=arch, gpus=g, seq_len=T, method=method, value=off, threshold=TOLERANCE,
                                  target=f"|speedup / predicted_speedup - 1| <= {TOLERANCE}", status=verdict)
                    extra = f" speedup {speedup:.2f} (model {predicted:.2f}, {verdict})"
                add(g, **row)
                print(f"[seq_parallel] {arch:11} T={T:8d} gpus={g} {method:33} {ms:10.1f} ms "
                      f"(model {pred_ms:10.1f}){extra}", flush=True)
        models.clear()
        free(device)
    if args.predict_gpus > 1:
        for arch in archs:
            window = args.window if arch in ORTHROS_ARCHS else None
            for T in lengths:
                add(1, arch=arch, gpus=args.predict_gpus, seq_len=T, method="cost-model prediction",
                    ms=1e3 * cm.prefill_time(shape, T, arch, args.predict_gpus, rates, window)["total_s"],
                    predicted_speedup=cm.seq_parallel_speedup(shape, T, arch, args.predict_gpus, rates, window),
                    status="ok")
    dist.barrier()
    if rank == 0:
        print(f"[seq_parallel] wrote {writer.path} in {time.perf_counter() - start:.0f}s", flush=True)
    return writer.rows if writer is not None else []


if __name__ == "__main__":
    main()
