"""suite.collect: 'not run' rows for archs a profile leaves out."""
import pandas as pd

from suite.collect import concat


def test_not_run_rows_cover_every_cell_and_carry_the_shared_provenance(tmp_path):
    rows = [{"arch": "transformer", "context_len": n, "depth": d, "accuracy": 1.0, "status": "ok", "commit": "abc",
             "profile": "gpu", "device": "NVIDIA H200", "dtype": "bfloat16", "backend": "sdpa-flash"}
            for n in (4096, 8192) for d in (0.0, 1.0)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    out = concat([str(tmp_path / "t.csv")], {"gdn": "not run: cut by the cap"})
    gdn = out[out["arch"] == "gdn"]
    assert len(gdn) == 4 and set(zip(gdn["context_len"], gdn["depth"])) == {(4096, 0.0), (4096, 1.0), (8192, 0.0),
                                                                           (8192, 1.0)}
    assert (gdn["status"] == "not run: cut by the cap").all() and gdn["accuracy"].isna().all()
    assert (gdn[["commit", "profile", "device", "dtype"]].values == ["abc", "gpu", "NVIDIA H200", "bfloat16"]).all()
    assert gdn["backend"].isna().all()  # no kernel ran for it


def test_a_continued_runs_tokens_count_the_base_runs_too(tmp_path):
    """base_cpt and conversion continue the base run: Table 2 read '51.2K tokens, 51.2K tokens extra' for a model
    that had seen 143K + 51.2K (a new user's report)."""
    from suite.experiments.conversion.collect import conversion

    evals, metrics = [], []
    for variant, tokens in [("base", 143360), ("base_cpt", 51200), ("conversion", 51200)]:
        pd.DataFrame([{"task": "val_ppl", "metric": "byte_perplexity", "value": 3.0, "status": "ok"}]).to_csv(
            tmp_path / f"{variant}_eval.csv", index=False)
        pd.DataFrame([{"n_params": 1000, "tokens": tokens, "seq_len": 256}]).to_csv(
            tmp_path / f"{variant}_metrics.csv", index=False)
        evals.append(str(tmp_path / f"{variant}_eval.csv"))
        metrics.append(str(tmp_path / f"{variant}_metrics.csv"))
    out = conversion(evals, metrics, ["base", "base_cpt", "conversion"]).set_index("variant")
    assert out["tokens"].to_dict() == {"base": 143360, "base_cpt": 143360 + 51200, "conversion": 143360 + 51200}
    assert out["tokens_extra"].to_dict() == {"base": 0, "base_cpt": 51200, "conversion": 51200}


def test_a_runs_training_loss_row_keeps_the_library_versions(tmp_path):
    """quality.csv: the train_val_loss row of a run carries its provenance, library versions included, as its lm-eval
    rows do."""
    from suite.collect import quality

    prov = {"commit": "abc", "profile": "default", "device": "cpu", "backend": "torch", "dtype": "float32",
            "seed": 0, "wall_s": 1.0, "torch": "2.13.0", "transformers": "5.25.0", "fla": "0.6.0"}
    run = {"arch": "orthros", "size": "1M", "seed": 0}
    pd.DataFrame([run | {"task": "val_ppl", "metric": "byte_perplexity", "value": 3.0, "status": "ok"} | prov]).to_csv(
        tmp_path / "eval.csv", index=False)
    pd.DataFrame([run | {"n_params": 1000, "tokens": 2048, "seq_len": 64, "val_loss": 1.5} | prov]).to_csv(
        tmp_path / "metrics.csv", index=False)
    out = quality([str(tmp_path / "eval.csv")], [str(tmp_path / "metrics.csv")]).set_index("task")
    assert out.loc["train_val_loss", "value"] == 1.5
    assert out.loc["train_val_loss", ["torch", "transformers", "fla"]].tolist() == ["2.13.0", "5.25.0", "0.6.0"]
