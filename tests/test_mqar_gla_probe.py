"""The MQAR GLA probe: its runs' options (recipe.gla_probe_args), its DAG jobs and its table (gla_probe)."""
import pandas as pd
import pytest

from suite.experiments.mqar.gla_probe import probe_table, profile_rows
from suite.experiments.mqar.recipe import gla_probe_args
from tests.dag import dry_run, rule_counts
from tests.test_dag import parse_only, suite_commands

RECIPE = {"seq_lens": [128, 256], "num_kv_pairs": [8, 16, 32, 64], "train_kv": [[8], [16, 32, 64]], "window": 16,
          "vocab_size": 1024, "steps": 40, "batch_size": 4, "lr": 1e-3, "weight_decay": 0.1, "warmup": 2,
          "gla_probe": {"lrs": [3e-4, 1e-3], "seeds": [42, 43]}}


def test_probe_trains_the_control_cell_alone_and_labels_the_variant():
    conv = gla_probe_args(RECIPE, (128, 8), "gla_conv", 3e-4)
    assert conv[:6] == ["--arch", "gla", "--override", "gla_short_conv=true", "--label-arch", "gla_conv"]
    opts = dict(zip(conv[6::2], conv[7::2]))
    assert opts["--seq-len"] == "128" and opts["--train-kv"] == "8" and opts["--lr"] == "0.0003"
    assert opts["--kv-pairs"] == "8,16,32"  # the pair counts that fit T=128 (4 x pairs <= T)
    assert "--override" not in gla_probe_args(RECIPE, (128, 8), "gla", 1e-3)
    with pytest.raises(ValueError, match="'retnet'"):
        gla_probe_args(RECIPE, (128, 8), "retnet", 1e-3)


def _rows(variant, lr, values, cell=(64, 4)):
    return [dict(arch=variant, lr=lr, seed=seed, seq_len=cell[0], num_kv_pairs=kv, train_kv=str(cell[1]),
                 accuracy=acc if kv == cell[1] else acc / 2, chance=1 / 128, final_train_loss=3.0, status="ok",
                 n_params=2.7e5, steps=500, num_test=300, commit="abc")
            for seed, acc in values.items() for kv in (2, 4, 8)]


def _probe(conv_best=(0.50, 0.53)):
    rows = (_rows("gla", 3e-4, {42: 0.12, 43: 0.13}) + _rows("gla", 1e-3, {42: 0.18, 43: 0.20})
            + _rows("gla", 3e-3, {42: 0.03, 43: 0.02}) + _rows("gla_conv", 3e-4, {42: 0.15, 43: 0.14})
            + _rows("gla_conv", 1e-3, dict(zip((42, 43), conv_best)))
            + _rows("gla_conv", 3e-3, {42: 0.02, 43: 0.03}))
    return pd.DataFrame(rows)


def test_each_variant_at_its_best_rate_and_the_paired_difference():
    mqar = pd.DataFrame(_rows("transformer", 1e-3, {42: 0.99}) + _rows("gla", 1e-3, {42: 0.18}))
    t = profile_rows(_probe(), mqar, "default", "missing")
    rates = t[t["row"] == "rate"]
    assert list(rates.loc[rates["best"] == "best", "lr"]) == [1e-3, 1e-3]
    conv = rates[(rates["variant"] == "gla_conv") & (rates["lr"] == 1e-3)].iloc[0]
    assert conv["accuracy"] == pytest.approx(0.515) and conv["per_seed"] == "42:0.500 43:0.530"
    assert "seeds 42/43" in conv["conditions"] and "commit abc" in conv["conditions"]
    comparison = t[t["row"] == "comparison"].iloc[0]
    assert comparison["accuracy"] == pytest.approx(0.325) and comparison["status"].startswith("differs: ")
    assert "paired t over 2 seeds" in comparison["status"]
    reference = t[t["row"] == "reference"].iloc[0]
    assert reference["variant"] == "transformer (mqar.csv)" and reference["accuracy"] == pytest.approx(0.99)


def test_an_inconsistent_gain_is_no_difference_and_a_best_rate_at_an_end_says_so():
    probe = _probe(conv_best=(0.60, 0.10))
    t = profile_rows(probe, None, "default", "missing")
    assert t[t["row"] == "comparison"]["status"].iloc[0].startswith("no difference detected")
    edge = profile_rows(probe[probe["lr"] != 3e-3], None, "default", "missing")
    assert set(edge.loc[edge["best"].astype(str).str.startswith("best"), "best"]) == {"best, edge"}


def test_missing_probe_and_failed_controls_are_said():
    t = probe_table([("gpu", None, None, "results/gpu/mqar_gla.csv missing", None),
                     ("default", _probe(), None, "", "invalid: mqar positive control failed")])
    assert t["status"].iloc[0] == "not run: results/gpu/mqar_gla.csv missing"
    assert set(t.loc[t["profile"] == "default", "status"]) == {"invalid: mqar positive control failed"}


@pytest.mark.slow
def test_dag_runs_every_variant_rate_and_seed_of_the_probe():
    counts = rule_counts(dry_run("-F", "--config", "profile=default", "--", "results/default/mqar_gla.csv"))
    assert counts["mqar_gla_probe"] == 12 and counts["collect_mqar_gla"] == 1


@pytest.mark.slow
def test_gpu_probe_runs_parse_at_the_control_cell_and_size():
    jobs = [j for j in dry_run("-F", "--config", "profile=gpu", "--", "results/gpu/mqar_gla.csv")
            if j.rule == "mqar_gla_probe"]
    assert len(jobs) == 2 * 3 * 3
    conv = next(j for j in jobs if j.wildcards["variant"] == "gla_conv")
    (module, argv), = suite_commands(conv.shell)
    args = parse_only(module, argv)
    assert (args.arch, args.label_arch, args.override, args.size, args.seq_len, args.train_kv) == (
        "gla", "gla_conv", ["gla_short_conv=true"], "d256", [128], [8])


def test_the_reference_is_the_grid_transformer_at_the_probe_cell_and_size():
    probe = _probe().assign(size="d256")
    grid = pd.DataFrame([dict(arch="transformer", size=size, seq_len=t, num_kv_pairs=kv, train_kv=train,
                              accuracy=acc, chance=1 / 512, status="ok", seed=42, lr=1e-3)
                         for size, t, kv, train, acc in (("d256", 64, 4, "4", 0.97), ("d64", 64, 4, "4", 0.5),
                                                         ("d256", 256, 16, "16+32", 0.8))])
    reference = profile_rows(probe, grid, "gpu", "")
    assert list(reference.loc[reference["row"] == "reference", "accuracy"]) == [0.97]
