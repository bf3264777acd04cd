"""The multi-GPU benchmarks, the DAG's rule multi_gpu (benchmarks/multi_gpu_all.sh), in a CPU profile's CPU/gloo
smoke mode (2 processes), and its two CSV writers."""
import os
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.multi_gpu_train import summarize
from benchmarks.seq_parallel_gpu import LAYER_WISE, parse_layer_wise
from suite import cost_model as cm
from suite.provenance import write_csv
from tests.dag import copy_repo, snakemake

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_smoke_run_writes_both_csvs(data_dir, tmp_path):
    repo = copy_repo(tmp_path / "repo")
    env = {**os.environ, "DATA_DIR": str(data_dir), "TOTAL_S": "400"}
    run = snakemake("--cores", "2", "--config", "profile=ci", "--", "work_dirs/ci/results/perf/multi_gpu", cwd=repo,
                    env=env, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    out = repo / "work_dirs/ci/results/perf/multi_gpu"

    sp = pd.read_csv(out / "seq_parallel.csv")
    measured = sp[sp["method"] != "cost-model prediction"]
    assert (measured["status"] == "ok").all(), measured["status"].tolist()
    assert set(zip(measured["arch"], measured["gpus"])) == {(a, g) for a in ("transformer", "orthros") for g in (1, 2)}
    assert set(measured["world_size"]) == {1, 2} and (measured["world_size"] == measured["gpus"]).all()
    assert set(measured.loc[measured["arch"] == "transformer", "method"]) == {"full-model", LAYER_WISE}
    one = measured[measured["gpus"] == 1].set_index(["arch", "seq_len"])
    two = measured[measured["gpus"] == 2].set_index(["arch", "seq_len"])
    pd.testing.assert_series_equal(two["speedup"], one["ms"] / two["ms"], check_names=False)
    targets = pd.read_csv(out / "targets.csv")
    sp_t = targets[targets["source"] == "seq_parallel.csv"]
    assert len(sp_t) == len(two) and set(sp_t["status"]) <= {"pass", "fail"} and (sp_t["threshold"] == 0.15).all()
    assert not {"within_15pct", "target"} & set(sp.columns)
    rates = cm.Rates.load(ROOT / "results" / "gpu" / "rates.json")
    for (arch, T), row in two.iterrows():  # the prediction is the cost model's, at the tiny model's shape
        window = 128 if arch == "orthros" else None
        assert row["predicted_speedup"] == pytest.approx(
            cm.seq_parallel_speedup(cm.Shape.from_size("1M"), int(T), arch, 2, rates, window), rel=1e-9)
    pred = sp[sp["method"] == "cost-model prediction"]
    assert set(pred["gpus"]) == {8} and len(pred) == 4 and (pred["ms"] > 0).all()
    assert {"commit", "profile", "device", "backend", "dtype", "seed", "wall_s", "world_size"} <= set(sp.columns)

    train = pd.read_csv(out / "multi_gpu_train.csv")
    runs = train[train["kind"] == "run"]
    assert sorted(runs["gpus"]) == [1, 2] and (runs["status"] == "ok").all() and (runs["tok_s"] > 0).all()
    loss = train[train["kind"] == "loss"]
    assert list(loss["step"]) == [1, 2, 3, 4]
    assert loss["abs_diff"].max() < 1e-5  # fp32 on the CPU: 2 ranks x 2 rows == 1 process x 4 rows
    assert "target" not in set(train["kind"])
    targets = targets[targets["source"] == "multi_gpu_train.csv"].set_index("threshold")
    assert targets.loc[1.8, "status"] in ("pass", "fail")
    assert targets.loc[1.8, "value"] == pytest.approx(runs["tok_s"].iloc[1] / runs["tok_s"].iloc[0])
    assert targets.loc[0.05, "status"] == "pass"
    assert (out / "train1_loss.csv").exists() and not (out / "checkpoint").exists()


def _fake_run(path: Path, world: int, losses: list[float], tok_s: float, **metrics) -> Path:
    path.mkdir(parents=True)
    write_csv([{"step": i + 1, "loss": v, "tok_s": tok_s} for i, v in enumerate(losses)], path / "loss.csv")
    base = dict(arch="orthros", size="160M", n_params=1, batch_size=16, seq_len=2048, steps=len(losses),
                train_loss=losses[-1], val_loss=losses[-1], world_size=world)
    write_csv([{**base, **metrics}], path / "metrics.csv")
    return path


def test_summary_targets_and_errors(tmp_path):
    one = _fake_run(tmp_path / "one", 1, [5.0, 4.0, 3.0], 100.0)
    two = _fake_run(tmp_path / "two", 2, [5.0, 4.1, 3.0], 170.0)
    rows = summarize(one, two, skip=0)
    targets = {r["threshold"]: r for r in rows if r["kind"] == "target"}
    assert targets[1.8]["value"] == pytest.approx(1.7) and targets[1.8]["status"] == "fail"
    assert targets[0.05]["value"] == pytest.approx(0.1) and targets[0.05]["status"] == "fail"
    missing = summarize(one, tmp_path / "absent")
    assert missing[1]["status"].startswith("not run") and {r["status"] for r in missing[2:]} == {
        "not run: a run did not finish"}
    other = _fake_run(tmp_path / "other", 2, [5.0, 4.0], 170.0, size="360M")
    with pytest.raises(ValueError, match="not comparable.*'size'"):
        summarize(one, other)


def test_layer_wise_option_parsing():
    assert parse_layer_wise("transformer=262144, orthros=1048576") == {"transformer": 262144, "orthros": 1048576}
    with pytest.raises(ValueError, match="'orthros' is not ARCH=LENGTH"):
        parse_layer_wise("orthros")
