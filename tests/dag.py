"""Helpers for the DAG tests: run snakemake in the repository, read a dry run's job list, copy a study config or the
repository."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from suite.config import load_config

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# what a copy of the repository leaves out: git, the venv, what runs write, caches
COPY_SKIP = shutil.ignore_patterns(".git", ".venv", "work_dirs", ".whl*", ".snakemake", "__pycache__", ".pytest_cache",
                                   "*.egg-info")


def copy_repo(dst: Path) -> Path:
    """A copy of the repository's tracked tree at ``dst`` (for runs that write under work_dirs/ and results/)."""
    shutil.copytree(ROOT, dst, ignore=COPY_SKIP, symlinks=True)
    return dst


def snakemake(*args, timeout=900, cwd=ROOT, **kwargs) -> subprocess.CompletedProcess:
    """``python -m snakemake ARGS`` in ``cwd`` (the repository), output captured."""
    return subprocess.run([*SNAKEMAKE, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          **kwargs)


@dataclass
class Job:
    rule: str
    wildcards: dict = field(default_factory=dict)
    input: list = field(default_factory=list)
    output: list = field(default_factory=list)
    reason: str = ""
    threads: int = 1
    resources: dict = field(default_factory=dict)
    shell: str | None = None


def parse_dry_run(text: str) -> list[Job]:
    """The jobs of ``snakemake -n --printshellcmds`` output, in the order printed."""
    jobs: list[Job] = []
    for line in text.splitlines():
        head = re.match(r"^(?:local)?rule (\w+):$", line)
        if head:
            jobs.append(Job(head.group(1)))
            continue
        if not jobs:
            continue
        job = jobs[-1]
        item = re.match(r"^    (\w+): (.*)$", line)
        if item:
            key, value = item.groups()
            if key in ("input", "output"):
                setattr(job, key, value.split(", "))
            elif key == "wildcards":
                job.wildcards = dict(kv.split("=", 1) for kv in value.split(", "))
            elif key == "threads":
                job.threads = int(value)
            elif key == "resources":
                job.resources = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
            elif key == "reason":
                job.reason = value
        elif line.startswith("Shell command: ") and line != "Shell command: None":
            job.shell = line[len("Shell command: "):]
    return jobs


def dry_run(*args, timeout=600) -> list[Job]:
    """Jobs of a dry run (``-n --printshellcmds`` plus ``args``); fails the test, showing snakemake's message,
    when the dry run does."""
    run = snakemake("-n", "--printshellcmds", *args, timeout=timeout)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    return parse_dry_run(run.stdout + run.stderr)


def rule_counts(jobs: list[Job]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.rule] = counts.get(job.rule, 0) + 1
    return counts


def study_copy(path: Path, base: str = "ci", drop: tuple[str, ...] = (), **edits) -> Path:
    """Write a copy of ``profiles/<base>.yaml`` to ``path`` with dotted keys changed (``data__max_files=40``:
    a double underscore separates levels) or dropped; return the path."""
    config = load_config(base)
    for key, value in edits.items():
        *parents, last = key.split("__")
        node = config
        for part in parents:
            node = node[part]
        node[last] = value
    for key in drop:
        *parents, last = key.split("__")
        node = config
        for part in parents:
            node = node[part]
        del node[last]
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    load_config(path)  # the copy is valid
    return path
