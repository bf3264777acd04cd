"""Figures 2-4 of the paper redrawn with the suite's measurements beside (never on top of) the reported values.

fig2: scaling + SO ablation. Left: reported Table 7 6-task averages vs model size (10B tokens each). Right: measured
      ablation metric vs n_params (results/<profile>/ablation.csv).
fig4: prefill. (a) one-GPU latency; (b) the one-GPU speedup against the paper's 3.5x at 128K; (c) the 8-GPU claim
      (21.9x at 1M) with the cost model's prediction and any multi-GPU measurement, apart from the one-GPU curve;
      (d) CPU curves from results/<profile>/prefill_cpu.csv.
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

from suite.report.measured import human_count, scale_text  # noqa: E402
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
        # no creation date in the PDF: a re-render of unchanged rows leaves the file byte for byte as it was
        metadata = {"CreationDate": None} if path.suffix == ".pdf" else None
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=metadata)
    plt.close(fig)
    return paths


# provenance columns: in a caption line at the figure's foot (_caption), not in the panel titles
CAPTION_COLUMNS = ["dtype", "backend", "device", "gpu_name", "kernel"]


def _scale(frame: pd.DataFrame, drop: tuple[str, ...] = ()) -> str:
    """:func:`scale_text` of ``frame`` without the provenance columns (they go to :func:`_caption`)."""
    return scale_text(frame.drop(columns=[*CAPTION_COLUMNS, *drop], errors="ignore"))


def _foot(fig, *captions: str) -> None:
    """Provenance lines under the figure."""
    text = "\n".join(textwrap.fill(c, 170) for c in captions if c)
    if text:
        fig.text(0.01, -0.01, text, fontsize=7, va="top")


def _empty(ax, text: str) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes,
            bbox=dict(boxstyle="round", fc="#f4f4f4", ec="#999999"))


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


def _caption(frame: pd.DataFrame | None, what: str) -> str:
    """One provenance line for a figure caption, e.g. ``GPU rows: NVIDIA H200, bfloat16, kernels sdpa-flash+...``."""
    if frame is None or frame.empty:
        return ""
    parts = []
    for col, label in (("gpu_name", ""), ("device", ""), ("dtype", ""), ("backend", "kernels "), ("commit", "commit ")):
        if col in frame and frame[col].notna().any():
            values = frame[col].dropna().astype(str)
            values = sorted(set(values.str[:12] if col == "commit" else values))
            more = f" (+{len(values) - 3} more)" if len(values) > 3 else ""
            parts.append(label + "/".join(values[:3]) + more)
    return f"{what}: " + ", ".join(dict.fromkeys(parts))


def _speedups(rows: pd.DataFrame, slow: str = "transformer", fast: str = "orthros") -> pd.DataFrame:
    """Per (method, seq_len): ms of ``slow`` / ms of ``fast``."""
    t = rows[rows["arch"] == slow].groupby(["method", "seq_len"])["ms"].mean()
    o = rows[rows["arch"] == fast].groupby(["method", "seq_len"])["ms"].mean()
    return (t / o).dropna().rename("speedup").reset_index()


def _speedup_axes(ax, title: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: tokens_label(v)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("prefill speedup, Transformer ms / Orthros ms")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")


def _paper_marker(ax, rep: pd.Series, marker: str) -> None:
    gpus = int(rep["gpus"])
    ax.scatter([float(rep["seq_len"])], [float(rep["value"])], marker=marker, s=180, color="black", zorder=5,
               label=f"paper: {rep['value']:g}x, {gpus} GPU{'s' if gpus > 1 else ''} at {tokens_label(rep['seq_len'])}")


def fig4(figures: pd.DataFrame, gpu_prefill: pd.DataFrame | None, cpu_prefill: pd.DataFrame | None,
         out_dir: str | Path, missing_gpu: str, missing_cpu: str,
         seq_parallel: pd.DataFrame | None = None) -> list[Path]:
    """Prefill (Fig. 4) in four panels: (a) one-GPU latency (ms, log-log) at the Qwen3-8B shape; (b) the one-GPU
    claim: Transformer ms / Orthros ms against length, measured on one GPU (the one-layer x 36 rows reach 1M), beside
    the paper's 3.5x (1 GPU, 128K); (c) the 8-GPU claim, kept apart: the paper's 21.9x (8 GPUs, sequence parallel,
    1M) beside the cost model's 8-GPU prediction (a prediction, dashed) and any measured multi-GPU rows
    (``seq_parallel``), never the one-GPU curve; (d) the CPU sweep of the ~1M-parameter trained models, a different
    scale on its own axes. Archs or lengths with no measurement are listed as not run. Provenance goes in one
    caption line per source."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 11))
    (a, b), (c, d) = axes
    rep = {g: figures[(figures["figure"] == "Figure 4") & (figures["gpus"] == str(g))].iloc[0] for g in (1, 8)}
    ok = None
    if gpu_prefill is not None:  # the 32K eager-vs-compiled A/B that picks the timed path is not a sweep
        ok = gpu_prefill[(gpu_prefill["status"] == "ok") & (gpu_prefill["method"] != "path selection")]
    one = ok[pd.to_numeric(ok["gpus"]) == 1] if ok is not None else None
    if one is None or one.empty:
        _empty(a, f"1 GPU: not run\n{textwrap.fill(missing_gpu, 50)}")
    else:
        for (arch, method), rows in one.groupby(["arch", "method"], sort=False):
            rows = rows.sort_values("seq_len")
            a.plot(rows["seq_len"], rows["ms"], marker="o", linestyle="-" if method == "full-model" else ":",
                   color=ARCH_COLOR.get(arch), label=f"{arch} ({method})")
        a.legend(fontsize=7, loc="upper left")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: tokens_label(v)))
    a.axvline(float(rep[1]["seq_len"]), color="black", alpha=0.3, linestyle="-.")
    a.set_xlabel("sequence length (tokens)")
    a.set_ylabel("prefill latency (ms)")
    a.set_title("(a) 1 GPU: Qwen3-8B shape, random bf16 weights, prefill only", fontsize=9)
    a.grid(alpha=0.3, which="both")

    if one is not None and not one.empty:
        for method, rows in _speedups(one).groupby("method"):
            b.plot(rows["seq_len"], rows["speedup"], marker="o", linestyle="-" if method == "full-model" else ":",
                   color="tab:purple", label=f"measured, 1 GPU ({method})")
    _paper_marker(b, rep[1], "*")
    _speedup_axes(b, "(b) the 1-GPU claim (3.5x at 128K): speedup vs length, one GPU")

    eight = _speedups(ok[pd.to_numeric(ok["gpus"]) == 8]) if ok is not None else pd.DataFrame()
    for method, rows in eight.groupby("method") if len(eight) else []:
        c.plot(rows["seq_len"], rows["speedup"], linestyle="--", color="tab:gray",
               label="cost model, 8 GPUs (a prediction, not a measurement)" if method == "cost-model prediction"
               else f"measured, 8 GPUs ({method})")
    if seq_parallel is not None and "arch" in seq_parallel:
        sp_ok = seq_parallel[(seq_parallel["status"] == "ok") & (pd.to_numeric(seq_parallel["gpus"]) > 1)]
        for gpus, rows in sp_ok.groupby("gpus"):
            ratio = _speedups(rows)
            if len(ratio):
                c.plot(ratio["seq_len"], ratio["speedup"], marker="s", linestyle="-", color="tab:green",
                       label=f"measured, {int(gpus)} GPUs (sequence parallel)")
    else:
        c.plot([], [], " ", label="measured with several GPUs: not run (no seq_parallel.csv)")
    _paper_marker(c, rep[8], "P")
    _speedup_axes(c, "(c) the 8-GPU claim (21.9x at 1M, sequence parallel): kept apart from the 1-GPU curve")

    cpu_ok = cpu_prefill[cpu_prefill["status"] == "ok"] if cpu_prefill is not None else None
    if cpu_ok is None or cpu_ok.empty:
        _empty(d, "CPU sweep: not run\n" + textwrap.fill(missing_cpu, 50))
    else:
        for arch, rows in cpu_prefill.groupby("arch", sort=False):
            good = rows[rows["status"] == "ok"].sort_values("seq_len")
            lost = rows[rows["status"] != "ok"]
            note = f" (not run at {', '.join(tokens_label(n) for n in lost['seq_len'])})" if len(lost) else ""
            if len(good):
                d.plot(good["seq_len"], good["ms"], marker="x", linestyle=":", color=ARCH_COLOR.get(arch),
                       label=f"{arch}{note}")
            else:
                d.plot([], [], " ", label=f"{arch}: {lost['status'].iloc[0]}")
        d.set_xscale("log", base=2)
        d.set_yscale("log")
        d.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: tokens_label(v)))
        d.legend(fontsize=7, loc="upper left")
        d.grid(alpha=0.3, which="both")
    d.set_xlabel("sequence length (tokens)")
    d.set_ylabel("prefill latency (ms)")
    measured = cpu_ok is not None and "n_params" in cpu_ok and len(cpu_ok)
    params = human_count(pd.to_numeric(cpu_ok["n_params"]).median()) if measured else "?"
    d.set_title(f"(d) CPU: the trained {params}-parameter models of this profile (not the 8B shape)", fontsize=9)
    captions = [_caption(ok, "GPU rows"), _caption(seq_parallel, "multi-GPU rows"), _caption(cpu_ok, "CPU rows"),
                "Paper: Qwen3-8B vs Orthros-8B; 3.5x at 128K on one GPU and 21.9x at 1M on 8 GPUs (sequence parallel), "
                "prefill only."]
    _foot(fig, *captions)
    fig.tight_layout()
    return _save(fig, Path(out_dir), "fig4")
