"""Every job of a GPU profile that uses the GPU declares the `gpu` resource, so `--resources gpu=1` runs them one at a
time (timing benchmarks never share the GPU with training); CPU-only jobs do not hold it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# in a cuda profile, training uses the GPU too; the time-capped benchmarks (rules perf and multi_gpu) run on the CPU
# (SMOKE=1) where the profile's device is the CPU
GPU_MARKERS = ("--device cuda", "suite.train.run", "gpu_all.sh", "benchmarks.fla_vs_naive", "torch.distributed.run",
               "benchmarks.seq_parallel_gpu", "SMOKE=0 bash benchmarks/multi_gpu_all.sh",
               "SMOKE=0 bash benchmarks/perf_all.sh")


def dry_run_jobs(*args: str) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    jobs, current = [], None
    for line in run.stdout.splitlines():
        if line.startswith("rule ") or line.startswith("localrule "):
            current = {"rule": line.split()[-1].rstrip(":"), "gpu": 0, "shell": ""}
            jobs.append(current)
        elif current is not None and line.strip().startswith("resources:"):
            found = re.search(r"\bgpu=(\d+)", line)
            current["gpu"] = int(found.group(1)) if found else 0
        elif current is not None and line.startswith("Shell command:"):
            current["shell"] = line
    return jobs


def test_every_gpu_job_of_the_gpu_profile_declares_the_gpu():
    # `all`, the opt-in system benchmarks, a part of the time-capped ones and the multi-GPU ones
    jobs = dry_run_jobs("--config", "profile=gpu", "--", "all", "benchmarks", "results/gpu/perf/main",
                        "results/gpu/perf/multi_gpu")
    gpu_jobs = [j for j in jobs if any(m in j["shell"] for m in GPU_MARKERS)]
    assert {j["rule"] for j in gpu_jobs} >= {"train", "lm_eval", "niah", "mqar", "gpu_benchmarks", "fla_crosscheck",
                                             "perf", "multi_gpu"}
    missing = sorted({j["rule"] for j in gpu_jobs if j["gpu"] < 1})
    assert not missing, f"rules using the GPU without resources: gpu: {missing}"
    cpu_only = [j for j in jobs if j["shell"] and not any(m in j["shell"] for m in GPU_MARKERS) and j["gpu"]]
    assert not cpu_only, f"CPU-only jobs holding the GPU: {sorted({j['rule'] for j in cpu_only})}"


def test_cpu_profile_jobs_hold_no_gpu():
    jobs = dry_run_jobs("--", "all", "results/default/perf/main", "results/default/perf/multi_gpu")
    assert {"perf", "multi_gpu"} <= {j["rule"] for j in jobs} and all(j["gpu"] == 0 for j in jobs)
