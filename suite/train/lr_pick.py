"""The learning-rate pick of a short sweep, recorded before the long runs that use it.

Rule (``RULE``): for each arm, the swept rate whose run ends with the lowest held-out loss (the ``val_loss`` of its
metrics row: the same fixed validation windows for every rate); a tie goes to the lower rate; a run that diverged
(``python -m suite.train.run --record-divergence``: its status says so) is never picked but still bounds the range.
Every swept run of an arm reads the same batches (one data-order seed), so the rates differ in nothing else. The
pick file lists every swept run with ``picked`` true on one row per arm and, on that row, ``edge`` when the pick is
the lowest or highest rate swept: the best rate may then lie outside the range, and :func:`picked_lr`, which reads
the pick back for the long runs (``python -m suite.train.run --lr-from``), refuses it until the sweep is extended.
The long runs never change the pick.

CLI: ``python -m suite.train.lr_pick --runs A/metrics.csv B/metrics.csv ... --out results/gpu/pretrained_lr.csv``
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from suite.cli import in_file, out_file, usage_errors
from suite.provenance import read_csv, write_csv

RULE = ("lowest final held-out loss among the swept rates, per arm (tie: the lower rate; a diverged run is never "
        "picked); a pick at either end of the swept range is refused until the range is extended")
COLUMNS = ("arch", "lr", "val_loss", "tokens", "steps", "seed")


def sweep_rates(sweep: dict, arch: str) -> list[float]:
    """The rates swept for ``arch``, its runs ``lr0``, ``lr1``, ... in this order: the sweep's ``lrs``, then the ones
    ``extend`` adds for that arch (a range widened after a pick at its end, the earlier runs kept as they are)."""
    return [*sweep["lrs"], *sweep.get("extend", {}).get(arch, [])]


def pick(rows: list[dict]) -> list[dict]:
    """The sweep's metrics rows, each with ``status`` (``ok`` or the run's ``diverged: ...``), ``picked`` (one true
    per arch), ``edge`` (on the picked row: ``lowest swept rate`` or ``highest swept rate`` when it is one) and
    ``rule``; ValueError for an ok row without a finite val_loss or lr, two runs of an arch at the same rate, or an
    arch whose every run diverged."""
    for i, row in enumerate(rows):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise ValueError(f"sweep run {i + 1}: no {missing} in its metrics row")
        checked = ("lr",) if _diverged(row) else ("lr", "val_loss")
        for col in checked:
            if not math.isfinite(float(row[col])):
                raise ValueError(f"sweep run {i + 1} ({row['arch']}, lr {row['lr']}): {col} is {row[col]}")
    out = []
    for arch, group in pd.DataFrame(rows).groupby("arch", sort=True):
        if group["lr"].duplicated().any():
            raise ValueError(f"the sweep of {arch} has two runs at one rate: {sorted(group['lr'])}")
        ok = group[[not _diverged(r) for r in group.to_dict("records")]]
        if ok.empty:
            raise ValueError(f"every swept run of {arch} diverged (rates {sorted(group['lr'])}): sweep lower rates")
        best = ok.sort_values(["val_loss", "lr"]).index[0]
        lr = group.loc[best, "lr"]
        edge = ("lowest swept rate" if lr == group["lr"].min() else
                "highest swept rate" if lr == group["lr"].max() else "")
        for idx, row in group.sort_values("lr").iterrows():
            status = row["status"] if _diverged(row) else "ok"
            out.append({**row.to_dict(), "status": status, "picked": idx == best, "edge": edge if idx == best else "",
                        "rule": RULE})
    return out


def _diverged(row) -> bool:
    return str(row.get("status", "ok")).startswith("diverged")


def picked_lr(path: str | Path, arch: str) -> float:
    """The rate the pick file ``path`` picked for ``arch``; ValueError naming the file and arch when it has none."""
    frame = read_csv(path)
    if not {"arch", "lr", "picked"} <= set(frame.columns):
        raise ValueError(f"{path}: not a learning-rate pick (needs the columns arch, lr, picked)")
    chosen = frame[(frame["arch"] == arch) & frame["picked"].astype(str).str.lower().eq("true")]
    if len(chosen) != 1:
        raise ValueError(f"{path}: {len(chosen)} picked rates for {arch!r} (arches there: "
                         f"{sorted(frame['arch'].unique())}); a pick file has one per swept arch")
    edge = chosen["edge"].iloc[0] if "edge" in frame else None
    lr, edge = float(chosen["lr"].iloc[0]), str(edge) if pd.notna(edge) else ""
    if edge:
        raise ValueError(f"{path}: the sweep picked lr {lr:g} for {arch!r}, its {edge}: the best rate may lie outside "
                         "the swept range; sweep rates past it (lr_sweep.lrs; the from-scratch study: "
                         "lr_sweep.extend) and run the sweep again")
    return lr


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True, type=in_file, help="the swept runs' metrics.csv files")
    ap.add_argument("--out", required=True, type=out_file, help="the pick file to write")
    args = ap.parse_args(argv)
    with usage_errors(ap):
        rows = [read_csv(path).iloc[0].to_dict() for path in args.runs]
        out = pick(rows)
    write_csv(out, args.out)
    for row in out:
        if row["picked"]:
            note = f"; {row['edge']}: extend the swept range before the long runs" if row["edge"] else ""
            print(f"{row['arch']}: lr {row['lr']:g} (val_loss {row['val_loss']:.4f}){note}")


if __name__ == "__main__":
    main()
