"""Compare two results trees (e.g. the committed ``results/default`` and a clean clone's re-run of it) CSV by CSV.

Every CSV under OLD must exist under NEW with the same columns and rows, and every value must be equal, except in
the columns that a re-run changes by nature: the commit, wall-clock times and resident memory (``--ignore`` adds
more). Prints one line per CSV that differs (which columns, how many rows, the largest difference) and exits 1 if
any does, 0 otherwise.

Usage: python scripts/compare_results.py results/default /tmp/clone/results/default [--ignore COL ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# what a re-run changes by nature: provenance of the run, clocks, memory measurements
VOLATILE = {"commit", "ms", "wall_s", "train_s", "peak_rss_gib", "rss_before_prefill_gib"}
VOLATILE_SUFFIXES = ("_ms", "_s", "tok_per_s")


def volatile(column: str, extra: set[str]) -> bool:
    return column in VOLATILE or column in extra or column.endswith(VOLATILE_SUFFIXES)


def column_differences(old: pd.DataFrame, new: pd.DataFrame, extra: set[str] = frozenset()) -> list[str]:
    """Human-readable differences between two frames of one CSV ([] when they agree outside volatile columns)."""
    out = []
    only_old, only_new = sorted(set(old.columns) - set(new.columns)), sorted(set(new.columns) - set(old.columns))
    if only_old or only_new:  # then the shared columns are still compared
        out.append(f"columns differ (only in old: {only_old}, only in new: {only_new})")
    if len(old) != len(new):
        return out + [f"{len(old)} rows, re-run has {len(new)}"]
    for col in [c for c in old.columns if c in new.columns]:
        if volatile(col, extra):
            continue
        a, b = old[col], new[col]
        numeric = all(pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) for s in (a, b))
        if numeric:
            same = (a.isna() & b.isna()) | (a.to_numpy(float) == b.to_numpy(float))
        else:
            same = a.astype(str).where(a.notna(), "") == b.astype(str).where(b.notna(), "")
        if same.all():
            continue
        where = ~np.asarray(same)
        detail = f"max abs diff {np.nanmax(np.abs(a[where].to_numpy(float) - b[where].to_numpy(float))):.3g}" \
            if numeric else f"e.g. {a[where].iloc[0]!r} -> {b[where].iloc[0]!r}"
        out.append(f"{col}: {int(where.sum())} rows ({detail})")
    return out


def compare(old_dir: Path, new_dir: Path, extra: set[str] = frozenset()) -> dict[str, list[str]]:
    """``{relative CSV path: differences}`` for every CSV under ``old_dir`` that differs from ``new_dir``'s.

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
        diffs = column_differences(pd.read_csv(path), pd.read_csv(other), extra)
        if diffs:
            result[str(rel)] = diffs
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", type=Path, help="the committed results folder, e.g. results/default")
    p.add_argument("new", type=Path, help="the re-run's results folder")
    p.add_argument("--ignore", nargs="*", default=[], help="more columns to leave out of the comparison")
    a = p.parse_args(argv)
    for d in (a.old, a.new):
        if not d.is_dir():
            p.error(f"not a folder: {d}")
    diffs = compare(a.old, a.new, set(a.ignore))
    n = len(list(a.old.rglob("*.csv")))
    for rel, items in diffs.items():
        print(f"{rel}: " + "; ".join(items))
    print(f"{len(diffs)} of {n} CSVs differ outside the commit, clock and memory columns")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
