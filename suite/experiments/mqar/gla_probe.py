"""The GLA probe's table (``paper_tables/mqar_gla.{md,csv}``): why GLA sits on the MQAR plateau.

FLA's reference GLA layer has no token shift (no short convolution, no RoPE), which MQAR needs to bind a value to
its key (README.md, "GLA on MQAR"). The probe (``mqar.gla_probe``; rule ``mqar_gla_probe``) trains that layer
(``gla``) and the same layer with FLA's short convolution (``gla_conv``) on the MQAR control cell alone, at the
control size, at every rate and seed of the probe, with the rest of the study's MQAR recipe. A seed fixes the data,
so the variants are paired by seed.

Per (profile, variant, rate): the control-cell accuracy, mean and std over seeds, each seed's value and the final
training loss. Each variant's best rate is the one with the highest mean accuracy (``edge`` when it is the lowest or
highest rate swept). The comparison: ``gla_conv - gla``, each at its best rate, a paired t over the seeds
(``suite.report.stats.paired``) read by the audit's rule (``suite.report.verdicts.comparison_text``). Beside them, the
Transformer's accuracy at the same cell from the main MQAR run (``mqar.csv``: one seed, the recipe's own rate), the
cell's positive control. Pure functions of DataFrames.
"""
from __future__ import annotations

import pandas as pd

from suite.report.measured import scale_text
from suite.report.stats import paired, per_seed
from suite.report.verdicts import comparison_text

VARIANTS = ("gla", "gla_conv")
COLUMNS = ["profile", "row", "variant", "lr", "n_seeds", "accuracy", "accuracy_std", "per_seed", "final_train_loss",
           "chance", "best", "conditions", "status"]
NOTE = ("GLA on MQAR: FLA's reference GLA layer (gla) and the same layer with FLA's short convolution (gla_conv), "
        "trained on the MQAR control cell alone at the control size, each at every rate and seed of mqar.gla_probe "
        "(the rest of the study's MQAR recipe unchanged). accuracy: the control cell's held-out accuracy, mean +- "
        "std over seeds (per_seed: each seed's). best: the variant's rate with the highest mean (edge: the lowest "
        "or highest rate swept, so a better rate may lie outside). comparison: gla_conv - gla, each at its best "
        "rate, paired by seed (a seed fixes the data), 95% t CI; 'differs' only when the CI excludes 0. reference: "
        "the Transformer at the same cell in the main MQAR run (one seed, the recipe's rate), the cell's positive "
        "control.")


def _cell(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the cell each run trained on (``num_kv_pairs`` equal to its ``train_kv``, at its seq_len)."""
    kv = pd.to_numeric(rows["train_kv"].astype(str).str.split(r"[+,]").str[0], errors="coerce")
    return rows[pd.to_numeric(rows["num_kv_pairs"], errors="coerce") == kv]


def _conditions(rows: pd.DataFrame, label: str) -> str:
    """Scale and conditions of a cell's rows: params, tokens, steps, T, device, software (``scale_text``), then the
    cell, the held-out sequences, the seeds and the commits."""
    def values(col):
        return "/".join(sorted(rows[col].dropna().astype(str).unique())) if col in rows else "?"
    return (f"{scale_text(rows, label)}, cell T={values('seq_len')} x {values('num_kv_pairs')} pairs, "
            f"n={values('num_test')} sequences, seeds {values('seed')}, commit {values('commit')}")


def _seed_text(seeds: pd.Series) -> str:
    return " ".join(f"{s}:{v:.3f}" for s, v in seeds.items())


def profile_rows(probe: pd.DataFrame | None, mqar: pd.DataFrame | None, profile: str, missing: str,
                 invalid: str | None = None) -> pd.DataFrame:
    """The table's rows of one profile: one per (variant, rate), the comparison, the Transformer's reference; one
    ``not run`` row when ``probe`` is None or empty. ``invalid``: why the MQAR controls void the cell (every row's
    status says so)."""
    if probe is None or probe.empty:
        return pd.DataFrame([{"profile": profile, "row": "rate", "status": f"not run: {missing}"}], columns=COLUMNS)
    ok = _cell(probe[probe["status"].astype(str) == "ok"])
    out, best = [], {}
    for variant in VARIANTS:
        mine = ok[ok["arch"].astype(str) == variant]
        if mine.empty:
            out.append({"profile": profile, "row": "rate", "variant": variant, "status": f"not run: no {variant} rows"})
            continue
        rates = sorted(pd.to_numeric(mine["lr"]).unique())
        means = {lr: per_seed(mine[pd.to_numeric(mine["lr"]) == lr], "accuracy") for lr in rates}
        top = max(rates, key=lambda lr: (means[lr].mean(), -lr))  # a tie: the lower rate
        best[variant] = means[top]
        for lr in rates:
            g, seeds = mine[pd.to_numeric(mine["lr"]) == lr], means[lr]
            mark = "" if lr != top else "best, edge" if lr in (rates[0], rates[-1]) else "best"
            out.append({"profile": profile, "row": "rate", "variant": variant, "lr": lr, "n_seeds": len(seeds),
                        "accuracy": seeds.mean(), "accuracy_std": seeds.std() if len(seeds) > 1 else None,
                        "per_seed": _seed_text(seeds),
                        "final_train_loss": pd.to_numeric(g["final_train_loss"], errors="coerce").mean(),
                        "chance": pd.to_numeric(g["chance"], errors="coerce").mean(), "best": mark,
                        "conditions": _conditions(g, variant), "status": invalid or "measured"})
    if len(best) == len(VARIANTS):
        est = paired(best["gla_conv"], best["gla"], "difference", "seeds")
        out.append({"profile": profile, "row": "comparison", "variant": "gla_conv - gla (best rates)",
                    "n_seeds": est.n, "accuracy": est.value, "status": invalid or comparison_text(est)})
    cell = ok[["seq_len", "num_kv_pairs"]].drop_duplicates()
    reference = pd.DataFrame()
    if mqar is not None and len(cell) == 1:  # the main run's Transformer at the probe's cell and size
        reference = mqar[(mqar["arch"].astype(str) == "transformer") & (mqar["status"].astype(str) == "ok")
                         & (pd.to_numeric(mqar["seq_len"]) == float(cell["seq_len"].iloc[0]))
                         & (pd.to_numeric(mqar["num_kv_pairs"]) == float(cell["num_kv_pairs"].iloc[0]))]
        if "size" in reference and "size" in ok:
            reference = reference[reference["size"].astype(str).isin(ok["size"].astype(str))]
    if len(reference):
        seeds = per_seed(reference, "accuracy")
        out.append({"profile": profile, "row": "reference", "variant": "transformer (mqar.csv)",
                    "lr": pd.to_numeric(reference["lr"]).iloc[0], "n_seeds": len(seeds), "accuracy": seeds.mean(),
                    "per_seed": _seed_text(seeds),
                    "chance": pd.to_numeric(reference["chance"], errors="coerce").mean(),
                    "conditions": _conditions(reference, "transformer"), "status": "positive control's model"})
    return pd.DataFrame(out, columns=COLUMNS).round(
        {"accuracy": 4, "accuracy_std": 4, "final_train_loss": 4, "chance": 6})


def probe_table(profiles: list[tuple[str, pd.DataFrame | None, pd.DataFrame | None, str, str | None]]) -> pd.DataFrame:
    """Every profile's rows (:func:`profile_rows` of each ``(profile, probe, mqar, missing, invalid)``)."""
    return pd.concat([profile_rows(p, m, name, miss, bad) for name, p, m, miss, bad in profiles], ignore_index=True)
