"""Measured results produced by this suite (never the paper's numbers), loaded for the renderers and the audit.

File names follow the results conventions: ``results/<profile>/{quality,niah,mqar,ablation,conversion,prefill_cpu}.csv``
and ``results/gpu/{prefill,e2e,decode_load,niah,mqar,seq_parallel,controls,quality,ablation}.csv``. A missing file is
not an error here: it maps to ``None`` and the renderers print "not run: ..." cells. A corrupt file, or one without the
columns and types ``suite.report.schema`` lists for it, raises ValueError naming the file (and the column and row); a
``controls.csv`` whose ``passed`` is neither true nor false too (:func:`read_controls`, its one loader).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.provenance import read_csv
from suite.report.schema import validate

PRETRAINED_FILES = ["pretrained", "pretrained_ppl", "pretrained_identity", "pretrained_niah", "pretrained_loss",
                    "pretrained_train"]
PROFILE_FILES = ["quality", "niah", "mqar", "ablation", "conversion", "prefill_cpu", "controls", "prompt_lengths",
                 *PRETRAINED_FILES]
GPU_FILES = ["prefill", "e2e", "decode_load", "niah", "mqar", "seq_parallel", "controls", "quality", "ablation",
             *PRETRAINED_FILES]
SCALE_COLUMNS = ["n_params", "tokens", "tokens_extra", "seq_len", "context_len", "input_len", "output_len", "batch",
                 "gpus", "threads", "method", "kernel", "dtype", "backend", "device", "gpu_name"]


def read_result(path: str | Path, name: str) -> pd.DataFrame:
    """A results CSV checked against ``suite.report.schema.SCHEMAS[name]``; ValueError naming file, column, row."""
    return validate(name, read_csv(path), path)


CONTROL_FILES = {"controls", "gpu_controls"}


def read_controls(path: str | Path, name: str = "controls") -> pd.DataFrame:
    """A ``controls.csv`` (``suite.eval.controls``): checked against ``SCHEMAS[name]``, with its ``passed`` column
    as bool. The one loader of that file, for the audit and the renderers alike.

    Raises ValueError naming the file, the data row (1 = first row after the header) and the value when ``passed``
    is not true or false (any case), and as :func:`read_result` does for a missing column or an empty cell.
    """
    frame = read_result(path, name)
    text = frame["passed"].astype(str).str.strip().str.lower()
    bad = ~text.isin(["true", "false"])
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise ValueError(f"{path} row {i + 1}: column 'passed' holds {frame['passed'].iloc[i]!r}; a control either "
                         "passed or failed: expected true or false")
    return frame.assign(passed=text == "true")


def load_measured(results: str | Path | None, gpu_results: str | Path | None) -> dict[str, pd.DataFrame | None]:
    """Map of result name (``quality``, ..., ``gpu_prefill``, ``gpu_e2e``) to its DataFrame, or None if absent.
    Every present file is validated (``read_result``; controls files through ``read_controls``) before any is
    returned."""
    out: dict[str, pd.DataFrame | None] = {}
    for folder, names, prefix in ((results, PROFILE_FILES, ""), (gpu_results, GPU_FILES, "gpu_")):
        for name in names:
            path = Path(folder) / f"{name}.csv" if folder else None
            reader = read_controls if prefix + name in CONTROL_FILES else read_result
            out[prefix + name] = reader(path, prefix + name) if path is not None and path.exists() else None
    return out


def select(frame: pd.DataFrame, filters: dict | None) -> pd.DataFrame:
    """Rows matching every ``column: value`` (or ``column: [values]``) filter. Numbers compare numerically.

    Raises ValueError naming the column when a filter column is absent from the frame.
    """
    mask = pd.Series(True, index=frame.index)
    for col, want in (filters or {}).items():
        if col not in frame.columns:
            raise ValueError(f"filter column {col!r} not in results columns {list(frame.columns)}")
        wants = want if isinstance(want, list) else [want]
        if all(isinstance(w, (int, float)) for w in wants):
            mask &= pd.to_numeric(frame[col], errors="coerce").isin([float(w) for w in wants])
        else:
            mask &= frame[col].astype(str).isin([str(w) for w in wants])
    return frame[mask]


def human_count(n: float) -> str:
    for div, suffix in [(1e9, "B"), (1e6, "M"), (1e3, "K")]:
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}"
    return f"{n:.0f}"


def scale_text(rows: pd.DataFrame, label: str = "") -> str:
    """One-line measured scale & conditions, e.g. ``orthros 6.1M params, 2M tokens, T=256, cpu:x86_64x2``.

    Lists each distinct value of the scale columns present (n_params, tokens, seq_len, gpus, method, device, ...).
    """
    if rows is None or rows.empty:
        return ""
    parts = [label] if label else []
    for col in SCALE_COLUMNS:
        if col not in rows.columns:
            continue
        vals = rows[col].dropna().unique()
        if not len(vals):
            continue
        if col in ("n_params", "tokens", "tokens_extra"):
            num = pd.to_numeric(pd.Series(vals), errors="coerce").dropna()
            text = "/".join(human_count(v) for v in sorted(num)) if len(num) else "/".join(map(str, vals))
            parts.append(f"{text} {'params' if col == 'n_params' else col.replace('_', ' ')}")
        elif col in ("seq_len", "context_len", "input_len", "output_len"):
            nums = sorted(pd.to_numeric(pd.Series(vals), errors="coerce").dropna().astype(int))
            key = {"seq_len": "T", "context_len": "ctx", "input_len": "in", "output_len": "out"}[col]
            parts.append(f"{key}={'/'.join(map(str, nums)) if len(nums) <= 4 else f'{nums[0]}-{nums[-1]}'}")
        else:
            parts.append(f"{col}={'/'.join(map(str, vals[:3]))}")
    return ", ".join(parts)


def sizes_by_params(rows: pd.DataFrame) -> list[str]:
    """The distinct ``size`` names of measured rows, smallest mean ``n_params`` first (first-seen order without
    that column)."""
    params = pd.to_numeric(rows["n_params"], errors="coerce") if "n_params" in rows else \
        pd.Series(0.0, index=rows.index)
    return list(params.groupby(rows["size"].astype(str), sort=False).mean().sort_values(kind="stable").index)


def mqar_control_cell(ok: pd.DataFrame) -> tuple[int, int] | None:
    """The MQAR control cell of measured rows: the shortest trained seq_len and its first training pair count
    (``train_kv`` ``"16+32"`` -> 16), as ``suite.config.mqar_control_cell`` reads the config; None when no row
    names its training pairs."""
    if "train_kv" not in ok:
        return None
    trained = ok[ok["train_kv"].notna() & (ok["train_kv"].astype(str) != "none")]
    if trained.empty:
        return None
    first = trained.sort_values("seq_len", kind="stable").iloc[0]
    return int(first["seq_len"]), int(float(str(first["train_kv"]).split("+")[0]))  # a CSV may read "8" as 8.0


def mqar_control_rows(rows: pd.DataFrame, grid: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of ``rows`` that the MQAR controls read (``suite.eval.controls``): the control cell
    (:func:`mqar_control_cell`) at the size with the most parameters (``suite.config.mqar_control_size``, the grid's
    widest), both taken from ``grid`` (the whole results file, whatever each row's status; default ``rows``), so
    that a failed run does not move them. Rows without a seq_len (an arch that did not run at all) are kept, so that
    their status says why. No rows when none of ``grid`` names its training pairs."""
    grid = rows if grid is None else grid
    cell = mqar_control_cell(grid)
    if cell is None:
        return rows.iloc[0:0]
    seq_len = pd.to_numeric(rows["seq_len"], errors="coerce")
    keep = (seq_len == cell[0]) & (pd.to_numeric(rows["num_kv_pairs"], errors="coerce") == cell[1])
    sized = grid[grid["size"].notna()] if "size" in grid else grid.iloc[0:0]
    if sized["size"].nunique() > 1:
        keep &= rows["size"].astype(str) == sizes_by_params(sized)[-1]
    return rows[keep | seq_len.isna()]
