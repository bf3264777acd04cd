"""The SO ablation's figure (``fig2``, the paper's Fig. 2): scaling and the query scale-offset. Left: the reported
Table 7 6-task averages against model size (10B tokens each). Middle: the measured held-out perplexity against n_params
(``results/<profile>/ablation.csv``). Right: the measured 6-task zero-shot accuracy. A pure function of the rows; it
writes PNG and PDF through the shared figure helpers (:mod:`suite.report.figures`).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report.figures import _caption, _empty, _foot, _save, _scale  # noqa: E402
from suite.report.measured import human_count  # noqa: E402
from suite.report.stats import mean_std  # noqa: E402

SIZE_PARAMS = {"160M": 160e6, "360M": 360e6, "780M": 780e6, "1.3B": 1.3e9, "2.7B": 2.7e9, "6.8B": 6.8e9}
VARIANT_STYLE = {"transformer": ("Transformer", "tab:pink", "o"), "orthros_noso": ("Orthros w/o SO", "tab:gray", "s"),
                 "orthros": ("Orthros (w/ SO)", "tab:purple", "^")}


def fig2(table7: pd.DataFrame, ablation: pd.DataFrame | None, out_dir: str | Path, missing: str,
         invalid: str | None = None) -> list[Path]:
    """Scaling + SO ablation. ``table7``: reported Table 7 rows; ``ablation``: measured ablation.csv or None (mean +-
    std over seeds per size): held-out perplexity (middle) and the 6-task zero-shot accuracy of Table 7 (right,
    :func:`_accuracy_panel`); ``invalid``: a failed control of the perplexity experiments, printed on the panel."""
    fig, (left, right, acc) = plt.subplots(1, 3, figsize=(18, 4.6))
    _accuracy_panel(acc, ablation, missing)
    avg = table7[table7["task"] == "avg6"]
    for variant, (label, color, marker) in VARIANT_STYLE.items():
        g = avg[avg["model"] == variant].assign(n=lambda d: d["scale"].map(SIZE_PARAMS)).sort_values("n")
        left.plot(g["n"], g["value"], marker=marker, color=color, label=label)
    left.set_xscale("log")
    left.set_xticks(list(SIZE_PARAMS.values()), list(SIZE_PARAMS), minor=False)
    left.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    left.set_xlabel("model size (parameters)")
    left.set_ylabel("average accuracy, 6 tasks, no SIQA (%)")
    left.set_title("Reported (paper Table 7 / Fig. 2)\n160M-6.8B, 10B tokens each, seq 2048, 8x H100", fontsize=10)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    if ablation is None or ablation[ablation["status"] == "ok"].empty:
        why = missing if ablation is None else ablation["status"].iloc[0]
        _empty(right, "Measured: not run\n" + textwrap.fill(why, 50))
        right.set_title("Measured (this suite)", fontsize=10)
    else:
        ok = ablation[(ablation["status"] == "ok") & ~ablation["metric"].isin(BENCH_METRICS)]
        ok = ok if len(ok) else ablation[ablation["status"] == "ok"]
        task = "val_ppl" if (ok["task"] == "val_ppl").any() else ok["task"].iloc[0]
        ok = ok[ok["task"] == task]
        for arch, (label, color, marker) in VARIANT_STYLE.items():
            g = ok[ok["arch"] == arch]
            if g.empty:
                continue
            stats = [(pd.to_numeric(r["n_params"]).mean(), *mean_std(r)) for _, r in g.groupby("size")]
            stats.sort()
            n, mean, std = [s[0] for s in stats], [s[1] for s in stats], [s[2] or 0.0 for s in stats]
            seeds = max(s[3] for s in stats)
            right.errorbar(n, mean, yerr=std, marker=marker, color=color, linestyle="--", capsize=3,
                           label=f"{label} (mean +- std, {seeds} seeds)")
        right.set_xscale("log")
        right.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: human_count(v)))
        right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        right.set_xlabel("model size (n_params)")
        metric = ok["metric"].iloc[0]
        right.set_ylabel(f"{task} ({metric}){' - lower is better' if 'ppl' in task else ''}")
        right.set_title(f"Measured (this suite): {task}, not the paper's accuracy\n"
                        + textwrap.fill(_scale(ok, ("seed",)), 80)
                        + (f"\n{textwrap.fill(invalid, 80)}" if invalid else ""), fontsize=8,
                        color="tab:red" if invalid else "black")
        right.legend(fontsize=8)
        right.grid(alpha=0.3)
        _foot(fig, _caption(ok, "Measured rows"))
    return _save(fig, Path(out_dir), "fig2")


TABLE7_TASKS = ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "winogrande"]  # no SIQA
BENCH_METRICS = ("acc", "acc_norm", "contains", "f1")


def _accuracy_panel(ax, ablation: pd.DataFrame | None, missing: str) -> None:
    """Measured 6-task average accuracy of Table 7 (zero-shot, each task on its table metric, in points) against
    n_params, mean +- std over seeds, beside the average chance; a point whose every task lies within 2 stderr of
    chance is drawn hollow and labelled 'at chance'."""
    from suite.eval.controls import at_chance, chance_of, table_metric

    ax.set_title("Measured (this suite): 6-task accuracy, zero-shot", fontsize=10)
    rows = ablation[ablation["task"].isin(TABLE7_TASKS)] if ablation is not None else None
    if rows is not None:
        metric = rows["task"].map(table_metric)
        shots = pd.to_numeric(rows["num_fewshot"], errors="coerce").fillna(0) if "num_fewshot" in rows else 0
        rows = rows[(rows["metric"] == metric) & (shots == 0)]
    ok = rows[rows["status"] == "ok"] if rows is not None else None
    if ok is None or ok.empty:
        why = missing if rows is None or rows.empty else str(rows["status"].iloc[0])
        _empty(ax, "Measured: not run\n" + textwrap.fill(why, 50))
        return
    chances = []
    for variant, (label, color, marker) in VARIANT_STYLE.items():
        points = []
        for _, g in ok[ok["arch"] == variant].groupby("size"):
            if g["task"].nunique() < len(TABLE7_TASKS):
                continue
            per_seed = g.groupby("seed")["value"].mean() * 100 if "seed" in g else g["value"] * 100
            near = all(at_chance(t)[0] for _, t in g.groupby("task"))
            chances.append(100 * np.mean([chance_of(t) for _, t in g.groupby("task")]))
            points.append((pd.to_numeric(g["n_params"]).mean(), per_seed.mean(),
                           per_seed.std(ddof=1) if len(per_seed) > 1 else 0.0, near, int(g["n_samples"].max())))
        if not points:
            continue
        points.sort()
        ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], color=color,
                    marker=marker, linestyle="--", capsize=3, label=label, mfc="none" if all(p[3] for p in points)
                    else color)
        for n, mean, _, near, docs in points:
            if near:
                ax.annotate(f"at chance (n={docs}/task)", (n, mean), fontsize=7, xytext=(4, 4),
                            textcoords="offset points", color=color)
    if chances:
        ax.axhline(np.mean(chances), color="black", linestyle=":", linewidth=1, label="chance (mean over tasks)")
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, np.mean(chances) - 5), max(hi, np.mean(chances) + 5))
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: human_count(v)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("model size (n_params)")
    ax.set_ylabel("average accuracy, 6 tasks, no SIQA (%)")
    splits = "/".join(sorted(ok["split"].dropna().astype(str).unique())) if "split" in ok else ""
    ax.set_title("Measured (this suite): 6-task accuracy, zero-shot\n" + textwrap.fill(
        f"{_scale(ok, ('seed',))}; {splits}", 80), fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
