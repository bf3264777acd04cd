"""Figures 2-4 of the paper redrawn with the suite's measurements beside (never on top of) the reported values.

fig2: scaling + SO ablation. Left: reported Table 7 6-task averages vs model size (10B tokens each). Right: measured
      ablation metric vs n_params (results/<profile>/ablation.csv).
fig3: NIAH heatmaps, paper layout (x = context length, y = needle depth, colour = accuracy), one panel per arch
      (results/<profile>/niah.csv). The paper's Fig. 3 is a Qwen3-8B converted + 20B ProLong at up to 128K.
fig4: prefill latency (ms, log-log). Left: one GPU (reported 3.5x at 128K); right: 8 GPUs (reported 21.9x at 1M).
      Measured curves from results/gpu/prefill.csv (cost-model predictions dashed) and CPU curves from
      results/<profile>/prefill_cpu.csv.
Every figure writes PNG and PDF and prints the measured scale next to the paper's. Pure functions of DataFrames.
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

from suite.report.measured import _human, scale_text  # noqa: E402
from suite.report.stats import mean_std  # noqa: E402

SIZE_PARAMS = {"160M": 160e6, "360M": 360e6, "780M": 780e6, "1.3B": 1.3e9, "2.7B": 2.7e9, "6.8B": 6.8e9}
VARIANT_STYLE = {"transformer": ("Transformer", "tab:pink", "o"), "orthros_noso": ("Orthros w/o SO", "tab:gray", "s"),
                 "orthros": ("Orthros (w/ SO)", "tab:purple", "^")}
ARCH_COLOR = {"transformer": "tab:pink", "orthros": "tab:purple", "swa": "tab:green", "gdn": "tab:blue",
              "gla": "tab:orange", "retnet": "tab:brown", "linear_hybrid": "tab:olive", "orthros_h": "tab:cyan"}


def tokens_label(n: float) -> str:
    """1048576 -> '1M', 131072 -> '128K', 300 -> '300' (binary K/M, as the paper labels lengths)."""
    n = int(n)
    for div, suffix in [(1 << 20, "M"), (1 << 10, "K")]:
        if n >= div and n % (div // 8 or 1) == 0:
            return f"{n / div:g}{suffix}"
    return str(n)


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return paths


def _empty(ax, text: str) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes,
            bbox=dict(boxstyle="round", fc="#f4f4f4", ec="#999999"))


def fig2(table7: pd.DataFrame, ablation: pd.DataFrame | None, out_dir: str | Path, missing: str,
         invalid: str | None = None) -> list[Path]:
    """Scaling + SO ablation. ``table7``: reported Table 7 rows; ``ablation``: measured ablation.csv or None (mean +-
    std over seeds per size); ``invalid``: a failed control of the perplexity experiments, printed on the panel."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
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
        _empty(right, "Measured: not run\n" + textwrap.fill(missing if ablation is None else ablation['status'].iloc[0], 50))
        right.set_title("Measured (this suite)", fontsize=10)
    else:
        ok = ablation[ablation["status"] == "ok"]
        task = "val_ppl" if (ok["task"] == "val_ppl").any() else ok["task"].iloc[0]
        ok = ok[ok["task"] == task]
        for variant, (label, color, marker) in VARIANT_STYLE.items():
            g = ok[ok["variant"] == variant]
            if g.empty:
                continue
            stats = [(pd.to_numeric(r["n_params"]).mean(), *mean_std(r)) for _, r in g.groupby("size")]
            stats.sort()
            n, mean, std = [s[0] for s in stats], [s[1] for s in stats], [s[2] or 0.0 for s in stats]
            seeds = max(s[3] for s in stats)
            right.errorbar(n, mean, yerr=std, marker=marker, color=color, linestyle="--", capsize=3,
                           label=f"{label} (mean +- std, {seeds} seeds)")
        right.set_xscale("log")
        right.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _human(v)))
        right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        right.set_xlabel("model size (n_params)")
        metric = ok["metric"].iloc[0]
        right.set_ylabel(f"{task} ({metric}){' - lower is better' if 'ppl' in task else ''}")
        right.set_title(f"Measured (this suite): {task}, not the paper's accuracy\n"
                        + textwrap.fill(scale_text(ok.drop(columns=["seed"], errors="ignore")), 80)
                        + (f"\n{textwrap.fill(invalid, 80)}" if invalid else ""), fontsize=8,
                        color="tab:red" if invalid else "black")
        right.legend(fontsize=8)
        right.grid(alpha=0.3)
    return _save(fig, Path(out_dir), "fig2")


def fig3(niah: pd.DataFrame | None, out_dir: str | Path, missing: str, invalid: str | None = None) -> list[Path]:
    """NIAH heatmaps: x = context length (tokens), y = needle depth, colour = accuracy in [0, 1]; one panel per arch
    in ``niah`` (an arch with no measured cell shows its 'not run' reason), every length and depth of the grid on
    every panel (unmeasured cells grey), the retrieval training length as a dashed line. ``invalid``: a failed NIAH
    control, printed above the panels."""
    note = "Paper Fig. 3: Qwen3-8B converted to Orthros + 20B ProLong tokens, contexts up to 128K; most cells ~1"
    if niah is None or niah.empty:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth")
        _empty(ax, f"Measured: not run\n{missing}")
        ax.set_title(note, fontsize=8)
        return _save(fig, Path(out_dir), "fig3")
    archs = list(dict.fromkeys(niah["arch"]))
    lengths = sorted(pd.to_numeric(niah["context_len"], errors="coerce").dropna().unique())
    depths = sorted(pd.to_numeric(niah["depth"], errors="coerce").dropna().unique())
    ncols = min(3, len(archs))
    nrows = -(-len(archs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1, 3.6 * nrows + 1), squeeze=False)
    fig.subplots_adjust(hspace=0.6, wspace=0.3)
    for ax in axes.flat[len(archs):]:
        ax.set_visible(False)
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#dddddd")
    im = None
    for ax, arch in zip(axes.flat, archs):
        g = niah[niah["arch"] == arch]
        ok = g[g["status"] == "ok"]
        if ok.empty:
            _empty(ax, textwrap.fill(f"{arch}: {g['status'].iloc[0]}", 40))
            ax.set_title(arch, fontsize=9)
            continue
        grid = ok.pivot_table(index="depth", columns="context_len", values="accuracy", aggfunc="mean")
        grid = grid.reindex(index=depths, columns=lengths)
        im = ax.imshow(np.ma.masked_invalid(grid.values.astype(float)), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(lengths)), [tokens_label(c) for c in lengths], fontsize=7)
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=7)
        for (i, j), v in np.ndenumerate(grid.values):
            ax.text(j, i, "n/r" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=6)
        train_len = pd.to_numeric(ok.get("train_len"), errors="coerce").dropna() if "train_len" in ok else []
        if len(train_len):
            inside = sum(n <= train_len.iloc[0] for n in lengths)
            ax.axvline(inside - 0.5, color="black", linestyle="--", linewidth=1.2)
            ax.text(inside - 0.45, -0.6, f"trained at {tokens_label(train_len.iloc[0])}", fontsize=6, va="bottom")
        ax.set_xlabel("context length (tokens)", fontsize=7)
        ax.set_ylabel("needle depth", fontsize=7)
        params = _human(pd.to_numeric(ok["n_params"]).iloc[0]) if "n_params" in ok else "?"
        ax.set_title(f"{arch} ({params} params)", fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="accuracy", shrink=0.8)
    measured = niah[niah["status"] == "ok"]
    caption = f"Measured NIAH (this suite): {scale_text(measured.drop(columns=['n_params'], errors='ignore'))}"
    fig.suptitle("\n".join([textwrap.fill(caption, 120), note] + ([textwrap.fill(invalid, 120)] if invalid else [])),
                 fontsize=8, y=1.02, color="tab:red" if invalid else "black")
    return _save(fig, Path(out_dir), "fig3")


def fig_mqar(mqar: pd.DataFrame | None, table3: pd.DataFrame, out_dir: str | Path, missing: str,
             invalid: str | None = None) -> list[Path]:
    """MQAR accuracy vs number of key-value pairs per arch (Zoology's figure), all answers and those beyond SWA's
    receptive field, chance dashed; beside it the paper's Table 3 recall averages (reported, a different task)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1.6, 1]})
    ok = mqar[mqar["status"] == "ok"] if mqar is not None else None
    if ok is None or ok.empty:
        _empty(left, "Measured: not run\n" + textwrap.fill(missing if mqar is None else str(mqar["status"].iloc[0]), 50))
    else:
        for arch, g in ok.groupby("arch", sort=False):
            g = g.sort_values("num_kv_pairs")
            color = ARCH_COLOR.get(arch)
            left.plot(g["num_kv_pairs"], g["accuracy"], marker="o", color=color, label=f"{arch}")
            if "accuracy_far" in g and g["accuracy_far"].notna().any():
                left.plot(g["num_kv_pairs"], g["accuracy_far"], marker="x", linestyle=":", color=color)
        left.axhline(float(ok["chance"].iloc[0]), color="gray", linestyle="--", linewidth=1, label="chance")
        left.set_xscale("log", base=2)
        left.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        left.set_ylim(-0.02, 1.02)
        left.set_xlabel("key-value pairs")
        left.set_ylabel("accuracy (solid: all answers; dotted: beyond SWA's field)")
        for arch in mqar["arch"].unique():
            if arch not in set(ok["arch"]):
                left.plot([], [], " ", label=f"{arch}: {mqar[mqar['arch'] == arch]['status'].iloc[0]}")
        left.legend(fontsize=7)
        left.grid(alpha=0.3)
        trained = "/".join(sorted(set(ok["train_kv"].astype(str)))) if "train_kv" in ok else "each cell"
        left.set_title(textwrap.fill(f"Measured MQAR (this suite), trained at {trained} pairs: {scale_text(ok)}", 90)
                       + (f"\n{textwrap.fill(invalid, 90)}" if invalid else ""), fontsize=8,
                       color="tab:red" if invalid else "black")
    avg = table3[table3["task"] == "avg6_recall"].sort_values("value")
    right.barh(avg["model"], avg["value"], color=[ARCH_COLOR.get(m, "gray") for m in avg["model"]])
    for y, v in enumerate(avg["value"]):
        right.text(v, y, f" {v:.1f}", va="center", fontsize=7)
    right.set_xlabel("reported recall average (Table 3, %)")
    right.set_title("Reported (paper Table 3): 1.3B, 100B tokens, 6 recall tasks\n(not MQAR: a different task)", fontsize=8)
    right.grid(alpha=0.3, axis="x")
    return _save(fig, Path(out_dir), "fig_mqar")


def fig4(figures: pd.DataFrame, gpu_prefill: pd.DataFrame | None, cpu_prefill: pd.DataFrame | None,
         out_dir: str | Path, missing_gpu: str, missing_cpu: str) -> list[Path]:
    """Prefill latency (ms) vs sequence length, log-log; left 1 GPU, right 8 GPUs. ``figures``: reported figures.csv."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 6.5))
    panels = [(axes[0], 1, "single GPU", (8192, 131072)), (axes[1], 8, "8 GPUs", (65536, 1048576))]
    for ax, gpus, panel, (lo, hi) in panels:
        rep = figures[(figures["figure"] == "Figure 4") & (figures["gpus"] == str(gpus))].iloc[0]
        notes = []
        if gpu_prefill is not None:
            g = gpu_prefill[(pd.to_numeric(gpu_prefill["gpus"]) == gpus) & (gpu_prefill["status"] == "ok")]
            for (model, method), c in g.groupby(["model", "method"], sort=False):
                c = c.sort_values("seq_len")
                dashed = method == "cost-model prediction"
                ax.plot(c["seq_len"], c["ms"], marker="o", linestyle="--" if dashed else "-",
                        color=ARCH_COLOR.get(model, None), label=f"{model} GPU ({method})")
            at = g[pd.to_numeric(g["seq_len"]) == float(rep["seq_len"])]
            t, o = at[at["model"] == "transformer"], at[at["model"] == "orthros"]
            if len(t) and len(o):
                kind = "/".join(sorted(set(t["method"]) | set(o["method"])))
                label = "predicted" if kind == "cost-model prediction" else "measured"
                notes.append(f"{label} {t['ms'].mean() / o['ms'].mean():.2f}x at {tokens_label(rep['seq_len'])} ({kind}); "
                             f"{scale_text(at)}")
            elif g.empty:
                notes.append(f"GPU: not run ({'no rows for this GPU count' if len(gpu_prefill) else missing_gpu})")
        else:
            notes.append(f"GPU: not run ({missing_gpu})")
        if gpus == 1:
            if cpu_prefill is not None and (cpu_prefill["status"] == "ok").any():
                c_ok = cpu_prefill[cpu_prefill["status"] == "ok"]
                for arch, c in c_ok.groupby("arch", sort=False):
                    c = c.sort_values("seq_len")
                    ax.plot(c["seq_len"], c["ms"], marker="x", linestyle=":", color=ARCH_COLOR.get(arch, None),
                            label=f"{arch} CPU")
                notes.append(f"CPU: {scale_text(c_ok)}")
            else:
                notes.append(f"CPU: not run ({missing_cpu})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if not ax.lines:
            ax.set_xlim(lo / 2, hi * 2)
            ax.set_ylim(1, 1e6)
        ax.axvline(float(rep["seq_len"]), color="black", alpha=0.4, linestyle="-.")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: tokens_label(v)))
        ax.annotate(f"paper: {rep['value']:g}x at {tokens_label(rep['seq_len'])}\n({rep['note']})",
                    xy=(float(rep["seq_len"]), 0.97), xycoords=("data", "axes fraction"), ha="right", va="top",
                    fontsize=8, bbox=dict(boxstyle="round", fc="white", ec="black", alpha=0.8))
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("prefill latency (ms)")
        ax.margins(x=0.1, y=0.25)
        ax.set_title(f"{panel}: paper Qwen3-8B vs Orthros-8B, {rep['x_range']}, prefill only\n"
                     + "\n".join(textwrap.fill(n, 95) for n in notes), fontsize=7)
        ax.grid(alpha=0.3, which="both")
        if ax.lines:
            handles = [h for h in ax.lines if not h.get_label().startswith("_")]
            if handles:
                ax.legend(fontsize=7, loc="lower right")
    return _save(fig, Path(out_dir), "fig4")
