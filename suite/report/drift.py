"""The drift floor: how far whole re-runs of the same cells move a measured value, from re-run CSVs.

A re-run of a profile's study writes the same results files again; ``results/<profile>/calibration/rerun_<commit>/``
keeps such files beside the committed ones. For every cell (arch, size, seed, task, metric) measured in at least two
of the runs, its relative spread is ``max / min - 1`` over the runs; the drift floor is the largest spread. A measured
ratio closer to 1 than the floor does not "differ" (:mod:`suite.report.verdicts`). The re-runs were made at other
commits than the committed rows, so the floor bounds nondeterminism and code drift together.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from suite.provenance import read_csv

CELL = ["arch", "size", "seed", "task", "metric"]


@dataclass(frozen=True)
class Drift:
    floor: float | None   # relative: the largest max/min - 1 of a cell over the runs
    cells: int
    runs: list[str]       # the runs compared (folder names)

    def text(self) -> str:
        if self.floor is None:
            return "drift floor not measured (no re-run of these cells)"
        return (f"drift floor {100 * self.floor:.2g}% (largest spread of {self.cells} cells over {len(self.runs)} "
                f"runs: {', '.join(self.runs)})")


NONE = Drift(None, 0, [])


def drift(runs: dict[str, pd.DataFrame], column: str = "value") -> Drift:
    """The drift floor of ``column`` over ``runs`` (name -> rows already restricted to the metric compared)."""
    frames = []
    for name, rows in runs.items():
        if "arch" not in rows and "variant" in rows:  # an older results file named the model "variant"
            rows = rows.rename(columns={"variant": "arch"})
        keys = [c for c in CELL if c in rows.columns]
        values = pd.to_numeric(rows[column], errors="coerce")
        frames.append(rows[keys].astype(str).assign(value=values, run=name).dropna(subset=["value"]))
    if len(frames) < 2:
        return NONE
    both = pd.concat(frames, ignore_index=True)
    keys = [c for c in CELL if c in both.columns]
    spread = both.groupby(keys, dropna=False)["value"].agg(["min", "max", "count"])  # a pretrained arm has no size
    spread = spread[(spread["count"] >= 2) & (spread["min"] > 0)]
    if spread.empty:
        return NONE
    return Drift(float((spread["max"] / spread["min"] - 1).max()), len(spread), sorted(runs))


def reruns(results: str | Path | None, name: str) -> dict[str, pd.DataFrame]:
    """The committed ``<results>/<name>.csv`` and every ``<results>/calibration/rerun_*/<name>.csv`` (name ->
    rows); empty when the committed file is absent."""
    if results is None or not (Path(results) / f"{name}.csv").exists():
        return {}
    out = {"committed": read_csv(Path(results) / f"{name}.csv")}
    for path in sorted((Path(results) / "calibration").glob(f"rerun_*/{name}.csv")):
        out[path.parent.name] = read_csv(path)
    return out
