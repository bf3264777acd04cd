"""The conversion experiment's table (Table 2): its title and note, and the measured rows of the four arms on a real
pretrained LM (:func:`table2_rows`; the loss gap of conversion against Base CPT is drawn by
:mod:`suite.experiments.conversion.figure`). The render puts them after the miniature's rows (``conversion.csv``,
matched on variant by :func:`suite.report.tables.quality_table`).

Inputs (``results/<profile>/``, written by the DAG's pretrained rules): ``pretrained.csv`` (benchmark rows of every
arm), ``pretrained_ppl.csv`` (held-out NLL by position bucket), ``pretrained_identity.csv`` (the conversion identity
control), ``pretrained_niah.csv``, ``pretrained_loss.csv`` and ``pretrained_evals.csv`` (continued-training and held-out
curves), ``pretrained_lr.csv`` (the rate sweep's pick). Pure functions of DataFrames.

A benchmark cell is the mean over the arm's seeds of the task's table metric (:func:`suite.eval.controls.table_metric`:
acc_norm for ARC-C, HellaSwag and OBQA, acc elsewhere: this suite's choice, as no seed note says which of the
paper's columns use Norm). Its status says what it may be used
for (:func:`suite.eval.controls.benchmark_verdict`, :func:`suite.eval.controls.at_chance`):

* ``no verdict ...``: the task's benchmark controls did not both pass (e.g. the base model itself is within 2 stderr
  of chance on it), so no arm's score on it says anything here;
* ``at chance (n=..., stderr ...)``: this arm is within 2 stderr of chance;
* ``ok`` otherwise.

The 8-task average (``avg8``, the paper's Table 2 average) is taken per seed over the tasks every arm measured.
conversion - base_cpt and converted - base are compared per task and over those tasks, per document where the
per-document outcomes were collected (``pretrained_pairs.csv``), paired per seed, with 95% CIs
(:func:`suite.report.bench_audit.difference`).
"""
from __future__ import annotations

import math

import pandas as pd

from suite.eval.controls import at_chance, at_chance_text, benchmark_verdict, table_metric
from suite.report.bench_audit import difference
from suite.report.measured import human_count
from suite.report.stats import mean_std, paired, per_seed
from suite.report.verdicts import comparison_text

TITLE = "Table 2: conversion of 8B models"
NOTE = ("Two kinds of measured rows, neither an 8B model: (1) rows named after a real pretrained model (e.g. "
        "SmolLM2-135M-Instruct): its four arms (Base; Orthros converted with no training; Base CPT; Orthros "
        "conversion, continued on the same tokens) scored on the paper's benchmarks, each cell the mean over "
        "data-order seeds with its split, n, stderr and chance, 'at chance' or 'no verdict at this scale' "
        "where the benchmark controls say so, the 'conversion - base_cpt' and 'converted - base' rows per task "
        "and over the tasks, compared per document (McNemar or a paired bootstrap, docs/verdicts.md) and per "
        "seed, with 95% CIs; (2) rows matched on variant only: the suite's own 1M-parameter Transformer "
        "converted and continued, scored by held-out byte perplexity (a proxy). Compare conversion with "
        "base_cpt, not with base.")

TASKS = ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande", "mmlu"]
LABELS = {"arc_challenge": "ARC-C", "arc_easy": "ARC-E", "hellaswag": "HellaSwag", "openbookqa": "OpenBookQA",
          "piqa": "PIQA", "social_iqa": "Social-IQa", "winogrande": "WinoGrande", "mmlu": "MMLU"}
ARMS = {"base": "Base (pretrained, untouched)", "converted": "Orthros, converted, no training",
        "base_cpt": "Base CPT", "conversion": "Orthros conversion", "random_init": "random init (negative control)"}
COLUMNS = ["model", "variant", "scale", "task", "metric", "reported", "measured", "measured_std", "n_seeds", "diff",
           "unit", "paper_scale_conditions", "measured_scale_conditions", "status"]


def headline(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured (status ok) rows of the paper's 8 tasks on each task's table metric."""
    ok = frame[(frame["status"] == "ok") & frame["task"].isin(TASKS)]
    return ok[ok["metric"] == ok["task"].map(table_metric)]


def _shots(frame: pd.DataFrame) -> list:
    return sorted(frame["num_fewshot"].dropna().unique()) if "num_fewshot" in frame else [None]


def _at(frame: pd.DataFrame, shots) -> pd.DataFrame:
    return frame if shots is None or "num_fewshot" not in frame else frame[frame["num_fewshot"] == shots]


def _cell_note(rows: pd.DataFrame) -> str:
    n = int(rows["n_samples"].astype(float).mean()) if "n_samples" in rows else 0
    stderr = math.sqrt((rows["stderr"].astype(float) ** 2).mean()) if "stderr" in rows else float("nan")
    chance = rows["chance"].astype(float).mean() if "chance" in rows else float("nan")
    return f"n={n}, stderr {100 * stderr:.2g}, chance {100 * chance:.3g}"


def _conditions(rows: pd.DataFrame, shots) -> str:
    first = rows.iloc[0]
    parts = [f"{first.get('base_model', '')} {human_count(float(first['base_n_params']))} params"
             if "base_n_params" in rows else ""]
    extra = rows["tokens_extra"].astype(float).max() if "tokens_extra" in rows else 0
    parts.append(f"+{human_count(extra)} tokens (T={int(float(first['train_seq_len']))})" if extra else
                 "no continued training")
    for col in ("split", "source"):
        if col in rows and str(first[col]) not in ("", "nan"):
            parts.append(str(first[col]))
    if shots is not None:
        parts.append(f"{int(shots)}-shot")
    if "limit" in rows and str(first["limit"]) not in ("", "nan"):
        parts.append(f"limit {float(first['limit']):g}")  # 300, not the 300.0 of a column that also holds 0.02
    parts += [str(first.get("quantization", "")), _all(rows, "device"), str(first.get("dtype", ""))]
    return ", ".join(p for p in parts if p and p != "nan")


def _all(rows: pd.DataFrame, column: str) -> str:
    """Every value of ``column`` among ``rows``, first seen first, joined (the cards a row's seeds ran on)."""
    return " / ".join(str(v) for v in rows[column].dropna().unique()) if column in rows else ""


def table2_rows(pre: pd.DataFrame | None, controls: pd.DataFrame | None = None, ppl: pd.DataFrame | None = None,
                identity: pd.DataFrame | None = None, label: str = "", train: pd.DataFrame | None = None,
                pairs: pd.DataFrame | None = None, where: str = "pretrained_pairs.csv",
                lr: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured Table 2 rows (``COLUMNS``) of the real-model arms: benchmark cells (``pre``, pretrained.csv), the
    held-out loss after continued training (``train``), held-out NLL by position (``ppl``) and the identity control;
    empty when none of them exists. ``controls``: the profile's controls.csv (the benchmark controls decide which
    tasks can give a verdict); ``label`` marks the profile (e.g. ``gpu profile``); ``pairs``: the arms' per-document
    outcomes (the pairs file ``where``, :mod:`suite.report.documents`; None where it is absent), so that the arms'
    comparisons are made per document; ``lr``: the rate sweep's pick (pretrained_lr.csv)."""
    frames = [f for f in (pre, identity, train, ppl, lr) if f is not None and not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    model = next((str(f["base_model"].iloc[0]) for f in (pre, identity) if f is not None and "base_model" in f),
                 "pretrained base model")
    name = f"{model} (measured{', ' + label if label else ''})"
    scale = human_count(float(pre["base_n_params"].iloc[0])) if pre is not None and len(pre) else ""
    rows = []
    heads = headline(pre) if pre is not None and len(pre) else pd.DataFrame(columns=["variant", "task"])
    for shots in _shots(heads) if len(heads) else []:
        at = _at(heads, shots)
        for variant in [v for v in ARMS if v in set(at["variant"])]:
            arm = at[at["variant"] == variant]
            for task in [t for t in TASKS if t in set(arm["task"])]:
                cell = arm[arm["task"] == task].assign(value=lambda d: d["value"].astype(float) * 100)
                mean, std, n = mean_std(cell)
                near, _, stderr, docs = at_chance(cell.assign(value=cell["value"] / 100))
                verdict = benchmark_verdict(controls, task, shots if shots is not None else 0)
                status = verdict or (f"{at_chance_text(docs, stderr)}" if near else f"ok ({_cell_note(cell)})")
                rows.append(dict(model=name, variant=variant, scale=scale, task=LABELS[task],
                                 metric=_metric(cell, shots), measured=mean, measured_std=std, n_seeds=n,
                                 unit="%", measured_scale_conditions=_conditions(cell, shots), status=status))
            rows.append(_average_row(at, variant, name, scale, shots, controls))
        rows += _comparison_rows(at, name, scale, shots, controls, pairs, where)
    rows += lr_rows(lr, name, scale) + _train_rows(train, name, scale) + _ppl_rows(ppl, name, scale)
    rows += _identity_rows(identity, name, scale)
    return pd.DataFrame(rows, columns=COLUMNS)


def _train_rows(train: pd.DataFrame | None, name: str, scale: str) -> list[dict]:
    """Held-out loss of each continued arm after training (mean over seeds), and conversion - base_cpt paired per
    seed with its 95% CI."""
    if train is None or train.empty:
        return []
    out, by = [], {v: g.rename(columns={"val_loss": "value"}) for v, g in train.groupby("arch")}
    for variant, g in by.items():
        mean, std, n = mean_std(g)
        out.append(dict(model=name, variant=variant, scale=scale, task="held-out loss after continued training",
                        metric="nats/token (lower is better)", measured=mean, measured_std=std, n_seeds=n,
                        unit="nats", status="measured only (the paper reports no held-out loss)",
                        measured_scale_conditions=f"+{human_count(float(g['tokens'].max()))} tokens, "
                                                  f"T={int(g['seq_len'].iloc[0])}, {_all(g, 'device')}, "
                                                  f"{g['dtype'].iloc[0]}"))
    if {"conversion", "base_cpt"} <= set(by):
        est = paired(per_seed(by["conversion"]), per_seed(by["base_cpt"]), "difference", "seeds")
        out.append(dict(model=name, variant="conversion - base_cpt", scale=scale,
                        task="held-out loss after continued training", metric="difference, nats/token",
                        measured=est.value, unit="nats", status=comparison_text(est),
                        measured_scale_conditions="same batches"))
    return out


def _metric(cell: pd.DataFrame, shots) -> str:
    return cell["metric"].iloc[0] + (f", {int(shots)}-shot" if shots is not None else "")


def per_seed_average(arm: pd.DataFrame, tasks: list[str]) -> pd.Series:
    """The arm's mean over ``tasks`` per seed (in %)."""
    part = arm[arm["task"].isin(tasks)]
    return part.assign(value=part["value"].astype(float) * 100).groupby(part["seed"].astype(str))["value"].mean()


def _average_row(at: pd.DataFrame, variant: str, name: str, scale: str, shots, controls) -> dict:
    tasks = sorted(set.intersection(*(set(g["task"]) for _, g in at.groupby("variant"))))
    failed = [t for t in tasks if benchmark_verdict(controls, t, shots if shots is not None else 0)]
    arm = at[at["variant"] == variant]
    seeds = per_seed_average(at[at["variant"] == variant], tasks)
    mean, std = float(seeds.mean()), (float(seeds.std(ddof=1)) if len(seeds) > 1 else None)
    note = f"mean of {len(tasks)} tasks ({', '.join(LABELS[t] for t in tasks)})"
    if len(tasks) < len(TASKS):
        note += f"; the paper's avg8 has {len(TASKS)}"
    if failed:
        note += f"; {len(failed)} of them without a verdict (benchmark controls)"
    return dict(model=name, variant=variant, scale=scale, task="Avg (measured tasks)",
                metric="mean" + (f", {int(shots)}-shot" if shots is not None else ""), measured=mean,
                measured_std=std, n_seeds=len(seeds), unit="%",
                measured_scale_conditions=_conditions(arm.drop(columns=["source"], errors="ignore"), shots),
                status=f"ok ({note})")


def _comparison_rows(at: pd.DataFrame, name: str, scale: str, shots, controls, pairs, where: str) -> list[dict]:
    """conversion - base_cpt (the paper's C04 comparison) and converted - base: per task, then over the tasks both
    arms measured, compared per document where ``pairs`` (the pairs file ``where``) holds the documents
    (:func:`suite.report.bench_audit.difference`); a task whose benchmark controls failed gives no verdict."""
    out, k = [], f", {int(shots)}-shot" if shots is not None else ""
    for a, b in (("conversion", "base_cpt"), ("converted", "base")):
        if not {a, b} <= set(at["variant"]):
            continue
        arm_a, arm_b = at[at["variant"] == a], at[at["variant"] == b]
        tasks = [t for t in TASKS if t in set(arm_a["task"]) & set(arm_b["task"])]
        for task in tasks:
            est = difference(arm_a[arm_a["task"] == task], arm_b[arm_b["task"] == task], pairs, where)
            verdict = benchmark_verdict(controls, task, shots if shots is not None else 0)
            out.append(dict(model=name, variant=f"{a} - {b}", scale=scale, task=LABELS[task],
                            metric=f"difference, {table_metric(task)}{k}", measured=est.value, unit="points",
                            status=verdict or comparison_text(est), measured_scale_conditions="same documents"))
        est = difference(arm_a[arm_a["task"].isin(tasks)], arm_b[arm_b["task"].isin(tasks)], pairs, where)
        out.append(dict(model=name, variant=f"{a} - {b}", scale=scale, task="Avg (measured tasks)",
                        metric=f"difference{k}", measured=est.value, unit="points", status=comparison_text(est),
                        measured_scale_conditions=f"{len(tasks)} tasks"))
    return out


def _ppl_rows(ppl: pd.DataFrame | None, name: str, scale: str) -> list[dict]:
    if ppl is None or ppl.empty:
        return []
    out = []
    for (variant, bucket), g in ppl.groupby(["variant", "bucket"], sort=False):
        mean, std, n = mean_std(g.rename(columns={"nll": "value"}))
        out.append(dict(model=name, variant=variant, scale=scale, task=f"held-out NLL, positions {bucket}",
                        metric="nats/token (lower is better)", measured=mean, measured_std=std, n_seeds=n,
                        unit="nats", status="measured only (the paper reports no held-out loss)",
                        measured_scale_conditions=f"{int(g['n_tokens'].iloc[0])} tokens of {int(g['n_docs'].iloc[0])} "
                                                  f"held-out documents, read to {int(g['max_len'].iloc[0])}"))
    return out


def _identity_rows(identity: pd.DataFrame | None, name: str, scale: str) -> list[dict]:
    if identity is None or identity.empty:
        return []
    r = identity.iloc[0]
    passed = str(r["passed"]).strip().lower() == "true"
    return [dict(model=name, variant="converted (w >= T) vs base", scale=scale, task="conversion identity",
                 metric="max |delta logit|, float32", measured=float(r["max_abs_dlogit"]), unit="logit",
                 measured_scale_conditions=f"{int(r['tokens'])} held-out tokens, {r['device']}",
                 status=("control passed" if passed else "control FAILED") + f" (threshold {r['threshold']}); at "
                        f"w={int(r['window'])} the held-out loss is {float(r['loss_window']):.4g} vs Base's "
                        f"{float(r['loss_base']):.4g} nats before training")]


def lr_rows(lr: pd.DataFrame | None, name: str, scale: str) -> list[dict]:
    """The rate each trained arm ran at, picked by the sweep before the long runs (pretrained_lr.csv), with every
    swept rate's held-out loss."""
    if lr is None or lr.empty:
        return []
    out = []
    for arch, g in lr.groupby("arch"):
        g = g.sort_values("lr")
        chosen = g[g["picked"].astype(str).str.lower() == "true"]
        swept = ", ".join(f"{r.lr:g}: {r.val_loss:.4f}" for r in g.itertuples())
        out.append(dict(model=name, variant=arch, scale=scale, task="learning rate (picked before the long runs)",
                        metric="peak lr", measured=float(chosen["lr"].iloc[0]) if len(chosen) else None,
                        unit="", status=f"rule: {g['rule'].iloc[0]}; held-out loss by rate: {swept}",
                        measured_scale_conditions=f"{human_count(float(g['tokens'].max()))} tokens a rate, "
                                                  f"seed {int(g['seed'].iloc[0])}, {int(g['steps'].iloc[0])} steps"))
    return out
