"""Benchmark accuracies compared per document (docs/verdicts.md, Statistics) on synthetic per-document rows:
McNemar and the paired bootstrap against scipy.stats and hand computations, the pairs file suite.collect writes from
the harness's per-document CSVs, and their use in the audit's benchmark evidence and in Table 2's arm comparisons,
with the labelled unpaired fallback where no per-document rows exist."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from suite import collect
from suite.eval.harness import DOC_COLUMNS
from suite.provenance import write_csv
from suite.report import audit, documents, stats, verdicts
from suite.report.bench_audit import difference
from suite.report.derived import load_derived
from suite.report.evidence import Inputs
from tests.test_verdicts import LM_OK, PROV, _current


def _bench_controls(*tasks: str) -> pd.DataFrame:
    """Benchmark controls that passed (zero-shot) for ``tasks``."""
    return pd.DataFrame([{"experiment": f"bench:{t}:0shot", "control": c, "arch": "base", "value": 0.7,
                          "threshold": "", "passed": True} for t in tasks for c in ("positive", "negative")])


def test_mcnemar_exact_below_25_discordant_documents_matches_scipy():
    a = np.array([1] * 9 + [0] * 2 + [1] * 40 + [0] * 49)       # 9 documents only a gets right, 2 only b
    b = np.array([0] * 9 + [1] * 2 + [1] * 40 + [0] * 49)
    est = stats.mcnemar(a, b)
    test = sps.binomtest(9, 11, 0.5)
    lo, hi = test.proportion_ci(0.95, method="exact")
    assert est.value == pytest.approx(0.07)
    assert est.ci == pytest.approx(((2 * lo - 1) * 11 / 100, (2 * hi - 1) * 11 / 100))   # given 11 discordant
    assert f"p {test.pvalue:.3g}" in est.method and "exact binomial, 9 vs 2 discordant of 100" in est.method
    assert est.beyond() is False and test.pvalue > 0.05                    # p 0.065: no difference detected
    assert stats.mcnemar(np.r_[np.ones(10), np.zeros(90)], np.zeros(100)).beyond() is True    # 10 vs 0: p 0.002
    assert est.mde == pytest.approx((1.959964 + 0.841621) * math.sqrt(11) / 100, rel=1e-5)  # McNemar's power


def test_mcnemar_asymptotic_interval_is_the_test():
    """From 25 discordant documents on: z = (n10 - n01) / sqrt(n10 + n01); the CI excludes 0 exactly when the
    chi-square test rejects, for every split of the discordant documents."""
    for n10 in range(0, 41):
        n01 = 40 - n10
        a = np.r_[np.ones(n10), np.zeros(n01), np.ones(30), np.zeros(130)]
        b = np.r_[np.zeros(n10), np.ones(n01), np.ones(30), np.zeros(130)]
        est = stats.mcnemar(a, b)
        chi2 = (n10 - n01) ** 2 / 40
        p = sps.chi2.sf(chi2, 1)
        assert est.value == pytest.approx((n10 - n01) / 200) and f"p {p:.3g}" in est.method
        assert est.beyond() is bool(p < 0.05)
    same = stats.mcnemar(np.ones(5), np.ones(5))
    assert same.ci == (0.0, 0.0) and "no discordant document of 5" in same.method
    # no discordant document says nothing about the power: the MDE is the smallest difference McNemar finds when
    # every discordant document favours one arm, (z_0.975 + z_0.80)^2 / n, never 0
    k = sps.norm.ppf(0.975) + sps.norm.ppf(0.80)
    assert same.mde == pytest.approx(k * k / 5)
    few = stats.mcnemar(np.r_[1.0, np.zeros(99)], np.zeros(100))
    assert few.mde == pytest.approx(k * k / 100) and few.beyond() is False
    flat = stats.paired_bootstrap([np.zeros(30), np.zeros(20)])  # the same floor for the bootstrap
    assert flat.mde == pytest.approx(k * k / 50) and flat.ci == (0.0, 0.0)
    with pytest.raises(ValueError, match="0/1 outcomes"):
        stats.mcnemar(np.array([0.5, 1]), np.array([1, 1]))
    with pytest.raises(ValueError, match="same documents"):
        stats.mcnemar(np.ones(3), np.ones(4))


def test_paired_bootstrap_matches_a_hand_bootstrap_and_the_normal_interval():
    rng = np.random.default_rng(3)
    d1 = rng.choice([-1.0, 0.0, 1.0], size=4000, p=[0.1, 0.75, 0.15])
    d2 = rng.choice([-1.0, 0.0, 1.0], size=600, p=[0.2, 0.6, 0.2])
    est = stats.paired_bootstrap([d1, d2], strata="tasks")
    assert est.value == pytest.approx((d1.mean() + d2.mean()) / 2) and "in 2 tasks" in est.method
    hand = np.random.default_rng(11)                  # a bootstrap written out: each task's documents apart
    means = [(d1[hand.integers(0, len(d1), len(d1))].mean() + d2[hand.integers(0, len(d2), len(d2))].mean()) / 2
             for _ in range(4000)]
    assert est.se == pytest.approx(np.std(means), rel=0.05)
    assert est.ci == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), abs=0.004)
    normal = math.sqrt(d1.var(ddof=1) / len(d1) + d2.var(ddof=1) / len(d2)) / 2   # the stratified mean's SE
    assert est.se == pytest.approx(normal, rel=0.05)
    one = stats.paired_bootstrap([d1])
    ref = sps.bootstrap((d1,), np.mean, method="percentile", n_resamples=9999, rng=np.random.default_rng(0))
    assert one.ci == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=0.002)
    assert stats.paired_bootstrap([np.zeros(4), np.full(3, 0.5)]).ci == (0.25, 0.25)
    with pytest.raises(ValueError, match="none empty"):
        stats.paired_bootstrap([d1, np.array([])])


def _outcomes(seed: int, n: int, p: float, shared: np.ndarray, flip: float) -> np.ndarray:
    """0/1 outcomes of one arm and seed: the documents' shared difficulty ``shared`` (what pairing removes), each
    outcome flipped with probability ``flip``, then shifted to accuracy ~``p``."""
    rng = np.random.default_rng(seed)
    out = (shared < p).astype(float)
    flips = rng.random(n) < flip
    return np.where(flips, 1 - out, out)


def _arms(tmp_path, key="arch", gain=0.05, seeds=(42, 43), tasks=("piqa", "arc_easy"), n=400, size="1M"):
    """Per-task rows and per-document CSVs of two arms on the same documents, and the pairs file collected from
    those CSVs. The arms share each document's difficulty, so their outcomes agree on most documents."""
    rows, paths = [], []
    for t, task in enumerate(tasks):
        shared = np.random.default_rng(100 + t).random(n)
        metric = "acc_norm" if task in ("arc_challenge", "hellaswag") else "acc"
        for arm, p in (("orthros", 0.6 + gain), ("transformer", 0.6)):
            for seed in seeds:
                values = _outcomes(seed + 7 * t + (arm == "orthros"), n, p, shared, 0.01)
                docs = pd.DataFrame({"arch": arm, "size": size, "seed": seed, "task": task, "num_fewshot": 0,
                                     "lm_eval_task": f"local_{task}", "doc_id": range(n),
                                     "doc_hash": [f"h{t}-{i}" for i in range(n)], "metric": metric, "value": values,
                                     "commit": "abc", "profile": "test"})[DOC_COLUMNS]
                paths.append(write_csv(docs, tmp_path / f"{arm}_{seed}_{task}_docs.csv"))
                v = values.mean()
                rows.append({key: arm, "arch": arm, "size": size, "task": task, "metric": metric, "num_fewshot": 0,
                             "value": v, "stderr": math.sqrt(v * (1 - v) / (n - 1)), "n_samples": n, "unit": "fraction",
                             "chance": 0.5 if task == "piqa" else 0.25, "status": "ok", "n_params": 1e6,
                             "split": "validation", **{**PROV, "seed": seed}})
    frame = pd.DataFrame(rows)
    pairs = collect.pairs([str(p) for p in paths], key)
    return frame, pairs


def test_collect_pairs_counts_the_documents_by_each_arms_summed_score(tmp_path):
    frame, pairs = _arms(tmp_path, seeds=(42, 43), tasks=("piqa",), n=50)
    assert set(pairs["arm_a"]) == {"orthros"} and set(pairs["arm_b"]) == {"transformer"}
    assert (pairs["seeds_a"] == "42/43").all() and pairs["count"].sum() == 50 and (pairs["n_docs"] == 50).all()
    assert set(pairs["sum_a"]) <= {0, 1, 2} and len(pairs) <= 9
    mean_a = (pairs["count"] * pairs["sum_a"]).sum() / 100
    assert mean_a == pytest.approx(frame[frame["arch"] == "orthros"]["value"].mean())


def test_collect_pairs_refuses_documents_that_differ(tmp_path):
    docs = pd.DataFrame({"arch": "orthros", "size": "1M", "seed": 42, "task": "piqa", "num_fewshot": 0,
                         "lm_eval_task": "local_piqa", "doc_id": [0, 1], "doc_hash": ["x", "y"], "metric": "acc",
                         "value": [1, 0], "commit": "abc", "profile": "test"})
    a = write_csv(docs, tmp_path / "a_docs.csv")
    b = write_csv(docs.assign(arch="transformer", doc_hash=["x", "z"]), tmp_path / "b_docs.csv")
    with pytest.raises(ValueError, match="orthros and transformer scored different piqa documents"):
        collect.pairs([str(a), str(b)])
    with pytest.raises(ValueError, match="scored piqa document local_piqa/0 twice"):
        collect.pairs([str(a), str(a)])
    c = write_csv(docs.assign(seed=43, doc_id=[0, 2]), tmp_path / "c_docs.csv")
    with pytest.raises(ValueError, match="the seeds of orthros scored different piqa documents"):
        collect.pairs([str(a), str(c)])
    empty = write_csv(pd.DataFrame(columns=DOC_COLUMNS), tmp_path / "e_docs.csv")
    assert list(collect.pairs([str(empty)]).columns) == collect.PAIR_COLUMNS
    out = tmp_path / "pairs.csv"
    collect.main(["pairs", "--inputs", str(a), "--out", str(out)])  # one arm: no pair
    assert documents.read_pairs(out).empty and documents.read_pairs(tmp_path / "none.csv") is None


def test_one_task_one_seed_is_mcnemar_and_detects_what_the_unpaired_bound_cannot(tmp_path):
    frame, pairs = _arms(tmp_path, gain=0.05, seeds=(42,), tasks=("piqa",))
    a, b = (frame[frame["arch"] == arm] for arm in ("orthros", "transformer"))
    est = difference(a, b, pairs, "quality_pairs.csv")
    flat = pairs.loc[pairs.index.repeat(pairs["count"])]
    ref = stats.mcnemar(flat["sum_a"].to_numpy(), flat["sum_b"].to_numpy())
    assert est.value == pytest.approx(100 * ref.value) and est.ci == pytest.approx(tuple(100 * x for x in ref.ci))
    assert est.method.startswith("McNemar") and "1 vs 1 seeds, 1 shared: training variance not in it" in est.method
    unpaired = difference(a, b)
    assert "unpaired bound: no per-document rows ( missing)" in unpaired.method
    assert est.beyond() is True and unpaired.beyond() is False       # the documents' shared difficulty cancels
    assert est.mde < unpaired.mde / 2


def test_several_tasks_and_seeds_add_the_seeds_to_the_paired_bootstrap(tmp_path):
    frame, pairs = _arms(tmp_path, seeds=(42, 43, 44))
    a, b = (frame[frame["arch"] == arm] for arm in ("orthros", "transformer"))
    est = difference(a, b, pairs, "quality_pairs.csv")
    seeds = stats.paired(*(100 * g.groupby("seed")["value"].mean() for g in (a, b)), "difference", "seeds")
    docs, _ = documents.difference(pairs, a, b, "quality_pairs.csv")
    assert docs.method.startswith("paired bootstrap over 800 documents in 2 tasks")
    assert est.value == pytest.approx(seeds.value) and docs.value == pytest.approx(seeds.value)
    assert est.se == pytest.approx(math.sqrt(seeds.se ** 2 + docs.se ** 2))
    assert est.method.startswith("paired t over 3 seeds + document-sample SE") and "paired bootstrap" in est.method
    swapped = difference(b, a, pairs, "quality_pairs.csv")       # the file's arm order does not matter
    assert swapped.value == pytest.approx(-est.value) and swapped.se == pytest.approx(est.se, rel=0.05)


def test_pairs_from_other_runs_are_refused(tmp_path):
    frame, pairs = _arms(tmp_path, seeds=(42,), tasks=("piqa",))
    a, b = (frame[frame["arch"] == arm] for arm in ("orthros", "transformer"))
    with pytest.raises(ValueError, match="orthros's piqa documents average .*, its rows .*; collect the pairs"):
        difference(a.assign(value=a["value"] + 0.01), b, pairs, "quality_pairs.csv")
    with pytest.raises(ValueError, match="scored by seeds 42, its rows by seeds 7"):
        difference(a.assign(seed=7), b.assign(seed=7), pairs, "quality_pairs.csv")
    est = difference(a.assign(task="arc_easy"), b.assign(task="arc_easy"), pairs, "q_pairs.csv")
    assert "unpaired bound: no per-document rows of orthros vs transformer on arc_easy in q_pairs.csv" in est.method


def test_an_arms_seeds_without_documents_leave_the_documents_of_the_others(tmp_path):
    """A seed scored before per-document outcomes were kept has rows but no documents: the per-document comparison
    reads the seeds whose documents both arms have, and says so; a seed of the pairs without rows is refused."""
    frame, pairs = _arms(tmp_path, seeds=(43,), tasks=("piqa",))
    a, b = (frame[frame["arch"] == arm] for arm in ("orthros", "transformer"))
    alone, _ = documents.difference(pairs, a, b, "quality_pairs.csv")
    older = a.assign(seed=42, value=a["value"] - 0.1)  # seed 42 of orthros: rows only
    both, _ = documents.difference(pairs, pd.concat([a, older]), b, "quality_pairs.csv")
    assert both.value == pytest.approx(alone.value) and both.ci == pytest.approx(alone.ci)
    assert both.method.endswith("documents of seeds 43 of orthros's 42/43") and "documents of" not in alone.method
    with pytest.raises(ValueError, match="scored by seeds 43, its rows by seeds 42"):
        documents.difference(pairs, older, b, "quality_pairs.csv")


def test_the_audit_compares_benchmark_evidence_per_document(tmp_path):
    """A benchmark claim with the pairs file beside quality.csv: paired per document (reproduced); without it the
    labelled unpaired bound (no difference detected on the same rows). The claimed gap, 10 points, is above what
    either can detect (a smaller one would be not testable at this scale, docs/verdicts.md)."""
    frame, pairs = _arms(tmp_path, gain=0.05, seeds=(42,), tasks=("piqa",), n=600)
    frame.to_csv(tmp_path / "quality.csv", index=False)
    write_csv(pairs, tmp_path / "quality_pairs.csv")
    controls = pd.concat([LM_OK, _bench_controls("piqa")])
    claim = {"id": "C98", "asserted_by": "paper", "claim": "Orthros beats the Transformer.", "value": 10.0,
             "unit": "accuracy points", "source": "test", "conditions": {"scale": "1.3B"},
             "evidence": [{"kind": "proxy", "describe": "synthetic benchmark rows", "benchmark": {
                 "results": "{results}/quality.csv", "key": "arch", "op": "difference", "numerator": "orthros",
                 "denominator": "transformer", "tasks": ["piqa"], "direction": "higher"}}]}
    inputs = Inputs(tmp_path, None, controls, None, stale=_current)
    row = audit.audit_claims([claim], load_derived(), inputs=inputs).iloc[0]
    assert row["measured_verdict"] == verdicts.REPRODUCED, row["measured_why"]
    assert "McNemar" in row["measured_conditions"] and row["ci95_low"] > 0
    (tmp_path / "quality_pairs.csv").unlink()
    row = audit.audit_claims([claim], load_derived(), inputs=Inputs(tmp_path, None, controls, None,
                                                                    stale=_current)).iloc[0]
    assert row["measured_verdict"] == verdicts.NO_DIFFERENCE
    assert f"unpaired bound: no per-document rows ({tmp_path}/quality_pairs.csv missing)" in row["measured_conditions"]


def test_table2_compares_the_arms_per_task_and_per_document(tmp_path):
    from suite.experiments.conversion.table import table2_rows

    frame, pairs = _arms(tmp_path, key="variant", seeds=(42, 43, 44))
    frame["variant"] = frame["variant"].map({"orthros": "conversion", "transformer": "base_cpt"})
    pairs[["arm_a", "arm_b"]] = pairs[["arm_a", "arm_b"]].replace({"orthros": "conversion",
                                                                   "transformer": "base_cpt"})
    frame = frame.assign(base_model="Tiny", base_n_params=135e6, quantization="Q4_1", tokens_extra=6.6e6,
                         train_seq_len=2048)
    table = table2_rows(frame, _bench_controls("piqa"), pairs=pairs, where="pretrained_pairs.csv")
    cmp = table[table["variant"] == "conversion - base_cpt"].set_index("task")
    assert list(cmp.index) == ["ARC-E", "PIQA", "Avg (measured tasks)"]
    assert "+ document-sample SE" in cmp.loc["PIQA", "status"]
    assert "paired bootstrap over 400 documents" in cmp.loc["PIQA", "status"]
    assert "paired bootstrap over 800 documents in 2 tasks" in cmp.loc["Avg (measured tasks)", "status"]
    assert cmp.loc["ARC-E", "status"].startswith("no verdict")      # its benchmark controls not run: no verdict
    fallback = table2_rows(frame, None).set_index("task")
    assert "unpaired bound: no per-document rows (pretrained_pairs.csv missing)" in \
        fallback[fallback["variant"] == "conversion - base_cpt"].loc["Avg (measured tasks)", "status"]


def test_a_damaged_pairs_file_is_named(tmp_path):
    frame, pairs = _arms(tmp_path, seeds=(42,), tasks=("piqa",), n=20)
    write_csv(pairs.drop(columns=["count"]), tmp_path / "a_pairs.csv")
    with pytest.raises(ValueError, match=r"a_pairs.csv: missing column\(s\) \['count'\]"):
        documents.read_pairs(tmp_path / "a_pairs.csv")
    write_csv(pairs.assign(count="many"), tmp_path / "b_pairs.csv")
    with pytest.raises(ValueError, match="b_pairs.csv row 1: column 'count' holds 'many', not a number"):
        documents.read_pairs(tmp_path / "b_pairs.csv")
