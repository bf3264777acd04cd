"""CPU prefill latency of the suite's small models (the CPU stand-in for paper Sec. 4.5, Fig. 4).

Two modes:

* ``sweep`` (default): arch list x prompt lengths, a full-model Prefill (``logits_to_keep=1``, T_out = 1)
  of one sequence, median ms of ``--repeats`` calls after a warm-up -> ``results/{profile}/prefill_cpu.csv``
  (arch,size,n_params,seq_len,ms,status + provenance, plus ``weights``: the checkpoint folder or
  "random init", as latency does not depend on the weights' values; and ``threads``: torch's intra-op threads).
* ``128k``: one 131,072-token Prefill of a tiny Orthros, reporting ms and the process's peak resident
  memory (``resource.getrusage``), plus the KV cache size -> ``results/{profile}/prefill_128k.csv``.

Examples::

    python -m benchmarks.prefill_cpu --profile ci --archs orthros,transformer --size 1M --lengths 256,1024
    python -m benchmarks.prefill_cpu --profile ci --checkpoint orthros=work_dirs/ci/train/orthros/1M/seed42/checkpoint
    python -m benchmarks.prefill_cpu --mode 128k --profile ci --size 1M
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

from suite.archs import ORTHROS_ARCHS
from suite.cli import in_folder, out_file, positive_int, positive_ints, usage_errors
from suite.common import arch_name, arch_names, size_name
from suite.provenance import provenance, write_csv

COLUMNS = ["arch", "size", "n_params", "seq_len", "ms", "status", "weights", "threads"]  # then provenance


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far, GiB (Linux reports ru_maxrss in KiB, macOS in bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**30 if sys.platform == "darwin" else 2**20)


def _overrides(arch: str, size: str, max_len: int, window: int | None) -> dict:
    from models.sizes import get_size

    overrides = {"vocab_size": get_size(size).ref_vocab, "max_position_embeddings": max(max_len, 2048)}
    if window is not None and arch in ORTHROS_ARCHS:
        overrides["window_size"] = window
    return overrides


def bench_model(arch: str, size: str, checkpoint: str | None, max_len: int, window: int | None):
    """A model in eval mode: from ``checkpoint`` (an HF folder, :func:`suite.train.checkpoint.load_model`) or freshly
    built from the registry.

    Raises:
        ValueError: unknown arch/size, or a checkpoint that does not load (naming the missing or corrupt file).
    """
    if checkpoint:
        from suite.train.checkpoint import load_model

        return load_model(checkpoint, dtype=None, tokenizer=False, max_position_embeddings=max(max_len, 2048))[0]
    from models.registry import build

    return build(arch, size, **_overrides(arch, size, max_len, window)).eval()


def check_memory(archs: list[str], size: str, checkpoints: dict, length: int, window: int | None,
                 option: str) -> None:
    """ValueError naming ``option`` when a Prefill of ``length`` tokens, its KV cache kept, cannot fit in this host's
    memory for one of ``archs`` (:mod:`suite.memory`: a lower bound from the model config; no model is built). An
    arch whose config does not build here is left to the sweep, which gives it a "not run" row."""
    from suite.memory import check_fits, forward_bytes

    for arch in archs:
        try:
            if checkpoints.get(arch):
                from transformers import AutoConfig

                from models.registry import register_auto_classes

                register_auto_classes()
                config = AutoConfig.from_pretrained(checkpoints[arch])
            else:
                from models.registry import make_config

                config = make_config(arch, size, **_overrides(arch, size, length + 1, window))
        except (ValueError, ImportError, OSError):
            continue
        check_fits(forward_bytes(config, 1, length, cache=True), f"{option} ({arch} {size})", "cpu")


def time_prefill(model, T: int, repeats: int, warmup: int = 1) -> tuple[float, object]:
    """Median ms of a Prefill of one random T-token sequence (KV cache kept, as in serving); returns (ms, cache)."""
    ids = torch.randint(0, model.config.vocab_size, (1, T))
    times, out = [], None
    with torch.inference_mode():
        for i in range(warmup + repeats):
            out = None
            t0 = time.perf_counter()
            out = model(ids, use_cache=True, logits_to_keep=1)
            if i >= warmup:
                times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times), out.cache


def sweep(args) -> Path:
    from models import kernels
    from models.sizes import count_parameters

    archs = args.archs
    lengths = args.lengths
    checkpoints = dict(args.checkpoint)
    start = time.perf_counter()
    rows = []
    for arch in archs:
        ckpt = checkpoints.get(arch)
        try:
            model = bench_model(arch, args.size, ckpt, max(lengths) + 1, args.window)
        except Exception as err:  # an arch that cannot be built here (FLA on CPU) gets a row saying why
            if ckpt:
                raise  # a given checkpoint that does not load stops the sweep, naming the file
            rows += [dict(arch=arch, size=args.size, seq_len=T, status=f"not run: {err}"[:300],
                          weights=ckpt or "random init") for T in lengths]
            continue
        n_params = count_parameters(model)
        for T in lengths:
            row = dict(arch=arch, size=args.size, n_params=n_params, seq_len=T, weights=ckpt or "random init",
                       threads=torch.get_num_threads())
            try:
                row["ms"], _ = time_prefill(model, T, args.repeats)
                row["status"] = "ok"
            except Exception as err:
                row["status"] = f"not run: {type(err).__name__}: {err}"[:300]
            rows.append(row)
            print(f"[prefill_cpu] {arch:12} T={T:6d} {row.get('ms', float('nan')):9.1f} ms  {row['status']}",
                  flush=True)
    prov = provenance(args.profile, 0, "float32", kernels.describe("cpu"), "cpu", time.perf_counter() - start)
    out = Path(args.out or f"results/{args.profile}/prefill_cpu.csv")
    write_csv([{**{c: r.get(c) for c in COLUMNS}, **prov} for r in rows], out)
    return out


def prefill_128k(args) -> Path:
    from models import kernels
    from models.sizes import count_parameters

    T = args.seq_len
    start = time.perf_counter()
    model = bench_model("orthros", args.size, None, T + 1, args.window)
    rss_before = peak_rss_gib()
    ms, cache = time_prefill(model, T, repeats=1, warmup=0)
    row = dict(arch="orthros", size=args.size, n_params=count_parameters(model), seq_len=T, ms=ms,
               peak_rss_gib=peak_rss_gib(), rss_before_prefill_gib=rss_before,
               kv_cache_gib=cache.memory_bytes() / 2**30, window=model.config.window_size, status="ok",
               weights="random init", threads=torch.get_num_threads())
    prov = provenance(args.profile, 0, "float32", kernels.describe("cpu"), "cpu", time.perf_counter() - start)
    out = Path(args.out or f"results/{args.profile}/prefill_128k.csv")
    write_csv([{**row, **prov}], out)
    print(f"[prefill_cpu] orthros {args.size} T={T}: {ms / 1e3:.1f} s, peak RSS {row['peak_rss_gib']:.2f} GiB "
          f"(before prefill {rss_before:.2f}), KV cache {row['kv_cache_gib']:.3f} GiB")
    return out


def _pair(text: str) -> tuple[str, str]:
    """argparse ``type=`` of ``--checkpoint ARCH=FOLDER``: a known arch and an existing folder."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected ARCH=FOLDER, got {text!r}")
    arch, path = text.split("=", 1)
    return arch_name(arch), in_folder(path)


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["sweep", "128k"], default="sweep")
    ap.add_argument("--profile", default="ci", help="profile label of the rows (provenance column, default path)")
    ap.add_argument("--archs", type=arch_names, default="orthros,transformer", help="comma list of architectures")
    ap.add_argument("--size", type=size_name, default="1M")
    ap.add_argument("--lengths", type=positive_ints, default="256,1024,4096")
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--window", type=positive_int, default=None, help="Orthros window (default: the arch's)")
    ap.add_argument("--checkpoint", type=_pair, action="append", default=[],
                    help="ARCH=FOLDER (HF checkpoint), repeatable")
    ap.add_argument("--seq-len", type=positive_int, default=131072, help="128k mode: prompt length")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch intra-op threads (default: torch's own)")
    ap.add_argument("--out", type=out_file, default=None, help="CSV path (default by mode and profile)")
    args = ap.parse_args(argv)
    # Offline unless the caller says otherwise: huggingface_hub reads these when it is first imported (by
    # transformers, through models), so they are set here and models is imported lazily (bench_model, sweep,
    # prefill_128k), after this line.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    unknown = sorted({arch for arch, _ in args.checkpoint} - set(args.archs))
    if unknown:
        ap.error(f"--checkpoint given for arch(s) not in --archs: {unknown}")
    from suite.train.checkpoint import check_folder

    with usage_errors(ap):  # a truncated or corrupt checkpoint file, named before any model is built
        for _, folder in args.checkpoint:
            check_folder(folder)
        # before a model is built or a file written: a prompt that cannot fit, naming its option
        if args.mode == "128k":
            check_memory(["orthros"], args.size, {}, args.seq_len, args.window, f"--seq-len {args.seq_len}")
        else:
            check_memory(args.archs, args.size, dict(args.checkpoint), max(args.lengths), args.window,
                         f"--lengths (longest {max(args.lengths)})")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = prefill_128k(args) if args.mode == "128k" else sweep(args)
    print(f"[prefill_cpu] wrote {out}")
    return out


if __name__ == "__main__":
    main()
