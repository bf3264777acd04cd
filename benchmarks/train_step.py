"""Training-step time of Orthros PT vs the Transformer at one length (a target row).

Regime PT (every position carries an output-stream token, T_out = T): Orthros runs 2T rows per sequence
(window attention for the base stream, full causal attention for the output stream), so its step costs
about twice the Transformer's; the target is <= 2.1x at T = 4096. Uses
:func:`benchmarks.fla_vs_naive.throughput` (AdamW, bf16 autocast on CUDA, warm-up steps first) at each
``--sizes`` entry. Writes ``train_step.csv`` (one row per (arch, size)) and a target row per size into
``targets.csv`` beside it.

GPU: ``python -m benchmarks.train_step --out-dir $OUT``. CPU smoke: ``--device cpu --sizes 1M --seq-len 64
--batch 1 --steps 1 --warmup 1``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.fla_vs_naive import throughput
from benchmarks.gpu_common import RowWriter, common_columns
from suite.cli import device_name, nonnegative_int, out_folder, positive_int
from suite.common import size_names

RATIO_TARGET = 2.1


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--sizes", type=size_names, default="12M,25M")
    ap.add_argument("--seq-len", type=positive_int, default=4096)
    ap.add_argument("--batch", type=positive_int, default=4)
    ap.add_argument("--steps", type=positive_int, default=5)
    ap.add_argument("--warmup", type=nonnegative_int, default=2)
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu")
    args = ap.parse_args(argv)
    device = args.device
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = RowWriter(out_dir / "train_step.csv",
                       common_columns(device, "bf16-autocast" if device.startswith("cuda") else "float32"))
    start = time.perf_counter()
    for size in args.sizes:
        ms = {}
        for arch in ("transformer", "orthros"):
            try:
                row = throughput(arch, size, args.batch, args.seq_len, args.steps, args.warmup, device)
            except Exception as err:  # out of memory, a kernel refusing a shape
                row = {"arch": arch, "size": size, "batch": args.batch, "seq_len": args.seq_len,
                       "status": f"not run: {type(err).__name__}: {err}"[:300]}
            writer.add(method="training step (PT)", **row)
            if row.get("status") == "ok":
                ms[arch] = row["ms_per_step"]
            print(f"[train_step] {arch:12} {size:5} T={args.seq_len} batch {args.batch}: "
                  f"{row.get('ms_per_step')} ms/step {row.get('status')}", flush=True)
        ratio = ms["orthros"] / ms["transformer"] if len(ms) == 2 else None
        status = "not run: measurement missing" if ratio is None else ("pass" if ratio <= RATIO_TARGET else "fail")
        writer.target(arch="orthros", size=size, batch=args.batch, seq_len=args.seq_len, method="target",
                      target=f"orthros PT training step / transformer's at T={args.seq_len} <= {RATIO_TARGET}",
                      value=ratio, threshold=RATIO_TARGET, status=status)
        print(f"target: {size} orthros/transformer training step {ratio} -> {status}", flush=True)
    print(f"[train_step] wrote {writer.path} in {time.perf_counter() - start:.0f}s", flush=True)
    return writer.rows


if __name__ == "__main__":
    main()
