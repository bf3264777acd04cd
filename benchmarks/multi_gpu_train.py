"""Data-parallel training on 1 vs N GPUs: throughput and loss curves of two ``suite.train.run`` runs -> one CSV.

The two runs (folders holding ``loss.csv`` and ``metrics.csv``) train the same model on the same global batch,
one process vs ``torchrun --nproc_per_node N`` (FSDP2). Rows (column ``kind``):

* ``run``: per run, ``gpus`` (its ``world_size``), parameters, global batch, ``tok_s`` = median tokens/s of the
  steps after the first ``--skip`` (steady state; startup and kernel compilation excluded), ``step_ms``,
  final train and val loss;
* ``loss``: per step, ``loss_1gpu``, ``loss_ngpu`` and their absolute difference;
* ``target`` (status pass/fail; written to ``targets.csv`` beside the CSV, not into it): N-GPU tok/s >=
  ``--min-scaling`` x 1-GPU tok/s (default 1.8), and max |loss difference| <= ``--loss-atol`` nats (default 0.05:
  bf16 autocast on GPUs is not bitwise reproducible across batch splits; the fp32 CPU tests hold 1e-5).

Provenance columns come from each run's ``metrics.csv`` (the N-GPU run's for loss and target rows).
A run that did not finish gives a ``run`` row with status "not run: ..." and targets "not run".

``python -m benchmarks.multi_gpu_train --one RUN_DIR --many RUN_DIR --out results/gpu/multi_gpu_train.csv``
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from benchmarks.targets import write_targets
from suite.cli import nonnegative_int, out_file, positive_float, usage_errors
from suite.provenance import PROVENANCE_COLUMNS, read_csv, write_csv

RUN_COLUMNS = ("arch", "size", "n_params", "batch_size", "seq_len", "steps", "train_loss", "val_loss")


def _run(path: Path, skip: int) -> tuple[dict, pd.DataFrame | None]:
    """The ``run`` row of one training folder and its loss curve (None when it did not finish)."""
    if not (path / "metrics.csv").exists() or not (path / "loss.csv").exists():
        return {"kind": "run", "run_dir": str(path), "status": f"not run: no metrics.csv/loss.csv in {path}"}, None
    metrics, loss = read_csv(path / "metrics.csv").iloc[0].to_dict(), read_csv(path / "loss.csv")
    steady = loss[loss["step"] > skip] if len(loss) > skip else loss
    tok_s = float(steady["tok_s"].median())
    row = {"kind": "run", "gpus": int(metrics.get("world_size", 1)), **{k: metrics[k] for k in RUN_COLUMNS},
           "tok_s": tok_s, "step_ms": 1e3 * metrics["batch_size"] * metrics["seq_len"] / tok_s,
           "run_dir": str(path), "status": "ok", **{k: metrics.get(k) for k in PROVENANCE_COLUMNS}}
    return row, loss


def summarize(one: str | Path, many: str | Path, skip: int = 5, min_scaling: float = 1.8,
              loss_atol: float = 0.05) -> list[dict]:
    """Rows comparing the 1-GPU run folder ``one`` with the N-GPU run folder ``many`` (see module doc).

    Raises ValueError when both runs finished but trained different models, batches or step counts.
    """
    (r1, l1), (rn, ln) = _run(Path(one), skip), _run(Path(many), skip)
    rows = [r1, rn]
    prov = {k: rn.get(k) for k in PROVENANCE_COLUMNS}
    ratio = max_diff = None
    if l1 is not None and ln is not None:
        differ = {k: (r1[k], rn[k]) for k in ("arch", "size", "batch_size", "seq_len", "steps") if r1[k] != rn[k]}
        if differ:
            raise ValueError(f"runs {one} and {many} are not comparable: {differ} (1 GPU, N GPUs)")
        ratio = rn["tok_s"] / r1["tok_s"]
        both = l1[["step", "loss"]].merge(ln[["step", "loss"]], on="step", suffixes=("_1gpu", "_ngpu"))
        both["abs_diff"] = (both["loss_1gpu"] - both["loss_ngpu"]).abs()
        max_diff = float(both["abs_diff"].max())
        rows += [{"kind": "loss", "gpus": rn["gpus"], **r, **prov} for r in both.to_dict("records")]
    n = rn.get("gpus", "N")
    for name, value, threshold, op in (
            (f"tok/s on {n} GPUs >= {min_scaling} x tok/s on 1 GPU", ratio, min_scaling, ">="),
            (f"max |loss on {n} GPUs - loss on 1 GPU| over steps <= {loss_atol}", max_diff, loss_atol, "<=")):
        ok = None if value is None else (value >= threshold if op == ">=" else value <= threshold)
        rows.append({"kind": "target", "gpus": rn.get("gpus"), "target": name, "value": value, "threshold": threshold,
                     "status": "not run: a run did not finish" if ok is None else ("pass" if ok else "fail"), **prov})
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", required=True, help="run folder of the 1-GPU run")
    ap.add_argument("--many", required=True, help="run folder of the N-GPU (torchrun) run")
    ap.add_argument("--out", type=out_file, default="results/gpu/multi_gpu_train.csv")
    ap.add_argument("--skip", type=nonnegative_int, default=5, help="first steps left out of the tok/s median")
    ap.add_argument("--min-scaling", type=positive_float, default=1.8)
    ap.add_argument("--loss-atol", type=positive_float, default=0.05)
    args = ap.parse_args(argv)
    with usage_errors(ap):  # two runs of different models, batches or step counts
        rows = summarize(args.one, args.many, args.skip, args.min_scaling, args.loss_atol)
    out = Path(args.out)
    write_csv([r for r in rows if r["kind"] != "target"], out)
    write_targets(out.parent, out.name, [{"arch": rows[1].get("arch"), "method": "data-parallel training",
                                          **{k: v for k, v in r.items() if k != "kind"}}
                                         for r in rows if r["kind"] == "target"])
    for r in rows:
        if r["kind"] == "run":
            print(f"[multi_gpu_train] {r.get('gpus', '?')} GPU(s): {r.get('tok_s', float('nan')):.0f} tok/s "
                  f"({r['status']})")
        elif r["kind"] == "target":
            print(f"[multi_gpu_train] target: {r['target']}: value={r['value']} -> {r['status']}")
    print(f"[multi_gpu_train] wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
