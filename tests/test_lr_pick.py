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
