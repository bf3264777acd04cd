"""Gather per-job CSVs into the tidy summary CSVs the renderers read (``results/<profile>/*.csv``).

Each DAG job writes its own CSV (paths encode arch / size / seed); these functions concatenate them
and fill the scale columns (n_params, tokens, seq_len) from the training run's ``metrics.csv``, so
every measured cell carries its scale. An experiment's own collect step is in its folder (the SO ablation's,
the conversion experiment's: ``suite/experiments/<name>/collect.py``).

CLI::

    python -m suite.collect quality --evals E1.csv ... --metrics M1.csv ... --out results/<p>/quality.csv
    python -m suite.collect concat --inputs A.csv B.csv --out results/<p>/niah.csv
    python -m suite.collect curves --inputs L1.csv ... --runs base_cpt:42 ... --out results/<p>/pretrained_loss.csv
    python -m suite.collect pairs --inputs E1_docs.csv ... --key arch --out results/<p>/quality_pairs.csv
    python -m suite.collect labelled --inputs E1.csv ... --labels arch=orthros,seed=42,budget=tokens ... --out ...

The per-document rows (each job's ``<stem>_docs.csv``, :func:`suite.eval.harness.documents_path`) stay in the job
folders: a full benchmark run scores ~30K documents per model and seed. ``pairs`` keeps what a per-document
comparison of two models needs, whatever the number of documents (:func:`pairs`).
"""
from __future__ import annotations

import argparse
import itertools

import pandas as pd

from suite.cli import in_file, out_file, usage_errors
from suite.provenance import SOFTWARE_COLUMNS, read_csv, write_csv

SCALE = ["n_params", "tokens", "seq_len"]
PPL_METRIC = "byte_perplexity"  # tokenizer-independent held-out perplexity (lm-eval loglikelihood_rolling)
BENCH_METRICS = ["acc", "acc_norm", "contains", "f1"]  # the benchmark tasks' scores (suite.eval.harness)
CELL = ["size", "task", "num_fewshot", "metric"]  # one scored set of documents
DOC_KEYS = ["arch", "seed", *CELL, "lm_eval_task", "doc_id", "doc_hash", "value"]  # what pairs reads of a docs CSV
PAIR_COLUMNS = ["key", "arm_a", "arm_b", *CELL, "seeds_a", "seeds_b", "n_docs", "sum_a", "sum_b", "count"]


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
            "commit", "profile", "device", "backend", "dtype", "seed", "wall_s", *SOFTWARE_COLUMNS]
    return pd.concat([rows, train_rows[[c for c in keep if c in train_rows]]], ignore_index=True)


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


def labelled(paths: list[str], labels: list[dict[str, str]]) -> pd.DataFrame:
    """The rows of ``paths`` in one frame, each file's rows given the columns of its entry of ``labels`` (a label
    replaces a column of the same name)."""
    if len(paths) != len(labels):
        raise ValueError(f"need one label per input; got {len(paths)} files, {len(labels)} labels")
    return pd.concat([read_csv(path).assign(**label) for path, label in zip(paths, labels)], ignore_index=True)


def pairs(paths: list[str], key: str = "arch") -> pd.DataFrame:
    """Every two models scored on the same documents, per document: from the harness's per-document CSVs
    ``paths``, for each (size, task, shot count, metric) and each two arms (the rows' ``arch``, the column ``key``
    names: arch, or variant for the pretrained arms), the documents counted by ``(sum_a, sum_b)``, each arm's
    score on the document summed over its seeds (``seeds_a``, ``seeds_b``). That table is all a per-document
    comparison of the two arms' means needs (McNemar, a paired bootstrap: :mod:`suite.report.documents`) and has
    at most (k_a + 1) x (k_b + 1) rows for 0/1 scores over k seeds, however many documents were scored. Arms come
    in name order (``arm_a`` < ``arm_b``). Raises ValueError naming the files when a seed scored a document twice,
    or two seeds or two arms scored different documents (ids, or lm-eval's hash under one id)."""
    frames = []
    for path in paths:
        frame = read_csv(path)
        missing = [c for c in DOC_KEYS if c not in frame.columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} of a per-document CSV (suite.eval.harness)")
        frames.append(frame[DOC_KEYS].assign(_file=str(path)))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*DOC_KEYS, "_file"])
    if rows.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    rows["doc"] = rows["lm_eval_task"].astype(str) + "/" + rows["doc_id"].astype(int).astype(str)
    twice = rows.duplicated(["arch", "seed", *CELL, "doc"], keep=False)
    if twice.any():
        first = rows[twice].iloc[0]
        raise ValueError(f"{', '.join(sorted(set(rows[twice]['_file'])))}: {first['arch']} seed {first['seed']} "
                         f"scored {first['task']} document {first['doc']} twice")
    out = []
    for cell, group in rows.groupby(CELL, dropna=False, sort=True):
        arms = {arm: _summed(g, cell) for arm, g in group.groupby("arch", sort=True)}
        for a, b in itertools.combinations(sorted(arms), 2):
            (seeds_a, sums_a, hashes_a, files_a), (seeds_b, sums_b, hashes_b, files_b) = arms[a], arms[b]
            if not hashes_a.sort_index().equals(hashes_b.sort_index()):
                raise ValueError(f"{', '.join(sorted(files_a | files_b))}: {a} and {b} scored different {cell[1]} "
                                 f"documents ({cell[2]}-shot, size {cell[0]}); they cannot be compared per document")
            joint = pd.DataFrame({"sum_a": sums_a, "sum_b": sums_b.reindex(sums_a.index)})
            counts = joint.value_counts().reset_index(name="count").sort_values(["sum_a", "sum_b"])
            out.append(counts.assign(key=key, arm_a=a, arm_b=b, **dict(zip(CELL, cell)), seeds_a=seeds_a,
                                     seeds_b=seeds_b, n_docs=len(joint)))
    return pd.concat(out, ignore_index=True)[PAIR_COLUMNS] if out else pd.DataFrame(columns=PAIR_COLUMNS)


def _summed(rows: pd.DataFrame, cell: tuple) -> tuple[str, pd.Series, pd.Series, set]:
    """One arm's documents of one cell: (its seeds "42/43/44", the score summed over them per document, lm-eval's
    hash per document, the files); ValueError naming the files when its seeds scored different documents."""
    per_seed = {seed: g.set_index("doc") for seed, g in rows.groupby("seed", sort=True)}
    files = set(rows["_file"])
    first = next(iter(per_seed.values()))["doc_hash"].sort_index()
    for g in per_seed.values():
        if not g["doc_hash"].sort_index().equals(first):
            raise ValueError(f"{', '.join(sorted(files))}: the seeds of {rows['arch'].iloc[0]} scored different "
                             f"{cell[1]} documents ({cell[2]}-shot, size {cell[0]})")
    sums = sum(pd.to_numeric(g["value"]) for g in per_seed.values())
    return "/".join(f"{int(float(s))}" for s in per_seed), sums, first, files


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


def _label(text: str) -> dict[str, str]:
    """argparse ``type=`` of a ``--labels`` item: ``KEY=VALUE[,KEY=VALUE...]``."""
    items = [item.partition("=") for item in text.split(",")]
    if not all(key and sep for key, sep, _ in items):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {text!r}")
    return {key: value for key, _, value in items}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["quality", "concat", "curves", "pairs", "labelled"])
    parser.add_argument("--evals", nargs="*", type=in_file, default=[])
    parser.add_argument("--metrics", nargs="*", type=in_file, default=[])
    parser.add_argument("--inputs", nargs="*", type=in_file, default=[])
    parser.add_argument("--not-run", nargs="*", type=_not_run, default=[], metavar="ARCH=REASON",
                        help="concat: archs with no results, and why (a 'not run' row per cell)")
    parser.add_argument("--runs", nargs="*", type=_run, default=[], metavar="VARIANT:SEED",
                        help="curves: one per input")
    parser.add_argument("--labels", nargs="*", type=_label, default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help="labelled: one per input, the columns its rows get")
    parser.add_argument("--key", default="arch", choices=["arch", "variant"],
                        help="pairs: what the arms are (the harness's --arch: an arch, or a pretrained arm's variant)")
    parser.add_argument("--out", required=True, type=out_file)
    args = parser.parse_args(argv)
    with usage_errors(parser):  # a damaged input CSV; inputs not one per run
        if args.kind == "concat":
            frame = concat(args.inputs, dict(args.not_run))
        elif args.kind == "curves":
            frame = curves(args.inputs, args.runs)
        elif args.kind == "pairs":
            frame = pairs(args.inputs, args.key)
        elif args.kind == "labelled":
            frame = labelled(args.inputs, args.labels)
        else:
            frame = quality(args.evals, args.metrics)
    write_csv(frame, args.out)
    print(f"wrote {args.out} ({len(frame)} rows)")


if __name__ == "__main__":
    main()
