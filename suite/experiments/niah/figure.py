"""NIAH's figure (``fig3``; ``fig3_gpu`` for the gpu profile): heatmaps in the paper's Fig. 3 layout (x = context
length, y = needle depth, colour = accuracy), one panel per arch, from ``results/<profile>/niah.csv``. The paper's
Fig. 3 is a Qwen3-8B converted + 20B ProLong at up to 128K. A pure function of the rows; it writes PNG and PDF
through the shared figure helpers (:mod:`suite.report.figures`).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report.figures import _caption, _empty, _foot, _save, _scale, tokens_label  # noqa: E402
from suite.report.measured import human_count  # noqa: E402


def fig3(niah: pd.DataFrame | None, out_dir: str | Path, missing: str, invalid: str | None = None,
         name: str = "fig3", profile: str = "") -> list[Path]:
    """NIAH heatmaps: x = context length (tokens), y = needle depth, colour = accuracy in [0, 1]; one panel per arch
    in ``niah`` (an arch with no measured cell shows its 'not run' reason), every length and depth of the grid on
    every panel (unmeasured cells grey), the retrieval training length as a dashed line. ``invalid``: a failed NIAH
    control, printed above the panels. Written as ``<name>.png`` and ``<name>.pdf`` (``fig3_gpu`` for the gpu
    profile's rows, ``profile`` naming it in the title)."""
    note = "Paper Fig. 3: Qwen3-8B converted to Orthros + 20B ProLong tokens, contexts up to 128K; most cells ~1"
    if niah is None or niah.empty:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth")
        _empty(ax, f"Measured: not run\n{missing}")
        ax.set_title(note, fontsize=8)
        return _save(fig, Path(out_dir), name)
    archs = list(dict.fromkeys(niah["arch"]))
    lengths = sorted(pd.to_numeric(niah["context_len"], errors="coerce").dropna().unique())
    depths = sorted(pd.to_numeric(niah["depth"], errors="coerce").dropna().unique())
    ncols = min(3, len(archs))
    nrows = -(-len(archs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1, 3.6 * nrows + 1), squeeze=False)
    fig.subplots_adjust(hspace=0.6, wspace=0.3)
    for ax in axes.flat[len(archs):]:
        ax.set_visible(False)
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
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
        trained = ""
        if len(train_len):
            inside = sum(n <= train_len.iloc[0] for n in lengths)
            ax.axvline(inside - 0.5, color="black", linestyle="--", linewidth=1.2)
            trained = f"; trained at {tokens_label(train_len.iloc[0])}, dashed"
        ax.set_xlabel("context length (tokens)", fontsize=7)
        ax.set_ylabel("needle depth", fontsize=7)
        params = human_count(pd.to_numeric(ok["n_params"]).iloc[0]) if "n_params" in ok else "?"
        ax.set_title(f"{arch} ({params} params{trained})", fontsize=8)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="accuracy", shrink=0.8)
    measured = niah[niah["status"] == "ok"]
    caption = f"Measured NIAH{', ' + profile + ' profile' if profile else ''} (this suite): " \
              f"{_scale(measured, ('n_params',))}"
    for col, what in (("format", "needle format {}"), ("n_trials", "{:g} trials a cell")):
        if col in measured and measured[col].notna().any():
            caption += "; " + what.format(*sorted(measured[col].dropna().unique())[:1])
    seeds = measured["seed"].dropna().unique() if "seed" in measured else []
    if len(seeds) > 1:
        caption += f"; each cell the mean of {len(seeds)} seeds ({', '.join(str(int(x)) for x in sorted(seeds))})"
    fig.suptitle("\n".join([textwrap.fill(caption, 120), note] + ([textwrap.fill(invalid, 120)] if invalid else [])),
                 fontsize=8, y=1.02, color="tab:red" if invalid else "black")
    _foot(fig, _caption(measured, "Measured rows"))
    return _save(fig, Path(out_dir), name)
