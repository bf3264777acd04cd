"""The DAG tells the truth (issue 16): a config edit reruns exactly the jobs that read the edited value, every
profile renders commands its modules accept, code inputs cover what commands import, a study config given as a
YAML path keeps its own name, a killed training job resumes inside the DAG bit for bit, a tokenizer job rerun after
an edit of its code trains again, and no data file is left undeclared."""
from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file

from suite.config import load_config
from suite.deps import NOT_FOLLOWED, PACKAGES, module_path
from suite.train.checkpoint import find_checkpoint, read_info
from tests.dag import ROOT, SNAKEMAKE, dry_run, parse_dry_run, rule_counts, snakemake, study_copy

pytestmark = pytest.mark.slow  # snakemake dry runs and DAG jobs

CI_JOBS = {"corpus": 1, "tokenizer": 1, "train": 10, "conversion_cpt": 1, "conversion_orthros": 1, "lm_eval": 10,
           "conversion_lm_eval": 2, "niah": 3, "mqar": 6, "collect_quality": 1, "collect_ablation": 1,
           "collect_quality_pairs": 1, "collect_ablation_pairs": 1, "collect_conversion": 1, "collect_niah": 1,
           "collect_mqar": 1, "controls": 1, "prefill_cpu": 1, "prefill_cpu_128k": 1, "render": 1, "all": 1,
           "benchmark_data": 1, "prompt_lengths": 1}
DOWNSTREAM_OF_TRAINING = {"lm_eval": 10, "conversion_lm_eval": 2, "collect_quality": 1, "collect_ablation": 1,
                          "collect_quality_pairs": 1, "collect_ablation_pairs": 1, "collect_conversion": 1,
                          "prefill_cpu": 1, "controls": 1, "render": 1, "all": 1}
TRAINING = {"lm_eval": 10, "conversion_lm_eval": 2, "collect_quality": 1, "collect_ablation": 1,
                          "collect_quality_pairs": 1, "collect_ablation_pairs": 1, "collect_conversion": 1,
                          "prefill_cpu": 1, "controls": 1, "render": 1, "all": 1}
TRAINING = {"train": 10, "conversion_cpt": 1, "conversion_orthros": 1}
AFTER_TOKENS = {**TRAINING, **DOWNSTREAM_OF_TRAINING, "niah": 3, "collect_niah": 1, "prompt_lengths": 1}

# (edit of profiles/ci.yaml, the rule that reads it, the jobs a dry run must list afterwards: {rule: count})
EDITS = {
    "data.max_files": ({"data__max_files": 40}, "corpus", {"corpus": 1, "tokenizer": 1, **AFTER_TOKENS}),
    "data.vocab_size": ({"data__vocab_size": 768}, "tokenizer", {"tokenizer": 1, **AFTER_TOKENS}),
    "train.steps": ({"train__steps": 40}, "train", {"train": 10, **DOWNSTREAM_OF_TRAINING,
                                                    "conversion_cpt": 1, "conversion_orthros": 1}),
    "mqar.steps": ({"mqar__steps": 20}, "mqar", {"mqar": 6, "collect_mqar": 1, "controls": 1, "render": 1, "all": 1}),
    # Orthros and its no-SO ablation read `window` (SWA's window is swa_window_ratio x seq_len)
    "window": ({"window": 8}, "train", {"train": 4, "conversion_orthros": 1, "niah": 1, "lm_eval": 4,
                                        "conversion_lm_eval": 1, "collect_quality": 1, "collect_ablation": 1,
                                        "collect_quality_pairs": 1, "collect_ablation_pairs": 1,
                                        "collect_conversion": 1, "collect_niah": 1, "prefill_cpu": 1, "controls": 1,
                                        "prompt_lengths": 1, "render": 1, "all": 1}),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_config_edit_reruns_exactly_the_jobs_that_read_it(ci_run, tmp_path, name):
    """On top of a finished ci run, a copy of ci.yaml with one value changed: the dry run lists the jobs that read
    that value (reason: their params changed) and what depends on them, nothing else."""
    edits, reader, expected = EDITS[name]
    jobs = dry_run("--config", f"profile={study_copy(tmp_path / 'edited.yaml', **edits)}")
    assert rule_counts(jobs) == expected
    readers = [j for j in jobs if j.rule == reader]
    assert readers and all("Params have changed" in j.reason for j in readers), [j.reason for j in readers]
    if name == "window":
        assert {j.wildcards["arch"] for j in jobs if j.rule == "train"} == {"orthros", "orthros_noso"}
        assert {j.wildcards["arch"] for j in jobs if j.rule == "niah"} == {"orthros"}


def test_unchanged_copy_of_the_config_reruns_nothing(ci_run, tmp_path):
    """The same values under another file name (and in another key order) are the same study."""
    copy = tmp_path / "same.yaml"
    copy.write_text(yaml.safe_dump(load_config("ci"), sort_keys=True))
    run = snakemake("-n", "--config", f"profile={copy}", timeout=300)
    assert run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]


class _Parsed(Exception):
    pass


def parse_only(module: str, argv: list[str]) -> argparse.Namespace:
    """``module.main(argv)`` stopped right after its argument parser accepted ``argv``; argparse's SystemExit
    (exit status 2, message on stderr) when it does not. The parser runs as on the job's host at its turn: an input
    that an earlier job writes counts as there (suite.cli's input types), and the host has GPUs for a cuda profile's
    ``--device cuda`` (suite.cli.device_name)."""
    import suite.cli

    mod = importlib.import_module(module)
    parse_args = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        raise _Parsed(parse_args(self, args, namespace))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_and_stop), \
            mock.patch.object(suite.cli, "_existing", lambda text, folder: text), \
            mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "device_count", lambda: 8):
        try:
            mod.main(argv)
        except _Parsed as parsed:
            return parsed.args[0]
    raise AssertionError(f"{module}.main({argv}) returned without parsing its arguments")


def suite_commands(shell: str) -> list[tuple[str, list[str]]]:
    """The ``python -m suite.<module> ARGS`` (or ``benchmarks.<module>``) calls of a rendered shell command:
    [(module, argv)]."""
    tokens, calls = shlex.split(shell), []
    for i, token in enumerate(tokens[:-1]):
        if token == "-m" and tokens[i + 1].startswith(("suite.", "benchmarks.")):
            argv = []
            for arg in tokens[i + 2:]:
                if arg in ("&&", "||", ";", "|") or arg.startswith((">", "2>")):
                    break
                argv.append(arg)
            calls.append((tokens[i + 1], argv))
    return calls


PROFILES = {"default": ["--config", "profile=default"], "ci": ["--config", "profile=ci"],
            "gpu": ["--config", "profile=gpu"],
            # --cores only lifts the dry run's one-core cap on threads: on a cluster a job gets its own threads
            "slurm": ["--profile", "profiles/snakemake/slurm", "--cores", "256"]}


@functools.lru_cache(maxsize=None)
def all_jobs(profile: str) -> tuple:
    """Every job of a profile's DAG (a forced dry run), computed once per test session."""
    return tuple(dry_run("-F", *PROFILES[profile]))


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_rendered_command_is_accepted_by_its_module(profile, capsys):
    """Every job's `python -m suite....` (or `benchmarks....`) call, as the profile renders it, passes its module's
    argument parser (an invalid CLI such as `--limit None` fails here; as on the job's host, :func:`parse_only`), and
    the threads a command asks for are the job's threads."""
    jobs = all_jobs(profile)
    if profile == "ci":
        assert rule_counts(jobs) == CI_JOBS
    calls = [(job, module, argv) for job in jobs if job.shell for module, argv in suite_commands(job.shell)]
    assert {job.rule for job, _, _ in calls} >= {"corpus", "tokenizer", "train", "lm_eval", "niah", "mqar", "render"}
    for job, module, argv in calls:
        try:
            args = parse_only(module, argv)
        except SystemExit as err:
            pytest.fail(f"{profile}: rule {job.rule}: {module} rejects {argv}: {capsys.readouterr().err.strip()} "
                        f"(exit {err.code})")
        if getattr(args, "threads", None) is not None:
            assert args.threads == job.threads, (profile, job.rule, args.threads, job.threads)
        if getattr(args, "limit", None) is not None:
            assert args.limit > 0
    if profile == "slurm":
        for job in jobs:
            cpus = int(job.resources.get("cpus_per_task", job.threads))
            assert job.threads <= cpus, (job.rule, job.threads, cpus)
        (tokenizer,) = [j for j in jobs if j.rule == "tokenizer"]
        assert tokenizer.threads == int(tokenizer.resources["cpus_per_task"]) > 1
        assert all("--limit" not in job.shell for job in jobs if job.rule == "lm_eval")  # lm_eval.limit: null


# Jobs of each profile's whole DAG (a forced dry run). The gpu profile's MQAR grid (issue 12: 6 archs x the sizes
# d64/d128/d256, one job each) took it from 54 jobs (6 mqar) to 66 (18 mqar), and its system benchmarks left `all`
# for the opt-in `benchmarks` target (64); the other profiles keep one MQAR size.
# The benchmark data and prompt-length jobs (issue 35) added 2 to every profile with lm_eval.data. The pretrained
# arms (issue 36) add 11 to the default profile (base model, English data, conversion, identity control, 3 benchmark
# and 2 perplexity jobs, 2 collects) and 40 to the gpu profile (4 arms, 3 seeds for the trained ones: training,
# benchmarks, perplexity and NIAH per run, 5 collects); ci and slurm leave conversion.pretrained off. The
# per-document pairs files add a collect each for quality, the ablation and the pretrained arms. The gpu profile's
# learning-rate sweep of the trained arms adds 10 (4 rates x 2 arms, the pick, the held-out curves' collect). The gpu
# profile's NIAH seeds (niah.seeds: 3, issue 48) add 8 (4 archs x 2 more seeds). The MQAR GLA probe (mqar.gla_probe,
# issue 48) adds a job per variant, rate and seed and a collect: 13 to the default profile (2 x 3 x 2), 19 to the gpu
# profile (2 x 3 x 3).
TOTAL_JOBS = {"default": 80, "ci": 49, "gpu": 148, "slurm": 60}
SIX_ARCHS = ["orthros", "transformer", "swa", "gdn", "gla", "retnet"]


@pytest.mark.parametrize("profile", list(PROFILES))
def test_job_count_of_each_profile(profile):
    jobs = all_jobs(profile)
    assert len(jobs) == TOTAL_JOBS[profile], rule_counts(jobs)


# The from-scratch study (issue 48) is the gpu profile's opt-in target `scratch`, outside `all` (the counts above): the
# corpus, 4 archs x 5 swept rates (3, then 2 past the end each first picked), the pick, 4 archs x 3 seeds at equal
# tokens and 2 x 3 at equal GPU time, their budget, a position-bucket job and a NIAH job per long run, 4 collects, the
# study's controls and the target.
SCRATCH_JOBS = {"scratch_data": 1, "scratch_lr_sweep": 20, "scratch_lr_pick": 1, "scratch_train": 18,
                "scratch_budget": 1, "scratch_ppl": 18, "scratch_niah": 18,
                "collect_scratch_labelled": 3, "collect_scratch_ppl": 1, "scratch_controls": 1, "scratch": 1}


def test_gpu_profile_scratch_target_commands(capsys):
    """Every command of the scratch target passes its module's parser, the equal-time runs reading their --steps
    and --warmup from the budget file when they run (here: as if it gave 10 and 1)."""
    jobs = dry_run("-F", "--config", "profile=gpu", "--", "scratch")
    assert rule_counts(jobs) == SCRATCH_JOBS
    seen = set()
    for job in jobs:
        shell = (job.shell or "").replace("'--steps", "--steps").replace("--warmup 76'", "--warmup 76")
        shell = shell.replace(" )", " ;").replace("$schedule", "--steps 10 --warmup 1")
        for module, argv in suite_commands(shell):
            try:
                parse_only(module, argv)
            except SystemExit as err:
                pytest.fail(f"rule {job.rule}: {module} rejects {argv}: {capsys.readouterr().err.strip()} "
                            f"(exit {err.code})")
            seen.add((job.rule, module))
    assert {("scratch_train", "suite.train.budget"), ("scratch_train", "suite.train.run"),
            ("scratch_budget", "suite.train.budget"), ("scratch_data", "suite.data.english")} <= seen
    timed = [j for j in jobs if j.rule == "scratch_train" and "/time/" in j.output[0]]
    assert len(timed) == 6 and all("results/gpu/scratch_budget.csv" in j.input for j in timed)
    # each job's code inputs hold what its modules import (as test_code_inputs_cover_what_each_command_imports)
    modules = sorted({m for _, m in seen})
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE, *modules], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    skip = {str(module_path(m).relative_to(ROOT)) for m in NOT_FOLLOWED}
    for module, files in json.loads(out.stdout.splitlines()[-1]).items():
        loaded = {str(Path(f).resolve().relative_to(ROOT)) for f in files if Path(f).resolve().is_relative_to(ROOT)
                  and Path(f).resolve().relative_to(ROOT).parts[0] in PACKAGES}
        for job in jobs:
            if (job.rule, module) in seen:
                missing = loaded - skip - set(job.input)
                assert not missing, f"rule {job.rule} runs {module}, which imports {sorted(missing)}"


def test_gpu_profile_runs_one_mqar_job_per_arch_and_size():
    """The gpu profile's MQAR grid: one job per (arch, size) writing results/gpu/eval/mqar/<arch>/<size>/seed42.csv,
    each training one model on the grid's mixture; collect_mqar reads all 18; the controls read T=128, 8 pairs at
    d256."""
    jobs = all_jobs("gpu")
    mqar = [j for j in jobs if j.rule == "mqar"]
    want = {(a, s) for a in SIX_ARCHS for s in ("d64", "d128", "d256")}
    assert {(j.wildcards["arch"], j.wildcards["size"]) for j in mqar} == want and len(mqar) == 18
    for job in mqar:
        arch, size = job.wildcards["arch"], job.wildcards["size"]
        assert job.output == [f"results/gpu/eval/mqar/{arch}/{size}/seed42.csv"]
        assert job.resources.get("gpu") == "1"
        (_, argv), = suite_commands(job.shell)
        args = parse_only("suite.experiments.mqar.run", argv)
        assert (args.arch, args.size, args.seq_len) == (arch, size, [128, 256, 512, 1024])
        assert args.train_kv == [[8], [16, 32, 64], [16, 32, 64, 128], [16, 32, 64, 128, 256]]
        assert args.kv_pairs == [8, 16, 32, 64, 128, 256] and args.tie_embeddings and args.vocab_size == 1024
    (collect,) = [j for j in jobs if j.rule == "collect_mqar"]
    assert sorted(f for f in collect.input if f.startswith("results/gpu/eval/mqar/")) == \
        sorted(f"results/gpu/eval/mqar/{a}/{s}/seed42.csv" for a, s in want)
    (controls,) = [j for j in jobs if j.rule == "controls"]
    (_, argv), = suite_commands(controls.shell)
    args = parse_only("suite.eval.controls", argv)
    assert (args.mqar_cell, args.mqar_size) == ((128, 8), "d256")


def test_default_profile_keeps_its_one_mqar_cell():
    """The default profile's MQAR is unchanged: one 1M model per arch, trained at 4 pairs at T=64, controls at 64:4
    over its one size."""
    jobs = all_jobs("default")
    mqar = [j for j in jobs if j.rule == "mqar"]
    assert sorted(j.wildcards["arch"] for j in mqar) == sorted(SIX_ARCHS)
    for job in mqar:
        (_, argv), = suite_commands(job.shell)
        args = parse_only("suite.experiments.mqar.run", argv)
        assert (args.size, args.seq_len, args.train_kv, args.kv_pairs) == ("1M", [64], [4], [2, 4, 8, 16])
        assert (args.steps, args.batch_size, args.lr, args.weight_decay, args.vocab_size, args.window) == \
            (500, 64, 1e-3, 0.0, 256, 8) and not args.tie_embeddings
        assert job.output == [f"results/default/eval/mqar/{job.wildcards['arch']}/1M/seed42.csv"]
    (controls,) = [j for j in jobs if j.rule == "controls"]
    args = parse_only("suite.eval.controls", suite_commands(controls.shell)[0][1])
    assert (args.mqar_cell, args.mqar_size) == ((64, 4), None)


# Imports each module given on its command line in a child forked after the heavy third-party packages are loaded
# (a fresh interpreter per module, without paying for torch each time); prints {module: [files it loaded]}.
IMPORT_PROBE = """
import importlib, json, os, sys
for heavy in ("torch", "transformers", "numpy", "pandas"):
    importlib.import_module(heavy)
loaded = {}
for module in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        importlib.import_module(module)
        files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
        with os.fdopen(write, "w") as out:
            json.dump([f for f in files if f.startswith(os.getcwd() + os.sep)], out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as inp:
        loaded[module] = json.load(inp)
    assert os.waitpid(pid, 0)[1] == 0, module
print(json.dumps(loaded))
"""


def test_code_inputs_cover_what_each_command_imports():
    """Each job's code inputs hold every repository file its module has imported once loaded (checked in a fresh
    interpreter per module; lazy imports inside functions are suite.deps' job, tests/test_deps.py)."""
    jobs = all_jobs("ci")
    by_module: dict[str, list] = {}
    for job in jobs:
        for module, _ in suite_commands(job.shell or ""):
            by_module.setdefault(module, []).append(job)
    assert len(by_module) >= 10
    skip = {str(module_path(m).relative_to(ROOT)) for m in NOT_FOLLOWED}
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE, *sorted(by_module)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for module, files in json.loads(out.stdout.splitlines()[-1]).items():
        files = [Path(f).resolve() for f in files]
        # repository files only: a virtual environment inside the checkout (scripts/setup.sh's .venv) is not ours
        loaded = {str(f.relative_to(ROOT)) for f in files if f.is_relative_to(ROOT)
                  and f.relative_to(ROOT).parts[0] in PACKAGES}
        assert str(module_path(module).relative_to(ROOT)) in loaded
        for job in by_module[module]:
            missing = loaded - skip - set(job.input)
            assert not missing, f"rule {job.rule} runs {module}, which imports {sorted(missing)}: not among its inputs"


def test_study_config_given_as_a_yaml_path_keeps_its_name(tmp_path):
    """`--config profile=path/to/my.yaml`: results under results/<its profile:>/ (ci here, the Snakefile's default
    being `default`), the name (never the path) in every --profile, the path in every --config; a copy of the gpu
    profile keeps the GPU jobs."""
    mine = study_copy(tmp_path / "my.yaml", work_dir=str(tmp_path / "work"), data__data_dir=str(tmp_path / "data"),
                      drop=("results_dir", "render_dir"))
    jobs = dry_run("-F", "--config", f"profile={mine}")
    outputs = [o for job in jobs for o in job.output]
    results = [o for o in outputs if not o.startswith((str(tmp_path), "paper_tables/", "figures/"))]
    assert results and all(o.startswith("results/ci/") for o in results), results
    calls = [argv for job in jobs if job.shell for _, argv in suite_commands(job.shell)]
    profiles = {argv[i + 1] for argv in calls for i, a in enumerate(argv[:-1]) if a == "--profile"}
    configs = {argv[i + 1] for argv in calls for i, a in enumerate(argv[:-1]) if a == "--config"}
    assert profiles == {"ci"} and configs == {str(mine)}
    assert "gpu_benchmarks" not in rule_counts(jobs)

    gpu = study_copy(tmp_path / "gpu_copy.yaml", base="gpu", work_dir=str(tmp_path / "gpu"),
                     data__data_dir=str(tmp_path / "gpu" / "data"), results_dir=str(tmp_path / "gpu" / "results"))
    counts = rule_counts(dry_run("-F", "--config", f"profile={gpu}"))
    assert counts.get("niah") and counts.get("mqar") and "gpu_benchmarks" not in counts  # benchmarks: opt-in
    counts = rule_counts(dry_run("-F", "benchmarks", "--config", f"profile={gpu}"))
    assert counts.get("gpu_benchmarks") == 1 and counts.get("fla_crosscheck") == 1


# ---- a training job killed inside the DAG resumes at its last checkpoint ----------------------------------------

STEPS, SAVE_EVERY = 80, 5
RESUME_TARGET = "train/transformer/1M/seed42/metrics.csv"


@pytest.fixture(scope="module")
def resume_studies(tmp_path_factory):
    """Two copies of the ci profile (one seed, more steps, a checkpoint every 5) that share a data folder and differ
    only in their work folders: `cut` gets killed, `whole` runs uninterrupted."""
    base = tmp_path_factory.mktemp("resume")
    studies = {}
    for name in ("cut", "whole"):
        work = base / name
        studies[name] = study_copy(base / f"{name}.yaml", seeds=[42], work_dir=str(work),
                                   results_dir=str(work / "results"), render_dir=str(work / "render"),
                                   data__data_dir=str(base / "data"), data__max_files=40,
                                   train__steps=STEPS, train__save_every=SAVE_EVERY)
    return base, studies


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoint" / "model.safetensors"))


def test_killed_training_job_resumes_in_the_dag(resume_studies):
    """SIGKILL the snakemake process group after the job's first checkpoint; the resume command (docs/reproducing.md)
    (`snakemake --unlock`, then the same command with --rerun-incomplete) resumes that checkpoint and ends with the
    weights and loss curve of an uninterrupted run. (After Ctrl-C, a crash or a time limit there is no stale lock to
    remove; the rest is the same.)"""
    base, studies = resume_studies
    cut_dir = base / "cut" / "runs" / "transformer" / "1M" / "seed42"
    whole_dir = base / "whole" / "runs" / "transformer" / "1M" / "seed42"
    if not (whole_dir / "metrics.csv").exists():
        run = snakemake("--cores", "1", base / "whole" / "results" / RESUME_TARGET,
                        "--config", f"profile={studies['whole']}")
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    shutil.rmtree(base / "cut", ignore_errors=True)
    # targets before --config, whose values run up to the next option
    command = ["--cores", "1", base / "cut" / "results" / RESUME_TARGET, "--config", f"profile={studies['cut']}"]
    proc = subprocess.Popen([*SNAKEMAKE, *map(str, command)], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = cut_dir / "checkpoint" / "trainer_state.json"
    deadline = time.time() + 600
    while not state.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=120)
    ckpt = find_checkpoint(cut_dir)  # a kill between the checkpoint's two renames leaves checkpoint.old
    assert ckpt is not None, "the kill must land after the first checkpoint"
    step_at_kill = read_info(ckpt)["step"]
    assert SAVE_EVERY <= step_at_kill < STEPS, "the kill must land after the first checkpoint, before the end"
    assert not (cut_dir / "metrics.csv").exists()

    unlock = snakemake("--unlock", "--config", f"profile={studies['cut']}", timeout=300)
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    resumed = snakemake("--rerun-incomplete", *command)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-4000:]
    log = (base / "cut" / "logs" / "train_transformer_1M.log").read_text()
    assert f"from its checkpoint at step {step_at_kill} of {STEPS}" in log
    cut, whole = _weights(cut_dir), _weights(whole_dir)
    assert cut.keys() == whole.keys() and all(torch.equal(cut[k], whole[k]) for k in cut)
    cut_loss = pd.read_csv(base / "cut" / "results" / "train/transformer/1M/seed42/loss.csv")
    whole_loss = pd.read_csv(base / "whole" / "results" / "train/transformer/1M/seed42/loss.csv")
    assert cut_loss["loss"].tolist() == whole_loss["loss"].tolist() and len(cut_loss) == STEPS
    metrics = pd.read_csv(base / "cut" / "results" / RESUME_TARGET)
    assert metrics["profile"].tolist() == ["ci"]  # the config's name, though it was given as a path
    again = snakemake("-n", *command, timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_tokenizer_job_reruns_after_an_edit_of_its_code(resume_studies, tmp_path):
    """A comment added to suite/data/tokenizer.py (in a copy of the workflow and code) reruns the tokenizer job;
    Snakemake deletes the job's declared outputs first, and the tokenizer is trained again rather than skipped
    because of a stamp left from the last run (which failed with `cannot load tokenizer file ...`)."""
    base, studies = resume_studies
    config = ("--config", f"profile={studies['whole']}")
    tokens = base / "data" / "tokens" / "train.npy"
    if not tokens.exists():  # built by the resume test
        first = snakemake("--cores", "1", tokens, *config)
        assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    tokenizer_json = base / "data" / "tokenizer" / "tokenizer.json"
    before = tokenizer_json.read_bytes()
    copy = tmp_path / "repo"
    copy.mkdir()
    for part in ("Snakefile", "workflows", "suite", "models", "baselines", "benchmarks", "profiles"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / part, copy / part)
    source = copy / "suite" / "data" / "tokenizer.py"
    source.write_text(source.read_text() + "# an edit\n")
    again = snakemake("--cores", "1", tokens, *config, cwd=copy)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "rule tokenizer:" in out and "suite/data/tokenizer.py" in out, out[-4000:]  # the reason names the edit
    assert "rule corpus:" not in out
    assert tokenizer_json.read_bytes() == before  # same corpus, same tokenizer
    assert len(np.load(tokens)) > 0


def test_no_data_file_is_read_without_being_declared(ci_run):
    """Every file in the data folder of a finished ci run is a declared output of a job (a stamp or cache that no
    rule declares survives a rerun and can short-circuit it); checkpoints live elsewhere (runs/), on purpose. Two
    exceptions by construction: the benchmark folder, which its rule deletes and unpacks whole behind its declared
    source.json, and fetched package archives, used only after their sha256 matches the study config."""
    data = ci_run / "data"
    declared = {o for job in all_jobs("ci") for o in job.output}
    assert str((data / "benchmarks" / "source.json").relative_to(ROOT)) in declared
    written = {str(f.relative_to(ROOT)) for f in data.rglob("*") if f.is_file()
               and not f.is_relative_to(data / "benchmarks") and not f.is_relative_to(data / "archives")}
    assert written and written <= declared, sorted(written - declared)


def test_a_collected_csv_with_missing_inputs_is_reported_not_silently_up_to_date(tmp_path):
    """Snakemake does not rebuild an existing file for a missing input (snakemake issue #2011): the Snakefile warns,
    naming the file, a missing input and the --forcerun that rebuilds it."""
    res = tmp_path / "results"
    mine = study_copy(tmp_path / "gpu_copy.yaml", base="gpu", work_dir=str(tmp_path / "work"),
                      data__data_dir=str(tmp_path / "data"), results_dir=str(res))
    one = res / "eval" / "mqar" / "transformer" / "d256" / "seed42.csv"
    one.parent.mkdir(parents=True)
    one.write_text("x\n")
    (res / "mqar.csv").write_text("x\n")                                # newer than its one existing input
    run = snakemake("-n", "--config", f"profile={mine}", "--", res / "mqar.csv")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"WARNING: {res}/mqar.csv exists but 17 of the files it collects do not" in run.stderr
    assert "add --forcerun collect_mqar" in run.stderr
    assert "Nothing to be done" in run.stdout + run.stderr                # snakemake's own verdict, now not alone


# ---- inputs a study config names by path rerun what reads them when replaced in place ----------------------------

def test_files_named_by_path_rerun_their_rules_when_replaced_in_place(tmp_path):
    """A data.files corpus, a {folder:} base model and local English text files are inputs of the rules that read
    them (suite.workflow_helpers.path_inputs): with every output in place a dry run has nothing to do; replacing one
    such file in place (same name, new write) reruns exactly the rule that reads it and what depends on it, and so
    does a file that a corpus glob gains."""
    from tests.tiny import make_tiny_checkpoint

    corpus, english = tmp_path / "corpus", tmp_path / "english"
    for folder, stem in ((corpus, "doc"), (english, "page")):
        folder.mkdir()
        for i in range(3):
            (folder / f"{stem}{i}.txt").write_text(f"text {i}\n" * 50)
    model = make_tiny_checkpoint(tmp_path / "model", max_position_embeddings=4096)
    work, data = tmp_path / "work", tmp_path / "work" / "data"
    study = study_copy(tmp_path / "study.yaml", base="default", work_dir=str(work), data__data_dir=str(data),
                       results_dir=str(tmp_path / "results"), render_dir=str(tmp_path / "render"),
                       data__source="files", data__files=[str(corpus / "*.txt")],
                       conversion__base_model={"folder": str(model)},
                       conversion__pretrained__corpus={"files": [str(english / "*.txt")]})
    targets = {"corpus": data / "corpus.json", "base_model": work / "models" / "base" / "base_model.json",
               "english_data": data / "english" / "english.json"}
    outputs = [data / n for n in ("train.txt", "val.txt", "test.txt", "corpus.json")]
    outputs += [work / "models" / m / "base_model.json" for m in ("base", "random_init")]
    outputs += [data / "english" / n for n in ("english.json", "test.txt")]
    outputs += [data / "english" / "tokens" / f"{s}.npy" for s in ("train", "val", "test")]
    time.sleep(0.05)
    for out in outputs:  # the jobs' outputs, newer than every input: the state after a finished run
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")

    def dry(*files):
        run = snakemake("-n", "--config", f"profile={study}", "--", *map(str, targets.values()), timeout=300)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        return run.stdout + run.stderr, rule_counts(parse_dry_run(run.stdout + run.stderr))

    text, _ = dry()
    assert "Nothing to be done" in text, text[-3000:]
    for path, expected in [(corpus / "doc1.txt", {"corpus": 1}),
                           (model / "config.json", {"base_model": 1, "english_data": 1}),
                           (english / "page2.txt", {"english_data": 1})]:
        time.sleep(0.05)
        path.write_text(path.read_text())  # replaced in place: same name, new write
        text, counts = dry()
        assert counts == expected, (path, counts)
        assert f"Updated input files: {path}" in text
        for out in outputs:  # rebuilt: newer than the edited file again
            out.write_text("")
    (corpus / "doc3.txt").write_text("more text\n" * 50)
    _, counts = dry()
    assert counts == {"corpus": 1}


def test_benchmarks_target_checks_fp8_kv_on_the_pretrained_model():
    """The gpu profile's `benchmarks` target runs benchmarks.fp8_kv_real on the conversion experiment's base model
    and English data at conversion.pretrained.window, on one GPU; the CPU default profile's target has no such job."""
    jobs = [j for j in dry_run("-F", "--config", "profile=gpu", "--", "benchmarks") if j.rule == "fp8_kv_real"]
    (job,) = jobs
    (module, argv), = suite_commands(job.shell)
    args = parse_only(module, argv)
    assert (args.base, args.data_dir, args.window, args.device, args.out_dir) == (
        "work_dirs/gpu/models/base", "work_dirs/gpu/data/english", 128, "cuda", "results/gpu")
    assert job.output == ["results/gpu/fp8_kv_real.csv"] and job.resources.get("gpu") == "1"
    assert {"work_dirs/gpu/models/base/base_model.json", "work_dirs/gpu/data/english/tokens/test.npy"} <= set(job.input)
    assert "fp8_kv_real" not in rule_counts(dry_run("-F", "--config", "profile=default", "--", "benchmarks"))
