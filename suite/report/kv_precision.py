"""FP8 K/V on real weights (``results/gpu/fp8_kv_real.csv``, :mod:`suite.bench.fp8_kv_real`): the table of
``paper_tables/fp8_kv_real.md``, a pure function of the rows."""
from __future__ import annotations

import pandas as pd

COLUMNS = ["seq_len", "n_seqs", "comparison", "test", "reference", "top1_agreement", "top1_lo", "top1_hi", "ppl_ref",
           "ppl_test", "ppl_rel_change", "ppl_rel_lo", "ppl_rel_hi", "max_abs_over_rms", "rel_err", "status"]
NOTE = ("The conversion experiment's pretrained model converted to Orthros (identity scale-offset, no training), one "
        "prefill per arm with the output stream at every position, the arms differing only in the K/V store both "
        "streams read. 'path floor': the runner against the model's own forward at the same K/V precision; 'bf16 "
        "rounding': K/V stored in bf16 against the model's dtype; 'fp8 check': FP8KV against bf16-stored K/V (the "
        "targets: top-1 agreement >= 0.99 and |perplexity change| < 1%, in results/gpu/targets.csv). lo/hi: 95% "
        "intervals from batch means over position blocks. Conditions (model, dtype, device, tokens, commit) in the "
        "last column.")


def fp8_real_table(frame: pd.DataFrame | None, missing: str) -> pd.DataFrame:
    """One row per (T, comparison) with its conditions; a single ``not run`` row when there are no rows."""
    if frame is None or frame.empty:
        return pd.DataFrame([{"status": f"not run: {missing}"}])
    out = frame[[c for c in COLUMNS if c in frame.columns]].copy()
    def conditions(r: pd.Series) -> str:
        block = f", FP8 block {int(r['fp8_block'])}" if pd.notna(r.get("fp8_block")) else ""
        return (f"{r['base_model']} ({r['quantization']}) as {r['arch']}, w={r['window']}, {r['split']} split, "
                f"{r['tokens']} tokens, model {r['dtype']}{block}, {r['device']}, commit {r['commit']}")

    return out.round(4).assign(conditions=frame.apply(conditions, axis=1))
