"""Checks of this suite's own experiments beyond their controls: baselines that fail their own control, and rows
that contradict each other. Pure functions of results frames; the audit, Table 3 and the MQAR figure use them.

- MQAR, per size: the Transformer must pass the positive control (accuracy >= 0.95 at the control cell) at every
  size of a grid, not only the control size; where it does not, its cells at that size are void
  (:func:`mqar_size_voids`). A linear baseline (GDN, GLA, RetNet) that stays within 0.05 of chance on every cell of
  the control size never trained (:func:`mqar_flags`).
- Language modelling: every baseline's held-out loss must lie below the unigram cross-entropy (the lm positive
  control's criterion, applied to each arm), and full attention should not lose to its own windowed restriction:
  a Transformer worse than SWA beyond noise marks an untuned Transformer recipe (:func:`lm_flags`).
- Benchmarks: a model's TTFT at batch b covers b prompts, so it should be about b times its batch-1 prefill at the
  same length (prefill is compute-bound at these lengths); a pair of rows off by more than ``BATCH_SPREAD`` cannot
  both hold (:func:`batch_contradictions`).
"""
from __future__ import annotations

import re

import pandas as pd

from suite.eval.controls import MQAR_CHANCE_MARGIN, MQAR_POSITIVE
from suite.report.measured import mqar_control_cell, sizes_by_params
from suite.report.stats import paired
from suite.report.tables import TTFT_SPREAD

LINEAR_BASELINES = ("gdn", "gla", "retnet")
LM_BASELINES = ("transformer", "swa", *LINEAR_BASELINES)
BATCH_SPREAD = TTFT_SPREAD  # the same spread that flags a TTFT off its model's other configs (Table 4)


def _ok(frame: pd.DataFrame | None) -> pd.DataFrame:
    return frame[frame["status"] == "ok"] if frame is not None and "status" in frame else pd.DataFrame()


def mqar_size_voids(mqar: pd.DataFrame | None) -> dict[str, str]:
    """size -> ``invalid: ...`` for each size of an MQAR grid where the Transformer misses the positive control at
    the control cell (:func:`suite.report.measured.mqar_control_cell`)."""
    ok = _ok(mqar)
    cell = mqar_control_cell(ok) if len(ok) else None
    if cell is None or "size" not in ok:
        return {}
    out = {}
    for size in sizes_by_params(ok[ok["size"].notna()]):
        at = ok[(ok["size"].astype(str) == size) & (ok["arch"] == "transformer") & (ok["seq_len"] == cell[0])
                & (ok["num_kv_pairs"] == cell[1])]
        value = pd.to_numeric(at["accuracy"], errors="coerce").mean() if len(at) else None
        if value is not None and value < MQAR_POSITIVE:
            out[size] = (f"invalid: Transformer misses its positive control at {size} ({value:.3g} vs >= "
                         f"{MQAR_POSITIVE} at T={cell[0]}, {cell[1]} pairs)")
    return out


Flag = tuple[str, str, str | None, str]  # (experiment: mqar or lm, arch, size or None for every size, why)


def mqar_flags(mqar: pd.DataFrame | None) -> list[Flag]:
    """Baseline-soundness flags of MQAR rows: the Transformer's per-size failures, and linear baselines within
    ``MQAR_CHANCE_MARGIN`` of chance on every cell of the control size (the grid's widest)."""
    flags = [("mqar", "transformer", size, v.removeprefix("invalid: ")) for size, v in mqar_size_voids(mqar).items()]
    ok = _ok(mqar)
    if ok.empty:
        return flags
    sized = ok[ok["size"].notna()] if "size" in ok else ok
    widest = sizes_by_params(sized)[-1] if "size" in sized and len(sized) else None
    at = sized[sized["size"].astype(str) == widest] if widest is not None else sized
    for arch in LINEAR_BASELINES:
        mine = at[at["arch"] == arch]
        if mine.empty:
            continue
        best, chance = float(mine["accuracy"].max()), float(pd.to_numeric(mine["chance"]).mean())
        if best <= chance + MQAR_CHANCE_MARGIN:
            flags.append(("mqar", arch, widest, f"{arch} never leaves chance on MQAR at {widest} (best cell "
                                                f"{best:.3g}, chance {chance:.3g} + {MQAR_CHANCE_MARGIN}): an "
                                                "untrained baseline"))
    return flags


def unigram_of(controls: pd.DataFrame | None, experiment: str = "lm") -> float | None:
    """The val split's unigram cross-entropy (nats/token): the threshold of ``experiment``'s positive control
    (``< x``; lm, or the from-scratch study's scratch_lm)."""
    if controls is None:
        return None
    rows = controls[(controls["experiment"] == experiment) & (controls["control"] == "positive")]
    found = re.match(r"\s*<\s*([0-9.]+)", str(rows["threshold"].iloc[0])) if len(rows) else None
    return float(found.group(1)) if found else None


def held_out_loss(runs: pd.DataFrame | None, arch: str, size: str | None = None) -> float | None:
    """Mean over seeds of an arm's validation loss (nats/token) in the training runs' metrics (``runs``)."""
    if runs is None or runs.empty:
        return None
    mine = runs[(runs["arch"] == arch) & ((runs["size"].astype(str) == str(size)) if size is not None else True)]
    values = pd.to_numeric(mine["val_loss"], errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def lm_flags(quality: pd.DataFrame | None, runs: pd.DataFrame | None, unigram: float | None,
             floor: float = 0.0) -> list[Flag]:
    """Baseline-soundness flags of one profile's main comparison (``quality.csv`` and its training runs' metrics):
    a baseline whose held-out loss is not below the unigram cross-entropy, and a Transformer whose held-out byte
    perplexity is above SWA's beyond noise (paired per seed, CI and drift floor ``floor``)."""
    flags = []
    ok = _ok(quality)
    for arch in LM_BASELINES:
        sizes = ok[ok["arch"] == arch]["size"].dropna().astype(str).unique() if len(ok) else []
        loss = held_out_loss(runs, arch, sizes[0]) if len(sizes) == 1 else None
        if loss is not None and unigram is not None and loss >= unigram:
            flags.append(("lm", arch, None, f"{arch}'s held-out loss {loss:.4g} is not below the unigram {unigram:.4g} "
                                      "nats/token"))
    ppl = ok[(ok["task"] == "val_ppl") & (ok["metric"] == "byte_perplexity")] if len(ok) else ok
    if len(ppl) and {"transformer", "swa"} <= set(ppl["arch"]):
        keys = [c for c in ("size", "seed") if c in ppl]
        by = {a: ppl[ppl["arch"] == a].groupby(keys)["value"].mean() for a in ("transformer", "swa")}
        est = paired(by["transformer"], by["swa"], "ratio", "seeds")
        if est.beyond(floor) and est.value > 1:
            flags.append(("lm", "transformer", None, f"Transformer worse than SWA: byte perplexity ratio "
                                               f"Transformer / SWA {est.text()}; full attention loses to its own "
                                               "windowed restriction, a sign of an untuned Transformer recipe"))
    return flags


def batch_contradictions(e2e: pd.DataFrame | None, prefill: pd.DataFrame | None) -> dict[str, str]:
    """arch -> why, for models whose batch-b TTFT (``e2e.csv``) is off b x their batch-1 full-model prefill at the
    same input length (``prefill.csv``, one GPU) by more than ``BATCH_SPREAD`` (module docstring)."""
    e2e, prefill = _ok(e2e), _ok(prefill)
    if e2e.empty or prefill.empty:
        return {}
    one = prefill[(pd.to_numeric(prefill["gpus"]) == 1) & (prefill["method"] == "full-model")]
    out, seen = {}, []
    for r in e2e.itertuples():
        base = one[(one["arch"] == r.arch) & (pd.to_numeric(one["seq_len"]) == float(r.input_len))]
        if base.empty:
            continue
        ms = float(base["ms"].mean())
        ratio = float(r.ttft_s) / (float(r.batch) * ms / 1000)
        seen.append(f"{r.arch} {ratio:.2f}")
        if abs(ratio - 1) > BATCH_SPREAD:
            out[r.arch] = (f"{r.arch}: TTFT {float(r.ttft_s):.4g} s at batch {int(r.batch)} vs a batch-1 prefill of "
                           f"{ms / 1000:.4g} s at {int(r.input_len)} tokens (results/gpu/prefill.csv, commit "
                           f"{base['commit'].iloc[0]}): {ratio:.2f} x batch x prefill, outside 1 +/- {BATCH_SPREAD}")
    return {arch: f"{why} (batch TTFT / (batch x prefill) of every model measured both ways: {', '.join(seen)})"
            for arch, why in out.items()}
