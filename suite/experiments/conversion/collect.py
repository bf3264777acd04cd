"""The conversion experiment's collect steps: ``results/<profile>/conversion.csv`` (the miniature: held-out
perplexity of Base, Base CPT and the conversion, each with every token its model trained on) and
``results/<profile>/pretrained.csv`` (a real pretrained LM: every benchmark row of every arm, with the base model's
name, size and quantization and each arm's continued-training tokens).

CLI::

    python -m suite.experiments.conversion.collect conversion --evals E1.csv ... --metrics M1.csv ... \
        --variants base base_cpt conversion --out results/<p>/conversion.csv
    python -m suite.experiments.conversion.collect pretrained --evals E1.csv ... --variants base converted ... \
        --metrics M1.csv ... --base-record B.json --out results/<p>/pretrained.csv
"""
from __future__ import annotations

import argparse
import json

import pandas as pd

from suite.cli import in_file, out_file, usage_errors
from suite.collect import PPL_METRIC, SCALE
from suite.provenance import read_csv, write_csv


def conversion(evals: list[str], metrics: list[str], variants: list[str]) -> pd.DataFrame:
    """Conversion (Table 2 in miniature): base, base CPT and converted Orthros, in ``variants`` order of inputs.

    ``tokens`` is every token a variant's model trained on: a continued run (base CPT, conversion) adds its own,
    ``tokens_extra``, to the base run's (each base run trains the same tokens; without a ``base`` variant, its own).
    """
    if not (len(evals) == len(metrics) == len(variants)):
        raise ValueError(f"need one eval CSV and one metrics CSV per variant; got {len(evals)} evals, "
                         f"{len(metrics)} metrics, variants {variants}")
    runs = [read_csv(me).iloc[0] for me in metrics]
    base_tokens = next((run["tokens"] for run, v in zip(runs, variants) if v == "base"), 0)
    out = []
    for ev, run, variant in zip(evals, runs, variants):
        rows = read_csv(ev)
        rows = rows[(rows["task"] == "val_ppl") & (rows["metric"] == PPL_METRIC)].copy()
        rows["variant"] = variant
        for col in SCALE:
            rows[col] = run[col]
        if variant != "base":
            rows["tokens"] = base_tokens + run["tokens"]
        rows["tokens_extra"] = 0 if variant == "base" else run["tokens"]
        out.append(rows)
    return pd.concat(out, ignore_index=True)


def pretrained(evals: list[str], variants: list[str], metrics: list[str], base_record: str) -> pd.DataFrame:
    """The real-model conversion arms (Table 2 on ``conversion.base_model``): every benchmark row of every arm, in
    ``variants`` order of ``evals``, with the base model's name, parameter count and quantization, and the tokens
    each arm continued on (``tokens_extra``, from its run's metrics.csv in ``metrics``, one per trained row: variants
    base_cpt and conversion; 0 for base, converted and random_init)."""
    if len(evals) != len(variants):
        raise ValueError(f"need one eval CSV per variant; got {len(evals)} evals, variants {variants}")
    record = json.loads(open(base_record).read())
    runs = {(row["arch"], int(row["seed"])): row for row in (read_csv(m).iloc[0] for m in metrics)}
    out = []
    for path, variant in zip(evals, variants):
        rows = read_csv(path).rename(columns={"variant": "task_variant"})  # the harness's: how the task was set up
        rows["variant"] = variant
        seed = int(rows["seed"].iloc[0]) if len(rows) else 0
        run = runs.get((variant, seed))
        if variant in ("base_cpt", "conversion") and run is None:
            raise ValueError(f"{path}: no metrics.csv among --metrics for {variant} seed {seed}")
        rows["tokens_extra"] = 0 if run is None else int(run["tokens"])
        rows["train_seq_len"] = None if run is None else run["seq_len"]
        rows["base_model"] = record["name"]
        rows["base_n_params"] = record["n_params"]
        rows["quantization"] = record["quantization"] if variant != "random_init" else "none (random init)"
        out.append(rows)
    return pd.concat(out, ignore_index=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m suite.experiments.conversion.collect",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["conversion", "pretrained"])
    parser.add_argument("--evals", nargs="*", type=in_file, default=[])
    parser.add_argument("--metrics", nargs="*", type=in_file, default=[])
    parser.add_argument("--variants", nargs="*", default=[])
    parser.add_argument("--base-record", type=in_file, help="pretrained: the base model's base_model.json")
    parser.add_argument("--out", required=True, type=out_file)
    args = parser.parse_args(argv)
    if args.kind == "pretrained" and not args.base_record:
        parser.error("pretrained needs --base-record")
    with usage_errors(parser):  # a damaged input CSV; inputs not one per variant
        if args.kind == "conversion":
            frame = conversion(args.evals, args.metrics, args.variants)
        else:
            frame = pretrained(args.evals, args.variants, args.metrics, args.base_record)
    write_csv(frame, args.out)
    print(f"wrote {args.out} ({len(frame)} rows)")


if __name__ == "__main__":
    main()
