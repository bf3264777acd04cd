"""MQAR's figure (``fig_mqar``; ``fig_mqar_gpu`` for the gpu profile): accuracy against key-value pairs (Zoology's
figure), one panel per (size, seq_len) of the grid, a line per arch, from ``results/<profile>/mqar.csv``, beside the
paper's Table 3 recall averages (a different task). A pure function of the rows; it writes PNG and PDF through the
shared figure helpers (:mod:`suite.report.figures`).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report.figures import ARCH_COLOR, _caption, _empty, _foot, _save, _scale  # noqa: E402
from suite.report.measured import human_count, sizes_by_params  # noqa: E402


def _mqar_panel(ax, rows: pd.DataFrame, title: str, void: dict[str, str] | None = None) -> None:
    """One MQAR cell group: accuracy vs key-value pairs, one line per arch (solid: all answers; dotted: answers
    beyond SWA's receptive field), chance dashed; an arch in ``void`` (arch -> why: it misses its own control at
    this size) is not drawn, its reason is written on the panel."""
    void = void or {}
    for i, (arch, why) in enumerate(sorted(void.items())):
        ax.text(0.02, 0.5 - 0.1 * i, textwrap.fill(f"{arch}: {why}", 45), transform=ax.transAxes, fontsize=6,
                color="tab:red", va="top")
    for arch, g in rows[~rows["arch"].isin(list(void))].groupby("arch", sort=False):
        g = g.sort_values("num_kv_pairs")
        color = ARCH_COLOR.get(arch)
        ax.plot(g["num_kv_pairs"], g["accuracy"], marker="o", color=color, label=f"{arch}")
        if "accuracy_far" in g and g["accuracy_far"].notna().any():
            ax.plot(g["num_kv_pairs"], g["accuracy_far"], marker="x", linestyle=":", color=color)
    ax.axhline(float(rows["chance"].iloc[0]), color="gray", linestyle="--", linewidth=1, label="chance")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("key-value pairs", fontsize=8)
    ax.set_ylabel("accuracy (solid: all; dotted: beyond SWA's field)", fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=8)


def _reported_recall(ax, table3: pd.DataFrame) -> None:
    """The paper's Table 3 6-task recall averages as bars (a different task from MQAR)."""
    avg = table3[table3["task"] == "avg6_recall"].sort_values("value")
    ax.barh(avg["model"], avg["value"], color=[ARCH_COLOR.get(m, "gray") for m in avg["model"]])
    for y, v in enumerate(avg["value"]):
        ax.text(v, y, f" {v:.1f}", va="center", fontsize=7)
    ax.set_xlabel("reported recall average (Table 3, %)")
    ax.set_title("Reported (paper Table 3): 1.3B, 100B tokens, 6 recall tasks\n(not MQAR: a different task)",
                 fontsize=8)
    ax.grid(alpha=0.3, axis="x")


def _training_cells(ok: pd.DataFrame) -> str:
    """The training cells of measured MQAR rows, e.g. ``T=128: 8 pairs; T=256: 16/32/64 pairs`` (each row's
    ``train_kv`` holds the pair counts trained at its seq_len, ``none`` if none); ``each cell`` without that column."""
    if "train_kv" not in ok:
        return "each cell"
    per_len = {}
    for seq_len, kv in ok[["seq_len", "train_kv"]].dropna().itertuples(index=False):
        counts = [str(int(float(k))) for k in str(kv).split("+") if k != "none"]
        if counts:
            per_len.setdefault(int(seq_len), set()).add("/".join(counts))
    return "; ".join(f"T={t}: {' or '.join(sorted(v))} pairs" for t, v in sorted(per_len.items())) or "no cell"


def fig_mqar(mqar: pd.DataFrame | None, table3: pd.DataFrame, out_dir: str | Path, missing: str,
             invalid: str | None = None, name: str = "fig_mqar", profile: str = "",
             flags: list[tuple] | None = None) -> list[Path]:
    """MQAR accuracy vs key-value pairs (Zoology's figure), one panel per (size, seq_len) of the grid (rows: sizes,
    smallest first; columns: seq_len), a line per arch (solid: all answers, dotted: answers beyond SWA's receptive
    field), chance dashed; an arch with no measured cell is listed with its status. Beside them the paper's Table 3
    recall averages (reported, a different task). ``invalid``: a failed MQAR control, printed above the panels.
    Written as ``<name>.png`` and ``<name>.pdf`` (``fig_mqar_gpu`` for the gpu profile's rows, ``profile`` naming it
    in the title). ``flags``: the grid's baseline-soundness flags (``suite.report.soundness.mqar_flags``); a
    Transformer that misses its positive control at a size is not drawn at that size (its cells are void)."""
    ok = mqar[(mqar["status"] == "ok") & mqar["accuracy"].notna()] if mqar is not None else None
    voids = {size: why for _, arch, size, why in flags or [] if arch == "transformer"}
    sizes = sizes_by_params(ok) if ok is not None and len(ok) else []
    seq_lens = sorted(int(t) for t in ok["seq_len"].unique()) if sizes else []
    nrows, ncols = max(1, len(sizes)), max(1, len(seq_lens))
    fig = plt.figure(figsize=(4.6 * ncols + 4.6, 3.8 * nrows + 0.8))
    grid = fig.add_gridspec(nrows, ncols + 1, width_ratios=[1] * ncols + [0.9], hspace=0.45, wspace=0.35)
    _reported_recall(fig.add_subplot(grid[0, ncols]), table3)
    if not sizes:
        why = missing if mqar is None else "no measured value" if (mqar["status"] == "ok").any() else \
            str(mqar["status"].iloc[0])
        _empty(fig.add_subplot(grid[0, 0]), "Measured: not run\n" + textwrap.fill(why, 50))
        return _save(fig, Path(out_dir), name)
    legend_ax = None
    for i, size in enumerate(sizes):
        for j, seq_len in enumerate(seq_lens):
            ax = fig.add_subplot(grid[i, j])
            if legend_ax is None or (i, j) == (len(sizes) - 1, 0):
                legend_ax = ax
            rows = ok[(ok["size"].astype(str) == size) & (ok["seq_len"] == seq_len)]
            if rows.empty:
                _empty(ax, f"{size}, T={seq_len}: no measured cell")
                continue
            _mqar_panel(ax, rows, f"{size} ({human_count(pd.to_numeric(rows['n_params']).max())} params), T={seq_len}",
                        {"transformer": f"invalid: {voids[size]}"} if size in voids else None)
    legend_ax.legend(fontsize=7)  # the widest size's first panel: every arch drawn there (none void)
    scale = _scale(ok, ("n_params", "seq_len"))
    lines = [f"Measured MQAR{', ' + profile + ' profile' if profile else ''} (this suite): one model per arch and "
             f"size, trained on {_training_cells(ok)}" + (f"; {scale}" if scale else "")]
    lines += [f"{arch}: {mqar[mqar['arch'] == arch]['status'].iloc[0]}" for arch in mqar["arch"].unique()
              if arch not in set(ok["arch"])]
    fig.suptitle("\n".join([textwrap.fill(line, 150) for line in lines] + ([textwrap.fill(invalid, 150)]
                                                                          if invalid else [])),
                 fontsize=9, y=1.0 + 0.06 / nrows, color="tab:red" if invalid else "black")
    _foot(fig, _caption(ok, "Measured rows"))
    return _save(fig, Path(out_dir), name)
