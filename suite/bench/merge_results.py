"""Merge the CSVs that several GPU commands wrote (each into its own ``$OUT``) into one results folder.

``perf_all.sh`` runs its main command (``PART=main``: prefill, decode step, ...) and, optionally, Table 4 as
further commands (``PART=table4``, ``PART=hybrids``); each writes an ``e2e.csv`` and a ``targets.csv``. For
every CSV name found in the sources, rows are merged in source order: a later source's rows replace the
earlier rows of the same key (``e2e.csv``: ``model``; ``prefill.csv``: ``(model, method, seq_len, path)``;
``targets.csv``: ``(source, model, target)``; other files: the later file replaces the earlier one whole).
``rates.json`` and ``attn_choice.json`` are copied from the last source that has them.

Usage: ``python -m suite.bench.merge_results --into results/gpu OUT_MAIN [OUT_TABLE4 [OUT_HYBRIDS]]``
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pandas as pd

from suite.provenance import read_csv, write_csv

KEYS = {"e2e.csv": ("model",), "prefill.csv": ("model", "method", "seq_len", "path"),
        "targets.csv": ("source", "model", "target")}


def _key(frame: pd.DataFrame, cols) -> pd.Series:
    return frame.reindex(columns=list(cols)).astype(str).agg("|".join, axis=1)


def merge(sources: list[Path], into: Path) -> list[Path]:
    """Merge the CSVs of ``sources`` (folders, in order) into ``into``; returns the written files.

    Raises ValueError when a source folder does not exist.
    """
    for src in sources:
        if not src.is_dir():
            raise ValueError(f"{src} is not a folder")
    into.mkdir(parents=True, exist_ok=True)
    names = sorted({p.name for src in sources for p in src.glob("*.csv")})
    written = []
    for name in names:
        merged = None
        for src in sources:
            path = src / name
            if not path.exists():
                continue
            frame = read_csv(path)
            if merged is None or name not in KEYS:
                merged = frame
                continue
            keys = _key(frame, KEYS[name])
            merged = pd.concat([merged[~_key(merged, KEYS[name]).isin(set(keys))], frame], ignore_index=True)
        write_csv(merged, into / name)
        written.append(into / name)
    for name in ("rates.json", "attn_choice.json"):
        found = [src / name for src in sources if (src / name).exists()]
        if found:
            shutil.copyfile(found[-1], into / name)
            written.append(into / name)
    return written


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--into", required=True, help="results folder to write (e.g. results/gpu)")
    ap.add_argument("sources", nargs="+", help="folders in order; later rows win")
    args = ap.parse_args(argv)
    for path in merge([Path(s) for s in args.sources], Path(args.into)):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
