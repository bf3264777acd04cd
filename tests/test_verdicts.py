"""The verdict rules of the audit (suite.report.verdicts, docs/verdicts.md) on synthetic rows: a null on a claimed
difference, an underpowered or near-trivial experiment, a failed control, the paired statistics, the drift floor,
contradictory rows, stale rows, and the counts the README and the audit share."""
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from suite.eval import controls as ctl
from suite.report import audit, findings, soundness, staleness, stats, verdicts
from suite.report.derived import load_derived
from suite.report.drift import drift
from suite.report.evidence import Inputs
from suite.report.tables import recall_table

ROOT = Path(__file__).resolve().parents[1]
PROV = {"commit": "abc", "profile": "test", "device": "cpu", "backend": "blocked", "dtype": "float32"}
LM_OK = pd.DataFrame([{"experiment": "lm", "control": "positive", "arch": "transformer", "value": 4.0,
                       "threshold": "< 6.5", "passed": True},
                      {"experiment": "lm", "control": "negative", "arch": "transformer", "value": 8.3,
                       "threshold": ">= 7.8", "passed": True}])


def _current(commits, archs, trained):
    return "current"


def _ppl(gain: float, arms=("orthros", "transformer")) -> pd.DataFrame:
    """Byte perplexity of two arms over three seeds, the first arm ``gain`` lower; a seed moves both arms alike
    (shared data order) and each a little on its own."""
    rows = []
    for seed, shared, own in zip((42, 43, 44), (0.0, 0.2, -0.2), (0.02, -0.03, 0.01)):
        for arm, value in ((arms[0], 5.0 - gain + shared + own), (arms[1], 5.0 + shared)):
            rows.append({"arch": arm, "size": "1M", "n_params": 1e6, "task": "val_ppl", "metric": "byte_perplexity",
                         "value": value, "unit": "ppl", "status": "ok", "seed": seed, **PROV})
    return pd.DataFrame(rows)


def _runs(losses: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"arch": a, "size": "1M", "seed": s, "steps": 70, "val_loss": v, **PROV}
                         for a, v in losses.items() for s in (42, 43, 44)])


def _claim(direction="lower", **extra) -> dict:
    measure = {"results": "{results}/quality.csv", "column": "value", "op": "ratio",
               "numerator": {"arch": "orthros", "task": "val_ppl", "metric": "byte_perplexity"},
               "denominator": {"arch": "transformer", "task": "val_ppl", "metric": "byte_perplexity"},
               "where": {"status": "ok"}, "controls": "lm", "trivial": "unigram", "direction": direction,
               "unit": "byte perplexity ratio"}
    return {"id": "C99", "asserted_by": "paper", "claim": "Orthros is better than the Transformer.", "value": 0.57,
            "unit": "accuracy points", "source": "test", "conditions": {"scale": "1.3B"},
            "evidence": [{"kind": "proxy", "describe": "synthetic perplexity rows", "measure": measure}], **extra}


def _audit(tmp_path, gain, losses=None, controls=LM_OK, claim=None) -> pd.Series:
    _ppl(gain).to_csv(tmp_path / "quality.csv", index=False)
    train = tmp_path / "train" / "orthros" / "1M" / "seed42"
    train.mkdir(parents=True, exist_ok=True)
    _runs(losses or {"orthros": 4.0, "transformer": 4.1}).to_csv(train / "metrics.csv", index=False)
    inputs = Inputs(tmp_path, None, controls, None, stale=_current)
    return audit.audit_claims([claim or _claim()], load_derived(), inputs=inputs).iloc[0]


def test_a_null_on_a_claimed_difference_is_not_reproduced(tmp_path):
    null = _audit(tmp_path, gain=0.001)
    assert null["measured_verdict"] == verdicts.NO_DIFFERENCE != verdicts.REPRODUCED
    assert "CI holds 1" in null["measured_why"] and null["ci95_low"] < 1 < null["ci95_high"]
    gain = _audit(tmp_path, gain=0.3)
    assert gain["measured_verdict"] == verdicts.REPRODUCED and gain["ci95_high"] < 1
    worse = _audit(tmp_path, gain=-0.3)                       # beyond noise, the other sign
    assert worse["measured_verdict"] == verdicts.NOT_REPRODUCED
    counts = verdicts.count_lines(pd.DataFrame([null, gain]))
    assert "Proxies (another metric or a far smaller scale): 1 reproduced here, 1 no difference detected." in counts


def test_judge_a_null_without_the_audit():
    est = stats.paired(pd.Series([1.0, 1.01, 0.99]), pd.Series([1.0, 1.0, 1.0]), "ratio")
    assert verdicts.judge(est, direction="lower")[0] == verdicts.NO_DIFFERENCE
    one = stats.Estimate(0.9, 1.0)                            # one run: no noise estimate for a claimed difference
    assert verdicts.judge(one, direction="lower")[0] == verdicts.NOT_TESTABLE
    assert verdicts.judge(one, expect={"approx": 1.0, "rel_tol": 0.2})[0] == verdicts.REPRODUCED
    assert verdicts.judge(one, expect={"ge": 0.95}, kind=verdicts.IMPLEMENTATION)[0] == verdicts.FAILED


def test_a_model_near_unigram_is_not_testable_at_this_scale(tmp_path):
    row = _audit(tmp_path, gain=0.3, losses={"orthros": 6.2, "transformer": 6.3})      # unigram 6.5: 3% below
    assert row["measured_verdict"] == verdicts.NOT_TESTABLE
    assert "less than 10% better than a unigram model" in row["measured_why"]
    assert "transformer 6.3 (3.1% below)" in row["trivial_margin"]


def test_an_underpowered_experiment_is_not_testable_at_this_scale():
    effects = {"160M": 0.12, "1.3B": 1.16, "6.8B": 2.87}
    reason, text = verdicts.scale_gate(effects, 1e6, mde=10.0)        # nearest reported scale to 1M: 160M
    assert reason and "(160M) is +0.12 accuracy points, below the 10 accuracy points" in reason
    assert verdicts.scale_gate(effects, 1e6, mde=0.05)[0] is None      # detectable: the gate lets it through
    assert verdicts.scale_gate(effects, 2e9, mde=1.0)[0] is None       # nearest 1.3B: +1.16 >= 1
    assert verdicts.scale_gate(effects, 1e6, mde=None)[0] is None and "no measurement" in \
        verdicts.scale_gate(effects, 1e6, mde=None)[1]
    est = stats.paired(pd.Series([0.9, 0.91, 0.89]), pd.Series([1.0, 1.0, 1.0]), "ratio")
    assert verdicts.judge(est, direction="lower", untestable=[reason])[0] == verdicts.NOT_TESTABLE


def test_the_scale_rule_in_the_audit_uses_the_benchmark_mde(tmp_path):
    """C12-like: the paper's own effect at the nearest reported scale (160M: +0.12 points) is below what 20 documents
    a task can detect, so the perplexity proxy is not testable either, whatever it shows."""
    from tests.test_controls import bench_rows

    quality = pd.concat([_ppl(0.3), bench_rows("arch", "orthros", lambda t: 0.5, n=20, seeds=(42, 43, 44)),
                         bench_rows("arch", "transformer", lambda t: 0.45, n=20, seeds=(42, 43, 44))])
    quality["status"] = "ok"
    claim = _claim(scale_effects={"160M": "d_t7_160M_orthros_minus_orthros_noso",
                                  "6.8B": "d_t7_6.8B_orthros_minus_orthros_noso"})
    claim["evidence"].insert(0, {"kind": "proxy", "describe": "synthetic benchmark rows", "benchmark": {
        "results": "{results}/quality.csv", "key": "arch", "op": "difference", "numerator": "orthros",
        "denominator": "transformer", "tasks": ["arc_easy", "piqa"], "direction": "higher"}})
    quality.to_csv(tmp_path / "quality.csv", index=False)
    inputs = Inputs(tmp_path, None, LM_OK, None, stale=_current)
    row = audit.audit_claims([claim], load_derived(), inputs=inputs).iloc[0]
    assert row["measured_verdict"] == verdicts.NOT_TESTABLE
    assert "the paper's own effect at its reported scale nearest this one (160M) is +0.12" in row["measured_why"]


def test_a_failed_control_voids_the_cell(tmp_path):
    failed = LM_OK.assign(passed=[False, True])
    row = _audit(tmp_path, gain=0.3, controls=failed)
    assert row["measured_verdict"] == verdicts.INVALID and pd.isna(row["measured"])
    assert row["measured_why"].startswith("invalid: positive control failed")



SCRATCH_OK = pd.DataFrame([{"experiment": "scratch_lm", "control": "positive", "arch": "transformer", "value": 3.0,
                            "threshold": "< 7", "passed": True},
                           {"experiment": "scratch_lm", "control": "negative", "arch": "transformer", "value": 9.7,
                            "threshold": ">= 9.2", "passed": True}])


def _scratch_audit(tmp_path, controls, losses=(3.0, 3.2)) -> pd.Series:
    """C01's from-scratch proxy on synthetic scratch_train.csv rows: Orthros and the Transformer at equal tokens,
    three paired seeds."""
    rows = [{"arch": arch, "budget": "tokens", "seed": seed, "steps": 1526, "tokens": 1e8, "wall_s": 300.0,
             "n_params": 2.5e7, "val_loss": loss + shift, **PROV}
            for seed, shift in zip((42, 43, 44), (0.0, 0.01, -0.01)) for arch, loss in zip(("orthros", "transformer"),
                                                                                            losses)]
    pd.DataFrame(rows).to_csv(tmp_path / "scratch_train.csv", index=False)
    measure = {"results": "{gpu}/scratch_train.csv", "column": "val_loss", "op": "ratio",
               "numerator": {"arch": "orthros"}, "denominator": {"arch": "transformer"}, "where": {"budget": "tokens"},
               "controls": "scratch_lm", "trivial": "unigram", "direction": "lower", "unit": "held-out loss ratio"}
    claim = _claim()
    claim["evidence"] = [{"kind": "proxy", "describe": "synthetic from-scratch rows", "measure": measure}]
    inputs = Inputs(None, tmp_path, None, controls, stale=_current)
    return audit.audit_claims([claim], load_derived(), inputs=inputs).iloc[0]


def test_the_from_scratch_proxies_answer_to_their_own_controls_and_unigram(tmp_path):
    """The from-scratch study's proxies read its scratch_lm controls and its own corpus's unigram (their
    thresholds), not the quality study's lm ones."""
    assert _scratch_audit(tmp_path, SCRATCH_OK)["measured_verdict"] == verdicts.REPRODUCED
    assert "held-out loss vs the unigram cross-entropy 7 nats/token" in _scratch_audit(tmp_path, SCRATCH_OK)[
        "trivial_margin"]
    failed = _scratch_audit(tmp_path, SCRATCH_OK.assign(passed=[False, True]))
    assert failed["measured_verdict"] == verdicts.INVALID and "positive control failed" in failed["measured_why"]
    missing = _scratch_audit(tmp_path, LM_OK)                  # the quality study's controls say nothing here
    assert missing["measured_verdict"] == verdicts.INVALID and "no scratch_lm controls" in missing["measured_why"]
    near = _scratch_audit(tmp_path, SCRATCH_OK, losses=(6.6, 6.8))      # 3-6% below the unigram 7
    assert near["measured_verdict"] == verdicts.NOT_TESTABLE
    assert "less than 10% better than a unigram model" in near["measured_why"]


def test_a_loss_ratio_reads_its_drift_floor_from_reruns_of_its_own_column(tmp_path):
    """A re-run of one long run (calibration/rerun_*/scratch_train.csv) gives the held-out loss ratio its drift
    floor, read from the measure's column (val_loss); a ratio inside the floor is no difference."""
    assert pd.isna(_scratch_audit(tmp_path, SCRATCH_OK)["drift_floor"])
    rerun = tmp_path / "calibration" / "rerun_abc"
    rerun.mkdir(parents=True)
    pd.DataFrame([{"arch": "orthros", "budget": "tokens", "seed": 42, "val_loss": 3.0 * 1.08}]).to_csv(
        rerun / "scratch_train.csv", index=False)
    row = _scratch_audit(tmp_path, SCRATCH_OK)
    assert row["drift_floor"] == pytest.approx(0.08) and row["measured_verdict"] == verdicts.NO_DIFFERENCE


def _domain_audit(tmp_path, code_gain: float) -> pd.Series:
    """C03's proxy as committed, on synthetic scratch_ppl.csv rows: per domain and position bucket, Orthros's loss
    below the Transformer's by 0.3 nats on prose and by ``code_gain`` on code, three paired seeds; the whole-split
    rows (domain all) say the opposite and must not count."""
    from suite.report.claims import load_claims

    rows = []
    for seed, shift in zip((42, 43, 44), (0.0, 0.01, -0.01)):
        for domain, gain in (("prose", 0.3), ("code", code_gain), ("all", -1.0)):
            for bucket, n_tokens, loss in (("<=128", 1000, 3.5), ("513-2048", 100, 2.0)):
                for arch, delta in (("orthros", -gain), ("transformer", 0.0)):
                    rows.append({"arch": arch, "budget": "tokens", "seed": seed, "domain": domain, "bucket": bucket,
                                 "pos_min": 2, "pos_max": 2048, "nll": loss + delta + shift, "n_tokens": n_tokens,
                                 "n_docs": 4, "n_params": 2.5e7, **PROV})
    pd.DataFrame(rows).to_csv(tmp_path / "scratch_ppl.csv", index=False)
    pd.DataFrame([{"arch": a, "budget": "tokens", "seed": s, "steps": 1526, "tokens": 1e8, "wall_s": 300.0,
                   "n_params": 2.5e7, "val_loss": 3.2, **PROV} for a in ("orthros", "transformer")
                  for s in (42, 43, 44)]).to_csv(tmp_path / "scratch_train.csv", index=False)
    claim = next(c for c in load_claims() if c["id"] == "C03")
    inputs = Inputs(None, tmp_path, None, SCRATCH_OK, stale=_current)
    return audit.audit_claims([claim], load_derived(), inputs=inputs).iloc[0]


def test_a_win_on_most_domains_needs_more_than_half_won_beyond_noise(tmp_path):
    from suite.report.claims import load_claims

    both = _domain_audit(tmp_path, code_gain=0.2)
    assert both["measured_verdict"] == verdicts.REPRODUCED and both["measured"] == 2
    assert "beyond noise on 2 of 2 with the claimed sign" in both["measured_why"]
    # each domain's loss is over all its scored tokens: (1000 x 3.5 + 100 x 2.0) / 1100, not the buckets' mean
    prose = (1000 * 3.2 + 100 * 1.7) / (1000 * 3.5 + 100 * 2.0)
    assert f"prose {prose:.4g}" in both["measured_why"]
    split = _domain_audit(tmp_path, code_gain=-0.2)                  # code: Orthros worse beyond noise
    assert split["measured_verdict"] == verdicts.NOT_REPRODUCED and split["measured"] == 1
    rows = pd.read_csv(tmp_path / "scratch_ppl.csv")
    rows = rows[(rows["domain"] != "code") | (rows["arch"] != "transformer")]  # code measured for Orthros alone
    rows.to_csv(tmp_path / "scratch_ppl.csv", index=False)
    claim = next(c for c in load_claims() if c["id"] == "C03")
    one_arm = audit.audit_claims([claim], load_derived(), inputs=Inputs(None, tmp_path, None, SCRATCH_OK,
                                                                         stale=_current)).iloc[0]
    assert one_arm["measured_verdict"] == verdicts.NOT_RUN and "domain code has rows of one arm only" in \
        one_arm["measured_why"]
    tie = _domain_audit(tmp_path, code_gain=0.0)                     # code: identical, one win of two
    assert tie["measured_verdict"] == verdicts.NO_DIFFERENCE
    assert "beyond noise on 1 of 2 with the claimed sign, 0 with the other" in tie["measured_why"]


def test_judge_wins_needs_a_noise_estimate_in_every_group():
    one = stats.Estimate(0.9, 1.0)
    est = stats.paired(pd.Series([0.9, 0.91, 0.89]), pd.Series([1.0, 1.0, 1.0]), "ratio")
    assert verdicts.judge_wins({"prose": est, "code": one}, direction="lower")[0] == verdicts.NOT_TESTABLE
    assert verdicts.judge_wins({"prose": est}, direction="lower", untestable=["tiny"])[:2] == (verdicts.NOT_TESTABLE,
                                                                                               None)
    assert verdicts.judge_wins({"prose": est}, direction="higher")[0] == verdicts.NOT_REPRODUCED


def test_a_folder_s_controls_are_its_controls_csv_and_the_from_scratch_study_s(tmp_path):
    from suite.report.measured import folder_controls, load_measured

    assert folder_controls(tmp_path) is None
    SCRATCH_OK.assign(**PROV).to_csv(tmp_path / "scratch_controls.csv", index=False)
    assert list(folder_controls(tmp_path)["experiment"]) == ["scratch_lm", "scratch_lm"]
    LM_OK.assign(**PROV).to_csv(tmp_path / "controls.csv", index=False)
    both = load_measured(None, tmp_path)["gpu_controls"]
    assert list(both["experiment"]) == ["lm", "lm", "scratch_lm", "scratch_lm"] and both["passed"].all()

def _grid(d64_transformer=0.3) -> pd.DataFrame:
    rows = []
    for size, params in (("d64", 1.6e5), ("d256", 1.9e6)):
        for arch, acc in (("transformer", d64_transformer if size == "d64" else 0.99), ("orthros", 0.9),
                          ("swa", 0.05), ("gla", 0.003)):
            rows.append({"arch": arch, "size": size, "n_params": params, "seq_len": 128, "num_kv_pairs": 8,
                         "train_kv": "8", "accuracy": acc, "accuracy_far": acc, "chance": 2 / 1024, "n_near": 1000,
                         "n_far": 3000, "num_test": 500, "window": 16, "status": "ok", "seed": 42, **PROV})
    return pd.DataFrame(rows)


def test_a_transformer_that_fails_its_control_at_a_size_voids_its_cells_there():
    flags = soundness.mqar_flags(_grid())
    assert ("mqar", "transformer", "d64") == flags[0][:3] and "0.3 vs >= 0.95" in flags[0][3]
    assert any(f[1] == "gla" and f[2] == "d256" and "never leaves chance" in f[3] for f in flags)
    assert soundness.mqar_size_voids(_grid(0.97)) == {}
    reported = pd.DataFrame(columns=["model", "variant", "scale", "task_label", "metric", "value", "unit"])
    table = recall_table(reported, None, None, paper_cond="", missing="x", gpu_mqar=_grid(),
                         flags={"gpu_mqar": flags}).set_index(["model", "task"])
    d64 = "MQAR accuracy (d64, T=128, 8 pairs) (gpu profile)"
    assert table.loc[("transformer", d64), "status"].startswith("invalid: Transformer misses its positive control")
    assert "no comparison with the Transformer" in table.loc[("orthros", d64), "status"]
    d256 = "MQAR accuracy (d256, T=128, 8 pairs) (gpu profile)"
    assert table.loc[("transformer", d256), "status"].startswith("measured only")
    assert "baseline flag: gla never leaves chance" in table.loc[("gla", d256), "status"]


def test_the_voided_transformer_is_not_drawn_in_the_mqar_figure(monkeypatch, tmp_path):
    from suite.experiments.mqar import figure

    shown = []
    monkeypatch.setattr(figure, "_save", lambda fig, out_dir, name: shown.append(fig) or [])
    table3 = pd.DataFrame(columns=["model", "task", "value"])
    figure.fig_mqar(_grid(), table3, tmp_path, "x", flags=soundness.mqar_flags(_grid()), profile="gpu")
    panels = {ax.get_title(): ax for ax in shown[0].axes if "T=" in ax.get_title()}
    small = [t for t in panels if t.startswith("d64")][0]
    assert "transformer" not in {line.get_label() for line in panels[small].get_lines()}
    assert any("misses its positive control" in " ".join(t.get_text().split()) for t in panels[small].texts)
    wide = [t for t in panels if t.startswith("d256")][0]
    assert "transformer" in {line.get_label() for line in panels[wide].get_lines()}


def test_paired_ci_matches_scipy():
    a = pd.Series([6.07, 6.23, 6.14], index=["42", "43", "44"])
    b = pd.Series([6.25, 6.45, 6.43], index=["42", "43", "44"])
    diff = stats.paired(a, b, "difference")
    ref = sps.ttest_rel(a, b).confidence_interval()
    assert diff.ci == pytest.approx((ref.low, ref.high)) and diff.value == pytest.approx((a - b).mean())
    ratio = stats.paired(a, b, "ratio")
    ref = sps.ttest_1samp(a / b, 1.0).confidence_interval()
    assert ratio.ci == pytest.approx((ref.low, ref.high))
    se = (a / b).std(ddof=1) / math.sqrt(3)                   # MDE by hand: (t_0.975 + t_0.80) x SE, 2 df
    assert ratio.mde == pytest.approx((4.302653 + 1.060660) * se, rel=1e-5)
    assert ratio.beyond() is True and ratio.beyond(floor=0.05) is False        # 3.6% is below a 5% drift floor
    shuffled = stats.paired(a, b.rename(index={"42": "43", "43": "42"}), "difference")   # pairs follow the key
    assert shuffled.value == pytest.approx((a - b).mean()) and shuffled.ci != diff.ci


def test_unpaired_and_binomial_estimates():
    a, b = np.array([1.0, 1.2, 1.1]), np.array([2.0, 2.4])
    est = stats.unpaired(a, b, "difference")
    ref = sps.ttest_ind(a, b, equal_var=False).confidence_interval()
    assert est.ci == pytest.approx((ref.low, ref.high))
    assert stats.paired(pd.Series([1.0], index=["42"]), pd.Series([2.0], index=["42"]), "ratio").se is None
    cells = stats.binomial([0.9, 0.8], [1000, 500], [0.7, 0.6], [1000, 500])
    var = (0.9 * 0.1 / 1000 + 0.7 * 0.3 / 1000 + 0.8 * 0.2 / 500 + 0.6 * 0.4 / 500) / 4
    assert cells.value == pytest.approx(0.2) and cells.se == pytest.approx(math.sqrt(var))
    assert cells.ci[0] == pytest.approx(0.2 - 1.959964 * math.sqrt(var), rel=1e-6)


def test_the_drift_floor_is_the_largest_spread_of_a_rerun_cell():
    run = _ppl(0.1)
    again = run.assign(value=run["value"] * np.where(run["arch"] == "orthros", 1.03, 1.0))
    found = drift({"committed": run, "rerun_x": again})
    assert found.floor == pytest.approx(0.03) and found.cells == 6 and "3% (largest spread of 6 cells" in found.text()
    assert drift({"committed": run}).floor is None
    # a pretrained arm's rows have no size: its cell is still one cell, of the column the measure reads
    train = pd.DataFrame({"arch": ["conversion", "base_cpt"], "size": [np.nan, np.nan], "seed": [43, 43],
                          "val_loss": [1.70, 1.67]})
    rerun = train.iloc[:1].assign(val_loss=1.6966)
    found = drift({"committed": train, "rerun_x": rerun}, "val_loss")
    assert found.cells == 1 and found.floor == pytest.approx(1.70 / 1.6966 - 1)


def test_rows_that_contradict_each_other_are_flagged():
    e2e = pd.DataFrame([{"arch": a, "batch": 2, "input_len": 131072, "ttft_s": t, "status": "ok"}
                        for a, t in (("orthros", 6.2), ("linear_hybrid", 11.4))])
    prefill = pd.DataFrame([{"arch": a, "gpus": 1, "method": "full-model", "seq_len": 131072, "ms": ms,
                             "status": "ok", "commit": "c1"}
                            for a, ms in (("orthros", 3030), ("linear_hybrid", 12993))])
    found = soundness.batch_contradictions(e2e, prefill)
    assert list(found) == ["linear_hybrid"] and "0.44 x batch x prefill" in found["linear_hybrid"]


def test_rows_older_than_the_code_they_ran_read_stale():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    root = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                          text=True).stdout.split()[0]
    assert staleness.staleness([head[:7]], ["orthros"], trained=True) == "current"
    old = staleness.staleness([root[:12]], ["orthros"], trained=True)
    assert old.startswith(f"stale: rows at {root[:12]} predate") and "suite/train/optim.py" in old
    assert staleness.staleness(["0123abc"], ["orthros"], trained=True).startswith("commit unknown")
    assert {"baselines/linear.py", "baselines/fla_mixers.py"} <= set(staleness.code_paths(["gdn"], trained=False))
    assert staleness.code_paths(["orthros"], trained=False) == ("models/",)


def test_the_readme_and_the_audit_print_the_same_counts(tmp_path):
    table = audit.audit_claims([_claim()], load_derived(), inputs=Inputs(tmp_path, None, LM_OK, None,
                                                                          stale=_current))
    lines = verdicts.count_lines(table)
    md = audit.audit_markdown(table, load_derived())
    block = findings.findings_markdown(table)
    for line in lines:
        assert f"- {line}" in md
        assert " ".join(line.split()) in " ".join(block.replace("- ", " ").split())
    committed = pd.read_csv(ROOT / "paper_tables" / "claims_audit.csv")
    readme = " ".join((ROOT / "README.md").read_text().replace("- ", " ").split())
    for line in verdicts.count_lines(committed):
        assert f"- {line}" in (ROOT / "paper_tables" / "claims_audit.md").read_text()
        assert " ".join(line.split()) in readme


def test_the_deciding_evidence_is_the_first_decisive_one():
    assert verdicts.pick([verdicts.INVALID, verdicts.NOT_REPRODUCED, verdicts.REPRODUCED]) == 1
    assert verdicts.pick([verdicts.NOT_RUN, verdicts.INVALID, verdicts.NOT_TESTABLE]) == 2
    assert verdicts.pick([verdicts.NOT_RUN, verdicts.NOT_RUN]) == 0


def test_a_benchmark_difference_adds_the_document_sample_to_the_seeds():
    from suite.report.bench_audit import difference
    from tests.test_controls import bench_rows

    a = bench_rows("arch", "orthros", lambda t: 0.6, n=100, seeds=(42, 43), tasks=["piqa"])
    b = bench_rows("arch", "transformer", lambda t: 0.5, n=100, seeds=(42, 43), tasks=["piqa"])
    a.loc[a["seed"] == 43, "value"] = 0.62
    est = difference(a, b)
    docs = 100 * math.sqrt(a["stderr"].mean() ** 2 + b["stderr"].mean() ** 2)
    assert est.value == pytest.approx(11.0) and est.se == pytest.approx(math.sqrt(1.0 ** 2 + docs ** 2))
    assert ctl.table_metric("piqa") == "acc"


def _table2_audit(tmp_path, n: int, gain: float) -> pd.Series:
    """A Table 2-like claim (+0.26 points at 8B) judged on the tasks whose benchmark controls pass: Base is at chance
    on WinoGrande, so that task is left out; the arms' size is empty, as a pretrained arm's is."""
    from tests.test_controls import CHANCE, T1, bench_rows, pretrained_fixture

    base = pretrained_fixture()
    arms = [bench_rows("variant", arm, lambda t, v=v: CHANCE[t] + v, n=n, seeds=(42,), size="")
            for arm, v in (("base_cpt", 0.15), ("conversion", 0.15 + gain))]
    rows = pd.concat([base, *arms]).assign(base_model="SmolLM2-135M", base_n_params=1.345e8, tokens_extra=5e7)
    rows.to_csv(tmp_path / "pretrained.csv", index=False)
    controls = pd.DataFrame(ctl.benchmark_controls(base))
    block = {"results": "{gpu}/pretrained.csv", "key": "variant", "op": "difference", "numerator": "conversion",
             "denominator": "base_cpt", "tasks": T1, "direction": "higher", "controlled_tasks_only": True}
    claim = {"id": "C98", "asserted_by": "paper", "claim": "Conversion beats Base CPT.", "value": 0.26,
             "unit": "accuracy points", "source": "test", "conditions": {"scale": "8B"},
             "evidence": [{"kind": "proxy", "describe": "the tasks whose controls pass", "benchmark": block}]}
    inputs = Inputs(None, tmp_path, None, controls, stale=_current)
    return audit.audit_claims([claim], load_derived(), inputs=inputs).iloc[0]


def test_a_benchmark_claim_on_the_tasks_whose_controls_pass(tmp_path):
    """The tasks whose controls fail are left out and named, the rest judged; a claimed 0.26-point gap is not
    testable where the measurement can only detect several points, and a large measured gap is judged as usual."""
    small = _table2_audit(tmp_path, n=500, gain=0.0)
    assert small["measured_verdict"] == verdicts.NOT_TESTABLE
    assert "left out, their controls failing: winogrande" in small["measured_why"]
    assert "(8B) is +0.26 accuracy points, below the" in small["measured_why"]
    assert "0 of 12 (model, task, size) cells at chance" in small["measured_why"]  # empty sizes are counted
    assert "6-task zero-shot mean" in small["measured_unit"]
    large = _table2_audit(tmp_path, n=100_000, gain=-0.05)
    assert large["measured_verdict"] == verdicts.NOT_REPRODUCED
