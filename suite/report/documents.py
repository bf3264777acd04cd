"""Benchmark accuracies of two models compared per document: the paired outcome tables ``suite.collect pairs``
writes beside a results CSV (``quality.csv`` -> ``quality_pairs.csv``) turned into the estimate of a difference of
task means.

A table counts, for one task, shot count, size and metric, the documents by ``(sum_a, sum_b)``: each arm's score on
the document summed over its seeds. The per-document difference is ``sum_a / k_a - sum_b / k_b`` (k: the arm's
seeds), in points. One task of 0/1 scores and one seed per arm: McNemar's test (:func:`suite.report.stats.mcnemar`);
otherwise the paired bootstrap over the documents, resampled within each task (:func:`suite.report.stats.
paired_bootstrap`). Where the arms share seeds, :func:`suite.report.bench_audit.difference` adds the seed part.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd

from suite.collect import PAIR_COLUMNS
from suite.provenance import read_csv
from suite.report.schema import NONNEG, TEXT, check_columns
from suite.report.stats import Estimate, mcnemar, paired_bootstrap

TOLERANCE = 1e-6  # the per-document mean of an arm and its rows' value agree to this (fractions)
TYPES = {"key": TEXT, "arm_a": TEXT, "arm_b": TEXT, "task": TEXT, "metric": TEXT, "seeds_a": TEXT, "seeds_b": TEXT,
         "n_docs": NONNEG, "sum_a": NONNEG, "sum_b": NONNEG, "count": NONNEG}


def pairs_path(results_csv: str | Path) -> Path:
    """The paired outcome tables beside a results CSV: ``results/default/quality.csv`` -> ``quality_pairs.csv``."""
    path = Path(results_csv)
    return path.with_name(f"{path.stem}_pairs.csv")


def read_pairs(path: str | Path) -> pd.DataFrame | None:
    """The tables of ``path``, or None when the file is absent (rows collected before per-document outcomes were
    kept). A header alone is a study that scored no benchmark document. ValueError naming the file and the
    columns it lacks, or the row and column of a value of the wrong type."""
    path = Path(path)
    if not path.exists():
        return None
    frame = read_csv(path)
    missing = [c for c in PAIR_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing} of a per-document pairs file (suite.collect pairs)")
    return check_columns(frame, path, TYPES)


def _one(rows: pd.DataFrame, column: str):
    values = rows[column].drop_duplicates() if column in rows else pd.Series([np.nan])
    if len(values) != 1:
        raise ValueError(f"rows of one compared cell hold {len(values)} values of {column}: {list(values)}")
    return values.iloc[0]


def _same(column: pd.Series, value) -> pd.Series:
    """Rows whose ``column`` equals ``value``: numbers numerically, text as text, empty matching empty."""
    if pd.isna(value):
        return column.isna()
    number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    if not pd.isna(number):
        return pd.to_numeric(column, errors="coerce") == number
    return column.astype(str) == str(value)


def _seed_names(rows: pd.DataFrame) -> pd.Series:
    """Each row's seed as the pairs file writes it (42, not 42.0; no seed: empty)."""
    return rows["seed"].map(lambda s: "" if pd.isna(s) else f"{int(float(s))}")


def _seeds(rows: pd.DataFrame) -> str:
    return "/".join(sorted(set(_seed_names(rows)) - {""}, key=int)) if "seed" in rows else ""


def _table(pairs: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame, where: str) -> pd.DataFrame | str:
    """One task's table oriented a, b (``sum_a``, ``sum_b``, ``count``, ``k_a``, ``k_b``), or why there is none.
    ValueError naming ``where`` when the table does not belong to the rows (other seeds, another mean)."""
    key = _key(pairs)
    arm_a, arm_b = _one(a, key), _one(b, key)
    cell = {c: _one(a, c) for c in ("size", "task", "num_fewshot", "metric")}
    mask = pd.Series(True, index=pairs.index)
    for column, value in cell.items():
        mask &= _same(pairs[column], value)
    forward = pairs[mask & (pairs["arm_a"] == arm_a) & (pairs["arm_b"] == arm_b)]
    backward = pairs[mask & (pairs["arm_a"] == arm_b) & (pairs["arm_b"] == arm_a)]
    if forward.empty and backward.empty:
        return f"no per-document rows of {arm_a} vs {arm_b} on {cell['task']} in {where}"
    table = forward if len(forward) else backward.rename(columns={"sum_a": "sum_b", "sum_b": "sum_a",
                                                                  "seeds_a": "seeds_b", "seeds_b": "seeds_a"})
    for arm, rows, side in ((arm_a, a, "a"), (arm_b, b, "b")):
        seeds = str(_one(table, f"seeds_{side}"))
        if set(seeds.split("/")) < set(_seeds(rows).split("/")):  # an arm's other seeds kept no documents
            rows = rows[_seed_names(rows).isin(seeds.split("/"))]
        if seeds != _seeds(rows):
            raise ValueError(f"{where}: {arm}'s {cell['task']} documents were scored by seeds {seeds}, its rows by "
                             f"seeds {_seeds(rows)}; collect the pairs file again from the same runs")
        k = len(seeds.split("/"))
        mean = float((table["count"] * table[f"sum_{side}"]).sum() / (table["count"].sum() * k))
        value = float(pd.to_numeric(rows["value"]).mean())
        if not math.isclose(mean, value, abs_tol=TOLERANCE):
            raise ValueError(f"{where}: {arm}'s {cell['task']} documents average {mean:.6g}, its rows {value:.6g}; "
                             "collect the pairs file again from the same runs")
        table = table.assign(**{f"k_{side}": k})
    return table


def difference(pairs: pd.DataFrame | None, a: pd.DataFrame, b: pd.DataFrame,
               where: str) -> tuple[Estimate | None, str]:
    """``(estimate, "")`` of the difference of task means ``a - b`` in points over the documents both arms scored
    (``a``, ``b``: the arms' rows of the compared tasks, one size, shot count and metric per task; ``pairs``: the
    pairs file ``where``), or ``(None, why)`` where a task has no table (``pairs`` None: the file is absent)."""
    if pairs is None:
        return None, f"no per-document rows ({where} missing)"
    tables = {}
    for task in sorted(set(a["task"]) & set(b["task"])):
        found = _table(pairs, a[a["task"] == task], b[b["task"] == task], where)
        if isinstance(found, str):
            return None, found
        tables[task] = found
    if not tables:
        return None, "no task both arms scored"
    diffs = {t: np.repeat(100 * (g["sum_a"] / g["k_a"] - g["sum_b"] / g["k_b"]).to_numpy(), g["count"].to_numpy())
             for t, g in tables.items()}
    only = next(iter(tables.values()))
    if len(tables) == 1 and (only[["k_a", "k_b"]] == 1).all(axis=None) and \
            only[["sum_a", "sum_b"]].isin([0, 1]).all(axis=None):  # one task of 0/1 outcomes, one seed each
        outcomes = [np.repeat(only[c].to_numpy(), only["count"].to_numpy()) for c in ("sum_a", "sum_b")]
        est = _points(mcnemar(*outcomes))
    else:
        est = paired_bootstrap(list(diffs.values()), strata="tasks", span=100.0)  # differences in points
    key = _key(pairs)
    kept = {side: _seeds_of(tables, side) for side in "ab"}
    fewer = [f"{kept[side]} of {_one(rows, key)}'s {_seeds(rows)}" for side, rows in (("a", a), ("b", b))
             if kept[side] != _seeds(rows)]
    if fewer:
        est = dataclasses.replace(est, method=f"{est.method}, documents of seeds {' and '.join(fewer)}")
    return est, ""


def _key(pairs: pd.DataFrame) -> str:
    return _one(pairs, "key") if len(pairs) else "arch"


def _seeds_of(tables: dict[str, pd.DataFrame], side: str) -> str:
    """The seeds whose documents a side's tables hold (one set for every task, else ValueError)."""
    return str(_one(pd.concat([t[[f"seeds_{side}"]] for t in tables.values()]), f"seeds_{side}"))


def _points(est: Estimate) -> Estimate:
    """A difference of fractions in points (x 100)."""
    return dataclasses.replace(est, value=100 * est.value, se=None if est.se is None else 100 * est.se,
                               interval=None if est.interval is None else tuple(100 * x for x in est.interval))
