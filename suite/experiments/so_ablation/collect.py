"""The SO ablation's collect step: ``results/<profile>/ablation.csv``, held-out byte perplexity and the benchmark
scores of every variant (``ablation_variants``) at every ablation size and seed, each row with its scale.

CLI::

    python -m suite.experiments.so_ablation.collect --evals E1.csv ... --metrics M1.csv ... \
        --out results/<p>/ablation.csv
"""
from __future__ import annotations

import argparse

import pandas as pd

from suite.cli import in_file, out_file, usage_errors
from suite.collect import BENCH_METRICS, PPL_METRIC, quality
from suite.provenance import write_csv


def ablation(evals: list[str], metrics: list[str]) -> pd.DataFrame:
    """SO ablation (Table 7 / Fig. 2 in miniature): held-out byte perplexity and the benchmark scores per arch
    (the study config's ``ablation_variants``: orthros, orthros_noso, transformer) and size, from the lm-eval rows
    ``evals`` and the training runs' ``metrics`` (:func:`suite.collect.quality`)."""
    rows = quality(evals, metrics)
    return rows[((rows["task"] == "val_ppl") & (rows["metric"] == PPL_METRIC)) | rows["metric"].isin(BENCH_METRICS)]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m suite.experiments.so_ablation.collect",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--evals", nargs="*", type=in_file, default=[])
    parser.add_argument("--metrics", nargs="*", type=in_file, default=[])
    parser.add_argument("--out", required=True, type=out_file)
    args = parser.parse_args(argv)
    with usage_errors(parser):  # a damaged input CSV
        frame = ablation(args.evals, args.metrics)
    write_csv(frame, args.out)
    print(f"wrote {args.out} ({len(frame)} rows)")


if __name__ == "__main__":
    main()
