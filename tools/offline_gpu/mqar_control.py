"""The MQAR positive control's first phase at several seeds and schedules, all jobs at once on one GPU.

The gpu profile trains each MQAR model first on the controls' cell alone (``mqar.first_cell_frac`` of the steps at
T=128 / 8 pairs), then on the whole mixture. Whether the d256 Transformer leaves the pre-copy plateau in that phase
decides the positive control, and one stream of data is one draw of it. Each job here runs the profile's recipe
(``suite.experiments.mqar.recipe.mqar_cli_args``, the DAG's ``mqar`` rule's options) for the Transformer at the control
size, on the controls' cell alone and only through that phase (``--stop-after``: the same batches and learning rates
as the DAG's job up to there), then tests that cell. A variant adds options to the recipe (``name=--lr 2e-3``;
argparse keeps the last of a repeated option); every variant runs at every seed.

    python3 tools/offline_gpu/mqar_control.py --variants "profile=;no_warmup=--warmup 0" --seeds 42,43,44 \\
        --out work_dirs/gpu/run/mqar_control.csv --log-dir work_dirs/gpu/run

(``results/gpu/calibration/mqar_control.csv`` is one such run: results/gpu/CALIBRATION.md.)

Rows (one per job): variant, options, seed, accuracy at the controls' cell, final_train_loss, ``crossed_step`` (the
first logged step whose loss is under ``--crossed-loss``: the copy transition; empty when none), train_s, status
(``ok``, or why not), with the job row's provenance. Exit status 1 when a job failed or its ``--timeout`` ended it.
Raises SystemExit (2) for a malformed ``--variants`` or ``--seeds``.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from suite.config import load_config, mqar_control_cell, mqar_control_size  # noqa: E402
from suite.experiments.mqar.recipe import mqar_cli_args  # noqa: E402
from suite.provenance import write_csv  # noqa: E402

STEP_LINE = re.compile(r"^step (\d+) .* loss ([0-9.naninf]+) ", re.MULTILINE)


def parse_variants(text: str) -> list[tuple[str, str]]:
    """``"profile=;no_warmup=--warmup 0"`` -> ``[("profile", []), ("no_warmup", ["--warmup", "0"])]`` (options split
    as a shell would); ValueError names a bad entry (no ``=``, an empty or non-word name, a repeated name, unbalanced
    quotes)."""
    variants, names = [], set()
    for part in text.split(";"):
        name, eq, options = part.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in names:
            raise ValueError(f"--variants entry {part!r}: want NAME=OPTIONS, NAME of letters, digits, _ . - and "
                             "unique")
        try:
            argv = shlex.split(options)
        except ValueError as exc:
            raise ValueError(f"--variants entry {part!r}: {exc}") from None
        names.add(name)
        variants.append((name, argv))
    return variants


def parse_seeds(text: str) -> list[int]:
    """``"42,43"`` -> ``[42, 43]``; ValueError names a bad or repeated entry (a job's files are named by its seed)."""
    seeds = []
    for part in text.split(","):
        if not (part.isascii() and part.isdigit()) or int(part) in seeds:
            raise ValueError(f"--seeds entry {part!r}: want distinct whole numbers separated by commas")
        seeds.append(int(part))
    return seeds


def control_options(mqar: dict) -> list[str]:
    """The DAG's ``mqar`` options for the control size, narrowed to the controls' cell and its phase.

    Raises ValueError for a recipe without a control-cell phase (``first_cell_frac``): its DAG job trains the
    whole mixture from step 0, which a run on the control cell alone does not reproduce."""
    seq_len, kv = mqar_control_cell(mqar)
    phase = round(mqar.get("first_cell_frac", 0.0) * mqar["steps"])
    if phase < 1:
        raise ValueError(f"mqar.first_cell_frac={mqar.get('first_cell_frac', 0.0)}: the recipe has no control-cell "
                         "phase to reproduce")
    return ["--arch", "transformer", "--size", mqar_control_size(mqar), *mqar_cli_args(mqar), "--seq-len",
            str(seq_len), "--kv-pairs", str(kv), "--train-kv", str(kv), "--stop-after", str(phase)]


def crossed_step(log: str, below: float) -> int | None:
    """The first ``step N ... loss X`` line of a job's log with ``X < below``, or None."""
    for step, loss in STEP_LINE.findall(log):
        with contextlib.suppress(ValueError):
            if float(loss) < below:
                return int(step)
    return None


def last_step(log: str) -> int | None:
    """The last logged step of a job's log, or None."""
    steps = STEP_LINE.findall(log)
    return int(steps[-1][0]) if steps else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", default="profile=", help="NAME=OPTIONS;... (default %(default)s: the recipe)")
    p.add_argument("--seeds", default="42,43,44", help="comma-separated (default %(default)s)")
    p.add_argument("--profile", default="gpu", help="study config whose mqar recipe runs (default %(default)s)")
    p.add_argument("--device", default="cuda", help="torch device of the jobs (default %(default)s)")
    p.add_argument("--crossed-loss", type=float, default=0.5,
                   help="a logged loss under this marks the copy transition (default %(default)s; the plateau "
                        "sits near ln(pairs))")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before running jobs are ended (default "
                                                                "%(default)s)")
    p.add_argument("--out", required=True, type=Path, help="CSV, one row per job")
    p.add_argument("--log-dir", required=True, type=Path, help="each job's log and CSV: mqar_control_<variant>_"
                                                               "seed<s>.{log,csv}")
    a = p.parse_args(argv)
    try:
        variants, seeds = parse_variants(a.variants), parse_seeds(a.seeds)
    except ValueError as exc:
        p.error(str(exc))
    config = load_config(a.profile)
    try:
        base = control_options(config["mqar"])
    except ValueError as exc:
        p.error(f"--profile {a.profile}: {exc}")
    dtype = config["dtype"] if a.device.startswith("cuda") else "float32"  # as the DAG's rule (float32 on a CPU)
    a.log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    jobs = []
    with contextlib.ExitStack() as files:
        for name, options in variants:
            for seed in seeds:
                stem = a.log_dir / f"mqar_control_{name}_seed{seed}"
                cmd = [sys.executable, "-m", "suite.experiments.mqar.run", *base, *options, "--seed", str(seed),
                       "--device", a.device, "--dtype", dtype, "--profile", f"{config['profile']}-control",
                       "--out", str(stem.with_suffix(".csv"))]
                log = files.enter_context(open(stem.with_suffix(".log"), "w"))
                jobs.append((name, options, seed, stem, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                                                         stderr=subprocess.STDOUT)))
        deadline = time.monotonic() + a.timeout
        for *_, proc in jobs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    rows, bad = [], 0
    for name, options, seed, stem, proc in jobs:
        log = stem.with_suffix(".log").read_text(errors="replace")
        row = {"variant": name, "options": shlex.join(options), "seed": seed, "accuracy": None,
               "final_train_loss": None, "crossed_step": crossed_step(log, a.crossed_loss),
               "last_logged_step": last_step(log), "train_s": None, "status": "ok"}
        job_csv = stem.with_suffix(".csv")
        if proc.returncode == 0 and job_csv.is_file():
            job = next(csv.DictReader(job_csv.read_text().splitlines()))
            row |= {"accuracy": job["accuracy"], "final_train_loss": job["final_train_loss"],
                    "train_s": job["wall_s"], "stop_after": job["stop_after"], "lr": job["lr"],
                    "warmup": job["warmup"]} | {k: job.get(k) for k in ("commit", "profile", "device", "dtype",
                                                                         "backend")}
        else:
            bad += 1
            tail = (log.strip().splitlines() or ["no output"])[-1]
            row["status"] = f"exit {proc.returncode}: {tail}"[:300]
        rows.append(row)
        print(" ".join(f"{k}={row.get(k)}" for k in ("variant", "seed", "accuracy", "crossed_step", "train_s",
                                                       "status")), flush=True)
    import pandas as pd  # (the jobs import torch; this process only reads their rows)

    frame = pd.DataFrame(rows).astype({"crossed_step": "Int64", "last_logged_step": "Int64"})  # steps, not floats
    write_csv(frame, a.out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
