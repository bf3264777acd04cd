"""scripts/gpu_run.sh in its CPU smoke mode (DRY=1: `snakemake -n` of each step), the archive it packs, and
scripts/gpu_unpack.sh; scripts/gpu_plan.py's reading of a snakemake plan."""
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_plan as gp  # noqa: E402

SKIP = shutil.ignore_patterns(".git", ".venv", "work_dirs", ".whl*", ".snakemake", "__pycache__", ".pytest_cache",
                              "*.egg-info")


@pytest.fixture()
def repo(tmp_path):
    """A copy of the repository (gpu_run.sh sets file times and writes under work_dirs/)."""
    dst = tmp_path / "repo"
    shutil.copytree(ROOT, dst, ignore=SKIP, symlinks=True)
    return dst


def gpu_run(repo: Path, out: Path, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("PART", "TARGETS", "TOTAL_S", "NGPU", "AGE")}
    env = {**base, "DRY": "1", "PYTHON": sys.executable, "OUT": str(out), "SUITE_COMMIT": "test", **env}
    return subprocess.run(["bash", "scripts/gpu_run.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)


def members(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {m.name.removeprefix("./") for m in tar.getmembers() if m.isfile()}


def test_train_plan_retrains_what_an_earlier_call_left_without_checkpoints(repo, tmp_path):
    # this call's data preparation (corpus, tokenizer) is done ...
    data = repo / "work_dirs" / "gpu" / "data"
    for f in ("train.txt", "val.txt", "test.txt", "corpus.json", "tokenizer/tokenizer.json",
              "tokenizer/tokenizer_config.json", "tokenizer/suite_tokenizer.json", "tokens/train.npy",
              "tokens/val.npy", "tokens/test.npy", "tokens/meta.json"):
        (data / f).parent.mkdir(parents=True, exist_ok=True)
        (data / f).write_text("x\n")
    # ... and an earlier call trained the 12M Transformer (its CSVs came back), but its lm-eval and conversion did not
    # (the committed train part's results are not in this copy: its plan starts from nothing else)
    res = repo / "results" / "gpu"
    for done in ("train", "eval/quality", "conversion"):
        shutil.rmtree(res / done, ignore_errors=True)
    for done in ("quality.csv", "ablation.csv", "conversion.csv"):
        (res / done).unlink(missing_ok=True)
    for seed in (42, 43, 44):
        d = repo / "results" / "gpu" / "train" / "transformer" / "12M" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.csv").write_text("arch,val_loss\ntransformer,3.0\n")
        (d / "loss.csv").write_text("step,loss\n1,8.0\n")
    run = gpu_run(repo, tmp_path / "out", PART="train", AGE="1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "re-training, its checkpoints stayed on an earlier machine: " in log
    forced = log.split("re-training, its checkpoints stayed on an earlier machine: ")[1].splitlines()[0].split()
    assert forced == [f"results/gpu/train/transformer/12M/seed{s}/metrics.csv" for s in (42, 43, 44)]

    archive = tmp_path / "out" / "gpu_results.tar.gz"
    names = members(archive)
    assert {"gpu_run/plan.log", "gpu_run/env.log", "gpu_run/status.txt",
            "gpu_run/gpu_run.log"} <= names
    # a dry run writes no result, so none is packed (only what a call writes comes back)
    assert not any(n.startswith("results/") for n in names)
    assert not any(n.startswith(("paper_tables/", "figures/")) for n in names)  # nothing was rendered
    with tarfile.open(archive) as tar:
        plan = tar.extractfile("./gpu_run/plan.log").read().decode()  # the last plan: with the re-training forced
        status = tar.extractfile("./gpu_run/status.txt").read().decode()
    assert "Forced execution" in plan and status.startswith("exit status 0")
    rules = [line.split()[1].rstrip(":") for line in plan.splitlines() if line.startswith(("rule ", "localrule "))]
    assert rules.count("train") == 13 and rules.count("lm_eval") == 13 and "conversion_cpt" in rules
    assert "tokenizer" not in rules and "corpus" not in rules
    # the GPU rules declare gpu=1 themselves (workflows/*.smk); the CPU prefill sweeps (timing) hold 'bench' and are
    # left out of the training step, to run after it alone
    assert "resources: tmpdir=/tmp, gpu=1" in plan and "bench=1" in plan
    with tarfile.open(archive) as tar:
        train = tar.extractfile("./gpu_run/train.log").read().decode()
    train_rules = {line.split()[1].rstrip(":") for line in train.splitlines()
                   if line.startswith(("rule ", "localrule "))}
    assert {"train", "lm_eval", "conversion_cpt"} <= train_rules
    assert not train_rules & {"prefill_cpu", "prefill_cpu_128k"}
    # TRAIN_THREADS (2) a job, not the profile's 4: 8 jobs fit the H200 machine's 16 cores beside GPU_JOBS=8 slots
    threads = set(re.findall(r"^\s+threads: (\d+)$", train, flags=re.M))
    assert threads == {"2"} and "--set-threads train=2 lm_eval=2" in log and "MPS: off (dry run)" in log


def test_bench_runs_each_benchmark_alone_and_forced(repo, tmp_path):
    run = gpu_run(repo, tmp_path / "out", PART="bench", NGPU="1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "== gpu_benchmarks" in log and "== fla_crosscheck" in log and "== seq_parallel" not in log
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        bench = tar.extractfile("./gpu_run/gpu_benchmarks.log").read().decode()
        fla = tar.extractfile("./gpu_run/fla_crosscheck.log").read().decode()
    assert "rule gpu_benchmarks:" in bench and "Forced execution" in bench and "rule fla_crosscheck" not in bench
    assert "rule fla_crosscheck:" in fla and "rule gpu_benchmarks" not in fla
    assert "bench=1" in bench and "gpu=1" in bench


def test_bad_part_stops_before_anything(repo, tmp_path):
    run = gpu_run(repo, tmp_path / "out", PART="everything")
    assert run.returncode == 2 and "PART must be train, niah, mqar, finish, bench or none" in run.stderr


def test_unpack_overlays_results_and_logs(repo, tmp_path):
    stage = tmp_path / "stage"
    (stage / "results" / "gpu" / "eval").mkdir(parents=True)
    (stage / "results" / "gpu" / "mqar.csv").write_text("arch,acc\northros,1.0\n")
    (stage / "results" / "gpu" / "eval" / "x.csv").write_text("a\n1\n")
    (stage / "work_dirs" / "gpu" / "logs").mkdir(parents=True)
    (stage / "work_dirs" / "gpu" / "logs" / "mqar_orthros.log").write_text("trained\n")
    (stage / "gpu_run").mkdir()
    (stage / "gpu_run" / "status.txt").write_text("exit status 0 after 500s\n")
    (stage / "gpu_run" / "env.log").write_text("part: recall\n")
    (stage / "stray.txt").write_text("not packed by gpu_run.sh\n")
    archive = tmp_path / "gpu_results.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(stage, arcname=".")
    before = (repo / "results" / "gpu" / "prefill.csv").read_text()
    run = subprocess.run(["bash", "scripts/gpu_unpack.sh", str(archive)], cwd=repo, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (repo / "results" / "gpu" / "mqar.csv").read_text() == "arch,acc\northros,1.0\n"
    assert (repo / "results" / "gpu" / "eval" / "x.csv").exists()
    assert (repo / "results" / "gpu" / "prefill.csv").read_text() == before  # not in the archive: left alone
    assert (repo / "work_dirs" / "gpu" / "logs" / "mqar_orthros.log").read_text() == "trained\n"
    assert (repo / "work_dirs" / "gpu" / "logs" / "gpu_run" / "status.txt").exists()
    assert not (repo / "stray.txt").exists() and "ignoring stray.txt" in run.stderr
    assert "exit status 0 after 500s" in run.stdout

    evil = tmp_path / "evil.tar.gz"
    (stage / "results" / "default").mkdir()
    (stage / "results" / "default" / "quality.csv").write_text("x\n")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(stage, arcname=".")
    run = subprocess.run(["bash", "scripts/gpu_unpack.sh", str(evil)], cwd=repo, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1 and "refusing" in run.stderr
    assert not (repo / "results" / "default" / "quality.csv").read_text() == "x\n"


PLAN = """\
Building DAG of jobs...
[Tue Dec  1 02:29:30 2026]
rule lm_eval:
    input: results/gpu/train/gdn/12M/seed42/metrics.csv, work_dirs/gpu/data/val.txt, models/orthros.py
    output: results/gpu/eval/quality/gdn/12M/seed42.csv
    reason: Missing output files: results/gpu/eval/quality/gdn/12M/seed42.csv
[Tue Dec  1 02:29:30 2026]
rule lm_eval:
    input: results/gpu/train/gla/12M/seed42/metrics.csv, work_dirs/gpu/data/val.txt
    output: results/gpu/eval/quality/gla/12M/seed42.csv
[Tue Dec  1 02:29:30 2026]
localrule train:
    input: work_dirs/gpu/data/tokenizer/tokenizer.json
    output: results/gpu/train/gla/12M/seed42/metrics.csv, results/gpu/train/gla/12M/seed42/loss.csv
[Tue Dec  1 02:29:30 2026]
rule collect_quality:
    input: results/gpu/train/orthros/12M/seed42/metrics.csv
    output: results/gpu/quality.csv
"""


def test_plan_orphans(tmp_path):
    jobs = gp.parse_plan(PLAN)
    assert [j.rule for j in jobs] == ["lm_eval", "lm_eval", "train", "collect_quality"]
    gla = "results/gpu/train/gla/12M/seed42/"
    assert jobs[2].outputs == [gla + "metrics.csv", gla + "loss.csv"]
    for arch in ("gdn", "gla", "orthros"):
        f = tmp_path / f"results/gpu/train/{arch}/12M/seed42/metrics.csv"
        f.parent.mkdir(parents=True)
        f.write_text("x\n")
    # gdn: made in an earlier call -> orphan; gla: trained in this plan; orthros: read by a rule without checkpoints
    assert gp.orphans(jobs, {"lm_eval"}, root=tmp_path) == ["results/gpu/train/gdn/12M/seed42/metrics.csv"]
    assert gp.orphans(jobs, {"collect_quality"}, root=tmp_path) == ["results/gpu/train/orthros/12M/seed42/metrics.csv"]
    # a machine kept warm between calls still has gdn's checkpoint: nothing to re-train
    warm = {"results/gpu/train/": "work_dirs/gpu/runs/"}
    assert gp.orphans(jobs, {"lm_eval"}, root=tmp_path, checkpoints=warm) == [
        "results/gpu/train/gdn/12M/seed42/metrics.csv"]
    (tmp_path / "work_dirs/gpu/runs/gdn/12M/seed42/checkpoint").mkdir(parents=True)
    assert gp.orphans(jobs, {"lm_eval"}, root=tmp_path, checkpoints=warm) == []
    (tmp_path / "results/gpu/train/gdn/12M/seed42/metrics.csv").unlink()
    assert gp.orphans(jobs, {"lm_eval"}, root=tmp_path) == []


def test_the_archive_holds_only_the_results_and_records_the_call_wrote(repo, tmp_path):
    """What a call writes comes back with its snakemake record; a result or record it only received does not, so
    unpacking it cannot bring an old copy back over a newer local one (5638e28: an archive carried the mqar.csv sent
    with it over the one an earlier call had just made). A python shim stands in for a job: it writes a result and
    rewrites one record during the call."""
    import base64

    def key(path: str) -> str:
        return base64.urlsafe_b64encode(path.encode()).decode()

    meta = repo / ".snakemake" / "metadata"
    meta.mkdir(parents=True)
    (meta / key("results/gpu/mqar.csv")).write_text('{"params": ["sent"]}')      # carried, not rewritten
    (meta / key("results/gpu/niah.csv")).write_text('{"params": ["sent"]}')      # rewritten by the "job"
    (meta / key("results/default/mqar.csv")).write_text('{"params": ["b"]}')     # not a gpu result: stays here
    shim = tmp_path / "python"
    shim.write_text("#!/usr/bin/env bash\nprintf 'value\\n1\\n' > results/gpu/made_here.csv\n"
                    # rewritten by a snakemake job with an old time (a copy that keeps its source's): its size tells
                    "if [[ $* == *snakemake* ]]; then printf 'rewritten\\n' > results/gpu/niah.csv && "
                    "touch -d 2000-01-02 results/gpu/niah.csv; fi\n"
                    f"printf '{{\"params\": [\"new\"]}}' > .snakemake/metadata/{key('results/gpu/niah.csv')}\n"
                    f"exec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    run = gpu_run(repo, tmp_path / "out", PART="finish", PYTHON=str(shim))
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert "WARNING: results/gpu holds results but .snakemake/metadata" not in run.stdout
    names = members(tmp_path / "out" / "gpu_results.tar.gz")
    assert {n for n in names if n.startswith("results/")} == {"results/gpu/made_here.csv", "results/gpu/niah.csv"}
    assert {n for n in names if n.startswith("snakemake_metadata/")} == \
        {f"snakemake_metadata/{key('results/gpu/niah.csv')}"}

    # here, meanwhile: an earlier call's newer mqar.csv and its record were unpacked
    (repo / "results" / "gpu" / "mqar.csv").write_text("newer,local\n")
    (meta / key("results/gpu/mqar.csv")).write_text('{"params": ["newer"]}')
    (repo / "results" / "gpu" / "made_here.csv").unlink()
    (meta / key("results/gpu/niah.csv")).write_text('{"params": ["old"]}')
    unpack = subprocess.run(["bash", "scripts/gpu_unpack.sh", str(tmp_path / "out" / "gpu_results.tar.gz")],
                            cwd=repo, capture_output=True, text=True, timeout=60)
    assert unpack.returncode == 0, unpack.stdout + unpack.stderr
    assert (repo / "results" / "gpu" / "mqar.csv").read_text() == "newer,local\n"
    assert (meta / key("results/gpu/mqar.csv")).read_text() == '{"params": ["newer"]}'
    assert (repo / "results" / "gpu" / "made_here.csv").read_text() == "value\n1\n"
    assert (repo / "results" / "gpu" / "niah.csv").read_text() == "rewritten\n"
    assert (meta / key("results/gpu/niah.csv")).read_text() == '{"params": ["new"]}'


def test_a_call_without_the_records_warns(repo, tmp_path):
    """Results without .snakemake/metadata beside them: the call cannot see a stale result and says so."""
    run = gpu_run(repo, tmp_path / "out", TARGETS="results/gpu/mqar.csv")
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert "WARNING: results/gpu holds results but .snakemake/metadata was not carried" in run.stdout


def test_jit_caches_come_back_and_are_unpacked_for_the_next_call(repo, tmp_path):
    """The Triton/TileLang caches of a call come back as jit_cache.tar.xz beside the results archive; gpu_unpack.sh
    moves it to .jit_cache/, and the next call (carrying .jit_cache) unpacks it into its cache folders."""
    jit = tmp_path / "jit"
    (jit / "triton" / "abc").mkdir(parents=True)
    (jit / "triton" / "abc" / "kernel.cubin").write_bytes(b"\x7fELF" + bytes(100))
    # a real cache lists more paths than a pipe holds: a `find | grep -q` test of it dies of SIGPIPE (e401c5f on the
    # H200 returned no cache), so the cache here is that large too
    many = jit / "tilelang" / ("k" * 100)
    many.mkdir(parents=True)
    for i in range(1500):
        (many / f"kernel_{i:05d}.so").write_bytes(b"")
    out = tmp_path / "out"
    run = gpu_run(repo, out, TARGETS="tokenizer", JIT_DIR=str(jit))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "JIT caches packed" in run.stdout and not list(out.glob("*.part"))
    run = subprocess.run(["bash", "scripts/gpu_unpack.sh", str(out / "gpu_results.tar.gz")], cwd=repo,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and (repo / ".jit_cache" / "jit_cache.tar.xz").exists(), run.stdout + run.stderr
    fresh = tmp_path / "jit2"
    run = gpu_run(repo, tmp_path / "out2", TARGETS="tokenizer", JIT_DIR=str(fresh), JIT_BACK="0")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (fresh / "triton" / "abc" / "kernel.cubin").read_bytes() == b"\x7fELF" + bytes(100)
    assert "JIT caches unpacked" in run.stdout and not (tmp_path / "out2" / "jit_cache.tar.xz").exists()


@pytest.mark.parametrize("part", ["niah", "mqar", "finish"])
def test_a_part_run_last_completes_the_dag_from_a_fresh_clone(repo, tmp_path, part):
    """With every other part's CSVs in results/gpu, a part ends with controls and render; on a machine without the
    corpus the final step may plan corpus and tokenizer (data_prep builds them first outside DRY), so the dry run of
    the README's command succeeds."""
    shutil.rmtree(repo / "work_dirs", ignore_errors=True)
    run = gpu_run(repo, tmp_path / "out", PART=part)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "== final: exit status 0" in log and "MissingInputException" not in log
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        final = tar.extractfile("./gpu_run/final.log").read().decode()
    assert "rule render:" in final and "rule controls:" in final and "rule train:" not in final


def test_mqar_runs_the_grid_in_batches_widest_first(repo, tmp_path):
    shutil.rmtree(repo / "results" / "gpu" / "eval" / "mqar")  # every job of the grid to do
    (repo / "results" / "gpu" / "mqar.csv").unlink()
    run = gpu_run(repo, tmp_path / "out", PART="mqar")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        first, second, collect = (tar.extractfile(f"./gpu_run/{n}.log").read().decode()
                                  for n in ("mqar1", "mqar2", "mqar_collect"))
    assert first.count("rule mqar:") == second.count("rule mqar:") == 9
    # the first batch: every arch at d256 (the controls read it), then the attention archs at d128
    made = set(re.findall(r"output: results/gpu/eval/mqar/(\w+)/(d\d+)/", first))
    assert made == {(a, "d256") for a in ("orthros", "transformer", "swa", "gdn", "gla", "retnet")} | {
        (a, "d128") for a in ("orthros", "transformer", "swa")}
    assert "rule collect_mqar:" in collect and "== mqar_collect: exit status 0" in log


def test_plan_batches():
    plan = "".join(f"rule mqar:\n    output: results/gpu/eval/mqar/{arch}/{size}/seed42.csv\n"
                   for size in ("d64", "d256", "d128") for arch in ("gdn", "orthros", "transformer"))
    batches = gp.batches(gp.parse_plan(plan + "rule collect_mqar:\n    output: results/gpu/mqar.csv\n"), "mqar", 4)
    names = [["/".join(p.split("/")[-3:-1]) for p in b] for b in batches]
    assert names == [["transformer/d256", "orthros/d256", "gdn/d256", "transformer/d128"],
                     ["orthros/d128", "gdn/d128", "transformer/d64", "orthros/d64"], ["gdn/d64"]]


def test_a_part_leaves_controls_and_render_to_the_part_whose_csvs_are_missing(repo, tmp_path):
    """The niah part, run before the mqar part: it runs the missing CPU prefill sweep alone, in a step of its own,
    and plans no controls or render while mqar.csv is missing."""
    (repo / "results" / "gpu" / "mqar.csv").unlink()
    (repo / "results" / "gpu" / "prefill_cpu.csv").unlink()
    run = gpu_run(repo, tmp_path / "out", PART="niah")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "controls and render wait for another part's CSVs: results/gpu/mqar.csv results/gpu/prefill_cpu.csv" in log
    assert "== final" not in log and "--set-threads niah=2" in log
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        prefill = tar.extractfile("./gpu_run/prefill_cpu.log").read().decode()
        niah = tar.extractfile("./gpu_run/niah.log").read().decode()
    rules = {line.split()[1].rstrip(":") for line in prefill.splitlines() if line.startswith(("rule ", "localrule "))}
    assert "prefill_cpu" in rules <= {"prefill_cpu", "prefill_cpu_128k"} and "rule prefill_cpu" not in niah


@pytest.mark.parametrize("env", [{"DATA_PREP": "yes", "TARGETS": "results/gpu/mqar.csv"},
                                 {"DRY": "true", "PART": "train"}, {"PROBE": "2", "PART": "train"},
                                 {"MPS": "on", "PART": "niah"}])
def test_flags_other_than_0_or_1_are_refused_by_name(repo, tmp_path, env):
    run = gpu_run(repo, tmp_path / "out", **env)
    name, value = next((k, v) for k, v in env.items() if k not in ("TARGETS", "PART"))
    assert run.returncode == 2 and f"{name} must be 0 or 1, got '{value}'" in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,value", [("MQAR_JOBS", "0"), ("MQAR_BATCH_S", "abc"), ("TOTAL_S", "-5"),
                                        ("RECALL_THREADS", "2.5"), ("TRAIN_THREADS", "0")])
def test_counts_and_seconds_other_than_whole_numbers_are_refused_by_name(repo, tmp_path, name, value):
    run = gpu_run(repo, tmp_path / "out", PART="mqar", **{name: value})
    assert run.returncode == 2 and f"{name} must be a whole number >= 1, got '{value}'" in run.stderr
    assert not (tmp_path / "out").exists()


def test_concurrency_probe_refuses_bad_rounds_and_mps_without_its_daemon(tmp_path):
    import gpu_concurrency_probe as probe

    assert probe.parse_rounds("timeslice:9,mps:18") == [("timeslice", 9), ("mps", 18)]
    for bad in ("mps", "mps:0", "gpu:4", "timeslice:x"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            probe.parse_rounds(bad)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_MPS_PIPE_DIRECTORY"}
    run = subprocess.run([sys.executable, "scripts/gpu_concurrency_probe.py", "--rounds", "mps:2", "--out",
                          str(tmp_path / "p.csv")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "CUDA_MPS_PIPE_DIRECTORY" in run.stderr and not (tmp_path / "p.csv").exists()


def test_targets_schedule_the_train_rules_as_the_train_part_does(repo, tmp_path):
    run = gpu_run(repo, tmp_path / "out", TARGETS="results/gpu/quality.csv", PROBE="1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "--set-threads niah=2 mqar=2 train=2 lm_eval=2" in log and "concurrency probe: skipped (dry run)" in log


def test_mqar_control_narrows_the_dag_recipe_to_the_control_phase():
    """scripts/gpu_mqar_control.py: the DAG's mqar options for the gpu profile, then the controls' cell alone and
    --stop-after the control-cell phase (argparse keeps the last of a repeated option)."""
    import gpu_mqar_control as ctl

    from suite.config import load_config, mqar_cli_args

    mqar = load_config("gpu")["mqar"]
    opts = ctl.control_options(mqar)
    assert opts[:4] == ["--arch", "transformer", "--size", "d256"] and opts[4:-8] == mqar_cli_args(mqar)
    assert opts[-8:] == ["--seq-len", "128", "--kv-pairs", "8", "--train-kv", "8", "--stop-after",
                         str(round(mqar["first_cell_frac"] * mqar["steps"]))]
    log = "step 0 seq_len 128 kv 8 rows 256 loss 6.98 1s\nstep 100 seq_len 128 kv 8 rows 256 loss 2.9 2s\n" \
          "step 200 seq_len 128 kv 8 rows 256 loss 0.41 4s\nstep 300 seq_len 128 kv 8 rows 256 loss 0.2 5s\n"
    assert ctl.crossed_step(log, 0.5) == 200 and ctl.crossed_step(log, 0.1) is None and ctl.last_step(log) == 300
    assert ctl.parse_variants("profile=;no_warmup=--warmup 0;q=--lr '2e-3'") == \
        [("profile", []), ("no_warmup", ["--warmup", "0"]), ("q", ["--lr", "2e-3"])]
    for bad in ("profile", "a b=--lr 1", "x=;x=--lr 2", "=--lr 1", "q=--lr '2e-3"):
        with pytest.raises(ValueError, match="--variants entry"):
            ctl.parse_variants(bad)
    assert ctl.parse_seeds("42,43") == [42, 43]
    for bad in ("42,", "4x", "\u00b2", "42,42"):
        with pytest.raises(ValueError, match="--seeds entry"):
            ctl.parse_seeds(bad)


def test_mqar_control_runs_every_variant_at_every_seed_on_cpu(tmp_path):
    """The ci profile's MQAR recipe with a control-cell phase (half its 10 steps) on the CPU: one row a job, the
    variant's option honoured in the job's row; a recipe without that phase is refused by name."""
    import pandas as pd
    import yaml

    config = yaml.safe_load((ROOT / "profiles" / "ci.yaml").read_text())
    profile = tmp_path / "ci_phase.yaml"
    profile.write_text(yaml.safe_dump({**config, "mqar": {**config["mqar"], "first_cell_frac": 0.5}}))
    out = tmp_path / "control.csv"

    def control(path):
        return subprocess.run([sys.executable, "scripts/gpu_mqar_control.py", "--profile", str(path), "--device",
                               "cpu", "--variants", "profile=;warm=--warmup 3", "--seeds", "1", "--out", str(out),
                               "--log-dir", str(tmp_path / "logs"), "--timeout", "240"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)

    run = control(profile)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    rows = pd.read_csv(out)
    assert list(rows["variant"]) == ["profile", "warm"] and set(rows["status"]) == {"ok"}
    assert list(rows["warmup"]) == [0, 3] and list(rows["stop_after"]) == [5, 5]
    assert rows["accuracy"].between(0, 1).all() and (tmp_path / "logs" / "mqar_control_warm_seed1.log").is_file()
    assert set(rows["profile"]) == {"ci-control"} and set(rows["dtype"]) == {"float32"}
    out.unlink()
    refused = control(ROOT / "profiles" / "ci.yaml")
    assert refused.returncode == 2 and "first_cell_frac=0.0" in refused.stderr and not out.exists()


def test_part_none_runs_only_the_calibrations(repo, tmp_path):
    run = gpu_run(repo, tmp_path / "out", PART="none", MQAR_CONTROL="1", PROBE="1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "MQAR control calibration: skipped (dry run)" in log and "snakemake" not in log.split("dry run)")[-1]
    bad = gpu_run(repo, tmp_path / "out2", PART="none", MQAR_CONTROL="yes")
    assert bad.returncode == 2 and "MQAR_CONTROL must be 0 or 1, got 'yes'" in bad.stderr


def test_unpack_deletes_results_the_call_deleted_with_their_records(repo, tmp_path):
    """A job cut by the cap after snakemake deleted its old output leaves no file on the GPU machine: the old file
    here (and its snakemake record, which may claim the new settings) must go too, or it passes for the new result."""
    import base64

    old = repo / "results" / "gpu" / "eval" / "mqar" / "gla" / "d256" / "seed42.csv"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text("arch,accuracy\ngla,0.11\n")
    record = repo / ".snakemake" / "metadata" / base64.urlsafe_b64encode(
        b"results/gpu/eval/mqar/gla/d256/seed42.csv").decode()
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("{}")
    kept = repo / "results" / "gpu" / "mqar.csv"
    stage = tmp_path / "stage"
    (stage / "gpu_run").mkdir(parents=True)
    (repo / "results" / "gpu" / "eval" / "mqar" / "somedir").mkdir(parents=True, exist_ok=True)
    (stage / "gpu_run" / "results_removed.txt").write_text(
        "results/gpu/eval/mqar/somedir\nresults/gpu/eval/mqar/gla/d256/seed42.csv\nresults/default/quality.csv\n")
    archive = tmp_path / "gpu_results.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(stage, arcname=".")
    run = subprocess.run(["bash", "scripts/gpu_unpack.sh", str(archive)], cwd=repo, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not old.exists() and not record.exists() and kept.exists()
    assert "removed results/gpu/eval/mqar/gla/d256/seed42.csv" in run.stdout
    assert (repo / "results" / "default" / "quality.csv").exists() and "not under results/gpu" in run.stderr
    assert (repo / "results" / "gpu" / "eval" / "mqar" / "somedir").is_dir() and "not a file here" in run.stderr


def test_the_archive_lists_what_the_call_deleted(repo, tmp_path):
    """A step that deletes a result (here a python shim that removes mqar.csv before running snakemake, as
    snakemake removes a job's old output before a run the cap then cuts) puts it in gpu_run/results_removed.txt."""
    doomed = repo / "results" / "gpu" / "mqar.csv"
    assert doomed.exists()
    shim = tmp_path / "python"
    shim.write_text(f"#!/usr/bin/env bash\nrm -f results/gpu/mqar.csv\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    run = gpu_run(repo, tmp_path / "out", PART="finish", PYTHON=str(shim))
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        listed = tar.extractfile("./gpu_run/results_removed.txt").read().decode()
        started = tar.extractfile("./gpu_run/results_at_start.txt").read().decode()
    assert listed == "results/gpu/mqar.csv\n" and "results/gpu/mqar.csv" in started and not doomed.exists()


def niah_calibration(repo: Path, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CAL_")}
    return subprocess.run(["bash", "scripts/gpu_niah_calibration.sh"], cwd=repo, capture_output=True, text=True,
                          env={**base, "CAL_DRY": "1", "PYTHON": sys.executable, **env}, timeout=120)


def test_niah_calibration_runs_each_variant_at_each_seed(repo):
    """CAL_VARIANTS x CAL_SEEDS: one job each, the profile's recipe plus the variant's options (which come after the
    seed, so a variant may set its own), each into a file named by arch, variant and seed."""
    run = niah_calibration(repo, CAL_SEEDS="42,43",
                           CAL_VARIANTS="profile|niah|transformer|;steps2400|niah|transformer|--steps 2400 --trials 16")
    assert run.returncode == 0, run.stdout + run.stderr
    cmds = [line for line in run.stdout.splitlines() if line.startswith("python3 -m suite.eval.niah")]
    assert len(cmds) == 4
    outs = [re.search(r"--out (\S+)", c).group(1) for c in cmds]
    assert outs == [f"results/gpu/calibration/niah/transformer_{v}_seed{s}.csv"
                    for v in ("profile", "steps2400") for s in (42, 43)]
    assert all("--steps 1200" in c and "--lengths 4096,16384,32768" in c for c in cmds)  # the profile's, within 32K
    assert cmds[3].index("--seed 43") < cmds[3].index("--steps 2400") and cmds[3].endswith(outs[3])
    assert "--steps 2400" not in cmds[1]
    default = niah_calibration(repo)
    assert [re.search(r"--arch (\S+)", c).group(1) for c in default.stdout.splitlines() if "--arch" in c] == \
        ["transformer", "swa", "orthros"]


@pytest.mark.parametrize("env, message", [
    ({"CAL_VARIANTS": "x|foo|transformer|"}, "CAL_VARIANTS: 'x|foo|transformer|' is not name|study|arch|options"),
    ({"CAL_VARIANTS": "x|niah|transformer"}, "is not name|study|arch|options"),
    ({"CAL_VARIANTS": "a b|niah|transformer|"}, "is not name|study|arch|options"),
    ({"CAL_VARIANTS": "x|niah|swa|;x|niah|swa|--steps 10"}, "two variants write niah/swa_x"),
    ({"CAL_SEEDS": "42,x"}, "CAL_SEEDS: 'x' is not a whole number"),
    ({"CAL_SEEDS": "42,42"}, "CAL_SEEDS: a seed is repeated"),
    ({"CAL_VARIANTS": "a|niah|transfromer|;b|niah|swa|"}, "CAL_VARIANTS: unknown arch(s) transfromer"),
])
def test_niah_calibration_refuses_malformed_variants_and_seeds(repo, env, message):
    run = niah_calibration(repo, **env)
    assert run.returncode == 2 and message in run.stderr, run.stdout + run.stderr
    assert "python3 -m" not in run.stdout


@pytest.mark.parametrize("env, message", [
    ({"PART": "niah", "TARGETS": "results/gpu/niah.csv"}, "set PART or TARGETS, not both"),
    ({"PART": "finish", "FORCE": "render"}, "FORCE ('render') re-runs rules among TARGETS only"),
    ({"PART": "none", "MQAR_CONTROL": "1", "MQAR_CONTROL_SEEDS": "4x"}, "MQAR_CONTROL_SEEDS must be seeds like"),
])
def test_gpu_run_refuses_settings_it_would_ignore(repo, tmp_path, env, message):
    run = gpu_run(repo, tmp_path / "out", **env)
    assert run.returncode == 2 and message in run.stderr, run.stdout + run.stderr


def test_niah_calibration_refuses_a_flag_that_is_not_0_or_1(repo):
    run = niah_calibration(repo, CAL_DRY="yes")
    assert run.returncode == 2 and "CAL_DRY must be 0 or 1, got 'yes'" in run.stderr
    run = niah_calibration(repo, WITH_RECALL="true")
    assert run.returncode == 2 and "WITH_RECALL must be 0 or 1, got 'true'" in run.stderr
