"""Read a `snakemake -n` plan: which outputs from an earlier device call must be made again (scripts/gpu_run.sh).

A device call starts on a fresh machine: results/ comes back between calls (scripts/gpu_unpack.sh), the checkpoints
under work_dirs/ do not. A job that reads a checkpoint (lm-eval, conversion) can therefore only run in the call that
trained it. When the plan has such a job whose training output exists but is not planned (it came from an earlier
call), that output is printed, for `snakemake --forcerun`, so the training runs again in this call; unless its
checkpoint is still on this machine (a machine kept warm between calls keeps work_dirs/): `--checkpoints
RESULTS_PREFIX=WORK_PREFIX` maps such an output, .../metrics.csv, to its checkpoint folder, .../checkpoint.

    snakemake -n ... > plan.txt; python scripts/gpu_plan.py orphans plan.txt --consumers lm_eval conversion_cpt \
        --checkpoints results/gpu/train/=work_dirs/gpu/runs/

`batches` splits the planned jobs of one rule (the MQAR grid) into batches that each fit a call:

    python scripts/gpu_plan.py batches plan.txt --rule mqar --size 9     # one line of outputs a batch
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Job:
    rule: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def parse_plan(text: str) -> list[Job]:
    """The jobs of a `snakemake -n` printout: 'rule NAME:' (or 'localrule NAME:') then indented 'input:'/'output:'."""
    jobs: list[Job] = []
    for line in text.splitlines():
        head = re.fullmatch(r"(?:local)?rule (\w+):", line.strip())
        if head and not line.startswith(" "):
            jobs.append(Job(head.group(1)))
            continue
        field_ = re.fullmatch(r"\s+(input|output): (.*)", line)
        if field_ and jobs:
            files = [f.strip() for f in field_.group(2).split(",") if f.strip()]
            (jobs[-1].inputs if field_.group(1) == "input" else jobs[-1].outputs).extend(files)
    return jobs


def checkpoint_dir(metrics: str, prefixes: dict[str, str]) -> str | None:
    """The checkpoint folder of a run's results/.../metrics.csv (None where no prefix maps it)."""
    for res, work in prefixes.items():
        if metrics.startswith(res) and metrics.endswith("/metrics.csv"):
            return work + metrics[len(res):-len("metrics.csv")] + "checkpoint"
    return None


def orphans(jobs: list[Job], consumers: set[str], pattern: str = r"(^|/)metrics\.csv$",
            root: Path = Path("."), checkpoints: dict[str, str] | None = None) -> list[str]:
    """Inputs of planned `consumers` jobs that match `pattern`, exist and that no planned job makes, less those whose
    checkpoint folder (`checkpoints`: results prefix -> work prefix) is on this machine."""
    planned = {f for job in jobs for f in job.outputs}
    found = {f for job in jobs if job.rule in consumers for f in job.inputs
             if re.search(pattern, f) and f not in planned and (root / f).exists()}
    kept = {f for f in found if (ckpt := checkpoint_dir(f, checkpoints or {})) and (root / ckpt).is_dir()}
    return sorted(found - kept)


ATTENTION_FIRST = ("transformer", "swa", "orthros")  # no JIT compilation before their first step


def batches(jobs: list[Job], rule: str, size: int) -> list[list[str]]:
    """The first output of each planned `rule` job, in batches of `size`: widest model first (results/.../{arch}/
    d{N}/seed{S}.csv: the controls read the widest), attention archs before the FLA ones within a width, so a batch
    mixes the FLA archs' JIT compilation (CPU) with the others' training (GPU)."""
    def key(path: str) -> tuple[int, int, str]:
        parts = path.split("/")
        arch, width = parts[-3], re.sub(r"\D", "", parts[-2]) or "0"
        rank = ATTENTION_FIRST.index(arch) if arch in ATTENTION_FIRST else len(ATTENTION_FIRST)
        return -int(width), rank, path
    outputs = sorted((job.outputs[0] for job in jobs if job.rule == rule and job.outputs), key=key)
    return [outputs[i:i + size] for i in range(0, len(outputs), size)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["orphans", "rules", "batches"])
    ap.add_argument("plan", type=Path, help="the output of `snakemake -n`")
    ap.add_argument("--consumers", nargs="*", default=[], help="rules whose jobs read a checkpoint")
    ap.add_argument("--rule", default="mqar", help="batches: the rule whose planned jobs are batched")
    ap.add_argument("--size", type=int, default=9, help="batches: jobs a batch")
    ap.add_argument("--checkpoints", nargs="*", default=[], metavar="RESULTS_PREFIX=WORK_PREFIX",
                    help="where the checkpoint of a run's results/.../metrics.csv lies (.../checkpoint)")
    args = ap.parse_args(argv)
    bad = [m for m in args.checkpoints if m.count("=") != 1 or not all(m.split("="))]
    if bad:
        ap.error(f"--checkpoints takes RESULTS_PREFIX=WORK_PREFIX (both non-empty), got {bad[0]!r}")
    if args.size < 1:
        ap.error(f"--size must be >= 1, got {args.size}")
    if not args.plan.is_file():
        ap.error(f"no plan file {args.plan}")
    jobs = parse_plan(args.plan.read_text())
    if args.command == "rules":
        print(" ".join(sorted({j.rule for j in jobs})))
    elif args.command == "batches":
        for batch in batches(jobs, args.rule, args.size):
            print(" ".join(batch))
    else:
        print(" ".join(orphans(jobs, set(args.consumers), checkpoints=dict(m.split("=") for m in args.checkpoints))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
