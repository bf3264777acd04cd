"""The learning-rate pick of a sweep (suite.train.lr_pick) and the training CLI reading it back."""
import pandas as pd
import pytest

from suite.train import lr_pick


def run(arch, lr, val_loss):
    return {"arch": arch, "lr": lr, "val_loss": val_loss, "tokens": 100, "steps": 10, "seed": 42}


def test_pick_takes_the_lowest_held_out_loss_per_arm_and_ties_go_to_the_lower_rate(tmp_path):
    rows = [run("base_cpt", 3e-4, 2.1), run("base_cpt", 1e-4, 2.0), run("base_cpt", 3e-5, 2.05),
            run("conversion", 3e-4, 2.2), run("conversion", 1e-4, 2.2), run("conversion", 3e-5, 2.3)]
    out = lr_pick.pick(rows)
    picked = {r["arch"]: r["lr"] for r in out if r["picked"]}
    assert picked == {"base_cpt": 1e-4, "conversion": 1e-4}
    assert len(out) == 6 and all(r["rule"] == lr_pick.RULE for r in out)
    path = tmp_path / "pick.csv"
    lr_pick.main(["--runs", *[_metrics(tmp_path, i, r) for i, r in enumerate(rows)], "--out", str(path)])
    assert lr_pick.picked_lr(path, "conversion") == 1e-4 and lr_pick.picked_lr(path, "base_cpt") == 1e-4
    with pytest.raises(ValueError, match=r"0 picked rates for 'other'"):
        lr_pick.picked_lr(path, "other")


def _metrics(folder, i, row):
    path = folder / f"run{i}" / "metrics.csv"
    path.parent.mkdir()
    pd.DataFrame([row]).to_csv(path, index=False)
    return str(path)


def test_pick_refuses_runs_it_cannot_compare():
    with pytest.raises(ValueError, match=r"val_loss is nan"):
        lr_pick.pick([run("a", 1e-4, float("nan")), run("a", 3e-4, 2.0)])
    with pytest.raises(ValueError, match="two runs at one rate"):
        lr_pick.pick([run("a", 1e-4, 2.1), run("a", 1e-4, 2.0)])
    with pytest.raises(ValueError, match=r"no \['val_loss'\]"):
        lr_pick.pick([{k: v for k, v in run("a", 1e-4, 2.0).items() if k != "val_loss"}])


def test_training_cli_takes_lr_or_lr_from(data_dir, tmp_path, capsys):
    from suite.train.run import main

    pick = tmp_path / "pick.csv"
    pd.DataFrame([{**run("llama", 1e-3, 2.0), "picked": True}]).to_csv(pick, index=False)
    common = ["--data-dir", str(data_dir), "--out-dir", str(tmp_path / "o"), "--arch", "transformer", "--size",
              "0.5M", "--steps", "2", "--batch-size", "2", "--seq-len", "32"]
    with pytest.raises(SystemExit):
        main([*common, "--lr", "1e-3", "--lr-from", str(pick)])
    assert "give --lr or --lr-from, not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*common, "--lr-from", str(pick)])
    assert "0 picked rates for 'transformer'" in capsys.readouterr().err


def test_a_pick_at_an_end_of_the_range_is_refused_and_a_diverged_run_bounds_it(tmp_path):
    """Both arms best at the highest rate swept: the pick file says so and the long runs refuse it; once a higher
    rate was swept (here: it diverged, so it bounds the range) the same best rate is interior and is taken."""
    rows = [run("base_cpt", 1e-4, 2.0), run("base_cpt", 3e-4, 1.9)]
    out = lr_pick.pick(rows)
    assert [r["edge"] for r in out if r["picked"]] == ["highest swept rate"]
    path = tmp_path / "pick.csv"
    pd.DataFrame(out).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"picked lr 0.0003 for 'base_cpt', its highest swept rate: .*extend"):
        lr_pick.picked_lr(path, "base_cpt")
    diverged = {**run("base_cpt", 1e-3, float("nan")), "status": "diverged: the loss is nan at step 40 of 150"}
    out = lr_pick.pick(rows + [diverged])
    assert [(r["lr"], r["picked"], r["edge"], r["status"][:8]) for r in out] == [
        (1e-4, False, "", "ok"), (3e-4, True, "", "ok"), (1e-3, False, "", "diverged")]
    pd.DataFrame(out).to_csv(path, index=False)
    assert lr_pick.picked_lr(path, "base_cpt") == 3e-4
    with pytest.raises(ValueError, match="every swept run of base_cpt diverged"):
        lr_pick.pick([diverged])


def test_a_diverging_run_is_recorded_with_record_divergence(data_dir, tmp_path, capsys):
    """--record-divergence: a rate at which the loss turns non-finite leaves a metrics row whose status says so, and
    exits 0; without it the run stops with the error."""
    from suite.train.run import main

    common = ["--data-dir", str(data_dir), "--arch", "transformer", "--size", "0.5M", "--steps", "3",
              "--batch-size", "2", "--seq-len", "32", "--lr", "1e6", "--warmup", "0", "--no-progress"]
    main([*common, "--out-dir", str(tmp_path / "rec"), "--record-divergence"])
    row = pd.read_csv(tmp_path / "rec" / "metrics.csv").iloc[0]
    assert row["status"].startswith("diverged: ") and pd.isna(row["val_loss"]) and row["lr"] == 1e6
    assert (tmp_path / "rec" / "loss.csv").exists()
    from suite.train.loop import TrainingDivergedError

    with pytest.raises(TrainingDivergedError):
        main([*common, "--out-dir", str(tmp_path / "stop")])


def test_an_extended_sweep_lists_each_archs_rates_in_run_order_and_judges_ends_over_all_of_them():
    """lr_sweep.extend adds rates past an end for some archs: their runs go on from lr3 (the first runs keep their
    names) and a pick is at an end only of the arch's whole range, lrs and extend together."""
    sweep = {"lrs": [1e-3, 2e-3, 4e-3], "extend": {"orthros": [5e-4, 2.5e-4]}}
    assert lr_pick.sweep_rates(sweep, "orthros") == [1e-3, 2e-3, 4e-3, 5e-4, 2.5e-4]
    assert lr_pick.sweep_rates(sweep, "gdn") == [1e-3, 2e-3, 4e-3]
    losses = {1e-3: 4.53, 2e-3: 4.67, 4e-3: 4.95, 5e-4: 4.50, 2.5e-4: 4.60}
    out = lr_pick.pick([run("orthros", lr, loss) for lr, loss in losses.items()])
    assert [(r["lr"], r["edge"]) for r in out if r["picked"]] == [(5e-4, "")]
    assert [r["lr"] for r in out] == sorted(losses)
