"""Gather per-job CSVs into the tidy summary CSVs the renderers read (``results/<profile>/*.csv``).

Each DAG job writes its own CSV (paths encode arch / size / seed); these functions concatenate them
and fill the scale columns (n_params, tokens, seq_len) from the training run's ``metrics.csv``, so
every measured cell carries its scale.

CLI::

    python -m suite.collect quality --evals E1.csv ... --metrics M1.csv ... --out results/<p>/quality.csv
    python -m suite.collect ablation --evals ... --metrics ... --out results/<p>/ablation.csv
    python -m suite.collect conversion --evals ... --metrics ... --variants base base_cpt conversion --out ...
    python -m suite.collect concat --inputs A.csv B.csv --out results/<p>/niah.csv
    python -m suite.collect pretrained --evals ... --variants base converted ... --metrics ... --base-record B.json \
        --out results/<p>/pretrained.csv
    python -m suite.collect curves --inputs L1.csv ... --runs base_cpt:42 ... --out results/<p>/pretrained_loss.csv
"""
from __future__ import annotations

import argparse

import pandas as pd

from suite.cli import in_file, out_file, usage_errors
from suite.provenance import read_csv, write_csv

SCALE = ["n_params", "tokens", "seq_len"]
PPL_METRIC = "byte_perplexity"  # tokenizer-independent held-out perplexity (lm-eval loglikelihood_rolling)
BENCH_METRICS = ["acc", "acc_norm", "contains", "f1"]  # the benchmark tasks' scores (suite.eval.harness)


def concat(paths: list[str], not_run: dict[str, str] | None = None) -> pd.DataFrame:
    """All rows of ``paths`` (each read with a clear error naming a corrupt file), plus, for every arch in
    ``not_run`` (arch -> reason), one row per (context_len, depth) cell of the others with that status, so the
    tables and figures show the arch as not run instead of dropping it; those rows take the commit, profile,
    device and dtype that all measured rows share."""
    frames = [read_csv(p) for p in paths]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not_run:
        keys = [c for c in ("context_len", "depth", "seq_len", "num_kv_pairs") if c in out.columns]
        cells = out[keys].drop_duplicates() if keys else pd.DataFrame([{}])
        # the run that decided "not run": its commit, profile, device and dtype, where the measured rows share them
        shared = {c: out[c].iloc[0] for c in ("commit", "profile", "device", "dtype")
                  if c in out.columns and len(out) and out[c].nunique(dropna=False) == 1}
        extra = [dict(cell) | shared | {"arch": arch, "status": reason} for arch, reason in not_run.items()
                 for cell in cells.to_dict("records")]
        out = pd.concat([out, pd.DataFrame(extra)], ignore_index=True)
    return out


def _with_scale(evals: pd.DataFrame, metrics: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    scale = metrics[keys + SCALE].drop_duplicates(keys)
    evals = evals.drop(columns=[c for c in SCALE if c in evals.columns])
    return evals.merge(scale, on=keys, how="left")


def quality(evals: list[str], metrics: list[str]) -> pd.DataFrame:
    """lm-eval rows of every run, plus each run's training-time validation loss (nats/token)."""
    runs = concat(metrics)
    rows = _with_scale(concat(evals), runs, ["arch", "size", "seed"])
    train_rows = runs.assign(task="train_val_loss", metric="nats_per_token", value=runs["val_loss"],
                             unit="nats/token", status="ok")
    keep = ["arch", "size", *SCALE, "task", "metric", "value", "unit", "status",
            "commit", "profile", "device", "backend", "dtype", "seed", "wall_s"]
    return pd.concat([rows, train_rows[[c for c in keep if c in train_rows]]], ignore_index=True)


def ablation(evals: list[str], metrics: list[str]) -> pd.DataFrame:
    """SO ablation (Table 7 / Fig. 2 in miniature): held-out byte perplexity and the benchmark scores per arch
    (orthros, orthros_noso, transformer) and size."""
    rows = quality(evals, metrics)
    return rows[((rows["task"] == "val_ppl") & (rows["metric"] == PPL_METRIC)) | rows["metric"].isin(BENCH_METRICS)]


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
    import json

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


def curves(paths: list[str], runs: list[str]) -> pd.DataFrame:
    """Training loss curves (each run's loss.csv) in one frame, labelled by ``runs`` entries ``VARIANT:SEED``."""
    if len(paths) != len(runs):
        raise ValueError(f"need one loss.csv per run; got {len(paths)} files, runs {runs}")
    frames = []
    for path, run in zip(paths, runs):
        variant, _, seed = run.partition(":")
        if not seed.isdigit():
            raise ValueError(f"run {run!r} must be VARIANT:SEED")
        frames.append(read_csv(path).assign(variant=variant, seed=int(seed)))
    return pd.concat(frames, ignore_index=True)


def _run(text: str) -> str:
    """argparse ``type=`` of a ``--runs`` item: ``VARIANT:SEED``."""
    variant, sep, seed = text.partition(":")
    if not (variant and sep and seed.isdigit()):
        raise argparse.ArgumentTypeError(f"expected VARIANT:SEED, got {text!r}")
    return text


def _not_run(text: str) -> tuple[str, str]:
    arch, sep, reason = text.partition("=")
    if not (arch and sep and reason):
        raise argparse.ArgumentTypeError(f"expected ARCH=REASON, got {text!r}")
    return arch, reason


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["quality", "ablation", "conversion", "concat", "pretrained", "curves"])
    parser.add_argument("--evals", nargs="*", type=in_file, default=[])
    parser.add_argument("--metrics", nargs="*", type=in_file, default=[])
    parser.add_argument("--variants", nargs="*", default=[])
    parser.add_argument("--inputs", nargs="*", type=in_file, default=[])
    parser.add_argument("--not-run", nargs="*", type=_not_run, default=[], metavar="ARCH=REASON",
                        help="concat: archs with no results, and why (a 'not run' row per cell)")
    parser.add_argument("--base-record", type=in_file, help="pretrained: the base model's base_model.json")
    parser.add_argument("--runs", nargs="*", type=_run, default=[], metavar="VARIANT:SEED",
                        help="curves: one per input")
    parser.add_argument("--out", required=True, type=out_file)
    args = parser.parse_args(argv)
    if args.kind == "pretrained" and not args.base_record:
        parser.error("pretrained needs --base-record")
    with usage_errors(parser):  # a damaged input CSV; inputs not one per variant or run
        if args.kind == "concat":
            frame = concat(args.inputs, dict(args.not_run))
        elif args.kind == "conversion":
            frame = conversion(args.evals, args.metrics, args.variants)
        elif args.kind == "pretrained":
            frame = pretrained(args.evals, args.variants, args.metrics, args.base_record)
        elif args.kind == "curves":
            frame = curves(args.inputs, args.runs)
        else:
            frame = {"quality": quality, "ablation": ablation}[args.kind](args.evals, args.metrics)
    write_csv(frame, args.out)
    print(f"wrote {args.out} ({len(frame)} rows)")


if __name__ == "__main__":
    main()
