"""Decode under load (``results/gpu/decode_load.csv``, :mod:`benchmarks.decode_load`): the Orthros / Transformer
decode-step ratio against batch at each context, measured and as the cost model predicted it, and the figure.

Pure functions of the rows: :func:`step_ratios` pairs the two archs cell by cell (same context, batch, engine path
and decode-attention kernel; ``best``: each arch at its faster kernel), :func:`cost_limits` says per context at which
batches the second token costs at most ``tol`` and how close the cost model came, :func:`fig_decode_load` draws it.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

PATH = "fused compiled"  # the engine's fastest path: what the ratios use (the eager rows are kept as measured)
TOL = 0.05  # "the extra token costs less than 5%"
PAIR = ("transformer", "orthros")


def _ok(frame: pd.DataFrame, path: str) -> pd.DataFrame:
    return frame[(frame.status == "ok") & (frame.path == path) & frame.arch.isin(PAIR)]


def step_ratios(frame: pd.DataFrame, path: str = PATH) -> pd.DataFrame:
    """One row per (context, batch, kernel) where both archs were measured: their steps (ms), the measured ratio
    Orthros / Transformer and the cost model's predicted ratio. ``kernel`` is a decode-attention kernel, or ``best``
    (each arch at its faster kernel in that cell; the prediction of the kernels chosen)."""
    ok = _ok(frame, path)
    rows = []
    for (context, batch), cell in ok.groupby(["context", "batch"]):
        by = {a: cell[cell.arch == a] for a in PAIR}
        if any(part.empty for part in by.values()):
            continue
        fast = {a: part.loc[part.decode_step_ms.idxmin()] for a, part in by.items()}
        kernels = [(k, {a: by[a][by[a].decode_attn == k] for a in PAIR}) for k in sorted(set(cell.decode_attn))]
        choices = [(k, {a: part.iloc[0] for a, part in parts.items()}) for k, parts in kernels
                   if all(len(part) for part in parts.values())] + [("best", fast)]
        for kernel, pick in choices:
            t, o = pick["transformer"], pick["orthros"]
            rows.append({"context": int(context), "batch": int(batch), "kernel": kernel,
                         "transformer_ms": t.decode_step_ms, "orthros_ms": o.decode_step_ms,
                         "ratio": o.decode_step_ms / t.decode_step_ms,
                         "predicted_ratio": o.predicted_ms / t.predicted_ms,
                         "kernels": f"{t.decode_attn}/{o.decode_attn}"})
    return pd.DataFrame(rows)


def cost_limits(frame: pd.DataFrame, tol: float = TOL, path: str = PATH) -> pd.DataFrame:
    """Per context (each arch at its faster kernel): the batches measured for both archs, those where Orthros's step
    costs at most ``tol`` more than the Transformer's, the smallest ratio and its batch, and the worst
    |measured / predicted - 1| of the two archs' cells at those batches (the cost model's miss; a batch only one arch
    fits, e.g. the Transformer's largest, is left out as it is of the ratios)."""
    ratios = step_ratios(frame, path)
    ok = _ok(frame, path)
    rows = []
    for context, part in ratios[ratios.kernel == "best"].groupby("context"):
        cells = ok[(ok.context == context) & ok.batch.isin(part.batch)]
        best = part.loc[part.ratio.idxmin()]
        rows.append({"context": int(context), "batches": ",".join(str(b) for b in part.batch),
                     "free_batches": ",".join(str(b) for b in part.batch[part.ratio <= 1 + tol]) or "none",
                     "min_ratio": best.ratio, "min_ratio_batch": int(best.batch), "max_ratio": part.ratio.max(),
                     "max_ratio_batch": int(part.loc[part.ratio.idxmax()].batch),
                     "cost_model_worst_miss": (cells.measured_over_predicted - 1).abs().max()})
    return pd.DataFrame(rows)


NOTE = ("Decode step of Orthros over the Transformer's on the same engine and device (random weights, a K/V cache of "
        "random values at each context; model, device and commit in the conditions column), each arch at its faster "
        "decode-attention kernel in each cell (FlashAttention-2 or the matmul route; the audit's C30/C21 evidence uses "
        "FlashAttention-2 for both); predicted_ratio is the cost model's ratio for the same cells "
        "(per phase max(bytes / HBM bandwidth, FLOPs / kernel rate) plus a per-kernel cost fitted to the committed "
        "batch-2 rows, before these cells were measured). free_batches: the batches at which Orthros costs at most "
        f"{TOL:.0%} more; cost_model_worst_miss: the largest |measured / predicted - 1| over both archs' cells at "
        "that context's batches (a batch only one arch fits is left out, as it is of the ratios). The paper measured "
        "batch 2 only (1x H100, SGLang; Table 4's decode-only throughput). Rows measured before the last change to "
        "models/ are marked stale in the claims audit (paper_tables/claims_audit.md, C21 and C30).")


def summary_table(frame: pd.DataFrame | None, missing: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(limits, ratios)``: :func:`cost_limits` and the ``best``-kernel rows of :func:`step_ratios`, rounded, with
    the conditions; one ``not run`` row each when there are no measured pairs."""
    ratios = step_ratios(frame) if frame is not None and not frame.empty else pd.DataFrame()
    if ratios.empty:
        empty = pd.DataFrame([{"status": f"not run: {missing}"}])
        return empty, empty
    cond = conditions(frame)
    limits = cost_limits(frame).round(3).assign(conditions=cond)
    best = ratios[ratios.kernel == "best"].drop(columns="kernel").round(3).assign(conditions=cond)
    return limits, best


def conditions(frame: pd.DataFrame, path: str = PATH) -> str:
    """The measurement's conditions in one line (shape, dtype, window, steps, device, commits)."""
    ok = _ok(frame, path)
    win = ok.window.dropna().unique()
    return (f"{ok['shape'].iloc[0]} shape, random {ok['dtype'].iloc[0]} weights, Orthros w={int(win[0])}, engine "
            f"{path} + CUDA graphs, {int(ok.steps.iloc[0])} steps x median of {int(ok.repeats.iloc[0])}, "
            f"{ok.gpu_name.iloc[0]} (torch {ok.torch.iloc[0]}), commit {', '.join(sorted(set(ok.commit.astype(str))))}")


def fig_decode_load(frame: pd.DataFrame | None, paper_ratio: float | None, out_dir: str | Path, missing: str,
                    save) -> list[Path]:
    """``fig_decode_load.{png,pdf}``: the measured step ratio Orthros / Transformer against batch (log x), one line
    per context (each arch at its faster kernel), the cost model's prediction dashed, and the paper's one point
    (batch 2, 128K/128, decode-only throughput Transformer / Orthros; H100 + SGLang) as a star. ``save`` writes the
    figure (:func:`suite.report.figures._save`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    ratios = step_ratios(frame) if frame is not None and not frame.empty else pd.DataFrame()
    if ratios.empty:
        ax.text(0.5, 0.5, f"not run: {missing}", ha="center", va="center", transform=ax.transAxes, wrap=True)
        ax.set_axis_off()
        return save(fig, Path(out_dir), "fig_decode_load")
    best = ratios[ratios.kernel == "best"]
    for i, (context, part) in enumerate(best.groupby("context")):
        color = f"C{i}"
        label = f"{context // 1024}K context"
        ax.plot(part.batch, part.ratio, "o-", color=color, label=f"{label}: measured")
        ax.plot(part.batch, part.predicted_ratio, "--", color=color, alpha=0.7, label=f"{label}: cost model")
    if paper_ratio is not None:
        ax.plot([2], [paper_ratio], "k*", markersize=12, label="paper, 128K/128, batch 2 (1x H100, SGLang)")
    ax.axhline(1 + TOL, color="grey", lw=0.8, ls=":")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("decode step, Orthros / Transformer")
    ax.set_title("Decode under load: the cost of Orthros's second token per sequence")
    ax.legend(fontsize=7, ncol=2)
    fig.text(0.01, 0.005, conditions(frame) + f"; dotted: +{TOL:.0%}", fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, Path(out_dir), "fig_decode_load")


def paper_batch2_ratio(table4: pd.DataFrame) -> float | None:
    """The paper's decode-step ratio at batch 2, 128K/128: Transformer / Orthros decode-only throughput."""
    rows = table4[(table4.metric == "decode_tok_s") & (table4.input_len == 131072) & (table4.output_len == 128)]
    by = rows.set_index("model").value
    return float(by["transformer"] / by["orthros"]) if {"transformer", "orthros"} <= set(by.index) else None
