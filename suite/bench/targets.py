"""Collect every pass/fail target row (``method == "target"``) of the benchmark CSVs in a folder into
``targets.csv`` beside them (issue 15's speed and memory targets; provenance columns kept).

CLI: ``python -m suite.bench.targets DIR`` (``suite/bench/perf_all.sh`` runs it last).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.cli import in_folder, usage_errors
from suite.provenance import read_csv, write_csv


def collect(out: Path) -> pd.DataFrame | None:
    """Target rows of ``out/*.csv`` (but targets.csv) with a ``source`` column; None when there are none.
    Prints one line per target and the kernel-check tally of attention_kernels.csv."""
    targets = []
    for path in sorted(out.glob("*.csv")):
        if path.name == "targets.csv":
            continue
        frame = read_csv(path)
        if path.name == "attention_kernels.csv" and "status" in frame:
            checks = frame[frame["part"] == "check"]
            print(f"[{path.name}] checks: {dict(checks['status'].value_counts())}")
        if "method" not in frame or "target" not in frame:
            continue
        rows = frame[frame["method"].astype(str) == "target"].copy()
        rows.insert(0, "source", path.name)
        targets.append(rows)
        for r in rows.itertuples():
            print(f"target [{path.name}] {getattr(r, 'model', '')}: {r.target}: value={getattr(r, 'value', '')} "
                  f"-> {r.status}")
    return pd.concat(targets, ignore_index=True) if targets else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=in_folder, help="a folder of benchmark CSVs")
    out = Path(ap.parse_args(argv).folder)
    with usage_errors(ap):  # a damaged CSV, named
        frame = collect(out)
    if frame is not None:
        write_csv(frame, out / "targets.csv")
        print(f"wrote {out / 'targets.csv'}")


if __name__ == "__main__":
    main()
