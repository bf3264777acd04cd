"""GPU time of the from-scratch study's jobs, estimated before they run, and their grouping into time-capped parts.

A job's training seconds are its tokens over a tokens-per-second rate measured by the suite's training-step benchmark
(``results/gpu/baseline_throughput.csv``: each arch at the study's size and length, on one GPU), scaled by the ratio
of training FLOPs a token of the measured model and of the study's (:func:`suite.train.throughput.step_flops`: the
study's vocabulary and batch; for SWA and the linear archs, whose FLOPs the cost model does not count, the
Transformer's ratio), plus ``overhead_s`` a job (process start, data loading, compilation, evaluations, checkpoints:
an assumption of the plan, not a measurement). An equal-time run takes the reference arch's seconds. The estimate is no
measurement: the runs record what they took (``wall_s``), and ``suite.train.budget`` derives the equal-time steps from
those records, not from this plan.

Parts: the jobs in the DAG's order, packed greedily into parts of at most ``part_s`` seconds of one GPU with
``setup_s`` (host start, wheels, unpacking the data shards: also an assumption) at the start of each; a job longer
than a command (``command_s``) spans several commands, resuming from its checkpoint.

CLI: ``python -m suite.train.plan --config gpu --throughput results/gpu/baseline_throughput.csv --out
results/gpu/scratch_plan.csv``
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from suite.cli import in_file, out_file, positive_float, positive_int, study_config, usage_errors
from suite.provenance import read_csv, write_csv
from suite.train.lr_pick import sweep_rates


def flops_per_token(arch: str, size: str, vocab: int, batch: int, seq_len: int, window: int | None) -> float | None:
    """Training FLOPs a token of ``arch`` at ``size`` (None for a type the cost model does not count)."""
    from models.registry import make_config
    from suite.train.throughput import step_flops

    overrides = {"window_size": window} if window and arch == "orthros" else {}
    flops = step_flops(make_config(arch, size, vocab_size=vocab, **overrides), batch, seq_len)
    return None if flops is None else flops / (batch * seq_len)


def rates(throughput: pd.DataFrame, scratch: dict, measured_vocab: int) -> dict[str, float]:
    """Estimated tokens per second of each of the study's archs (module docstring); ValueError naming an arch the
    throughput rows lack at the study's size and length."""
    rows = throughput[(throughput["size"].astype(str) == scratch["size"])
                      & (pd.to_numeric(throughput["seq_len"]) == scratch["seq_len"])
                      & (throughput.get("status", "ok") == "ok")]
    out = {}
    for arch in scratch["archs"]:
        got = rows[rows["arch"] == arch]
        if got.empty:
            raise ValueError(f"no throughput row of {arch} at {scratch['size']}, T={scratch['seq_len']}")
        row = got.iloc[-1]
        window = None if pd.isna(row.get("window")) else int(row["window"])
        counted = arch if arch == "orthros" else "transformer"  # the cost model's two attention types
        before = flops_per_token(counted, scratch["size"], measured_vocab, int(row["batch"]), scratch["seq_len"],
                                 window)
        after = flops_per_token(counted, scratch["size"], scratch["tokenizer"]["vocab_size"], scratch["batch_size"],
                                scratch["seq_len"], scratch["window"])
        out[arch] = float(row["tokens_per_s"]) * before / after
    return out


def jobs(scratch: dict, tok_s: dict[str, float], overhead_s: float, res: str = "results/gpu") -> list[dict]:
    """Every GPU job of the study in the DAG's order with its estimated seconds and the output file that names it as
    a snakemake target (``res``: the study's results folder)."""
    per_step = scratch["batch_size"] * scratch["seq_len"]
    sweep, seeds, timed = scratch["lr_sweep"], scratch["seeds"], scratch["equal_time"]
    out = [{"job": f"scratch_lr_sweep {a} lr{i}", "tokens": sweep["steps"] * per_step, "arch": a,
            "target": f"{res}/scratch/lr_sweep/{a}/lr{i}/metrics.csv"}
           for a in scratch["archs"] for i in range(len(sweep_rates(sweep, a)))]
    # a long run's targets are its position-bucket file and, with scratch.niah, its NIAH cells: both jobs read the
    # run's checkpoint, which stays on the host that trained it (a fresh host has none), so all run in one part; each
    # costs a checkpoint load and some forward passes, counted as half an overhead
    evals = ["ppl"] + (["niah"] if scratch.get("niah") else [])
    label = " + ".join(f"scratch_{e}" for e in evals)

    def long_run(budget: str, arch: str, seed: int, tokens: int) -> dict:
        folder = f"{res}/scratch/{budget}/{arch}/seed{seed}"
        return {"job": f"scratch_train {budget} {arch} seed{seed} + {label}", "tokens": tokens, "arch": arch,
                "target": " ".join(f"{folder}/{e}.csv" for e in evals), "extra_s": len(evals) * overhead_s / 2}

    out += [long_run("tokens", a, s, scratch["steps"] * per_step) for a in scratch["archs"] for s in seeds]
    ref_s = scratch["steps"] * per_step / tok_s[timed["reference"]]
    out += [long_run("time", a, s, round(ref_s * tok_s[a])) for a in timed["archs"] for s in seeds]
    for job in out:
        job["train_s"] = job["tokens"] / tok_s[job["arch"]]
        job["seconds"] = job["train_s"] + overhead_s + job.pop("extra_s", 0.0)
    return out


def parts(items: list[dict], part_s: float, setup_s: float, command_s: float) -> list[dict]:
    """``items`` packed in order into parts of at most ``part_s`` seconds with ``setup_s`` each (a job that alone
    exceeds a part gets a part of its own, split over commands); each job gets its ``part`` and ``commands``."""
    part, used = 1, setup_s
    for item in items:
        if used > setup_s and used + item["seconds"] > part_s:
            part, used = part + 1, setup_s
        item["part"], item["commands"] = part, max(1, math.ceil(item["seconds"] / command_s))
        used += item["seconds"]
    return items


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=study_config, help="a study config with a scratch section")
    ap.add_argument("--throughput", required=True, type=in_file, help="results/gpu/baseline_throughput.csv")
    ap.add_argument("--measured-vocab", type=positive_int, default=4096,
                    help="the vocabulary of the throughput rows' models")
    ap.add_argument("--overhead-s", type=positive_float, default=60.0, help="assumed seconds a job beyond training")
    ap.add_argument("--setup-s", type=positive_float, default=300.0, help="assumed seconds of a part's setup")
    ap.add_argument("--part-s", type=positive_float, default=1500.0, help="a part's cap, setup included")
    ap.add_argument("--command-s", type=positive_float, default=600.0, help="a command's cap")
    ap.add_argument("--out", type=out_file, help="the plan CSV to write")
    ap.add_argument("--targets", type=positive_int, metavar="PART",
                    help="print only the snakemake targets of this part")
    ap.add_argument("--pending", action="store_true",
                    help="plan only the jobs whose targets are not all here yet (earlier parts' results in the tree), "
                         "so that part 1 is what runs next")
    args = ap.parse_args(argv)
    if not args.out and args.targets is None:
        ap.error("give --out (write the plan) or --targets PART (print a part's targets)")
    from suite.config import load_config

    cfg = load_config(args.config)
    if "scratch" not in cfg:
        ap.error(f"the study config {args.config!r} has no scratch section")
    with usage_errors(ap):
        tok_s = rates(read_csv(args.throughput), cfg["scratch"], args.measured_vocab)
    res = cfg.get("results_dir", f"results/{cfg['profile']}")
    todo = jobs(cfg["scratch"], tok_s, args.overhead_s, res)
    if args.pending:
        todo = [job for job in todo if not all(Path(t).is_file() for t in job["target"].split())]
        if not todo:
            ap.error("--pending: every job's targets are here already; nothing is left to plan")
    items = parts(todo, args.part_s, args.setup_s, args.command_s)
    if args.targets is not None:
        chosen = [item["target"] for item in items if item["part"] == args.targets]
        if not chosen:
            ap.error(f"--targets {args.targets}: the plan has parts 1-{items[-1]['part']}")
        print(" ".join(chosen))
        return
    for item in items:
        item |= {"tok_s": tok_s.get(item["arch"]), "overhead_s": args.overhead_s, "setup_s": args.setup_s,
                 "throughput": args.throughput}
    write_csv(items, args.out)
    frame = pd.DataFrame(items)
    for part, group in frame.groupby("part"):
        print(f"part {part}: {(group['seconds'].sum() + args.setup_s) / 60:.1f} min, {len(group)} jobs, "
              f"{group['commands'].sum()} commands")
    print(f"all: {(frame['seconds'].sum() + args.setup_s * frame['part'].nunique()) / 3600:.2f} GPU-hours")


if __name__ == "__main__":
    main()
