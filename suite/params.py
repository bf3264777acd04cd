"""Parameter count of every architecture at every named size: ``python -m suite.params``.

Prints a table and writes ``results/params.csv`` (arch, size, vocab_size, n_params,
orthros_params, ratio, intermediate_size, within_5pct + provenance). Models are built on the meta
device, so the 6.8B and Qwen3-8B shapes cost no memory. Each size uses its reference vocabulary
(4K BPE for the CPU sizes, 32K for the paper grid, 151,936 for ``qwen3_8b``). Hybrids are counted
at their default 1-in-4 attention layout.
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch

from models.registry import ARCHS, known_archs, make_config
from models.sizes import SIZES, count_parameters
from suite.cli import out_file
from suite.provenance import provenance, write_csv

TOLERANCE = 0.05


def count(arch: str, size: str) -> tuple[int, object]:
    """(parameters, config) of ``arch`` at ``size`` with the size's reference vocabulary."""
    config = make_config(arch, size, vocab_size=SIZES[size].ref_vocab)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ARCHS[arch].model_cls(config)
    return count_parameters(model), config


def table(sizes=None, archs=None) -> list[dict]:
    """One row per (arch, size) with the ratio to Orthros at the same size."""
    rows = []
    for size in sizes or list(SIZES):
        reference, _ = count("orthros", size)
        for arch in archs or known_archs():
            n, config = count(arch, size)
            ratio = n / reference
            rows.append({"arch": arch, "size": size, "vocab_size": config.vocab_size, "n_params": n,
                         "orthros_params": reference, "ratio": round(ratio, 4),
                         "intermediate_size": config.intermediate_size,
                         "within_5pct": abs(ratio - 1) <= TOLERANCE})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=out_file, default="results/params.csv",
                        help="CSV to write (default results/params.csv)")
    parser.add_argument("--sizes", nargs="*", choices=list(SIZES), help="sizes (default all)")
    args = parser.parse_args(argv)
    start = time.time()
    rows = table(args.sizes)
    prov = provenance("params", None, "n/a", "meta-device count", "cpu", time.time() - start)
    write_csv([{**row, **prov} for row in rows], args.out)
    print(f"{'size':>9} {'arch':>14} {'n_params':>14} {'ratio':>7} {'ffn':>6}")
    for row in rows:
        flag = "" if row["within_5pct"] else "  OUTSIDE +-5%"
        print(f"{row['size']:>9} {row['arch']:>14} {row['n_params']:>14,} {row['ratio']:>7.3f} "
              f"{row['intermediate_size']:>6}{flag}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
