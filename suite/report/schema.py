"""The columns each measured results CSV must have for the renderers and the claims audit, with their types.

One entry per results file, keyed as ``suite.report.measured.load_measured`` names them (profile files by stem,
GPU files as ``gpu_<stem>``). Only the columns the renderers read are listed; any other column is fine, and a
file not listed here is checked only for the columns a claim names. Types: ``TEXT`` (a value in every row),
``NUMBER`` (a number, or empty: an empty cell is "not measured"), ``NONNEG`` (a number >= 0, or empty: lengths, times,
scores and perplexities) and ``FRACTION`` (a number in [0, 1], or empty: accuracies, needle depths). To add a results
file, add its entry here.

A row whose ``status`` is ``ok`` is a measurement: it holds a finite number in every number column its file's entry
lists (:func:`check_ok_rows`), except the columns ``MAY_BE_EMPTY`` names. Only a row whose status says why it was
not measured (``not run: ...``, ``failed: ...``) may leave them empty.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

TEXT, NUMBER, NONNEG, FRACTION = "text", "number", "number >= 0", "number in [0, 1]"
RANGES = {NONNEG: (0.0, float("inf")), FRACTION: (0.0, 1.0)}
SCHEMAS: dict[str, dict[str, str]] = {
    "quality": {"arch": TEXT, "task": TEXT, "metric": TEXT, "value": NONNEG, "status": TEXT},
    "conversion": {"variant": TEXT, "task": TEXT, "metric": TEXT, "value": NONNEG, "status": TEXT},
    "ablation": {"arch": TEXT, "size": TEXT, "task": TEXT, "metric": TEXT, "value": NONNEG, "n_params": NONNEG,
                 "status": TEXT},
    "mqar": {"arch": TEXT, "seq_len": NONNEG, "num_kv_pairs": NONNEG, "accuracy": FRACTION, "accuracy_far": FRACTION,
             "chance": FRACTION, "status": TEXT},
    "mqar_gla": {"arch": TEXT, "lr": NONNEG, "seed": NONNEG, "seq_len": NONNEG, "num_kv_pairs": NONNEG,
                 "train_kv": TEXT, "accuracy": FRACTION, "chance": FRACTION, "status": TEXT},
    "niah": {"arch": TEXT, "context_len": NONNEG, "depth": FRACTION, "accuracy": FRACTION, "train_len": NONNEG,
             "status": TEXT},
    "controls": {"experiment": TEXT, "control": TEXT, "arch": TEXT, "value": NUMBER, "threshold": TEXT,
                 "passed": TEXT},
    "prefill_cpu": {"arch": TEXT, "seq_len": NONNEG, "ms": NONNEG, "status": TEXT},
    "prompt_lengths": {"tokenizer": TEXT, "task": TEXT, "num_fewshot": NONNEG, "n_docs": NONNEG,
                       "median_tokens": NONNEG, "p90_tokens": NONNEG, "max_tokens": NONNEG,
                       "share_above_128": FRACTION, "window": NONNEG, "share_above_window": FRACTION},
    "gpu_prefill": {"arch": TEXT, "method": TEXT, "gpus": NONNEG, "seq_len": NONNEG, "ms": NONNEG, "status": TEXT},
    "gpu_e2e": {"arch": TEXT, "batch": NONNEG, "input_len": NONNEG, "output_len": NONNEG, "ttft_s": NONNEG,
                "e2e_s": NONNEG, "output_tok_s": NONNEG, "decode_tok_s": NONNEG, "status": TEXT},
    # every column the FP8 table shows (suite.report.kv_precision.COLUMNS)
    "gpu_fp8_kv_real": {"seq_len": NONNEG, "n_seqs": NONNEG, "comparison": TEXT, "test": TEXT, "reference": TEXT,
                        "top1_agreement": FRACTION, "top1_lo": FRACTION, "top1_hi": FRACTION, "ppl_ref": NONNEG,
                        "ppl_test": NONNEG, "ppl_rel_change": NUMBER, "ppl_rel_lo": NUMBER, "ppl_rel_hi": NUMBER,
                        "max_abs_over_rms": NONNEG, "rel_err": NONNEG, "status": TEXT},
    "gpu_seq_parallel": {"arch": TEXT, "gpus": NONNEG, "seq_len": NONNEG, "ms": NONNEG, "status": TEXT},
    "gpu_decode_load": {"arch": TEXT, "context": NONNEG, "batch": NONNEG, "path": TEXT, "decode_attn": TEXT,
                        "decode_step_ms": NONNEG, "predicted_ms": NONNEG, "measured_over_predicted": NONNEG,
                        "status": TEXT},
    "gpu_niah": {"arch": TEXT, "device": TEXT, "context_len": NONNEG, "depth": FRACTION, "accuracy": FRACTION,
                 "status": TEXT},
}
SCHEMAS |= {
    "pretrained": {"variant": TEXT, "task": TEXT, "metric": TEXT, "value": NONNEG, "status": TEXT, "seed": NUMBER,
                   "base_model": TEXT, "base_n_params": NONNEG, "tokens_extra": NONNEG},
    "pretrained_ppl": {"variant": TEXT, "bucket": TEXT, "nll": NONNEG, "n_tokens": NONNEG, "n_docs": NONNEG,
                       "max_len": NONNEG, "seed": NUMBER},
    "pretrained_identity": {"tokens": NONNEG, "max_abs_dlogit": NONNEG, "threshold": NONNEG, "passed": TEXT,
                            "window": NONNEG, "loss_base": NONNEG, "loss_window": NONNEG},
    "pretrained_niah": {"arch": TEXT, "context_len": NONNEG, "depth": FRACTION, "accuracy": FRACTION},
    "pretrained_loss": {"variant": TEXT, "seed": NUMBER, "step": NONNEG, "tokens": NONNEG, "loss": NONNEG},
    "pretrained_train": {"arch": TEXT, "seed": NUMBER, "tokens": NONNEG, "val_loss": NONNEG},
    "pretrained_evals": {"variant": TEXT, "seed": NUMBER, "step": NONNEG, "tokens": NONNEG, "val_loss": NONNEG},
    "pretrained_lr": {"arch": TEXT, "lr": NONNEG, "val_loss": NONNEG, "tokens": NONNEG, "steps": NONNEG,
                      "seed": NUMBER, "picked": TEXT, "rule": TEXT},
    "pretrained_corpus": {"source": TEXT, "licence": TEXT, "members": NONNEG, "docs": NONNEG,
                          **{f"dropped_{why}": NONNEG for why in ("language", "stopwords", "short", "dup")},
                          **{f"{what}_{split}": NONNEG for what in ("docs", "bytes", "tokens")
                             for split in ("train", "val", "test")}},
}
# the from-scratch study (suite/experiments/from_scratch/rules.smk)
SCHEMAS |= {
    "scratch_corpus": SCHEMAS["pretrained_corpus"],
    "scratch_lr": SCHEMAS["pretrained_lr"],
    "scratch_train": {"arch": TEXT, "budget": TEXT, "seed": NUMBER, "steps": NONNEG, "tokens": NONNEG,
                      "val_loss": NONNEG, "wall_s": NONNEG, "n_params": NONNEG},
    "scratch_evals": {"arch": TEXT, "budget": TEXT, "seed": NUMBER, "step": NONNEG, "tokens": NONNEG,
                      "val_loss": NONNEG},
    "scratch_ppl": {"arch": TEXT, "budget": TEXT, "seed": NUMBER, "bucket": TEXT, "pos_min": NONNEG, "pos_max": NONNEG,
                    "nll": NONNEG, "n_tokens": NONNEG, "n_docs": NONNEG},
    "scratch_niah": {"arch": TEXT, "budget": TEXT, "seed": NUMBER, "context_len": NONNEG, "depth": FRACTION,
                     "accuracy": FRACTION, "train_len": NONNEG},
    "scratch_budget": {"arch": TEXT, "reference": TEXT, "ref_steps": NONNEG, "ref_step_s": NONNEG, "step_s": NONNEG,
                       "steps": NONNEG, "warmup": NONNEG, "tokens": NONNEG, "target_s": NONNEG, "epochs": NONNEG},
}
SCHEMAS |= {f"gpu_{name}": SCHEMAS[name] for name in ("scratch_corpus", "scratch_lr", "scratch_train", "scratch_evals",
                                                      "scratch_ppl", "scratch_niah", "scratch_budget")}
SCHEMAS |= {f"gpu_{name}": SCHEMAS[name] for name in ("pretrained", "pretrained_ppl", "pretrained_identity",
                                                      "pretrained_niah", "pretrained_loss", "pretrained_train",
                                                      "pretrained_evals", "pretrained_lr", "pretrained_corpus")}
SCHEMAS["gpu_controls"] = SCHEMAS["controls"]
SCHEMAS["gpu_mqar"] = SCHEMAS["mqar"]
SCHEMAS["gpu_mqar_gla"] = SCHEMAS["mqar_gla"]
SCHEMAS["gpu_quality"] = SCHEMAS["quality"]
SCHEMAS["gpu_ablation"] = SCHEMAS["ablation"]
# number columns an ``ok`` row may leave empty: MQAR's far-answer accuracy where no answer of the cell lies beyond
# the window's reach (suite.experiments.mqar.eval)
MAY_BE_EMPTY: dict[str, set[str]] = {"mqar": {"accuracy_far"}, "gpu_mqar": {"accuracy_far"}}
MAY_BE_EMPTY |= {f"{name}_gla": MAY_BE_EMPTY[name] for name in ("mqar", "gpu_mqar")}


def check_columns(frame: pd.DataFrame, path: str | Path, columns: dict[str, str]) -> pd.DataFrame:
    """``frame`` (read from ``path``) if it has every column of ``columns`` with values of its type; else
    ValueError naming the file, the column and, for a bad value, the data row (1 = first row after the header)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; the renderers need {list(columns)}")
    for col, kind in columns.items():
        values = frame[col]
        number = pd.to_numeric(values, errors="coerce")
        bad = values.isna() if kind == TEXT else values.notna() & number.isna()
        if bad.any():
            i = int(bad.to_numpy().argmax())
            what = "is empty" if kind == TEXT else f"holds {values.iloc[i]!r}, not a number"
            raise ValueError(f"{path} row {i + 1}: column {col!r} {what}")
        if kind in RANGES:
            low, high = RANGES[kind]
            out = number.notna() & ((number < low) | (number > high))
            if out.any():
                i = int(out.to_numpy().argmax())
                raise ValueError(f"{path} row {i + 1}: column {col!r} holds {number.iloc[i]:g}, not a {kind}")
    return frame


def check_ok_rows(frame: pd.DataFrame, path: str | Path, columns: dict[str, str],
                  may_be_empty: set[str] = frozenset()) -> pd.DataFrame:
    """``frame`` (read from ``path``) if every row with status ``ok`` holds a finite number in each number column of
    ``columns`` (but ``may_be_empty``); else ValueError naming the file, the data row (1 = first row after the header)
    and the column. A file without a ``status`` column is left as it is."""
    if "status" not in frame.columns:
        return frame
    ok = frame["status"].astype(str).str.strip() == "ok"
    for col, kind in columns.items():
        if kind == TEXT or col in may_be_empty:
            continue
        number = pd.to_numeric(frame[col], errors="coerce").astype(float)
        bad = ok & ~np.isfinite(number)
        if bad.any():
            i = int(bad.to_numpy().argmax())
            what = "is empty (or NaN)" if pd.isna(number.iloc[i]) else f"holds {number.iloc[i]:g}"
            raise ValueError(f"{path} row {i + 1}: column {col!r} {what} in a row with status 'ok'; a measured row "
                             f"holds a finite {kind} there (a cell that was not measured says why in its status)")
    return frame


def validate(name: str, frame: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """``frame`` checked against ``SCHEMAS[name]`` (nothing to check for an unlisted name), its ``ok`` rows holding
    finite numbers (:func:`check_ok_rows`); ValueError for a file with a header and no rows: every writer of a results
    file writes a row for each cell, one that could not run included, so an empty one is damaged (and the figures
    have nothing to say why)."""
    if frame.empty:
        raise ValueError(f"{path}: a header and no rows; a results file holds a row for every cell, 'not run' "
                         f"ones included (remove the file to render without it)")
    columns = SCHEMAS.get(name, {})
    return check_ok_rows(check_columns(frame, path, columns), path, columns, MAY_BE_EMPTY.get(name, set()))
