"""Compare two results trees (e.g. the committed ``results/default`` and a clean clone's re-run of it) CSV by CSV.

Every CSV under OLD must exist under NEW with the same columns and rows, and every value must be equal, except in
the columns that a re-run changes by nature: the provenance columns of ``suite.provenance.PROVENANCE_COLUMNS``
(commit, device, backend, ...) and the library versions (``SOFTWARE_COLUMNS``, also where only one side has them),
wall-clock times and resident memory (``--ignore`` adds more). A cell that reads as a
number on both sides is compared as a number: exactly by default, within ``|old - new| <= atol + rtol * |new|``
(numpy's ``isclose``) with ``--rtol`` / ``--atol``, which a re-run on another CPU needs (float results differ in the
last digits across CPUs); any other cell (text, booleans, an empty cell against a number) must be equal as text.
Prints one line per CSV that differs (which columns, how many rows, the largest difference), then a summary line,
and exits 1 if any differs, 0 otherwise.

Usage: python scripts/compare_results.py results/default /tmp/clone/results/default [--rtol 1e-4] [--atol 1e-6]
       [--ignore COL ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's suite/, also without an install
from suite.provenance import PROVENANCE_COLUMNS, SOFTWARE_COLUMNS, read_csv  # noqa: E402

# what a re-run changes by nature: provenance of the run (library versions included), clocks, memory measurements
VOLATILE = set(PROVENANCE_COLUMNS) | set(SOFTWARE_COLUMNS) | {"ms", "train_s", "peak_rss_gib", "rss_before_prefill_gib"}
VOLATILE_SUFFIXES = ("_ms", "_s", "tok_per_s")


def volatile(column: str, extra: set[str]) -> bool:
    return column in VOLATILE or column in extra or column.endswith(VOLATILE_SUFFIXES)


def _numbers(s: pd.Series) -> np.ndarray:
    """The cells of ``s`` as floats, NaN where a cell is empty or not a number (booleans count as text)."""
    if pd.api.types.is_bool_dtype(s):
        return np.full(len(s), np.nan)
    return pd.to_numeric(s, errors="coerce").to_numpy(float)


def column_differences(old: pd.DataFrame, new: pd.DataFrame, extra: set[str] = frozenset(), rtol: float = 0.0,
                       atol: float = 0.0) -> list[str]:
    """Human-readable differences between two frames of one CSV ([] when they agree outside volatile columns):
    numeric cells within ``rtol`` / ``atol`` (0, 0: exactly), the others as text."""
    out = []
    # a volatile column present on one side only (library versions that rows written before they were recorded lack)
    # is no difference
    only_old, only_new = ([c for c in sorted(set(a.columns) - set(b.columns)) if not volatile(c, extra)]
                          for a, b in ((old, new), (new, old)))
    if only_old or only_new:  # then the shared columns are still compared
        out.append(f"columns differ (only in old: {only_old}, only in new: {only_new})")
    if len(old) != len(new):
        return out + [f"{len(old)} rows, re-run has {len(new)}"]
    for col in [c for c in old.columns if c in new.columns]:
        if volatile(col, extra):
            continue
        a, b = old[col].reset_index(drop=True), new[col].reset_index(drop=True)
        x, y = _numbers(a), _numbers(b)
        numeric = ~np.isnan(x) & ~np.isnan(y)
        text_a, text_b = a.astype(str).where(a.notna(), ""), b.astype(str).where(b.notna(), "")
        same = np.where(numeric, np.isclose(x, y, rtol=rtol, atol=atol), (text_a == text_b).to_numpy())
        if same.all():
            continue
        where = ~same
        if (where & numeric).any():
            detail = f"max abs diff {np.max(np.abs(x[where & numeric] - y[where & numeric])):.3g}"
        else:
            detail = f"e.g. {a[where].tolist()[0]!r} -> {b[where].tolist()[0]!r}"  # Python values: False, not np.False_
        out.append(f"{col}: {int(where.sum())} rows ({detail})")
    return out


def compare(old_dir: Path, new_dir: Path, extra: set[str] = frozenset(), rtol: float = 0.0,
            atol: float = 0.0) -> dict[str, list[str]]:
    """``{relative CSV path: differences}`` for every CSV under ``old_dir`` that differs from ``new_dir``'s
    (numbers within ``rtol`` / ``atol``).

    Raises ValueError when ``old_dir`` holds no CSV (a wrong path would otherwise compare nothing)."""
    paths = sorted(old_dir.rglob("*.csv"))
    if not paths:
        raise ValueError(f"no CSV files under {old_dir}")
    result = {}
    for path in paths:
        rel = path.relative_to(old_dir)
        other = new_dir / rel
        if not other.is_file():
            result[str(rel)] = ["missing in the re-run"]
            continue
        diffs = column_differences(read_csv(path), read_csv(other), extra, rtol, atol)
        if diffs:
            result[str(rel)] = diffs
    return result


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not 0 <= value < np.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", type=Path, help="the committed results folder, e.g. results/default")
    p.add_argument("new", type=Path, help="the re-run's results folder")
    p.add_argument("--rtol", type=_tolerance, default=0.0, help="relative tolerance of numeric cells (default 0)")
    p.add_argument("--atol", type=_tolerance, default=0.0, help="absolute tolerance of numeric cells (default 0)")
    p.add_argument("--ignore", nargs="*", default=[], help="more columns to leave out of the comparison")
    a = p.parse_args(argv)
    for d in (a.old, a.new):
        if not d.is_dir():
            p.error(f"not a folder: {d}")
    try:
        diffs = compare(a.old, a.new, set(a.ignore), a.rtol, a.atol)
    except ValueError as err:
        p.error(str(err))
    n = len(list(a.old.rglob("*.csv")))
    for rel, items in diffs.items():
        print(f"{rel}: " + "; ".join(items))
    how = "exactly" if a.rtol == a.atol == 0 else f"within rtol={a.rtol:g}, atol={a.atol:g}"
    print(f"{len(diffs)} of {n} CSVs differ, {n - len(diffs)} agree (numbers compared {how}; provenance, clock and "
          "memory columns ignored)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
