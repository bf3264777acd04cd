"""The from-scratch study's figures: held-out loss against position in the document, per architecture and budget;
and each architecture's learning-rate sweep.

``fig_scratch_position`` draws ``scratch_ppl.csv`` (:mod:`suite.eval.ppl_buckets` rows of every long run, tagged with
its arch and budget): one panel per budget (equal tokens, equal GPU time), the position buckets along x, a line per
arch through the mean over seeds and a band from the lowest to the highest seed. Up to position w every arch can see
the whole prefix; beyond it SWA-w sees only the window, Orthros's output stream everything (its base stream only the
window), the Transformer everything.

``fig_scratch_lr`` draws ``scratch_lr.csv`` (the sweep's runs with the pick, :mod:`suite.train.lr_pick`): each
arch's final held-out loss against its rate, the picked rate ringed, a diverged run as a cross at the panel's top. So
one sees where each baseline stands at its best rate, and whether its best lies inside the swept range.

Pure functions of the rows; ``save(fig, out_dir, name)`` writes PNG and PDF.
"""
from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report.figures import ARCH_COLOR, _empty  # noqa: E402
from suite.report.measured import whole_split  # noqa: E402

BUDGETS = {"tokens": "equal tokens", "time": "equal GPU time (the Orthros runs' GPU-seconds)"}
NAME = "fig_scratch_position"
LR_NAME = "fig_scratch_lr"


def position_bands(ppl: pd.DataFrame) -> pd.DataFrame:
    """Per (budget, arch, bucket): the mean NLL over seeds, its lowest and highest seed, the seed count and the
    bucket's position range, buckets in position order."""
    ppl = whole_split(ppl)
    rows = ppl.assign(nll=pd.to_numeric(ppl["nll"], errors="coerce")).dropna(subset=["nll"])
    out = (rows.groupby(["budget", "arch", "bucket", "pos_min", "pos_max"], sort=False)["nll"]
           .agg(mean="mean", lo="min", hi="max", n_seeds="count").reset_index())
    return out.sort_values(["budget", "arch", "pos_min"], kind="stable").reset_index(drop=True)


def fig_scratch_position(ppl: pd.DataFrame | None, out_dir, missing: str, save, window: int | None = None,
                         reference: str = "orthros") -> list:
    """The figure (module docstring); every panel reads 'not run: <missing>' where there are no rows. ``window``:
    w in the axis label where it is known. The equal-time panel shows the ``reference`` arch's equal-token runs,
    whose GPU-seconds the others had."""
    fig, axes = plt.subplots(1, len(BUDGETS), figsize=(12, 4.4), sharey=True)
    if ppl is None or ppl.empty:
        for ax in axes:
            _empty(ax, "not run\n" + textwrap.fill(missing, 50))
        fig.suptitle("From scratch: held-out loss by position (not run)", fontsize=10)
        return save(fig, out_dir, NAME)
    bands = position_bands(ppl)
    for ax, (budget, title) in zip(axes, BUDGETS.items()):
        rows = bands[bands["budget"] == budget]
        if budget == "time" and not rows.empty and reference not in set(rows["arch"]):
            rows = pd.concat([rows, bands[(bands["budget"] == "tokens") & (bands["arch"] == reference)]])
        if rows.empty:
            _empty(ax, f"not run: no {title} rows")
            continue
        labels = list(dict.fromkeys(rows["bucket"]))
        for arch, g in rows.groupby("arch", sort=True):
            x = [labels.index(b) for b in g["bucket"]]
            color = ARCH_COLOR.get(arch, "black")
            ax.plot(x, g["mean"], "o-", color=color, label=f"{arch} ({int(g['n_seeds'].max())} seeds)")
            if g["n_seeds"].max() > 1:
                ax.fill_between(x, g["lo"], g["hi"], color=color, alpha=0.2)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("position in the document (tokens)" + (f"; w = {window}" if window else ""))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("held-out loss (nats/token): mean, band lowest-highest seed")
    scale = ""
    if "n_params" in ppl:
        scale = f"; {int(pd.to_numeric(ppl['n_params'], errors='coerce').max()):,} parameters"
    fig.suptitle(f"From scratch: held-out loss by position{scale} (paper: 1.3B, 100B tokens)", fontsize=9)
    return save(fig, out_dir, NAME)


def fig_scratch_lr(sweep: pd.DataFrame | None, out_dir, missing: str, save) -> list:
    """The sweep figure (module docstring); 'not run: <missing>' where there are no rows."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    if sweep is None or sweep.empty:
        _empty(ax, "not run\n" + textwrap.fill(missing, 50))
        fig.suptitle("From scratch: learning-rate sweep (not run)", fontsize=10)
        return save(fig, out_dir, LR_NAME)
    rows = sweep.assign(lr=pd.to_numeric(sweep["lr"]), val_loss=pd.to_numeric(sweep["val_loss"], errors="coerce"),
                        picked=sweep["picked"].astype(str).str.lower().eq("true"),
                        diverged=sweep["status"].astype(str).str.startswith("diverged"))
    ok = rows[~rows["diverged"]]
    top = ok["val_loss"].max()
    for arch, g in rows.sort_values("lr").groupby("arch", sort=True):
        color = ARCH_COLOR.get(arch, "black")
        good = g[~g["diverged"]]
        ax.plot(good["lr"], good["val_loss"], "o-", color=color, label=arch)
        best = g[g["picked"]]
        at_end = best["edge"].fillna("").astype(str).ne("").any() if "edge" in best else False
        ax.plot(best["lr"], best["val_loss"], "s" if at_end else "o", ms=13, mfc="none", color=color)
        ax.plot(g.loc[g["diverged"], "lr"], [top] * int(g["diverged"].sum()), "x", ms=9, color=color)
    rates = sorted(rows["lr"].unique())
    ax.set_xscale("log")
    ax.set_xticks(rates, [f"{r:g}" for r in rates], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("peak learning rate (ringed: picked; squared: picked at an end of its range, refused; "
                  "x at the top: diverged)", fontsize=8)
    ax.set_ylabel("final held-out loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    first = rows.iloc[0]
    devices = " / ".join(sorted(rows["device"].dropna().astype(str).unique())) if "device" in rows else ""
    fig.suptitle(f"From scratch: learning-rate sweep, {int(first['steps'])} steps, {int(first['tokens']):,} tokens, "
                 f"seed {int(first['seed'])}" + (f"\n{devices}" if devices else ""), fontsize=9)
    return save(fig, out_dir, LR_NAME)
