"""Claims measured on the paper's own metric: benchmark accuracy of the suite's models (a ``benchmark`` evidence).

A block names a results CSV (``{results}/quality.csv``, ``{results}/ablation.csv``, ``{gpu}/pretrained.csv``), the
column that names the models (``key``: arch or variant), the two models (``numerator``, ``denominator``), the tasks,
and what to compute (``op``), always zero-shot on each task's table metric (``suite.eval.controls.table_metric``),
in points:

- ``difference``: numerator - denominator of the task means, compared per document where the results file's
  pairs file holds the documents, and paired per seed (:func:`difference`);
- ``wins``: tasks where the numerator's mean is higher;
- ``size_wins``: the share of sizes where the numerator's task mean is higher (ablation.csv);
- ``gap_shrinks``: steps from one size to the next where numerator - denominator shrinks (ablation.csv).

``size``: ``largest`` (the size with the most parameters) or ``all``. ``controlled_tasks_only``: leave out the tasks
whose benchmark controls fail (named in the detail) and judge the rest, a declared narrower measure beside the block
over every task. The measured value and the minimum detectable effect (``mde``, points) are given whatever the
scale; a verdict needs every task's benchmark controls to have passed (``suite.eval.controls.benchmark_verdict``;
else the status reads ``invalid: ...``) and a compared model off chance on at least one task (else ``not testable at
this scale: ... at chance``).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from suite.eval.controls import at_chance, benchmark_verdict, table_metric
from suite.report import documents
from suite.report.measured import read_result, scale_text, sizes_by_params
from suite.report.stats import Estimate, paired

OPS = ("difference", "wins", "size_wins", "gap_shrinks")


def _rows(block: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """The ok, zero-shot rows of the block's tasks on their table metrics (and sizes)."""
    rows = frame[frame["task"].isin(block["tasks"]) & (frame["status"] == "ok")]
    rows = rows[rows["metric"] == rows["task"].map(table_metric)]
    if "num_fewshot" in rows:
        rows = rows[pd.to_numeric(rows["num_fewshot"], errors="coerce").fillna(0) == 0]
    if block.get("size", "all") == "largest" and "size" in rows and rows["size"].nunique() > 1:
        rows = rows[rows["size"].astype(str) == sizes_by_params(rows)[-1]]
    return rows


def _task_mean(rows: pd.DataFrame) -> pd.Series:
    """Per seed: the mean over tasks of the value, in points (seeds missing a task are dropped)."""
    pivot = rows.pivot_table(index="seed" if "seed" in rows else rows.index, columns="task", values="value")
    return 100 * pivot.dropna().mean(axis=1)


def difference(a: pd.DataFrame, b: pd.DataFrame, pairs: pd.DataFrame | None = None, where: str = "") -> Estimate:
    """Task-mean difference ``a - b`` in points (``a``, ``b``: the arms' rows, one size and shot count).

    Compared per document where ``pairs`` (the results file's pairs file ``where``, :mod:`suite.report.documents`)
    holds both arms' outcomes on every task: McNemar or the paired bootstrap over the documents. Where the arms also
    share 2 or more seeds, the seeds' part is added: the paired t over seeds (training variance; the seeds score the
    same documents) with the per-document SE, Welch-Satterthwaite degrees of freedom. Without per-document rows, the
    document-sample SE is the rows' ``stderr`` of both arms: an unpaired bound, labelled with why there are none."""
    by_seed = [_task_mean(rows) for rows in (a, b)]
    seeds = paired(*by_seed, "difference", "seeds")
    docs, why = documents.difference(pairs, a, b, where)
    if docs is None:
        se = _document_se(a, b)
        if se is None:
            return seeds
        docs = Estimate(seeds.value, 0.0, se, math.inf, seeds.n, f"stderr of both arms, unpaired bound: {why}")
    sample = f"document-sample SE {docs.se:.3g} ({docs.method})"
    if seeds.se is None:  # no seed pairs: the document sample alone
        shared = len(set(by_seed[0].index) & set(by_seed[1].index))
        seeds_text = f"{by_seed[0].size} vs {by_seed[1].size} seeds, {shared} shared: training variance not in it"
        return dataclasses.replace(docs, method=f"{sample if why else docs.method}; {seeds_text}")
    var_seeds = seeds.se ** 2
    se = math.sqrt(var_seeds + docs.se ** 2)
    # Welch-Satterthwaite: the seed part has n - 1 degrees of freedom, the document part (many documents) ~infinite
    df = (se ** 4 / (var_seeds ** 2 / seeds.df)) if var_seeds > 0 and not math.isinf(seeds.df) else math.inf
    return Estimate(seeds.value, 0.0, se, df, seeds.n, f"{seeds.method} + {sample}")


def _document_se(a: pd.DataFrame, b: pd.DataFrame) -> float | None:
    """SE (points) of the difference of two task means from each task's document-sample stderr (mean over seeds)."""
    if "stderr" not in a or "stderr" not in b:
        return None
    per = [pd.to_numeric(g.groupby("task")["stderr"].mean(), errors="coerce") for g in (a, b)]
    both = (per[0] ** 2 + per[1] ** 2).dropna()
    return 100 * math.sqrt(both.sum()) / len(both) if len(both) else None


def unit(block: dict, rows: pd.DataFrame | None = None) -> str:
    """The unit the block's value counts in, e.g. ``accuracy points, orthros - transformer (7-task mean)``."""
    a, b, n = block["numerator"], block.get("denominator", ""), len(block["tasks"])
    sizes = rows["size"].nunique() if rows is not None and "size" in rows else 0
    return {"difference": f"accuracy points, {a} - {b} ({n}-task zero-shot mean)",
            "wins": f"tasks (of {n}) where {a} is above {b}",
            "size_wins": f"share of the {sizes} measured sizes where {a} is above {b}",
            "gap_shrinks": f"size steps (of {max(sizes - 1, 0)}) where {a} - {b} shrinks"}[block["op"]]


def evaluate_benchmark(block: dict, results: str | Path | None, gpu: str | Path | None,
                       controls: pd.DataFrame | None) -> dict:
    """``dict(value, estimate, mde, status, conditions, detail, unit, rows)`` of a ``benchmark`` block (module
    docstring). ``status``: ``"ok"``, ``"not run: ..."``, ``"invalid: ..."`` or ``"not testable at this scale:
    ..."``; ``mde`` (points) is the smallest difference of the two models' task means the rows can detect."""
    path = Path(block["results"].format(results=results or "<no --results>", gpu=gpu or "<no --gpu-results>"))
    out = dict(value=None, estimate=None, mde=None, conditions="", detail="", unit=unit(block), rows=None)
    if not path.exists():
        return {**out, "status": f"not run: {path} missing"}
    frame = read_result(path, ("gpu_" if block["results"].startswith("{gpu}") else "") + path.stem)
    failing, left_out = {t: v for t in block["tasks"] if (v := benchmark_verdict(controls, t, 0))}, {}
    if block.get("controlled_tasks_only"):
        if len(failing) == len(block["tasks"]):
            return {**out, "status": f"invalid: no task of {len(failing)} has passing benchmark controls"}
        left_out, failing = failing, {}
        block = {**block, "tasks": [t for t in block["tasks"] if t not in left_out]}
        out["unit"] = unit(block)
    key, tasks, op = block["key"], block["tasks"], block["op"]
    rows = _rows(block, frame) if key in frame else frame.iloc[0:0]
    models = [block["numerator"]] + ([block["denominator"]] if "denominator" in block else [])
    per = {m: rows[rows[key] == m] for m in models}
    absent = [f"{m}: {t}" for m in models for t in tasks if per[m][per[m]["task"] == t].empty]
    if absent:
        return {**out, "status": f"not run: no measured zero-shot rows for {', '.join(absent[:4])}"
                                 + (f" (+{len(absent) - 4} more)" if len(absent) > 4 else "")}
    cells = ["task", "size"] if "size" in rows else ["task"]
    near = {(m, *(k if isinstance(k, tuple) else (k,))): at_chance(g)[0]
            for m in models for k, g in per[m].groupby(cells, dropna=False)}  # a pretrained arm's size is empty
    value, listed = _compute(op, per, models, rows)
    pairs = documents.pairs_path(path)
    est = difference(*(_largest(per[m]) for m in models), documents.read_pairs(pairs), str(pairs)) \
        if len(models) == 2 else None
    shares = f"{sum(near.values())} of {len(near)} (model, task{', size' if 'size' in rows else ''}) cells at chance"
    compared = pd.concat(per.values())
    out |= dict(value=value, estimate=est if op == "difference" else Estimate(value, None),
                mde=est.mde if est is not None else None, unit=unit(block, rows), rows=compared,
                conditions=scale_text(rows) + f" ({len(rows)} rows)",
                detail=f"{op} = {value:.4g}{'; ' + listed if listed else ''}; {shares}"
                + (f"; left out, their controls failing: {', '.join(left_out)}" if left_out else ""))
    if failing:
        first = next(iter(failing.items()))
        return {**out, "status": f"invalid: {len(failing)} of {len(tasks)} tasks without passing benchmark "
                                 f"controls ({first[0]}: {first[1]})"}
    if all(near.values()):
        return {**out, "status": "not testable at this scale: every compared model is within 2 stderr of chance "
                                 "on every task"}
    return {**out, "status": "ok"}


def _largest(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the largest size (all rows without a size column)."""
    if "size" not in rows or rows["size"].nunique() < 2:
        return rows
    return rows[rows["size"].astype(str) == sizes_by_params(rows)[-1]]


def _compute(op: str, per: dict, models: list[str], rows: pd.DataFrame) -> tuple[float, str]:
    """The block's number and, for a size-wise op, the per-size values it came from."""
    means = {m: 100 * per[m].groupby("task")["value"].mean() for m in models}
    if op == "difference":
        return float(means[models[0]].mean() - means[models[1]].mean()), ""
    if op == "wins":
        return float((means[models[0]] > means[models[1]]).sum()), ""
    by_size = {m: 100 * per[m].groupby(["size", "task"])["value"].mean().groupby("size").mean() for m in models}
    gap = (by_size[models[0]] - by_size[models[1]]).reindex(sizes_by_params(rows)).dropna()
    listed = f"{models[0]} - {models[1]} per size: " + ", ".join(f"{s}: {g:+.3g}" for s, g in gap.items())
    if op == "size_wins":
        return float((gap > 0).mean()), listed
    if op == "gap_shrinks":
        return float((gap.diff().dropna() < 0).sum()), listed
    raise ValueError(f"benchmark op {op!r} not in {OPS}")
