"""Paper tables with the suite's measurements beside them: reported | measured | diff | measured scale & conditions.

Pure functions from DataFrames to DataFrames / markdown. A reported cell gets a measured value only when this suite
measured the same task and metric for the same model (diff = measured - reported, in the reported unit); measured
rows with no paper counterpart (e.g. val_ppl, MQAR) are appended with the reported cell empty and a note that the
metric differs. A cell with nothing measured carries a status "not run: <why>".
"""
from __future__ import annotations

import pandas as pd

from suite.eval.controls import at_chance, at_chance_text, benchmark_verdict, chance_of, table_metric
from suite.report.measured import human_count, mqar_control_cell, scale_text, select, sizes_by_params
from suite.report.stats import mean_std

TABLE_COLUMNS = ["model", "variant", "scale", "task", "metric", "reported", "measured", "measured_std", "n_seeds",
                 "n", "stderr", "chance", "split", "diff", "unit", "paper_scale_conditions",
                 "measured_scale_conditions", "status"]
ACC_METRICS = {"acc", "acc_norm"}
BENCH_METRICS = ACC_METRICS | {"contains", "f1"}  # benchmark scores: per-task cells with n, stderr and chance
AT_CHANCE = "at chance"


def to_markdown(frame: pd.DataFrame) -> str:
    """GitHub markdown table of ``frame`` (pipes escaped, NaN/None as empty)."""
    def text(v):
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return ""
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(text, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(text(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def paper_conditions(conditions: pd.DataFrame, item: str) -> str:
    """The paper's scale & conditions for a table/figure, e.g. ``1.3B, 100B tokens, seq 2048, H100 80GB``."""
    c = conditions.loc[item]
    return (f"{c['scale']}, {c['tokens']} tokens, seq {c['seq_len']}, batch {c['batch']}, {c['hardware']}; "
            f"{c['average_definition']}")


def _as_percent(rows: pd.DataFrame) -> pd.Series:
    vals = pd.to_numeric(rows["value"], errors="coerce")
    unit = rows["unit"].astype(str).str.lower() if "unit" in rows else pd.Series("", index=rows.index)
    frac = unit.isin(["fraction", "ratio", "acc"]) | (~unit.isin(["%", "percent"]) & (vals <= 1.0))
    return vals.where(~frac, vals * 100)


def benchmark_cell(ok: pd.DataFrame, controls: pd.DataFrame | None, task: str, shots: int) -> dict:
    """A table cell of benchmark rows (one model, task, metric and shot count; one row per seed), in points: the mean
    over seeds with its std, the documents ``n``, the stderr of the document sample, chance, the split, and the
    status: ``at chance (n=..., stderr ...)`` when the mean lies within 2 stderr of chance (``diff`` then reads
    ``at chance``), ``below chance (...)`` when it lies further below, and why the cell gets no verdict where the
    task's benchmark controls did not both pass (``suite.eval.controls.benchmark_verdict``)."""
    value, std, n_seeds = mean_std(ok.assign(value=_as_percent(ok)))
    if "stderr" in ok and "n_samples" in ok:
        near, mean, stderr, n = at_chance(ok)
    else:
        near, mean, stderr, n = False, None, None, None
    status = [at_chance_text(n, stderr)] if near else []
    if not near and mean is not None and mean < chance_of(ok) - 2 * stderr:  # acc can favour short answers
        status.append(f"below chance (n={n}, stderr {stderr:.3g})")
    verdict = benchmark_verdict(controls, task, shots)
    status += [verdict] if verdict else []
    split = _first(ok, "split")
    return dict(measured=value, measured_std=std, n_seeds=n_seeds, n=n, split=split,
                stderr=None if stderr is None else 100 * stderr, chance=100 * chance_of(ok) if "chance" in ok else None,
                near=near, status="; ".join(status) or "ok")


def _shots(frame: pd.DataFrame) -> pd.Series:
    """Each row's shot count (0 where the frame has no ``num_fewshot`` column or the row none)."""
    if "num_fewshot" not in frame:
        return pd.Series(0.0, index=frame.index)
    return pd.to_numeric(frame["num_fewshot"], errors="coerce").fillna(0.0)


def quality_table(reported: pd.DataFrame, measured: pd.DataFrame | None, *, key: str, paper_cond: str,
                  missing: str, match_scale: bool = False, invalid: str | None = None,
                  controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Compare reported quality cells with a measured quality-style CSV.

    reported: rows of one table from ``reported.load_tables`` (value in %). measured: a results frame with columns
    ``key`` (arch or variant), task, metric, value, status (+ unit, size, n_params, tokens, seq_len, seed,
    num_fewshot, stderr, n_samples, chance, split) or None. Measured cells are the mean over seeds, with the sample
    std (``measured_std``) and ``n_seeds``. A reported benchmark cell is matched with the task's zero-shot rows on
    its table metric (``suite.eval.controls.table_metric``) and shown as :func:`benchmark_cell` makes it: ``diff``
    is ``at chance`` for a model at chance, and ``controls`` (the benchmark controls) decide whether the cell gets a
    verdict. ``missing`` is the reason printed when ``measured`` is None; ``invalid`` (a failed control of the
    perplexity experiments, see ``suite.eval.controls``) replaces the status of every other measured cell. Returns
    ``TABLE_COLUMNS`` rows.
    """
    rows, used = [], set()
    for r in reported.itertuples():
        base = dict(model=r.model, variant=r.variant, scale=r.scale, task=r.task_label, metric=r.metric,
                    reported=r.value, measured=None, diff=None, unit=r.unit, paper_scale_conditions=paper_cond,
                    measured_scale_conditions="", status=f"not run: {missing}")
        if measured is not None:
            filt = {key: r.model if key == "arch" else r.variant, "task": r.task}
            if match_scale:
                filt["size"] = r.scale
            hits = select(measured, filt)
            if len(hits) and hits["metric"].isin(BENCH_METRICS).any():  # zero-shot, on the task's table metric
                hits = hits[(hits["metric"] == table_metric(r.task)) & (_shots(hits) == 0)]
            used.update(hits.index)
            ok = hits[hits["status"] == "ok"]
            if len(ok) and ok["metric"].isin(BENCH_METRICS).all():
                cell = benchmark_cell(ok, controls, r.task, 0)
                base.update({k: v for k, v in cell.items() if k != "near"},
                            diff=AT_CHANCE if cell["near"] else cell["measured"] - r.value,
                            metric=f"{r.metric} (measured: {'/'.join(ok['metric'].unique())}, 0-shot)",
                            measured_scale_conditions=scale_text(ok, r.model))
            elif len(hits):
                base.update(status=str(hits["status"].iloc[0]) if len(ok) == 0 else
                            "not comparable: measured metric " + "/".join(ok["metric"].astype(str).unique()))
            else:
                base.update(status="not run: not measured by this suite (no row in results)")
        rows.append(base)
    if measured is not None:
        rest = measured.drop(index=list(used))
        rest = rest.assign(num_fewshot=_shots(rest)) if "num_fewshot" in rest else rest
        by = [key, "task", "metric"] + (["num_fewshot"] if "num_fewshot" in rest else []) + \
            (["size"] if "size" in rest else [])
        for _, g in rest.groupby(by, sort=False, dropna=False):
            rows.append(_measured_only(g, key, invalid, controls))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _measured_only(g: pd.DataFrame, key: str, invalid: str | None, controls: pd.DataFrame | None) -> dict:
    """A row for measured cells the paper has no counterpart for (another metric, shot count or scale)."""
    ok = g[g["status"] == "ok"]
    row = dict(model=g[key].iloc[0], variant=g[key].iloc[0], scale=_first(g, "size"), task=g["task"].iloc[0],
               metric=g["metric"].iloc[0], reported=None, diff=None,
               unit=str(g["unit"].iloc[0]) if "unit" in g else "", paper_scale_conditions="",
               measured_scale_conditions=scale_text(g, str(g[key].iloc[0])))
    if len(ok) and ok["metric"].isin(BENCH_METRICS).all():
        shots = int(_shots(ok).iloc[0])
        cell = benchmark_cell(ok, controls, str(ok["task"].iloc[0]), shots)
        return row | {k: v for k, v in cell.items() if k != "near"} | dict(
            metric=f"{row['metric']}, {shots}-shot", unit="%", diff=AT_CHANCE if cell["near"] else None,
            status=f"measured only: no reported cell at this scale, shot count or metric; {cell['status']}")
    val, std, n = mean_std(ok) if len(ok) else (None, None, 0)
    status = "measured only: the paper reports no such metric; not comparable" if len(ok) else str(g["status"].iloc[0])
    return row | dict(measured=val, measured_std=std, n_seeds=n,
                      status=f"{invalid} ({status})" if invalid and len(ok) else status)


def _first(frame: pd.DataFrame, column: str) -> str:
    """The column's first non-empty value as text ("" when there is none)."""
    values = frame[column].dropna() if column in frame else []
    return str(values.iloc[0]) if len(values) else ""


def _niah_views(niah: pd.DataFrame | None, name: str, suffix: str) -> list[tuple[str, pd.DataFrame | None, str, str]]:
    if niah is None or "train_len" not in niah:
        return [(name, niah, f"NIAH accuracy (mean over context x depth){suffix}", "accuracy")]
    inside = niah["context_len"] <= pd.to_numeric(niah["train_len"], errors="coerce")
    return [(name, niah[inside | (niah["status"] != "ok")], f"NIAH accuracy within the training length{suffix}",
             "accuracy"),
            (name, niah[~inside | (niah["status"] != "ok")], f"NIAH accuracy beyond the training length{suffix}",
             "accuracy")]


def params_label(rows: pd.DataFrame) -> str:
    """The measured parameter count of ``rows`` (their ``n_params``), human-readable: ``"272K"``, several distinct
    values joined by ``/``; ``""`` when none is measured."""
    if "n_params" not in rows:
        return ""
    values = pd.to_numeric(rows["n_params"], errors="coerce").dropna().unique()
    return "/".join(human_count(v) for v in sorted(values))


def held_out_trials(rows: pd.DataFrame) -> int | None:
    """Held-out trials behind a measured cell: MQAR's test sequences (``num_test``) or NIAH's needles (``n_trials``),
    summed over the rows; None when the rows do not say."""
    for column in ("num_test", "n_trials"):
        if column in rows:
            values = pd.to_numeric(rows[column], errors="coerce").dropna()
            if len(values):
                return int(values.sum())
    return None


def _mqar_views(mqar: pd.DataFrame | None, name: str,
                suffix: str) -> list[tuple[str, pd.DataFrame | None, str, str]]:
    """Table 3's MQAR views: accuracy at every measured (size, seq_len, pairs) cell, then the accuracy on answers
    beyond SWA's receptive field at the control cell of each size. The size is named in the label only when the
    rows hold several."""
    ok = mqar[mqar["status"] == "ok"] if mqar is not None and "accuracy_far" in mqar else None
    if ok is None or ok.empty:
        return [(name, mqar, f"MQAR accuracy{suffix}", "accuracy")]
    sizes = sizes_by_params(ok)
    unmeasured = mqar[~mqar["arch"].isin(ok["arch"])]                # archs that did not run: their status, everywhere

    def at(size: str, seq_len: int, kv: int) -> pd.DataFrame:
        rows = mqar[mqar["size"].astype(str) == size] if len(sizes) > 1 else mqar
        return pd.concat([rows[(rows["seq_len"] == seq_len) & (rows["num_kv_pairs"] == kv)], unmeasured])

    views, control = [], mqar_control_cell(ok)
    for size in sizes:
        label = f"{size}, " if len(sizes) > 1 else ""
        cells = ok[ok["size"].astype(str) == size][["seq_len", "num_kv_pairs"]].drop_duplicates()
        for seq_len, kv in sorted((int(t), int(k)) for t, k in cells.itertuples(index=False)):
            views.append((name, at(size, seq_len, kv), f"MQAR accuracy ({label}T={seq_len}, {kv} pairs){suffix}",
                          "accuracy"))
    for size in sizes if control else []:
        label = f"{size}, " if len(sizes) > 1 else ""
        views.append((name, at(size, *control), f"MQAR accuracy, answers beyond SWA's receptive field ({label}"
                                                f"T={control[0]}, {control[1]} pairs){suffix}", "accuracy_far"))
    return views


def _recall_views(mqar: pd.DataFrame | None, niah: pd.DataFrame | None, gpu_niah: pd.DataFrame | None = None,
                  gpu_mqar: pd.DataFrame | None = None) -> list[tuple[str, pd.DataFrame | None, str, str]]:
    """(experiment, rows, label, column) of every measured recall view of Table 3; the gpu profile's NIAH and MQAR
    (experiments "gpu_niah", "gpu_mqar") only where their CSVs exist."""
    views = _mqar_views(mqar, "mqar", "") if mqar is not None else \
        [("mqar", None, "MQAR accuracy (mean over seq_len x kv pairs)", "accuracy")]
    views += _niah_views(niah, "niah", "")
    if gpu_niah is not None:
        views += _niah_views(gpu_niah, "gpu_niah", " (gpu profile)")
    if gpu_mqar is not None:
        views += _mqar_views(gpu_mqar, "gpu_mqar", " (gpu profile)")
    return views


RECALL_COLUMNS = TABLE_COLUMNS[:TABLE_COLUMNS.index("n_seeds") + 1] + ["n_trials"] + \
    TABLE_COLUMNS[TABLE_COLUMNS.index("n_seeds") + 1:]


RECALL_TASKS = ["drop", "nq", "narrativeqa", "swde", "triviaqa", "fda", "squad"]  # suite.eval.harness.RECALL
NO_RECALL_AVERAGE = ("not run: the 6-task average needs SWDE, FDA, NarrativeQA and TriviaQA with their documents, "
                     "which no installed package ships (DROP and SQuAD are measured: their rows)")


def no_recall(quality: pd.DataFrame | None) -> pd.DataFrame | None:
    """``quality`` without the recall tasks' rows (Table 3 shows them)."""
    return None if quality is None else quality[~quality["task"].isin(RECALL_TASKS)]


def gpu_profile_rows(measured: pd.DataFrame | None, *, key: str, invalid: str | None,
                     controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """The gpu profile's measured-only rows (``results/gpu/{quality,ablation}.csv``) for Tables 1 and 7: their sizes
    marked "(gpu profile)", so they never merge with the other profile's cells nor match a reported one; ``invalid``:
    the gpu profile's own lm controls, ``controls``: its controls table, for the benchmark controls
    (``results/gpu/controls.csv``)."""
    if measured is None:
        return pd.DataFrame()
    marked = measured.assign(size=measured["size"].astype(str) + " (gpu profile)")
    no_reported = pd.DataFrame(columns=["model", "variant", "scale", "task", "task_label", "metric", "value", "unit"])
    return quality_table(no_reported, marked, key=key, paper_cond="", missing="", invalid=invalid, controls=controls)


def lm_table(reported: pd.DataFrame, measured: pd.DataFrame | None, gpu_measured: pd.DataFrame | None, *,
             paper_cond: str, missing: str, invalid: str | None, gpu_invalid: str | None,
             controls: pd.DataFrame | None, gpu_controls: pd.DataFrame | None,
             match_scale: bool = False) -> pd.DataFrame:
    """A table of the LM experiments (Table 1: the main comparison, Table 7: the SO ablation): the profile's measured
    cells beside the reported ones (:func:`quality_table`), then the gpu profile's measured-only rows
    (:func:`gpu_profile_rows`); the recall tasks' rows left out of both (Table 3 shows them)."""
    table = quality_table(reported, no_recall(measured), key="arch", paper_cond=paper_cond, missing=missing,
                          match_scale=match_scale, invalid=invalid, controls=controls)
    gpu = gpu_profile_rows(no_recall(gpu_measured), key="arch", invalid=gpu_invalid, controls=gpu_controls)
    return pd.concat([table, gpu], ignore_index=True) if len(gpu) else table


def recall_table(reported: pd.DataFrame, mqar: pd.DataFrame | None, niah: pd.DataFrame | None, *, paper_cond: str,
                 missing: str, invalid: dict[str, str | None] | None = None,
                 gpu_niah: pd.DataFrame | None = None, gpu_mqar: pd.DataFrame | None = None,
                 quality: pd.DataFrame | None = None, controls: pd.DataFrame | None = None,
                 flags: dict[str, list[tuple]] | None = None) -> pd.DataFrame:
    """Table 3: reported recall cells beside the recall tasks this suite measures (``quality``: the quality.csv rows
    of the recall tasks, contains-match in points, each with n, stderr and split; ``controls``: the benchmark
    controls), plus
    measured MQAR (every (size, seq_len, pairs) cell, and answers beyond SWA's receptive field at the control cell)
    and NIAH (within and beyond the training length) per arch as 'measured only' rows, and the same NIAH and MQAR rows
    of the gpu profile (``gpu_niah``, ``gpu_mqar``) where given. ``invalid`` maps an experiment ("mqar", "niah",
    "gpu_niah", "gpu_mqar") to its failed-control text (``suite.eval.controls.invalid_reason``), which replaces the
    status of its cells. ``flags`` maps an MQAR experiment to its baseline-soundness flags
    (``suite.report.soundness.mqar_flags``: (experiment, arch, size, why)): a Transformer that misses its positive
    control at a size voids its cells there (``invalid: ...``) and leaves the other archs' cells of that size without
    a comparison; another flagged baseline's cells say so. A measured row's ``scale`` is its measured parameter count
    (e.g. ``272K``), ``n_trials`` its held-out trials (MQAR test sequences, NIAH needles). Returns ``RECALL_COLUMNS``
    rows."""
    invalid, flags = invalid or {}, flags or {}
    recall = quality[quality["task"].isin(RECALL_TASKS)] if quality is not None else None
    if recall is not None and recall.empty:
        recall = None
    rows = [dict(model=r.model, variant=r.variant, scale=r.scale, task=r.task_label, metric=r.metric, reported=r.value,
                 measured=None, diff=None, unit=r.unit, paper_scale_conditions=paper_cond, measured_scale_conditions="",
                 status="not run: recall datasets (DROP, NarrativeQA, SWDE, TriviaQA, FDA, SQuAD) unavailable offline")
            for r in reported.itertuples()]
    if recall is not None:
        table = quality_table(reported, recall, key="arch", paper_cond=paper_cond, missing=missing, controls=controls)
        table.loc[table["task"].str.startswith("Avg"), "status"] = NO_RECALL_AVERAGE
        rows = table.to_dict("records")
    for name, frame, label, column in _recall_views(mqar, niah, gpu_niah, gpu_mqar):
        if frame is None:
            rows.append(dict(model="all", variant="", scale="", task=label, metric=column, reported=None,
                             measured=None, diff=None, unit="fraction", paper_scale_conditions="",
                             measured_scale_conditions="", status=f"not run: {missing.replace('quality', name)}"))
            continue
        for arch, g in frame.groupby("arch", sort=False):
            ok = g[g["status"] == "ok"]
            value = pd.to_numeric(ok[column], errors="coerce").mean() if len(ok) else None
            status = ("measured only: proxy for recall; not comparable with Table 3" if len(ok)
                      else str(g["status"].iloc[0]))
            if len(ok) and invalid.get(name):
                status = invalid[name]
            elif len(ok):
                status = _flagged(status, str(arch), set(frame["size"].dropna().astype(str)) if "size" in frame
                                  else set(), flags.get(name, []))
            rows.append(dict(model=arch, variant="", scale=params_label(ok), task=label,
                             metric=column, reported=None, measured=value, n_seeds=1 if len(ok) else 0,
                             n_trials=held_out_trials(ok) if len(ok) else None, diff=None,
                             unit="fraction", paper_scale_conditions="", measured_scale_conditions=scale_text(g, arch),
                             status=status))
    return pd.DataFrame(rows, columns=RECALL_COLUMNS)


def _flagged(status: str, arch: str, sizes: set[str], flags: list[tuple]) -> str:
    """A recall cell's status under the baseline flags of its experiment at its sizes."""
    void = [why for _, a, size, why in flags if a == "transformer" and size in sizes]
    if void and arch == "transformer":
        return f"invalid: {void[0]}"
    own = [why for _, a, size, why in flags if a == arch and a != "transformer" and (size is None or size in sizes)]
    notes = [f"baseline flag: {own[0]}"] if own else []
    notes += ["no comparison with the Transformer at this size (it misses its positive control)"] if void else []
    return "; ".join([status, *notes])


TTFT_SPREAD = 0.25  # a run's TTFT per input token may differ this much from the model's median before it is flagged


def ttft_suspects(e2e: pd.DataFrame) -> dict:
    """``{(arch, input_len, output_len): ratio}`` for ok rows whose TTFT per input token is off the same model's
    median over its configs by more than ``TTFT_SPREAD`` (prefill cost is near linear in the input at these
    lengths, so such a row points at a measurement problem, e.g. a first-call autotune or a fast path)."""
    ok = e2e[(e2e["status"] == "ok") & e2e["ttft_s"].notna()].copy()
    ok["per_token"] = pd.to_numeric(ok["ttft_s"]) / pd.to_numeric(ok["input_len"])
    out = {}
    for arch, g in ok.groupby("arch"):
        if len(g) < 3:
            continue
        median = g["per_token"].median()
        for r in g.itertuples():
            if abs(r.per_token / median - 1) > TTFT_SPREAD:
                out[(arch, float(r.input_len), float(r.output_len))] = r.per_token / median
    return out


def e2e_table(reported: pd.DataFrame, e2e: pd.DataFrame | None, *, paper_cond: str, missing: str) -> pd.DataFrame:
    """Table 4: reported TTFT / E2E / throughputs vs ``results/gpu/e2e.csv`` rows with the same model, batch and
    output length and an input length within 2% (diff = measured - reported, same unit). A row whose TTFT is
    off the model's other configs (:func:`ttft_suspects`) gets status ``ok (suspect: ...)``."""
    suspects = ttft_suspects(e2e) if e2e is not None else {}
    rows = []
    for r in reported.itertuples():
        base = dict(model=r.model, variant=r.variant, scale=r.scale, task=r.setting, metric=r.metric, reported=r.value,
                    measured=None, diff=None, unit=r.unit, paper_scale_conditions=paper_cond,
                    measured_scale_conditions="", status=f"not run: {missing}")
        if e2e is not None:
            hits = select(e2e, {"arch": r.model, "batch": float(r.batch), "output_len": float(r.output_len)})
            hits = hits[(pd.to_numeric(hits["input_len"]) - r.input_len).abs() <= 0.02 * r.input_len]
            ok = hits[hits["status"] == "ok"]
            if len(ok) and r.metric in ok:
                value = pd.to_numeric(ok[r.metric]).mean()
                flag = suspects.get((r.model, float(ok["input_len"].iloc[0]), float(r.output_len)))
                status = "ok" if flag is None else (f"ok (suspect: TTFT per input token {flag:.2f}x this model's "
                                                    f"median over its configs; re-measure)")
                base.update(measured=value, diff=value - r.value, status=status,
                            measured_scale_conditions=scale_text(ok, r.model))
            else:
                base.update(status=str(hits["status"].iloc[0]) if len(hits) else
                            "not run: this model/config is not in results/gpu/e2e.csv")
        rows.append(base)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return pd.concat([table, _speedup_rows(table)], ignore_index=True)


SPEEDUP_PAIRS = [("transformer", "orthros"), ("linear_hybrid", "orthros_h")]


def _speedup_rows(table: pd.DataFrame) -> pd.DataFrame:
    """TTFT and E2E speedups (baseline s / efficient s) per setting, reported and measured: the ratios are what
    compare across hardware and serving stacks, absolute seconds do not."""
    rows = []
    for (slow, fast), setting, metric in ((p, s, m) for p in SPEEDUP_PAIRS for s in table["task"].unique()
                                          for m in ("ttft_s", "e2e_s")):
        a = table[(table["model"] == slow) & (table["task"] == setting) & (table["metric"] == metric)]
        b = table[(table["model"] == fast) & (table["task"] == setting) & (table["metric"] == metric)]
        if a.empty or b.empty:
            continue
        a, b = a.iloc[0], b.iloc[0]
        ratio = lambda x, y: None if x is None or y is None or pd.isna(x) or pd.isna(y) else x / y  # noqa: E731
        rep, meas = ratio(a["reported"], b["reported"]), ratio(a["measured"], b["measured"])
        rows.append(dict(model=f"{fast} vs {slow}", variant="speedup", scale=b["scale"], task=setting,
                         metric=metric.replace("_s", "_speedup"), reported=rep, measured=meas,
                         diff=None if rep is None or meas is None else meas - rep, unit="x",
                         paper_scale_conditions=b["paper_scale_conditions"],
                         measured_scale_conditions=b["measured_scale_conditions"],
                         status=next((x for x in (a["status"], b["status"]) if str(x).startswith("ok (suspect")),
                                     "ok") if meas is not None else b["status"]))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def format_table(frame: pd.DataFrame, title: str, paper_cond: str, note: str = "") -> str:
    """Markdown for one rendered table: title, the paper's scale/conditions line, an optional note, the table."""
    view = frame.drop(columns=["paper_scale_conditions"])  # printed once, above the table
    if "measured_std" in view:
        trials = view["n_trials"] if "n_trials" in view else [None] * len(view)
        view["measured"] = [_mean_std_text(m, s, n, t) for m, s, n, t in zip(view["measured"], view["measured_std"],
                                                                             view["n_seeds"], trials)]
        view = view.drop(columns=["measured_std", "n_seeds", "n_trials"], errors="ignore")
    for col in ["reported", "diff"] + ([] if "measured_std" in frame else ["measured"]):
        view[col] = view[col].map(lambda v: "" if v is None or (not isinstance(v, str) and pd.isna(v))
                                  else v if isinstance(v, str) else f"{v:.6g}" if col != "diff" else f"{v:+.6g}")
    for col in ("stderr", "chance"):
        if col in view:
            view[col] = view[col].map(lambda v: "" if v is None or pd.isna(v) else f"{v:.3g}")
    if "n" in view:
        view["n"] = view["n"].map(lambda v: "" if v is None or pd.isna(v) else str(int(v)))
    parts = [f"# {title}", "", f"Paper scale & conditions: {paper_cond}", ""]
    if note:
        parts += [note, ""]
    parts.append(to_markdown(view))
    return "\n".join(parts) + "\n"


def _mean_std_text(mean, std, n, trials=None) -> str:
    """``"5.012 +- 0.013 (3 seeds)"`` for a measured cell, ``"0.997 (1 seed, 300 trials)"`` with held-out ``trials``,
    ``""`` when nothing was measured."""
    if mean is None or pd.isna(mean):
        return ""
    n = 0 if n is None or pd.isna(n) else int(n)
    of = "" if trials is None or pd.isna(trials) else f", {int(trials)} trials"
    if std is None or pd.isna(std):
        return f"{mean:.6g}" + (f" ({n} seed{of})" if n == 1 else "")
    return f"{mean:.6g} +- {std:.2g} ({n} seeds{of})"


PROMPT_COLUMNS = ["tokenizer", "task", "num_fewshot", "n_docs", "median_tokens", "p90_tokens", "max_tokens",
                  "share_above_128", "window", "share_above_window", "split", "status"]


def prompt_length_table(lengths: pd.DataFrame | None, missing: str) -> pd.DataFrame:
    """The prompt-length rows (``suite.eval.prompt_lengths``) with the shares in %, or one ``not run`` row."""
    if lengths is None or lengths.empty:
        return pd.DataFrame([{"status": f"not run: {missing}"}], columns=PROMPT_COLUMNS)
    out = lengths.assign(share_above_128=100 * pd.to_numeric(lengths["share_above_128"]),
                         share_above_window=100 * pd.to_numeric(lengths["share_above_window"]), status="ok")
    return out[PROMPT_COLUMNS].round(1)
