"""The equal-GPU-time budget: the steps an arch trains for the GPU-seconds the reference arch's runs took.

The reference arch (Orthros) trains the equal-token budget, ``ref_steps`` steps; its GPU-seconds are ``ref_steps``
times its step time. Every other arch of the budget trains the same equal-token budget first, at the same shape,
batch, data and dtype, which measures its own step time; so the steps it needs for the reference's GPU-seconds are
known before its equal-time run starts, and with them its learning-rate schedule::

    steps = floor(ref_steps * ref_step_s / step_s)

A step time is the median over the runs' steps (each seed's, pooled) of the step's own wall time, from ``loss.csv``
(tokens a step / ``tok_s``): the held-out evaluations and checkpoint saves are not in it, and the median leaves out
the first steps' compilation. An equal-time run records the GPU-seconds it took like any run (its ``metrics.csv``
``wall_s``, and ``loss.csv``), beside the target here. A run that would read the train split more than
``max_epochs`` times (1: no window twice) is refused, naming the arch and what it would need.

CLI: ``python -m suite.train.budget derive --reference orthros --loss orthros=R/loss.csv transformer=T/loss.csv ...
--ref-steps 1526 --batch-size 32 --seq-len 2048 --warmup-frac 0.05 --data-dir D --out budget.csv``; a run reads its
schedule back with ``python -m suite.train.budget args --budget budget.csv --arch transformer`` (prints ``--steps N
--warmup W``).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from suite.cli import in_file, in_folder, out_file, positive_float, positive_int, usage_errors
from suite.provenance import read_csv, write_csv

RULE = ("steps = floor(ref_steps x ref_step_s / step_s); a step time is the median of the runs' per-step wall "
        "times (loss.csv: tokens a step / tok_s), seeds pooled")


def step_seconds(frames: list[pd.DataFrame], tokens_per_step: int) -> tuple[float, int]:
    """The median step time (s) over the steps of ``frames`` (``loss.csv`` rows: ``tok_s`` of each step) and how many
    steps it is the median of. ValueError when no step has a finite positive ``tok_s``."""
    tok_s = pd.concat([pd.to_numeric(f["tok_s"], errors="coerce") for f in frames]) if frames else pd.Series([])
    tok_s = tok_s[np.isfinite(tok_s) & (tok_s > 0)]
    if tok_s.empty:
        raise ValueError("no step with a finite tok_s")
    return float(np.median(tokens_per_step / tok_s.to_numpy())), int(len(tok_s))


def train_windows(n_tokens: int, seq_len: int) -> int:
    """The windows an epoch-order run reads once an epoch from a train split of ``n_tokens`` tokens
    (:class:`suite.data.batches.TokenBatches`)."""
    return max(1, (n_tokens - seq_len) // seq_len)


def derive(loss: dict[str, list[pd.DataFrame]], reference: str, ref_steps: int, batch_size: int, seq_len: int,
           warmup_frac: float, n_train_tokens: int, max_epochs: float = 1.0) -> list[dict]:
    """One budget row per arch of ``loss`` other than ``reference`` (module docstring). ValueError naming the arch
    when it has no timed step, or when its run would read the train split more than ``max_epochs`` times."""
    if reference not in loss:
        raise ValueError(f"no loss.csv of the reference arch {reference!r} (given: {sorted(loss)})")
    per_step = batch_size * seq_len
    ref_s, ref_n = _seconds(loss, reference, per_step)
    windows = train_windows(n_train_tokens, seq_len)
    rows = []
    for arch in [a for a in loss if a != reference]:
        step_s, n = _seconds(loss, arch, per_step)
        steps = math.floor(ref_steps * ref_s / step_s)
        epochs = steps * batch_size / windows
        if epochs > max_epochs:
            raise ValueError(f"{arch}: {steps} steps for the {reference} runs' {ref_steps * ref_s:.0f} GPU-seconds "
                             f"read the train split {epochs:.2f} times ({steps * per_step} tokens of "
                             f"{n_train_tokens}), more than max_epochs {max_epochs}: a larger corpus or fewer steps")
        rows.append({"arch": arch, "reference": reference, "ref_steps": ref_steps, "ref_step_s": ref_s,
                     "ref_step_samples": ref_n, "step_s": step_s, "step_samples": n, "steps": steps,
                     "warmup": round(warmup_frac * steps), "tokens": steps * per_step,
                     "target_s": ref_steps * ref_s, "predicted_s": steps * step_s, "epochs": epochs,
                     "batch_size": batch_size, "seq_len": seq_len, "rule": RULE})
    return rows


def _seconds(loss: dict, arch: str, per_step: int) -> tuple[float, int]:
    try:
        return step_seconds(loss[arch], per_step)
    except ValueError as err:
        raise ValueError(f"{arch}: {err} in its loss.csv") from None


def schedule_args(budget: str | Path, arch: str) -> str:
    """``--steps N --warmup W`` of ``arch`` in the budget file ``budget``; ValueError naming the file and arch."""
    frame = read_csv(budget)
    chosen = frame[frame["arch"] == arch] if "arch" in frame else frame.iloc[0:0]
    if len(chosen) != 1 or not {"steps", "warmup"} <= set(frame.columns):
        raise ValueError(f"{budget}: no budget row for {arch!r} (rows: {sorted(frame.get('arch', []))})")
    return f"--steps {int(chosen['steps'].iloc[0])} --warmup {int(chosen['warmup'].iloc[0])}"


def _arch_path(text: str) -> tuple[str, str]:
    arch, sep, path = text.partition("=")
    if not sep or not arch or not path:
        raise argparse.ArgumentTypeError(f"{text!r} is not ARCH=PATH")
    return arch, str(in_file(path))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="derive every arch's equal-time steps from the equal-token runs")
    d.add_argument("--reference", required=True, help="the arch whose GPU-seconds set the budget (orthros)")
    d.add_argument("--loss", nargs="+", required=True, type=_arch_path,
                   help="ARCH=PATH of every equal-token run's loss.csv (the reference's and each budgeted arch's)")
    d.add_argument("--ref-steps", required=True, type=positive_int, help="the reference runs' steps")
    d.add_argument("--batch-size", required=True, type=positive_int)
    d.add_argument("--seq-len", required=True, type=positive_int)
    d.add_argument("--warmup-frac", required=True, type=float)
    d.add_argument("--data-dir", required=True, type=in_folder, help="the data folder (tokens/train.npy)")
    d.add_argument("--max-epochs", type=positive_float, default=1.0)
    d.add_argument("--out", required=True, type=out_file)
    a = sub.add_parser("args", help="print an arch's --steps and --warmup from a budget file")
    a.add_argument("--budget", required=True, type=in_file)
    a.add_argument("--arch", required=True)
    args = ap.parse_args(argv)
    if args.command == "args":
        with usage_errors(ap):
            print(schedule_args(args.budget, args.arch))
        return
    if not 0 <= args.warmup_frac < 1:
        ap.error(f"--warmup-frac {args.warmup_frac} must be in [0, 1)")
    from suite.data.tokenizer import load_tokens

    with usage_errors(ap):
        loss: dict[str, list[pd.DataFrame]] = {}
        for arch, path in args.loss:
            loss.setdefault(arch, []).append(read_csv(path))
        n_train = len(load_tokens(args.data_dir, "train"))
        rows = derive(loss, args.reference, args.ref_steps, args.batch_size, args.seq_len, args.warmup_frac,
                      n_train, args.max_epochs)
    write_csv(rows, args.out)
    for row in rows:
        print(f"{row['arch']}: {row['steps']} steps ({row['step_s'] * 1e3:.1f} ms a step against {row['reference']}'s "
              f"{row['ref_step_s'] * 1e3:.1f} ms; {row['epochs']:.2f} epochs)", file=sys.stderr)


if __name__ == "__main__":
    main()
