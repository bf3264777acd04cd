"""How many tiny-model training processes one GPU runs at once, with and without MPS (run on the GPU machine).

Each round starts ``jobs`` copies of one short MQAR training (``suite.eval.mqar``: the d256 Transformer at the
controls' cell, T=128, 8 pairs, 256 rows a step, bf16) at once and reads each copy's training time (``wall_s`` of its
row: the timed loop, without imports and evaluation). Modes: ``timeslice`` (the GPU switches between the processes'
contexts: their ``$CUDA_MPS_PIPE_DIRECTORY`` names an empty folder, so that they do not find a daemon at CUDA's
default pipe folder either) and ``mps`` (clients of the daemon whose pipe folder ``$CUDA_MPS_PIPE_DIRECTORY`` names;
scripts/gpu_run.sh starts it). The throughput column, steps a second over all jobs, says whether more jobs at once
buy anything. Rows go to ``--out`` (CSV) as each round ends; one line per round is printed; the exit status is 1
when a job failed (its last stderr line is in the row).

    python3 scripts/gpu_concurrency_probe.py --rounds timeslice:9,mps:9,mps:18 --steps 200 --out probe.csv

Raises SystemExit (2) for a malformed ``--rounds`` or an ``mps`` round without ``$CUDA_MPS_PIPE_DIRECTORY``.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_rounds(text: str) -> list[tuple[str, int]]:
    """``"timeslice:9,mps:18"`` -> ``[("timeslice", 9), ("mps", 18)]``; ValueError names a bad entry."""
    rounds = []
    for part in text.split(","):
        mode, _, jobs = part.partition(":")
        if mode not in ("timeslice", "mps") or not (jobs.isascii() and jobs.isdigit()) or int(jobs) < 1:
            raise ValueError(f"--rounds entry {part!r}: want MODE:JOBS, MODE timeslice or mps, JOBS >= 1")
        rounds.append((mode, int(jobs)))
    return rounds


def run_round(mode: str, jobs: int, steps: int, workdir: Path, device: str = "cuda") -> dict:
    """Start ``jobs`` trainings at once; wait for all; their training times (s) and the round's wall time (s)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if mode == "timeslice":  # unset, the variable means CUDA's default folder, where a daemon may be listening
        (workdir / "no_mps").mkdir(exist_ok=True)
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(workdir / "no_mps")
    outs = [workdir / f"{mode}_{jobs}_{i}.csv" for i in range(jobs)]
    errs = [workdir / f"{mode}_{jobs}_{i}.err" for i in range(jobs)]
    cmd = [sys.executable, "-m", "suite.eval.mqar", "--arch", "transformer", "--size", "d256", "--seq-len", "128",
           "--kv-pairs", "8", "--train-kv", "8", "--vocab-size", "1024", "--tie-embeddings", "--batch-size", "256",
           "--steps", str(steps), "--num-test", "64", "--device", device,
           "--dtype", "bfloat16" if device.startswith("cuda") else "float32", "--profile", "probe"]
    start = time.perf_counter()
    with contextlib.ExitStack() as files:
        procs = [subprocess.Popen([*cmd, "--seed", str(i), "--out", str(out)], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=files.enter_context(open(err, "w")))
                 for i, (out, err) in enumerate(zip(outs, errs))]
        codes = [p.wait() for p in procs]
    wall = time.perf_counter() - start
    failed = [(err.read_text().strip().splitlines() or [f"exit {code}"])[-1]
              for code, err in zip(codes, errs) if code]
    train_s = [float(next(csv.DictReader(out.read_text().splitlines()))["wall_s"]) for out in outs if out.exists()]
    return {"mode": mode, "jobs": jobs, "steps": steps, "failed": len(failed),
            "train_s_median": statistics.median(train_s) if train_s else None,
            "train_s_max": max(train_s) if train_s else None,
            "steps_per_s_all_jobs": steps * len(train_s) / max(train_s) if train_s else None,
            "round_wall_s": wall, "error": failed[0] if failed else ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", default="timeslice:9,mps:9,mps:18", help="MODE:JOBS,... (default %(default)s)")
    p.add_argument("--steps", type=int, default=200, help="training steps a job (default %(default)s)")
    p.add_argument("--device", default="cuda",
                   help="torch device of the jobs (default %(default)s; cpu: a float32 smoke test)")
    p.add_argument("--out", required=True, type=Path, help="CSV of one row per round")
    a = p.parse_args(argv)
    try:
        rounds = parse_rounds(a.rounds)
    except ValueError as exc:
        p.error(str(exc))
    if any(m == "mps" for m, _ in rounds) and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
        p.error("an mps round needs $CUDA_MPS_PIPE_DIRECTORY (the MPS daemon scripts/gpu_run.sh starts)")
    if a.steps < 1:
        p.error(f"--steps {a.steps} must be >= 1")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, open(a.out, "w", newline="") as f:
        writer = None
        for mode, jobs in rounds:  # each row written as its round ends: a probe cut by a timeout keeps the rest
            row = run_round(mode, jobs, a.steps, Path(tmp), a.device)
            failed += row["failed"]
            if writer is None:
                writer = csv.DictWriter(f, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
