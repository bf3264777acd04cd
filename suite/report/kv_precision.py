"""FP8 K/V on real weights (``results/gpu/fp8_kv_real.csv``, :mod:`benchmarks.fp8_kv_real`): the table of
``paper_tables/fp8_kv_real.md``, a pure function of the rows."""
from __future__ import annotations

import pandas as pd

COLUMNS = ["seq_len", "n_seqs", "comparison", "test", "reference", "top1_agreement", "top1_lo", "top1_hi", "ppl_ref",
           "ppl_test", "ppl_rel_change", "ppl_rel_lo", "ppl_rel_hi", "max_abs_over_rms", "rel_err", "status"]
NOTE = ("The conversion experiment's pretrained model converted to Orthros (identity scale-offset, no training), one "
        "prefill per arm with the output stream at every position, the arms differing only in the K/V store both "
        "streams read. 'path floor': the runner against the model's own forward at the same K/V precision; 'bf16 "
        "rounding': K/V stored in bf16 against the model's dtype; 'fp8 check': FP8KV against bf16-stored K/V (the "
        "targets: top-1 agreement >= 0.99 and |perplexity change| < 1%; 'targets' gives each one's pass/fail from "
        "results/gpu/targets.csv; 'ok' in status only says the row was measured). ppl_rel_change is a fraction "
        "(0.01 = +1%). lo/hi: 95% intervals from batch means over position blocks. Conditions (model, dtype, device, "
        "tokens, commit) in the last column; runs on several machines share the table, each row judged by its own "
        "run's targets. A failed path check voids that run's FP8 targets at that T: the measurement could not see "
        "agreement where nothing changed (a bf16 model's two paths round differently). A target is judged on the "
        "point estimate; where the 95% interval crosses the threshold the pass is not established.")


def _verdicts(targets: pd.DataFrame | None, row: pd.Series) -> str:
    """The pass/fail rows of ``targets.csv`` that judge one (comparison, T) row of one run (its device, model dtype and
    commit: runs on several machines share the file): the path check judges the path floor, the targets the FP8
    check of the same K/V store (a run with several FP8 scale blocks has one FP8 check row per block)."""
    method = {"path floor": "path check", "fp8 check": "target"}.get(row["comparison"])
    if targets is None or method is None or "seq_len" not in targets:
        return ""
    same_run = pd.Series(True, index=targets.index)
    for col in ("device", "dtype", "commit"):
        if col in targets and col in row:
            same_run &= targets[col].astype(str) == str(row[col])
    rows = targets[(targets.source == "fp8_kv_real.csv") & (targets.method == method) & same_run
                   & (pd.to_numeric(targets.seq_len, errors="coerce") == float(row["seq_len"]))]
    if method == "target":  # its text names the arms: "<test> vs <reference>: <metric> ..."
        rows = rows[rows.target.astype(str).str.startswith(f"{row['test']} vs {row['reference']}:")]
    def short(text: str) -> str:  # "<arms>: <metric> (<conditions>) <op> <threshold>" -> "<metric> <op> <threshold>"
        head, _, tail = text.rpartition(") ")
        return f"{head.split(': ', 1)[-1].split(' (T=')[0]} {tail}" if head else text

    return "; ".join(f"{short(r.target)}: {r.status}" for r in rows.itertuples())


def fp8_real_table(frame: pd.DataFrame | None, missing: str, targets: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (T, comparison) with the pass/fail of the ``targets`` rows that judge it and its conditions; a
    single ``not run`` row when there are no rows."""
    if frame is None or frame.empty:
        return pd.DataFrame([{"status": f"not run: {missing}"}])
    out = frame[[c for c in COLUMNS if c in frame.columns]].copy()
    out["targets"] = [_verdicts(targets, r) for _, r in frame.iterrows()]
    def conditions(r: pd.Series) -> str:
        block = f", FP8 block {int(r['fp8_block'])}" if pd.notna(r.get("fp8_block")) else ""
        return (f"{r['base_model']} ({r['quantization']}) as {r['arch']}, w={r['window']}, {r['split']} split, "
                f"{r['tokens']} tokens, model {r['dtype']}{block}, {r['device']}, commit {r['commit']}")

    return out.round(4).assign(conditions=frame.apply(conditions, axis=1))
