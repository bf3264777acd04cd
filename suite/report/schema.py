"""The columns each measured results CSV must have for the renderers and the claims audit, with their types.

One entry per results file, keyed as ``suite.report.measured.load_measured`` names them (profile files by stem,
GPU files as ``gpu_<stem>``). Only the columns the renderers read are listed; any other column is fine, and a
file not listed here is checked only for the columns a claim names. Types: ``TEXT`` (a value in every row) and
``NUMBER`` (a number, or empty: an empty cell is "not measured"). To add a results file, add its entry here.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

TEXT, NUMBER = "text", "number"
SCHEMAS: dict[str, dict[str, str]] = {
    "quality": {"arch": TEXT, "task": TEXT, "metric": TEXT, "value": NUMBER, "status": TEXT},
    "conversion": {"variant": TEXT, "task": TEXT, "metric": TEXT, "value": NUMBER, "status": TEXT},
    "ablation": {"variant": TEXT, "size": TEXT, "task": TEXT, "metric": TEXT, "value": NUMBER, "n_params": NUMBER,
                 "status": TEXT},
    "mqar": {"arch": TEXT, "seq_len": NUMBER, "num_kv_pairs": NUMBER, "accuracy": NUMBER, "accuracy_far": NUMBER,
             "chance": NUMBER, "status": TEXT},
    "niah": {"arch": TEXT, "context_len": NUMBER, "depth": NUMBER, "accuracy": NUMBER, "train_len": NUMBER,
             "status": TEXT},
    "controls": {"experiment": TEXT, "control": TEXT, "arch": TEXT, "value": NUMBER, "threshold": TEXT,
                 "passed": TEXT},
    "prefill_cpu": {"arch": TEXT, "seq_len": NUMBER, "ms": NUMBER, "status": TEXT},
    "gpu_prefill": {"model": TEXT, "method": TEXT, "gpus": NUMBER, "seq_len": NUMBER, "ms": NUMBER, "status": TEXT},
    "gpu_e2e": {"model": TEXT, "batch": NUMBER, "input_len": NUMBER, "output_len": NUMBER, "ttft_s": NUMBER,
                "e2e_s": NUMBER, "output_tok_s": NUMBER, "decode_tok_s": NUMBER, "status": TEXT},
    "gpu_seq_parallel": {"arch": TEXT, "gpus": NUMBER, "seq_len": NUMBER, "ms": NUMBER, "status": TEXT},
    "gpu_niah": {"arch": TEXT, "device": TEXT, "context_len": NUMBER, "depth": NUMBER, "accuracy": NUMBER,
                 "status": TEXT},
}
SCHEMAS["gpu_controls"] = SCHEMAS["controls"]
SCHEMAS["gpu_mqar"] = SCHEMAS["mqar"]
SCHEMAS["gpu_quality"] = SCHEMAS["quality"]
SCHEMAS["gpu_ablation"] = SCHEMAS["ablation"]


def check_columns(frame: pd.DataFrame, path: str | Path, columns: dict[str, str]) -> pd.DataFrame:
    """``frame`` (read from ``path``) if it has every column of ``columns`` with values of its type; else
    ValueError naming the file, the column and, for a bad value, the data row (1 = first row after the header)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; the renderers need {list(columns)}")
    for col, kind in columns.items():
        values = frame[col]
        bad = values.isna() if kind == TEXT else values.notna() & pd.to_numeric(values, errors="coerce").isna()
        if bad.any():
            i = int(bad.to_numpy().argmax())
            what = "is empty" if kind == TEXT else f"holds {values.iloc[i]!r}, not a number"
            raise ValueError(f"{path} row {i + 1}: column {col!r} {what}")
    return frame


def validate(name: str, frame: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """``frame`` checked against ``SCHEMAS[name]`` (nothing to check for an unlisted name)."""
    return check_columns(frame, path, SCHEMAS.get(name, {}))
