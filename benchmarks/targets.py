"""Pass/fail rows of the benchmarks: ``targets.csv`` in a results folder (the speed and memory targets, and
the checks a benchmark makes before it times anything).

One row per target or check: ``source`` (the benchmark CSV it belongs to), ``arch``, ``method`` (``target``, or the
kind of check), ``target`` (the rule in words), ``value``, ``threshold``, ``status`` (pass / fail / not run: ...)
and the provenance columns. The benchmarks write it as they go (:meth:`benchmarks.gpu_common.RowWriter.target`,
:func:`write_targets`); their measurement CSVs hold no pass/fail columns.

CLI: ``python -m benchmarks.targets DIR`` prints a folder's targets and its attention-kernel check tally
(``benchmarks/perf_all.sh``, the rule perf's command, runs it last).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from suite.cli import in_folder, usage_errors
from suite.provenance import read_csv, write_csv

TARGETS = "targets.csv"


def write_targets(folder: str | Path, source: str, rows: list[dict]) -> Path:
    """Replace the rows of ``source`` in ``folder/targets.csv`` by ``rows``; the other sources' rows stay."""
    path = Path(folder) / TARGETS
    old = [r for r in read_csv(path).to_dict("records") if r.get("source") != source] if path.exists() else []
    return write_csv(old + [{"source": source, **r} for r in rows], path)


def summary(folder: str | Path) -> list[str]:
    """One line per row of ``folder/targets.csv``, then the tally of the kernel checks in attention_kernels.csv."""
    folder, lines = Path(folder), []
    if (folder / TARGETS).exists():
        for r in read_csv(folder / TARGETS).to_dict("records"):
            lines.append(f"{r['method']} [{r['source']}] {r['arch']}: {r['target']}: value={r['value']} -> "
                         f"{r['status']}")
    if (folder / "attention_kernels.csv").exists():
        kernels = read_csv(folder / "attention_kernels.csv")
        checks = kernels[kernels["part"] == "check"]
        lines.append(f"[attention_kernels.csv] checks: {dict(checks['status'].value_counts())}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=in_folder, help="a folder of benchmark CSVs")
    folder = ap.parse_args(argv).folder
    with usage_errors(ap):  # a damaged CSV, named
        lines = summary(folder)
    print("\n".join(lines) or f"no {TARGETS} in {folder}")


if __name__ == "__main__":
    main()
