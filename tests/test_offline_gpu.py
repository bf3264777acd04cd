"""tools/offline_gpu/: the wheels built for a GPU host without internet access (wheels.py), the time-capped run
there in its CPU smoke mode (run.sh, DRY=1: `snakemake -n` of each step), the archive it packs and unpack.sh, and
the MQAR-control calibration (mqar_control.py)."""
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "offline_gpu"
sys.path.insert(0, str(TOOLS))
import mqar_control as ctl  # noqa: E402
import wheels  # noqa: E402

from tests.dag import copy_repo  # noqa: E402

ENV = wheels.marker_env("3.12")


@pytest.fixture()
def repo(tmp_path):
    """A copy of the repository (run.sh writes under work_dirs/ and results/gpu/)."""
    return copy_repo(tmp_path / "repo")


def run_sh(repo: Path, out: Path, python: str = sys.executable, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("TARGETS", "FORCE", "TIME_CAP", "GPU_JOBS")}
    env = {**base, "DRY": "1", "PYTHON": python, "OUT": str(out), "SUITE_COMMIT": "test", **env}
    return subprocess.run(["bash", "tools/offline_gpu/run.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)


def members(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {m.name.removeprefix("./") for m in tar.getmembers() if m.isfile()}


def dist(version: str, *requires: str) -> SimpleNamespace:
    return SimpleNamespace(version=version, requires=list(requires))


def test_resolve_ships_what_the_host_lacks_or_has_at_a_wrong_version():
    venv = {"app": dist("1.0", "lib>=2", "tool[fast]", "winonly; sys_platform == 'win32'"),
            "lib": dist("2.5", "base"), "base": dist("1.1"),
            "tool": dist("3.0", "speed; extra == 'fast'"), "speed": dist("0.2"), "pinned": dist("4.0", "lib<3")}
    lookup = venv.get
    top = [Requirement("app"), Requirement("pinned")]
    # the host has lib too old, base and tool: lib travels (and its requirement base stays the host's), tool stays
    # the host's but its extra's requirement travels
    host = {"lib": "1.9", "base": "1.0", "tool": "3.0", "torch": "2.11.0+cu130"}
    assert wheels.resolve(top, host, ENV, lookup) == {"app": "1.0", "pinned": "4.0", "lib": "2.5", "speed": "0.2"}
    # a host version that meets every requirement stays, unless --always names it
    host["lib"] = "2.1"
    assert "lib" not in wheels.resolve(top, host, ENV, lookup)
    assert wheels.resolve(top, host, ENV, lookup, always={"LIB"})["lib"] == "2.5"
    with pytest.raises(SystemExit, match="missing.*needed by app.*this venv has nothing"):
        wheels.resolve([Requirement("app")], {}, ENV, {**venv, "app": dist("1.0", "missing")}.get)


def test_resolve_follows_the_suites_requirements_through_this_venv():
    """The real pyproject.toml against a host that lacks only the DAG's own packages (as a GPU image typically)."""
    import importlib.metadata as md

    venv = {wheels.norm(d.metadata["Name"]): d.version for d in md.distributions()}
    host = {n: v for n, v in venv.items() if n not in ("flash-linear-attention", "fla-core", "lm-eval", "datasets")}
    out = wheels.resolve(wheels.top_requirements(), host, ENV)
    assert set(out) == {"flash-linear-attention", "fla-core", "lm-eval", "datasets"}
    assert out["flash-linear-attention"] == "0.6.0"


def test_read_freeze_and_the_build_cli_refuse_bad_input(tmp_path, capsys):
    assert wheels.read_freeze("# image\nTorch==2.11.0+cu130\nflash_linear.attention == 0.6\n\n") == {
        "torch": "2.11.0+cu130", "flash-linear-attention": "0.6"}
    with pytest.raises(ValueError, match="'numpy'"):
        wheels.read_freeze("numpy\n")
    for argv, message in ((["build"], "build needs --host FILE"), (["build", "--host", str(tmp_path / "nope")],
                                                                   "build needs --host FILE"),
                          (["check", "--extra", "tilelang"], "--extra takes NAME==VERSION, got 'tilelang'")):
        with pytest.raises(SystemExit) as err:
            wheels.main(argv)
        assert err.value.code == 2 and message in capsys.readouterr().err
    (tmp_path / "host.txt").write_text("torch 2.11\n")
    with pytest.raises(SystemExit):
        wheels.main(["build", "--host", str(tmp_path / "host.txt")])
    assert "not a NAME==VERSION line: 'torch 2.11'" in capsys.readouterr().err


def test_download_builds_a_pure_wheel_where_the_index_has_only_an_sdist(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, check=False):
        calls.append(cmd[3])
        if cmd[3] == "wheel":
            name = "pure-1.0-py3-none-any.whl" if "pure==1.0" in cmd else "native-1.0-cp312-cp312-linux_x86_64.whl"
            (Path(cmd[cmd.index("-w") + 1]) / name).write_bytes(b"")
        return SimpleNamespace(returncode=1)  # pip download: no wheel for the host

    monkeypatch.setattr(wheels.subprocess, "run", fake_run)
    wheels.download("pure==1.0", tmp_path, "3.12")
    assert calls == ["download", "wheel"] and (tmp_path / "pure-1.0-py3-none-any.whl").exists()
    with pytest.raises(SystemExit, match="not pure Python"):
        wheels.download("native==1.0", tmp_path, "3.12")


def test_pack_is_one_tar_of_the_folder(tmp_path):
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "a-1-py3-none-any.whl").write_bytes(b"x" * 10)
    (tmp_path / ".whl" / "MANIFEST.txt").write_text("a-1-py3-none-any.whl 10\n")
    out = wheels.pack(tmp_path / ".whl", tmp_path / ".whl.tar")
    assert members(out) == {"a-1-py3-none-any.whl", "MANIFEST.txt"} and not list(tmp_path.glob("*.part"))


def test_check_passes_where_the_suite_is_installed_and_names_what_is_missing(capsys):
    assert wheels.main(["check"]) == 0 and "every requirement met" in capsys.readouterr().out
    assert wheels.main(["check", "--extra", "no-such-package==1.0"]) == 1
    assert "--extra: no-such-package==1.0, found nothing" in capsys.readouterr().out


def test_a_dry_run_plans_each_step_and_packs_its_logs(repo, tmp_path):
    run = run_sh(repo, tmp_path / "out")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert re.findall(r"^== (\w+): snakemake", run.stdout, flags=re.M) == ["study", "prefill_cpu", "final"]
    names = members(tmp_path / "out" / "gpu_results.tar.gz")
    assert {"logs/run/study.log", "logs/run/status.txt", "logs/run/run.log", "logs/run/results_removed.txt"} <= names
    assert not any(n.startswith("results/") for n in names)  # a dry run writes no result, so none comes back
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        study = tar.extractfile("./logs/run/study.log").read().decode()
        prefill = tar.extractfile("./logs/run/prefill_cpu.log").read().decode()
    rules = {line.split()[1].rstrip(":") for line in study.splitlines() if line.startswith(("rule ", "localrule "))}
    assert {"train", "lm_eval", "conversion_cpt", "niah", "mqar", "collect_quality"} <= rules
    assert not rules & {"prefill_cpu", "prefill_cpu_128k", "controls", "render"}  # the timing sweeps run alone
    assert "resources: tmpdir=/tmp, gpu=1" in study and "rule prefill_cpu:" in prefill


def test_targets_and_force(repo, tmp_path):
    run = run_sh(repo, tmp_path / "out", TARGETS="results/gpu/fla_crosscheck.csv", FORCE="fla_crosscheck")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        plan = tar.extractfile("./logs/run/targets.log").read().decode()
    assert "rule fla_crosscheck:" in plan and "Forced execution" in plan


def test_keep_counts_results_that_came_with_the_tree_as_done(repo, tmp_path):
    """On a bare host a committed result has no snakemake metadata and is older than the code copied beside it:
    snakemake would run it again whatever --rerun-triggers says. KEEP=1 marks it done first (snakemake --touch)."""
    outputs = [repo / "results/gpu/fla_crosscheck.csv", repo / "results/gpu/baseline_throughput.csv"]
    for path in outputs:  # older than any code file, as after a copy that wrote the code last
        os.utime(path, (946684800, 946684800))  # 2000-01-01 (snakemake takes an mtime of 0 for none)

    def plan(**env):
        run = run_sh(repo, tmp_path / "out", TARGETS="results/gpu/fla_crosscheck.csv",
                     SMK_ARGS="--rerun-triggers params input software-env code", **env)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
            return run.stdout, tar.extractfile("./logs/run/targets.log").read().decode()

    stdout, targets = plan()
    assert "rule fla_crosscheck:" in targets and "Updated input files" in targets
    stdout, targets = plan(KEEP="1")
    assert "== keep: 1 of the targets' 1 jobs were done already" in stdout
    assert "Nothing to be done" in targets and "rule fla_crosscheck:" not in targets
    assert all(path.stat().st_mtime > 946684800 for path in outputs)  # touched


@pytest.mark.parametrize("env, message", [
    ({"FORCE": "render"}, "FORCE ('render') re-runs rules among TARGETS"),
    ({"TIME_CAP": "10m"}, "TIME_CAP must be a whole number of seconds, got '10m'"),
    ({"GPU_JOBS": "0"}, "GPU_JOBS must be a whole number >= 1, got '0'"),
    ({"DRY": "yes"}, "DRY must be 0 or 1, got 'yes'"),
    ({"KEEP": "yes"}, "KEEP must be 0 or 1, got 'yes'"),
    ({"KEEP": "1"}, "KEEP=1 keeps earlier results among TARGETS: set TARGETS too"),
    ({"KEEP": "1", "TARGETS": "  "}, "KEEP=1 keeps earlier results among TARGETS: set TARGETS too"),
])
def test_run_refuses_settings_it_cannot_honour(repo, tmp_path, env, message):
    run = run_sh(repo, tmp_path / "out", **env)
    assert run.returncode == 2 and message in run.stderr, run.stdout + run.stderr
    assert not (tmp_path / "out").exists()


def test_a_step_without_enough_time_left_waits_for_the_next_run(repo, tmp_path):
    run = run_sh(repo, tmp_path / "out", DRY="0", TIME_CAP="40", PACK_S="30")  # 10 s left: study needs 60
    assert run.returncode == 1 and "== study: " in run.stdout and "run this command again" in run.stdout
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        assert tar.extractfile("./logs/run/status.txt").read().decode().startswith("exit status 1")


def test_a_capped_run_tells_its_jobs_when_they_must_be_done(repo, tmp_path):
    """Under TIME_CAP each snakemake call's jobs see SUITE_DEADLINE, the end of the call less 20 s for snakemake (a
    part of the time-capped benchmarks stops before it, benchmarks/perf_all.sh); with no cap they see none. A python
    shim records what snakemake was started with; TARGETS plans such a part."""
    shim = tmp_path / "python"
    shim.write_text("#!/usr/bin/env bash\nif [[ $* == *snakemake* ]]; then echo \"${SUITE_DEADLINE:-none}\" >> "
                    f"{tmp_path}/deadline.txt; fi\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    start = time.time()
    run = run_sh(repo, tmp_path / "out", python=str(shim), TARGETS="results/gpu/perf/main", TIME_CAP="600")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    with tarfile.open(tmp_path / "out" / "gpu_results.tar.gz") as tar:
        plan = tar.extractfile("./logs/run/targets.log").read().decode()
    assert "rule perf:" in plan and "output: results/gpu/perf/main" in plan
    run = run_sh(repo, tmp_path / "out", python=str(shim), TARGETS="results/gpu/perf/main")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    capped, uncapped = (tmp_path / "deadline.txt").read_text().split()
    assert start + 600 - 30 - 20 - 60 < int(capped) <= start + 600 - 30 - 20 + 1 and uncapped == "none"


def test_what_a_run_writes_and_deletes_comes_back_and_unpacks_here(repo, tmp_path):
    """A python shim stands in for snakemake: it writes one result and deletes another, as a job cut after snakemake
    removed its old output leaves it. The archive holds exactly the result written and lists the one deleted;
    unpacked here, both apply, and the other results stay as they were."""
    shim = tmp_path / "python"
    shim.write_text("#!/usr/bin/env bash\nif [[ $* == *snakemake* ]]; then mkdir -p results/gpu/eval/niah && "
                    "printf 'arch\\nx\\n' > results/gpu/eval/niah/new.csv && rm -f results/gpu/mqar.csv; fi\n"
                    f"exec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    run = run_sh(repo, tmp_path / "out", python=str(shim), TARGETS="results/gpu/niah.csv")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    archive = tmp_path / "out" / "gpu_results.tar.gz"
    assert {n for n in members(archive) if n.startswith("results/")} == {"results/gpu/eval/niah/new.csv"}
    with tarfile.open(archive) as tar:
        assert tar.extractfile("./logs/run/results_removed.txt").read().decode() == "results/gpu/mqar.csv\n"

    here = copy_repo(tmp_path / "here")
    before = (here / "results" / "gpu" / "prefill.csv").read_text()
    unpack = subprocess.run(["bash", "tools/offline_gpu/unpack.sh", str(archive)], cwd=here, capture_output=True,
                            text=True, timeout=60)
    assert unpack.returncode == 0, unpack.stdout + unpack.stderr
    assert (here / "results/gpu/eval/niah/new.csv").read_text() == "arch\nx\n"
    assert not (here / "results/gpu/mqar.csv").exists() and "removed results/gpu/mqar.csv" in unpack.stdout
    assert (here / "results/gpu/prefill.csv").read_text() == before
    assert (here / "work_dirs/gpu/logs/run/status.txt").read_text().startswith("exit status 0")


def test_a_run_brings_back_what_each_of_its_jobs_took(repo, tmp_path):
    """Not a dry run: a python shim stands in for snakemake and, running nothing, leaves the record snakemake keeps
    of a job it ran (.snakemake/metadata, the output's name base64); an older record is an earlier call's. The archive
    holds this call's job times (suite.report.job_times) with that job alone."""
    import base64

    name = base64.urlsafe_b64encode(b"results/gpu/niah.csv").decode()
    old = base64.urlsafe_b64encode(b"results/gpu/mqar.csv").decode()
    meta = repo / ".snakemake" / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / old).write_text('{"rule": "mqar", "starttime": 10.0, "endtime": 20.0, "incomplete": false}')
    shim = tmp_path / "python"
    shim.write_text("#!/usr/bin/env bash\nif [[ $* == *snakemake* ]]; then now=$(date +%s.%N); sleep 1; printf "
                    "'{\"rule\": \"niah\", \"starttime\": %s, \"endtime\": %s, \"incomplete\": false}' $now "
                    f"$(date +%s.%N) > .snakemake/metadata/{name}; exit 0; fi\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    run = run_sh(repo, tmp_path / "out", python=str(shim), DRY="0", TARGETS="results/gpu/niah.csv", GPU_JOBS="2")
    archive = tmp_path / "out" / "gpu_results.tar.gz"
    times = [n for n in members(archive) if n.startswith("results/gpu/job_times/")]
    assert len(times) == 1, (run.stdout + run.stderr)[-3000:]
    with tarfile.open(archive) as tar:
        rows = pd.read_csv(tar.extractfile("./" + times[0]))
    assert list(rows["rule"]) == ["niah"] and rows["outputs"][0] == "results/gpu/niah.csv"
    assert 1 <= rows["seconds"][0] < 10 and rows["gpu_jobs"][0] == 2 and rows["commit"][0] == "test"


def test_unpack_refuses_anything_run_sh_does_not_pack(repo, tmp_path):
    stage = tmp_path / "stage"
    (stage / "results" / "default").mkdir(parents=True)
    (stage / "results" / "default" / "quality.csv").write_text("x\n")
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(stage, arcname=".")
    before = (repo / "results" / "default" / "quality.csv").read_text()
    run = subprocess.run(["bash", "tools/offline_gpu/unpack.sh", str(archive)], cwd=repo, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "refusing" in run.stderr and "results/default/quality.csv" in run.stderr
    assert (repo / "results" / "default" / "quality.csv").read_text() == before
    usage = subprocess.run(["bash", "tools/offline_gpu/unpack.sh"], cwd=repo, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_mqar_control_narrows_the_dag_recipe_to_the_control_phase():
    """mqar_control.py: the DAG's mqar options for the gpu profile, then the controls' cell alone and --stop-after
    the control-cell phase (argparse keeps the last of a repeated option)."""
    from suite.config import load_config
    from suite.experiments.mqar.recipe import mqar_cli_args

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


@pytest.mark.slow
def test_mqar_control_runs_every_variant_at_every_seed_on_cpu(tmp_path):
    """The ci profile's MQAR recipe with a control-cell phase (half its 10 steps) on the CPU: one row a job, the
    variant's option honoured in the job's row; a recipe without that phase is refused by name."""
    import yaml

    config = yaml.safe_load((ROOT / "profiles" / "ci.yaml").read_text())
    profile = tmp_path / "ci_phase.yaml"
    profile.write_text(yaml.safe_dump({**config, "mqar": {**config["mqar"], "first_cell_frac": 0.5}}))
    out = tmp_path / "control.csv"

    def control(path):
        return subprocess.run([sys.executable, str(TOOLS / "mqar_control.py"), "--profile", str(path), "--device",
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


def part_commands(*args: str) -> list[list[str]]:
    """part.sh's commands for one step, DRY=1 (printed, not run), as argument lists."""
    env = {**os.environ, "DRY": "1", "PYTHON": "python", "SUITE_COMMIT": "test", "OUT": "/tmp/part-test-out"}
    run = subprocess.run(["bash", "tools/offline_gpu/part.sh", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return [line.split() for line in run.stdout.splitlines() if line.startswith("python -m ")]


def dag_commands(shell: str) -> list[list[str]]:
    """The ``python -m`` commands of a rule's shell line, without their log redirection and copies."""
    return [re.split(r"\s>\s|\)\s>", part)[0].split() for part in re.findall(r"python -m .*?(?=&& python|$)", shell)]


def test_part_sh_runs_the_dags_own_commands_for_table_2_s_arms():
    """part.sh repeats the gpu profile's training, benchmark, bucket and NIAH commands for hosts without snakemake: a
    recipe changed in pretrained.smk or gpu.yaml and not in part.sh would give rows of another run than the DAG's."""
    from tests.dag import dry_run
    targets = [f"results/gpu/pretrained/{kind}/{arm}/seed43/{name}" for arm in ("base_cpt", "conversion")
               for kind, name in (("train", "metrics.csv"), ("eval", "quality.csv"), ("eval", "ppl.csv"),
                                       ("eval", "niah.csv"))]
    jobs = {(j.rule, j.wildcards.get("arm") or j.wildcards.get("variant")): j
            for j in dry_run("--forceall", "--config", "profile=gpu", "--", *targets, "results/gpu/pretrained/eval/"
                             "base/seed0/quality.csv")}
    for arm in ("base_cpt", "conversion"):
        assert part_commands("train", arm, "43") == dag_commands(jobs["pretrained_train", arm].shell)
        assert part_commands("ppl", arm, "43") == dag_commands(jobs["pretrained_ppl", arm].shell)
        assert part_commands("niah", arm, "43") == dag_commands(jobs["pretrained_niah", arm].shell)
        scored = part_commands("score", arm, "43", "commonsense,squad,drop", "quality")
        scored += part_commands("score", arm, "43", "mmlu", "mmlu")
        assert scored == dag_commands(jobs["pretrained_benchmarks", arm].shell)
    base = part_commands("score", "base", "0", "commonsense,squad,drop", "quality") + part_commands(
        "score", "base", "0", "mmlu", "mmlu")
    assert base == dag_commands(jobs["pretrained_benchmarks", "base"].shell)
    made = [c for c in part_commands("prep") if c[2] != "suite.data.shards"]  # the unpacking has no rule here
    assert made == dag_commands(jobs["base_model", None].shell) + dag_commands(jobs["convert_base", None].shell)
