"""Values the paper reports (transcribed from the seed notes), kept apart from anything measured.

``paper_tables/reported/`` holds one tidy CSV per table (``table{1,2,3,4,7}.csv``), ``figures.csv`` (annotated
figure values and axes), ``notes_derived.csv`` (numbers the seed notes computed from the tables, e.g. "+0.57"),
and ``conditions.csv`` (tokens, lengths, batch, hardware, timing scope, metric definition per table/figure).
Values are read as text first so the printed precision (``decimals``) survives: rounding checks need it.

Read by the report (:mod:`suite.report`) and by benchmarks that print the paper's numbers beside theirs
(:mod:`benchmarks.e2e_gpu`), so it sits below both.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

REPORTED_DIR = Path(__file__).resolve().parents[1] / "paper_tables" / "reported"
TABLE_FILES = ["table1.csv", "table2.csv", "table3.csv", "table4.csv", "table7.csv"]
TABLE_COLUMNS = ["table", "model", "variant", "scale", "tokens", "task", "task_label", "metric", "value", "unit",
                 "setting", "source", "seed_file"]
NOTES_COLUMNS = ["id", "statement", "value", "unit", "formula_id", "source", "seed_file"]
FIGURE_COLUMNS = ["figure", "panel", "model", "scale", "gpus", "seq_len", "quantity", "value", "unit", "x_label",
                  "x_unit", "y_label", "y_unit", "x_range", "note", "source", "seed_file"]
AVERAGE_TASKS = {"avg7": 7, "avg8": 8, "avg6": 6, "avg6_recall": 6}


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _read(path: Path, required: list[str]) -> pd.DataFrame:
    if not path.exists():
        raise ValueError(f"reported file missing: {path}")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return frame


def _numeric(frame: pd.DataFrame, path: Path, allow_empty: bool = False) -> pd.DataFrame:
    text = frame["value"].str.strip()
    frame = frame.assign(value_text=text, decimals=text.map(_decimals))
    values = pd.to_numeric(text.replace("", None) if allow_empty else text, errors="coerce")
    bad = frame.loc[values.isna() & ((text != "") | (not allow_empty)), "value_text"]
    if len(bad):
        raise ValueError(f"{path}: non-numeric value {bad.iloc[0]!r}")
    return frame.assign(value=values.astype(float))


def load_tables(directory: str | Path = REPORTED_DIR) -> pd.DataFrame:
    """All reported table cells, one row per cell.

    Returns a DataFrame with ``TABLE_COLUMNS`` plus ``value`` (float, in ``unit``: % for accuracy, s, tok/s),
    ``value_text`` (as printed), ``decimals`` (printed precision) and, for Table 4, ``input_len``, ``output_len``
    (tokens per request) and ``batch`` (requests) as floats. Raises ValueError on a missing file/column or a
    non-numeric value (naming the file and the value).
    """
    directory = Path(directory)
    frames = []
    for name in TABLE_FILES:
        path = directory / name
        frames.append(_numeric(_read(path, TABLE_COLUMNS), path))
    frame = pd.concat(frames, ignore_index=True)
    for col in ["input_len", "output_len", "batch"]:
        frame[col] = pd.to_numeric(frame[col].replace("", None), errors="coerce")
    return frame


def load_notes_derived(directory: str | Path = REPORTED_DIR) -> pd.DataFrame:
    """Numbers the seed notes derived from the tables (differences, speedups); same value columns as tables."""
    path = Path(directory) / "notes_derived.csv"
    frame = _numeric(_read(path, NOTES_COLUMNS), path)
    if frame["id"].duplicated().any():
        raise ValueError(f"{path}: duplicate id {frame.loc[frame['id'].duplicated(), 'id'].iloc[0]!r}")
    return frame


def load_figures(directory: str | Path = REPORTED_DIR) -> pd.DataFrame:
    """Annotated figure values and axes (Figs. 2-4). ``value`` is NaN on rows that only describe axes."""
    path = Path(directory) / "figures.csv"
    return _numeric(_read(path, FIGURE_COLUMNS), path, allow_empty=True)


def load_conditions(directory: str | Path = REPORTED_DIR) -> pd.DataFrame:
    """Per table/figure conditions (tokens, seq length, batch, hardware, GPUs, framework, timing scope, metric)."""
    path = Path(directory) / "conditions.csv"
    return _read(path, ["item", "tokens", "seq_len", "batch", "hardware", "gpus", "framework", "timing_scope",
                        "metric_definition", "average_definition"]).set_index("item")


def cell(tables: pd.DataFrame, table: str, model: str, task: str | None = None, metric: str | None = None,
         scale: str | None = None, variant: str | None = None, setting: str | None = None) -> pd.Series:
    """The one reported row matching the filters; ValueError naming the filters if none or several match."""
    mask = (tables["table"] == table) & (tables["model"] == model)
    for col, val in [("task", task), ("metric", metric), ("scale", scale), ("variant", variant), ("setting", setting)]:
        if val is not None:
            mask &= tables[col] == val
    hits = tables[mask]
    if len(hits) != 1:
        raise ValueError(f"{len(hits)} reported cells match table={table} model={model} task={task} metric={metric} "
                         f"scale={scale} variant={variant} setting={setting}")
    return hits.iloc[0]
