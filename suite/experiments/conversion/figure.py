"""The conversion experiment's figure on a real pretrained LM (``fig_conversion_loss``): the continued-training loss
of both trained arms and the loss gap of conversion against Base CPT, paired by seed (``pretrained_loss.csv``,
``pretrained_evals.csv``). Pure functions of DataFrames; ``save(fig, out_dir, name)`` writes PNG and PDF.
"""
from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from suite.experiments.conversion.table import ARMS  # noqa: E402
from suite.report.figures import _empty  # noqa: E402
from suite.report.stats import paired  # noqa: E402


def _seeds(n: int) -> str:
    return "1 seed" if n == 1 else f"mean of {n} seeds"


def loss_gap(curves: pd.DataFrame, smooth: int = 10) -> pd.DataFrame:
    """Per step: conversion loss minus base_cpt loss of the same seed (the same batch), smoothed over ``smooth``
    steps, then mean and std over seeds. Columns step, tokens, gap, gap_std, n_seeds."""
    wide = curves.pivot_table(index=["seed", "step"], columns="variant", values="loss").reset_index()
    tokens = curves.groupby("step")["tokens"].first()
    wide["gap"] = wide["conversion"] - wide["base_cpt"]
    wide["gap"] = wide.groupby("seed")["gap"].transform(lambda s: s.rolling(smooth, min_periods=1).mean())
    out = wide.groupby("step")["gap"].agg(["mean", "std", "count"]).reset_index()
    return out.rename(columns={"mean": "gap", "std": "gap_std", "count": "n_seeds"}).assign(
        tokens=lambda d: d["step"].map(tokens))


def heldout_gap(evals: pd.DataFrame) -> pd.DataFrame:
    """Per evaluation step of the trained arms' held-out curves (pretrained_evals.csv): conversion minus base_cpt
    held-out loss, paired by seed (same batches, same validation windows), with its 95% CI (paired t; none with one
    seed). Columns step, tokens, gap, lo, hi, n_seeds."""
    rows = []
    for step, at in evals.groupby("step"):
        by = {v: g.set_index(g["seed"].astype(str))["val_loss"] for v, g in at.groupby("variant")}
        if not {"conversion", "base_cpt"} <= set(by):
            continue
        est = paired(by["conversion"], by["base_cpt"], "difference", "seeds")
        lo, hi = est.ci if est.ci is not None else (np.nan, np.nan)
        rows.append({"step": step, "tokens": float(at["tokens"].max()), "gap": est.value, "lo": lo, "hi": hi,
                     "n_seeds": est.n})
    return pd.DataFrame(rows, columns=["step", "tokens", "gap", "lo", "hi", "n_seeds"])


def fig_conversion_loss(curves: pd.DataFrame | None, ppl: pd.DataFrame | None, out_dir, missing: str,
                        save, evals: pd.DataFrame | None = None) -> list:
    """Left: the continued-training loss of both arms (mean over seeds); right: the loss gap conversion - base_cpt:
    on the held-out windows at each evaluation (``evals``, pretrained_evals.csv) with its 95% CI over seeds where the
    runs have them, else per training step (same batches), mean +- std over seeds. ``save(fig, out_dir, name)``
    writes PNG and PDF."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    if curves is None or curves.empty or not {"base_cpt", "conversion"} <= set(curves["variant"]):
        for ax in (left, right):
            _empty(ax, "not run\n" + textwrap.fill(missing, 50))
        fig.suptitle("Table 2 on a real pretrained LM: continued training (not run)", fontsize=10)
        return save(fig, out_dir, "fig_conversion_loss")
    for variant, color in (("base_cpt", "tab:pink"), ("conversion", "tab:purple")):
        runs = curves[curves["variant"] == variant]
        g = runs.groupby("tokens")["loss"].mean().rolling(10, min_periods=1).mean()
        left.plot(g.index, g.values, color=color, label=f"{ARMS[variant]} ({_seeds(runs['seed'].nunique())})")
    left.set_xlabel("continued-training tokens")
    left.set_ylabel("training loss (nats/token, 10-step mean)")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    held = heldout_gap(evals) if evals is not None and not evals.empty else pd.DataFrame()
    if len(held):
        n = int(held["n_seeds"].max())
        right.plot(held["tokens"], held["gap"], "o-", color="tab:purple", label=_seeds(n))
        if n > 1:
            right.fill_between(held["tokens"], held["lo"], held["hi"], color="tab:purple", alpha=0.2,
                               label="95% CI, paired t over seeds (same batches and windows)")
        ylabel = "held-out loss gap, conversion - Base CPT (nats/token)"
    else:
        gap = loss_gap(curves)
        right.plot(gap["tokens"], gap["gap"], color="tab:purple")
        right.fill_between(gap["tokens"], gap["gap"] - gap["gap_std"].fillna(0),
                           gap["gap"] + gap["gap_std"].fillna(0), color="tab:purple", alpha=0.2,
                           label=f"+- std over the {int(gap['n_seeds'].max())} seeds both arms ran (same batches)")
        ylabel = "training loss gap, conversion - Base CPT (nats/token)"
    right.axhline(0, color="black", lw=0.8)
    right.set_xlabel("continued-training tokens")
    right.set_ylabel(ylabel)
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle("Table 2 on a real pretrained LM: both arms read the same batches (same seeds); paper: 8B models, "
                 "80B tokens", fontsize=9)
    return save(fig, out_dir, "fig_conversion_loss")
