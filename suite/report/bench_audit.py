"""Claims judged on the paper's own metric: benchmark accuracy of the suite's models (a claim's ``benchmark`` block).

A block names a results CSV (``{results}/quality.csv`` or ``{results}/ablation.csv``), the column that names the
models (``key``: arch or variant), the two models (``numerator``, ``denominator``), the tasks, and what to compute
(``op``), always zero-shot on each task's table metric (``suite.eval.controls.table_metric``), in points:

- ``value``: the numerator's mean over the tasks;
- ``difference``: numerator - denominator of the task means, per seed, under the seed-noise rule;
- ``wins``: tasks where the numerator's mean is higher;
- ``size_losses``: sizes where the numerator's task mean is not higher (ablation.csv);
- ``gap_shrinks``: steps from one size to the next where numerator - denominator shrinks (ablation.csv).

``size``: ``largest`` (the size with the most parameters) or ``all``. The measured value is given whatever the scale;
a verdict needs every task's benchmark controls to have passed (``suite.eval.controls.benchmark_verdict``) and at
least one task on which a compared model is not at chance. Otherwise the status says why there is no verdict, and the
audit falls back to the claim's proxy (``measure``) where it has one.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.eval.controls import at_chance, benchmark_verdict, table_metric
from suite.report.derived import EPS
from suite.report.measured import read_result, scale_text, sizes_by_params
from suite.report.stats import compare

OPS = ("value", "difference", "wins", "size_losses", "gap_shrinks")


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


def evaluate_benchmark(block: dict, results: str | Path | None, gpu: str | Path | None,
                       controls: pd.DataFrame | None) -> dict:
    """``dict(value, ok, status, conditions, noise, detail)`` of a claim's ``benchmark`` block (module docstring).
    ``status`` is ``"ok"`` for a verdict, else ``"not run: ..."``, ``"no verdict ..."`` or ``"at chance ..."``."""
    path = Path(block["results"].format(results=results or "<no --results>", gpu=gpu or "<no --gpu-results>"))
    out = dict(value=None, ok=None, conditions="", noise="", detail="")
    if not path.exists():
        return {**out, "status": f"not run: {path} missing"}
    frame = read_result(path, ("gpu_" if block["results"].startswith("{gpu}") else "") + path.stem)
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
            for m in models for k, g in per[m].groupby(cells)}
    value, noise = _compute(op, per, models, rows)
    shares = f"{sum(near.values())} of {len(near)} (model, task{', size' if 'size' in rows else ''}) cells at chance"
    out |= dict(value=value, noise=noise, conditions=scale_text(rows) + f" ({len(rows)} rows)",
                detail=f"paper's metric (zero-shot, {len(tasks)} tasks, points): {op} = {value:.4g}; {shares}")
    verdicts = {t: benchmark_verdict(controls, t, 0) for t in tasks}
    failing = {t: v for t, v in verdicts.items() if v}
    if failing:
        first = next(iter(failing.items()))
        return {**out, "status": f"no verdict at this scale: {len(failing)} of {len(tasks)} tasks without passing "
                                 f"benchmark controls ({first[0]}: {first[1]})"}
    if all(near.values()):
        return {**out, "status": "at chance: every compared model is within 2 stderr of chance on every task"}
    if "expect" not in block:
        return {**out, "status": "ok", "ok": None}
    ok = _meets(value, block["expect"])
    if op == "difference" and block.get("seed_noise"):
        cmp = compare(_task_mean(per[models[0]]).rename("value").to_frame().reset_index(),
                      _task_mean(per[models[1]]).rename("value").to_frame().reset_index())
        out["noise"] = cmp.text()
        if cmp.differs is False:
            ok = not block.get("claim_is_difference", False)
    return {**out, "status": "ok", "ok": bool(ok)}


def _meets(value: float, expect: dict) -> bool:
    return all((("ge" not in expect) or value >= expect["ge"] - EPS,
                ("le" not in expect) or value <= expect["le"] + EPS))


def _compute(op: str, per: dict, models: list[str], rows: pd.DataFrame) -> tuple[float, str]:
    """The block's number and, for a size-wise op, the per-size values it came from."""
    means = {m: 100 * per[m].groupby("task")["value"].mean() for m in models}
    if op == "value":
        return float(means[models[0]].mean()), ""
    if op == "difference":
        return float(means[models[0]].mean() - means[models[1]].mean()), ""
    if op == "wins":
        return float((means[models[0]] > means[models[1]]).sum()), ""
    by_size = {m: 100 * per[m].groupby(["size", "task"])["value"].mean().groupby("size").mean() for m in models}
    gap = (by_size[models[0]] - by_size[models[1]]).reindex(sizes_by_params(rows)).dropna()
    listed = ", ".join(f"{s}: {g:+.3g}" for s, g in gap.items())
    if op == "size_losses":
        return float((gap <= 0).sum()), f"{models[0]} - {models[1]} per size: {listed}"
    if op == "gap_shrinks":
        return float((gap.diff().dropna() < 0).sum()), f"{models[0]} - {models[1]} per size: {listed}"
    raise ValueError(f"benchmark op {op!r} not in {OPS}")
