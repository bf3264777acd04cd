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
                    "pretrained_train", "pretrained_evals", "pretrained_lr"]
# the from-scratch study (suite/experiments/from_scratch/rules.smk)
SCRATCH_FILES = ["scratch_train", "scratch_evals", "scratch_ppl", "scratch_niah", "scratch_lr", "scratch_budget"]
PROFILE_FILES = ["quality", "niah", "mqar", "mqar_gla", "ablation", "conversion", "prefill_cpu", "controls",
                 "prompt_lengths", *PRETRAINED_FILES]
GPU_FILES = ["prefill", "e2e", "decode_load", "fp8_kv_real", "targets", "niah", "mqar", "mqar_gla", "seq_parallel",
             "controls", "quality", "ablation", *PRETRAINED_FILES, *SCRATCH_FILES]
WHOLE_SPLIT = "all"  # the domain of suite.eval.ppl_buckets rows over the whole split (its WHOLE)


def whole_split(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of a position-bucket frame (``suite.eval.ppl_buckets``) over the whole split: ``domain`` ``all``, or
    rows written before the column existed; the per-domain rows of ``--by-domain`` left out."""
    if "domain" not in rows:
        return rows
    return rows[rows["domain"].fillna(WHOLE_SPLIT).astype(str) == WHOLE_SPLIT]


SCALE_COLUMNS = ["shape", "n_params", "tokens", "tokens_extra", "steps", "seq_len", "window", "context_len",
                 "input_len", "output_len", "batch", "gpus", "threads", "method", "kernel", "dtype", "backend",
                 "device", "gpu_name", "torch", "transformers", "fla"]


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


def folder_controls(folder: str | Path | None, name: str = "controls") -> pd.DataFrame | None:
    """A results folder's controls: ``controls.csv`` and, where the opt-in from-scratch study ran,
    ``scratch_controls.csv`` (its own target writes them), through :func:`read_controls`; None when neither exists."""
    paths = [Path(folder) / f"{stem}.csv" for stem in ("controls", "scratch_controls")] if folder else []
    frames = [read_controls(path, name) for path in paths if path.exists()]
    return pd.concat(frames, ignore_index=True) if frames else None


def load_measured(results: str | Path | None, gpu_results: str | Path | None) -> dict[str, pd.DataFrame | None]:
    """Map of result name (``quality``, ..., ``gpu_prefill``, ``gpu_e2e``) to its DataFrame, or None if absent.
    Every present file is validated (``read_result``; controls files through ``read_controls``) before any is
    returned; ``controls`` holds a folder's every control (:func:`folder_controls`)."""
    out: dict[str, pd.DataFrame | None] = {}
    for folder, names, prefix in ((results, PROFILE_FILES, ""), (gpu_results, GPU_FILES, "gpu_")):
        for name in names:
            path = Path(folder) / f"{name}.csv" if folder else None
            if prefix + name in CONTROL_FILES:
                out[prefix + name] = folder_controls(folder, prefix + name)
            else:
                out[prefix + name] = read_result(path, prefix + name) if path is not None and path.exists() else None
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
        elif col == "window":
            parts.append(_windows(rows))
        elif col in ("seq_len", "context_len", "input_len", "output_len"):
            nums = sorted(pd.to_numeric(pd.Series(vals), errors="coerce").dropna().astype(int))
            key = {"seq_len": "T", "context_len": "ctx", "input_len": "in", "output_len": "out"}[col]
            parts.append(f"{key}={'/'.join(map(str, nums)) if len(nums) <= 4 else f'{nums[0]}-{nums[-1]}'}")
        elif col == "steps":
            parts.append(f"steps={'/'.join(_text(v) for v in sorted(pd.to_numeric(pd.Series(vals)).dropna()))}")
        else:
            parts.append(f"{col}={'/'.join(map(str, vals[:3]))}")
    return ", ".join(parts)


def _windows(rows: pd.DataFrame) -> str:
    """``window=32 (orthros)``: the attention window of the windowed archs among ``rows`` (a results file may
    record the study's window on every row; only the Orthros family and SWA use it)."""
    from suite.archs import WINDOWED_ARCHS

    mine = rows[rows["arch"].isin(WINDOWED_ARCHS)] if "arch" in rows else rows
    per = mine.dropna(subset=["window"]).groupby("window", sort=True)["arch" if "arch" in mine else "window"]
    parts = [f"{int(w)} ({'/'.join(dict.fromkeys(map(str, g)))})" if "arch" in mine else f"{int(w)}" for w, g in per]
    return f"window={', '.join(parts)}" if parts else "window: none (no windowed arch)"


def train_runs(results: str | Path | None) -> pd.DataFrame | None:
    """The ``metrics.csv`` of every training run kept under ``<results>/train/<arch>/<size>/seed<n>/`` (steps,
    tokens, held-out loss, commit per run), or None when there are none."""
    paths = sorted(Path(results).glob("train/*/*/seed*/metrics.csv")) if results else []
    return pd.concat([read_csv(p) for p in paths], ignore_index=True) if paths else None


def profile_config(rows: pd.DataFrame | None) -> dict | None:
    """The study config of the profile that wrote ``rows`` (their ``profile`` column), or None when the rows name
    none, or several, or it is not a known profile."""
    from suite.config import PROFILES_DIR, ConfigError, load_config

    names = rows["profile"].dropna().astype(str).unique() if rows is not None and "profile" in rows else []
    if len(names) != 1 or not (PROFILES_DIR / f"{names[0]}.yaml").exists():
        return None
    try:
        return load_config(names[0])
    except ConfigError:
        return None


def with_run_conditions(rows: pd.DataFrame | None, runs: pd.DataFrame | None,
                        config: dict | None) -> pd.DataFrame | None:
    """``rows`` of trained models with the conditions their results file does not carry: ``steps`` from the
    training runs' metrics (same arch, size, seed) and, for the windowed archs, ``window`` as the study config gave
    it to the model (``suite.train.model.window_overrides``)."""
    if rows is None:
        return None
    out = rows.copy()
    keys = [c for c in ("arch", "size", "seed") if c in out and runs is not None and c in runs]
    if "steps" not in out and runs is not None and "steps" in runs and keys:
        out = _with_steps(out, runs, keys)
    if "window" not in out and config is not None and "arch" in out:
        from suite.train.model import window_overrides

        seq = pd.to_numeric(out["seq_len"], errors="coerce") if "seq_len" in out else pd.Series(float("nan"),
                                                                                                 index=out.index)
        out["window"] = [window_overrides(str(a), config, int(t) if pd.notna(t) else None).get("window_size")
                         for a, t in zip(out["arch"], seq)]
    return out


def _with_steps(rows: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``rows`` with the ``steps`` of their run, matched on ``keys`` as text (a seed may read 42 or 42.0)."""
    def key(frame):
        return [tuple(_text(v) for v in r) for r in frame[keys].itertuples(index=False)]

    table = dict(zip(key(runs), runs["steps"]))
    return rows.assign(steps=[table.get(k) for k in key(rows)])


def _text(value) -> str:
    try:
        number = float(value)
        return str(int(number)) if number.is_integer() else str(number)
    except (TypeError, ValueError):
        return str(value)


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


def mqar_control_size_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every cell of the MQAR controls' size (the grid's widest, as :func:`mqar_control_rows` takes it), where both
    controls were read; rows without a size (an arch that did not run) are kept, so that their status says why."""
    sized = rows[rows["size"].notna()] if "size" in rows else rows.iloc[0:0]
    if sized["size"].nunique() <= 1:
        return rows
    return rows[(rows["size"].astype(str) == sizes_by_params(sized)[-1]) | rows["size"].isna()]
