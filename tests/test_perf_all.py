"""The time-capped system benchmarks, the DAG's rule perf (benchmarks/perf_all.sh), end to end in a CPU profile's
smoke mode, and the merge of two GPU commands' outputs."""
import json
import os
import statistics
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.merge_results import merge
from tests.dag import copy_repo, parse_dry_run, snakemake

ROOT = Path(__file__).resolve().parents[1]
PERF = Path("work_dirs/ci/results/perf")  # the ci profile's results folder: the perf parts' folders


def perf(repo: Path, part: str, timeout: int, **env):
    """``snakemake <results>/perf/PART`` of the ci profile (CPU: every step at tiny size) in a copy of the repository;
    the rows record commit ``smoke123``."""
    env = {**os.environ, "SUITE_COMMIT": "smoke123", **env}
    return snakemake("--cores", "1", "--config", "profile=ci", "--", PERF / part, cwd=repo, env=env, timeout=timeout)


@pytest.mark.slow
def test_perf_all_smoke_runs_every_step_and_writes_every_table(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    run = perf(repo, "all", timeout=1500, TOTAL_S="1500")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = repo / PERF / "all"
    steps = pd.read_csv(out / "steps.tsv", sep="\t")
    # PART=main's steps, most valuable first and the 1M FP8 prefill last, then the optional Table 4 commands
    assert list(steps.step) == ["attn_kernels", "prefill_gpu", "decode_step", "train_step", "cost_model",
                                "prefill_1m", "e2e_table4", "e2e_hybrids", "decode_load"]
    assert (steps.exit.astype(str) == "0").all()
    env_log = (out / "env.log").read_text()
    assert "SUITE_COMMIT=smoke123" in env_log

    kernels = pd.read_csv(out / "attention_kernels.csv")
    checks = kernels[kernels.part == "check"]
    assert len(checks) >= 10 and (checks.status == "pass").all()
    assert {"chunk causal (bottom-right)", "chunk window (bottom-right)", "decode step (token-major cache)"} \
        <= set(checks.case)
    assert json.loads((out / "attn_choice.json").read_text())["fa2_ok"] is True

    # pass/fail rows (targets and the checks made before timing) live in targets.csv, not in the measurement CSVs
    targets = pd.read_csv(out / "targets.csv")
    by = {name: targets[targets.source == name] for name in set(targets.source)}
    pre = pd.read_csv(out / "prefill.csv")
    assert not {"target", "value", "threshold"} & set(pre.columns)
    assert not pre.method.isin(["target", "path check"]).any()
    path_checks = by["prefill.csv"][by["prefill.csv"].method == "path check"]
    assert (path_checks.status == "pass").all() and len(path_checks) == 2
    sweep = pre[(pre.method == "full-model") & (pre.status == "ok")]
    assert set(sweep.arch) == {"transformer", "orthros"} and sweep.path.isin(["eager", "compiled"]).all()
    assert len(pre[pre.method.str.endswith("comparison)")]) == 2
    pre_t = by["prefill.csv"][by["prefill.csv"].method == "target"]
    assert len(pre_t) == 3 and set(pre_t.status) <= {"pass", "fail"}
    carried = pre[(pre.method == "one-layer x n_layers") & (pre.seq_len == 1048576)]
    assert set(carried.arch) == {"transformer", "orthros"} and (carried.commit == "7066ee8456f3").all()

    p1m = pd.read_csv(out / "prefill_1m_fp8.csv")
    assert set(p1m[p1m.method == "check"].kv) == {"bf16 (chunked runner) vs model forward",
                                                  "fp8 vs bf16 (chunked runner)"}
    assert (p1m[p1m.method == "full-model (fp8 kv, chunked)"].status == "ok").all()
    assert len(by["prefill_1m_fp8.csv"]) == 3 and "transformer" in set(p1m.arch) and "target" not in set(p1m.method)

    e2e = pd.read_csv(out / "e2e.csv")
    rows = e2e[e2e.status == "ok"]
    assert set(rows.arch) == {"transformer", "orthros", "orthros_h", "linear_hybrid"}
    for r in rows.itertuples():
        runs = json.loads(r.ttft_runs_s)
        assert len(runs) == 3 and abs(r.ttft_s - statistics.median(runs)) < 1e-3
        assert r.decode_kernels_per_step > 0
        assert r.prefill_path == ("eager" if r.arch in ("orthros_h", "linear_hybrid") else "fused compiled")
    assert rows[rows.arch.isin(["orthros_h", "linear_hybrid"])].fla_norm_bucket.notna().all()
    e2e_t = by["e2e.csv"]
    checks = e2e_t[e2e_t.method == "engine check"]
    assert set(checks.arch) == {"orthros+transformer", "orthros_h+linear_hybrid"} and (checks.status == "pass").all()
    compiled = e2e_t[e2e_t.method == "compiled check"]
    assert set(compiled.arch) == {"transformer", "orthros"} and (compiled.status == "pass").all()
    assert set(e2e.method) & {"target", "engine check", "compiled check"} == set()
    assert len(by["train_step.csv"]) == 1 and "target" not in set(pd.read_csv(out / "train_step.csv").method)
    assert (out / "cost_model.csv").exists()
    load = pd.read_csv(out / "decode_load.csv")
    assert set(load.arch) == {"transformer", "orthros"} and (load.status == "ok").all()
    assert set(load.path) == {"fused eager", "fused compiled"} and load.predicted_ms.notna().all()
    assert load.gemm_alone_ms.notna().all() and load.attn_alone_ms.notna().all()
    assert len(by["decode_load.csv"]) == 8  # cost model within 15%: per arch, path and decode attention

    # every target row of every CSV, pass/fail, with its provenance (commit from SUITE_COMMIT, device, dtype, ...)
    assert {"prefill.csv", "e2e.csv", "prefill_1m_fp8.csv", "train_step.csv"} <= set(targets.source)
    assert targets.status.str.match(r"^(pass|fail|not run)").all()
    for col in ("commit", "device", "backend", "dtype", "gpu_name", "torch"):
        assert targets[col].notna().all(), col
    assert (targets.commit.astype(str) == "smoke123").all()
    for name in ("prefill.csv", "e2e.csv", "prefill_1m_fp8.csv", "attention_kernels.csv", "train_step.csv"):
        frame = pd.read_csv(out / name)
        if name == "prefill.csv":  # rows carried over from results/gpu keep their own provenance
            kept = set(pd.read_csv(ROOT / "results/gpu/prefill.csv").commit.astype(str))
            frame = frame[~frame.commit.astype(str).isin(kept)]
        assert len(frame) and (frame.commit.astype(str) == "smoke123").all(), name


@pytest.mark.slow
def test_perf_stops_before_the_callers_deadline_and_keeps_its_record(tmp_path):
    """SUITE_DEADLINE (run.sh's TIME_CAP) already passed: every step is skipped and recorded in steps.tsv, and the
    part still ends 0 with its folder."""
    repo = copy_repo(tmp_path / "repo")
    run = perf(repo, "main", timeout=300, SUITE_DEADLINE=str(int(time.time()) + 1))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = repo / PERF / "main"
    steps = pd.read_csv(out / "steps.tsv", sep="\t")
    assert list(steps.step) == ["attn_kernels", "prefill_gpu", "decode_step", "train_step", "cost_model", "prefill_1m"]
    assert (steps.exit.astype(str) == "skipped").all()
    assert "SUITE_COMMIT=smoke123" in (out / "env.log").read_text()
    assert "skipped" in (repo / "work_dirs/ci/logs/perf_main.log").read_text()


@pytest.mark.slow
def test_perf_parts_are_targets_of_the_dag():
    """In the gpu profile a part is one job on the GPU at full size; in a CPU profile the smoke steps; the parts are
    the script's (an unknown one has no rule), and neither `all` nor `benchmarks` runs them."""
    run = snakemake("-n", "-p", "--config", "profile=gpu", "--", "results/gpu/perf/main", "results/gpu/perf/table4",
                    timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = {j.wildcards["part"]: j for j in parse_dry_run(run.stdout) if j.rule == "perf"}
    assert set(jobs) == {"main", "table4"} and all(j.resources.get("gpu") == "1" for j in jobs.values())
    assert "OUT=results/gpu/perf/main PART=main SMOKE=0 bash benchmarks/perf_all.sh" in jobs["main"].shell
    cpu = snakemake("-n", "-p", "--config", "profile=ci", "--", PERF / "load", timeout=300)
    assert cpu.returncode == 0 and "PART=load SMOKE=1 bash benchmarks/perf_all.sh" in cpu.stdout, cpu.stderr[-3000:]
    wrong = snakemake("-n", "--config", "profile=ci", "--", PERF / "nope", timeout=300)
    assert wrong.returncode != 0 and "MissingRuleException" in wrong.stdout + wrong.stderr
    assert "rule perf:" not in snakemake("-n", "-p", "--config", "profile=gpu", "--", "all", "benchmarks",
                                         timeout=300).stdout


def test_merge_results_refuses_a_source_that_is_neither_folder_nor_archive(tmp_path, capsys):
    from benchmarks import merge_results
    (tmp_path / "x.csv").write_text("a\n1\n")
    with pytest.raises(SystemExit) as err:
        merge_results.main(["--into", str(tmp_path / "m"), str(tmp_path / "x.csv")])
    assert err.value.code == 2 and "neither a folder nor a .tar.gz" in capsys.readouterr().err


def test_merge_results_keeps_the_rows_of_the_into_folder(tmp_path):
    """``--into results/gpu OUT`` adds OUT's rows to what results/gpu holds: rows of other archs stay."""
    from benchmarks import merge_results
    into, out = tmp_path / "res", tmp_path / "out"
    into.mkdir(), out.mkdir()
    pd.DataFrame({"arch": ["orthros_h", "orthros"], "ttft_s": [7.0, 6.0]}).to_csv(into / "e2e.csv", index=False)
    pd.DataFrame({"arch": ["orthros"], "ttft_s": [5.0]}).to_csv(out / "e2e.csv", index=False)
    merge_results.main(["--into", str(into), str(out)])
    rows = pd.read_csv(into / "e2e.csv").set_index("arch")["ttft_s"].to_dict()
    assert rows == {"orthros_h": 7.0, "orthros": 5.0}


def test_merge_results_later_sources_replace_rows_of_the_same_key(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pd.DataFrame({"arch": ["orthros_h", "linear_hybrid"], "ttft_s": [7.0, None]}).to_csv(a / "e2e.csv", index=False)
    pd.DataFrame({"arch": ["transformer", "orthros_h"], "ttft_s": [23.0, 7.3]}).to_csv(b / "e2e.csv", index=False)
    pd.DataFrame({"x": [1]}).to_csv(a / "train_step.csv", index=False)
    (a / "rates.json").write_text("{}")
    merge([a, b], tmp_path / "into")
    got = pd.read_csv(tmp_path / "into" / "e2e.csv").set_index("arch")["ttft_s"]
    assert got["orthros_h"] == 7.3 and got["transformer"] == 23.0 and "linear_hybrid" in got.index and len(got) == 3
    assert (tmp_path / "into" / "train_step.csv").exists() and (tmp_path / "into" / "rates.json").exists()


def test_merge_results_replaces_only_the_re_measured_config_of_an_arch(tmp_path):
    """e2e.csv rows are keyed by arch and config: re-measuring one config keeps the arch's others (an empty cell
    elsewhere in the column makes pandas read the lengths as floats; 131072.0 and 131072 are one key)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pd.DataFrame({"arch": ["linear_hybrid", "linear_hybrid", "x"], "batch": [2, 2, 2],
                  "input_len": [131072, 130048, None], "output_len": [128, 1024, None],
                  "ttft_s": [11.4, 11.3, None]}).to_csv(a / "e2e.csv", index=False)
    pd.DataFrame({"arch": ["linear_hybrid"], "batch": [2], "input_len": [131072], "output_len": [128],
                  "ttft_s": [11.2]}).to_csv(b / "e2e.csv", index=False)
    merge([a, b], tmp_path / "into")
    got = pd.read_csv(tmp_path / "into" / "e2e.csv")
    assert len(got) == 3 and sorted(got.ttft_s.dropna()) == [11.2, 11.3]


def test_merge_results_adds_an_arm_scored_later_to_table_2_s_rows(tmp_path):
    """pretrained.csv rows are keyed by arm, seed, task, metric and shots: a part that scored random_init adds its
    rows beside base's; its controls replace only the controls of the same experiment and kind."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pd.DataFrame({"variant": ["base", "base"], "seed": [0, 0], "task": ["piqa", "mmlu"], "metric": ["acc", "acc"],
                  "num_fewshot": [0, 0], "value": [0.64, 0.3]}).to_csv(a / "pretrained.csv", index=False)
    pd.DataFrame({"variant": ["random_init"], "seed": [0], "task": ["piqa"], "metric": ["acc"], "num_fewshot": [0],
                  "value": [0.52]}).to_csv(b / "pretrained.csv", index=False)
    pd.DataFrame({"experiment": ["lm", "bench:piqa:0shot"], "control": ["positive", "negative"],
                  "passed": [True, False], "world_size": ["1", ""]}).to_csv(a / "controls.csv", index=False)
    pd.DataFrame({"experiment": ["bench:piqa:0shot"], "control": ["negative"], "passed": [True]}).to_csv(
        b / "controls.csv", index=False)
    merge([a, b], tmp_path / "into")
    rows = pd.read_csv(tmp_path / "into" / "pretrained.csv")
    assert list(zip(rows["variant"], rows["task"])) == [("base", "piqa"), ("base", "mmlu"), ("random_init", "piqa")]
    controls = pd.read_csv(tmp_path / "into" / "controls.csv")
    assert list(controls["experiment"]) == ["lm", "bench:piqa:0shot"] and controls["passed"].all()
    assert (tmp_path / "into" / "controls.csv").read_text().splitlines()[1] == "lm,positive,True,1"  # as written


def test_merge_results_replaces_a_recomputed_pairs_cell_whole_and_keeps_the_others(tmp_path):
    """pretrained_pairs.csv holds a cell (two arms, task, shots, metric) as several rows of counts: a cell recomputed
    with more seeds replaces all its old rows; a cell the later part could not recompute stays."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    cell = {"key": "variant", "size": "", "num_fewshot": 0, "metric": "acc"}
    pd.DataFrame([{**cell, "arm_a": "base", "arm_b": "conversion", "task": "piqa", "sum_a": x, "sum_b": y,
                   "count": 5} for x, y in [(0, 0), (0, 1), (1, 0), (1, 1)]]
                 + [{**cell, "arm_a": "base", "arm_b": "base_cpt", "task": "mmlu", "sum_a": 0, "sum_b": 0,
                     "count": 9}]).to_csv(a / "pretrained_pairs.csv", index=False)
    pd.DataFrame([{**cell, "arm_a": "base", "arm_b": "base_cpt", "task": "mmlu", "sum_a": x, "sum_b": y, "count": 3}
                  for x, y in [(0, 0), (0, 2)]]).to_csv(b / "pretrained_pairs.csv", index=False)
    merge([a, b], tmp_path / "into")
    rows = pd.read_csv(tmp_path / "into" / "pretrained_pairs.csv")
    assert rows[rows["task"] == "piqa"]["count"].sum() == 20
    assert rows[rows["task"] == "mmlu"][["sum_b", "count"]].values.tolist() == [[0, 3], [2, 3]]


def test_merge_results_writes_nothing_when_a_source_csv_is_bad(tmp_path, capsys):
    """A damaged CSV, or one without a column of its key, is refused by name before any file of --into changes."""
    from benchmarks import merge_results
    into, src = tmp_path / "into", tmp_path / "src"
    into.mkdir(), src.mkdir()
    pd.DataFrame({"experiment": ["lm"], "control": ["positive"]}).to_csv(into / "controls.csv", index=False)
    before = (into / "controls.csv").read_bytes()
    pd.DataFrame({"experiment": ["lm"], "control": ["positive"], "passed": [True]}).to_csv(src / "controls.csv",
                                                                                        index=False)
    (src / "pretrained.csv").write_text("a,b\n1\n")
    with pytest.raises(SystemExit):
        merge_results.main(["--into", str(into), str(src)])
    assert "pretrained.csv" in capsys.readouterr().err and (into / "controls.csv").read_bytes() == before
    (src / "pretrained.csv").unlink()
    pd.DataFrame({"variant": ["base"], "seed": [0], "task": ["piqa"], "metric": ["acc"], "num_fewshot": [0]}).to_csv(
        into / "pretrained.csv", index=False)
    pd.DataFrame({"variant": ["base"], "seed": [0], "task": ["piqa"], "metric": ["acc"]}).to_csv(
        src / "pretrained.csv", index=False)
    with pytest.raises(SystemExit):
        merge_results.main(["--into", str(into), str(src)])
    assert "lacks the key column(s) ['num_fewshot'] that the other pretrained.csv" in capsys.readouterr().err
    (tmp_path / "bad.tar.gz").write_text("not gzip")
    with pytest.raises(SystemExit):
        merge_results.main(["--into", str(into), str(tmp_path / "bad.tar.gz")])
    assert "bad.tar.gz is not a readable .tar.gz archive" in capsys.readouterr().err


def test_merge_results_reads_an_archive_like_a_folder(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    pd.DataFrame({"arch": ["orthros"], "ttft_s": [7.5]}).to_csv(a / "e2e.csv", index=False)
    (a / "rates.json").write_text('{"matmul_tflops": 1}')
    with tarfile.open(tmp_path / "a.tar.gz", "w:gz") as tar:
        tar.add(a, arcname=".")
    from benchmarks import merge_results
    merge_results.main(["--into", str(tmp_path / "m"), str(tmp_path / "a.tar.gz")])
    assert pd.read_csv(tmp_path / "m" / "e2e.csv")["ttft_s"].tolist() == [7.5]
    assert (tmp_path / "m" / "rates.json").read_text() == '{"matmul_tflops": 1}'
