"""Read a `snakemake -n` plan: which outputs from an earlier device call must be made again (scripts/gpu_run.sh).

A device call starts on a fresh machine: results/ comes back between calls (scripts/gpu_unpack.sh), the checkpoints
under work_dirs/ do not. A job that reads a checkpoint (lm-eval, conversion) can therefore only run in the call that
trained it. When the plan has such a job whose training output exists but is not planned (it came from an earlier
call), that output is printed, for `snakemake --forcerun`, so the training runs again in this call.

    snakemake -n ... > plan.txt; python scripts/gpu_plan.py orphans plan.txt --consumers lm_eval conversion_cpt
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


def orphans(jobs: list[Job], consumers: set[str], pattern: str = r"(^|/)metrics\.csv$",
            root: Path = Path(".")) -> list[str]:
    """Inputs of planned `consumers` jobs that match `pattern`, exist and that no planned job makes."""
    planned = {f for job in jobs for f in job.outputs}
    found = {f for job in jobs if job.rule in consumers for f in job.inputs
             if re.search(pattern, f) and f not in planned and (root / f).exists()}
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["orphans", "rules"])
    ap.add_argument("plan", type=Path, help="the output of `snakemake -n`")
    ap.add_argument("--consumers", nargs="*", default=[], help="rules whose jobs read a checkpoint")
    args = ap.parse_args(argv)
    jobs = parse_plan(args.plan.read_text())
    if args.command == "rules":
        print(" ".join(sorted({j.rule for j in jobs})))
    else:
        print(" ".join(orphans(jobs, set(args.consumers))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
