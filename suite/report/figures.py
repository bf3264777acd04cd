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


def fig2(table7: pd.DataFrame, ablation: pd.DataFrame | None, out_dir: str | Path, missing: str) -> list[Path]:
    """Scaling + SO ablation. ``table7``: reported Table 7 rows; ``ablation``: measured ablation.csv or None."""
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
            g = ok[ok["variant"] == variant].assign(n=lambda d: pd.to_numeric(d["n_params"])).sort_values("n")
            if len(g):
                right.plot(g["n"], pd.to_numeric(g["value"]), marker=marker, color=color, label=label, linestyle="--")
        right.set_xscale("log")
        right.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _human(v)))
        right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        right.set_xlabel("model size (n_params)")
        metric = ok["metric"].iloc[0]
        right.set_ylabel(f"{task} ({metric}){' - lower is better' if 'ppl' in task else ''}")
        right.set_title(f"Measured (this suite): {task}, not the paper's accuracy\n"
                        + textwrap.fill(scale_text(ok), 80), fontsize=8)
        right.legend(fontsize=8)
        right.grid(alpha=0.3)
    return _save(fig, Path(out_dir), "fig2")


def fig3(niah: pd.DataFrame | None, out_dir: str | Path, missing: str) -> list[Path]:
    """NIAH heatmaps: x = context length (tokens), y = depth (% of context), colour = accuracy in [0, 1]."""
    note = "Paper Fig. 3: Qwen3-8B converted to Orthros + 20B ProLong tokens, contexts up to 128K; most cells ~1"
    ok = niah[niah["status"] == "ok"] if niah is not None else None
    if ok is None or ok.empty:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth (%)")
        _empty(ax, f"Measured: not run\n{missing if niah is None else niah['status'].iloc[0]}")
        ax.set_title(note, fontsize=8)
        return _save(fig, Path(out_dir), "fig3")
    archs = list(dict.fromkeys(ok["arch"]))
    ncols = min(4, len(archs))
    nrows = -(-len(archs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 1, 4.8 * nrows), squeeze=False)
    fig.subplots_adjust(hspace=0.75, wspace=0.3)
    for ax in axes.flat[len(archs):]:
        ax.set_visible(False)
    for ax, arch in zip(axes.flat, archs):
        g = ok[ok["arch"] == arch]
        grid = g.pivot_table(index="depth", columns="context_len", values="accuracy", aggfunc="mean").sort_index()
        im = ax.imshow(grid.values, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto", origin="upper")
        ax.set_xticks(range(grid.shape[1]), [str(int(c)) for c in grid.columns], rotation=45, fontsize=7)
        ax.set_yticks(range(grid.shape[0]), [f"{d:g}" for d in grid.index], fontsize=7)
        for (i, j), v in np.ndenumerate(grid.values):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth")
        ax.set_title(f"{arch}\n" + textwrap.fill(scale_text(g), 45), fontsize=7)
    fig.colorbar(im, ax=axes.ravel().tolist(), label="accuracy")
    fig.suptitle(f"Measured NIAH (this suite)\n{note}", fontsize=8, y=1.1)
    return _save(fig, Path(out_dir), "fig3")


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
