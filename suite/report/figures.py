"""The figures' shared helpers, and Fig. 4 (prefill, the system benchmarks) redrawn with the suite's measurements
beside (never on top of) the reported values.

The helpers: ``_save`` (PNG and PDF, no creation date), ``_empty`` (a panel that says why nothing is drawn),
``_scale`` and ``_caption`` (the measured scale in a title, the provenance in a line under the figure), ``_foot``,
``tokens_label`` and ``ARCH_COLOR``. Each experiment draws its own figure with them (``fig2``:
:mod:`suite.experiments.so_ablation.figure`, ``fig3``: :mod:`suite.experiments.niah.figure`, ``fig_mqar``:
:mod:`suite.experiments.mqar.figure`, ...).

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
import pandas as pd  # noqa: E402

from suite.report.measured import human_count, scale_text  # noqa: E402

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
