"""The from-scratch study's measured-only rows of Table 1 (held-out loss per arch and budget) and Table 3 (held-out
loss beyond w, NIAH within T): a pure function of its collected CSVs (``scratch_train``, ``scratch_ppl``,
``scratch_niah``), each cell the mean over seeds with their spread. Proxies, not the paper's metrics: no 'reported'
cell faces them. A cell of an experiment whose controls failed (``suite.eval.controls``: ``scratch_lm``,
``scratch_niah``) reads "invalid: ..."."""
from __future__ import annotations

import pandas as pd

from suite.report.measured import scale_text, whole_split
from suite.report.tables import RECALL_COLUMNS, TABLE_COLUMNS, held_out_trials, params_label

SUFFIX = " (from-scratch study, gpu profile)"
BUDGETS = {"tokens": "equal tokens", "time": "equal GPU time"}
BEYOND_W = "513-2048"  # the position bucket past w (128) and past 4 w, where only Orthros's output stream sees a key
NIAH_LENGTHS = (1024, 2048)  # needles mostly beyond SWA-128's reach (6 layers x 127 tokens)
PROXY = "measured only: proxy, not comparable with the paper's cells"


def _cells(rows: pd.DataFrame, column: str, task: str, metric: str, unit: str, invalid: str | None,
           columns: list[str]) -> list[dict]:
    """One row per arch: ``column``'s mean over seeds (each seed's mean first), std and seed count."""
    out = []
    for arch, g in rows.groupby("arch", sort=False):
        per_seed = pd.to_numeric(g[column], errors="coerce").groupby(g["seed"]).mean().dropna()
        cell = dict(model=arch, variant="", scale=params_label(g), task=task, metric=metric, reported=None,
                    measured=per_seed.mean() if len(per_seed) else None,
                    measured_std=per_seed.std() if len(per_seed) > 1 else None, n_seeds=len(per_seed),
                    unit=unit, paper_scale_conditions="", measured_scale_conditions=scale_text(g, str(arch)),
                    status=invalid or PROXY)
        if "n_trials" in columns:
            cell["n_trials"] = held_out_trials(g)
        out.append(cell)
    return out


def _not_run(task: str, metric: str, missing: str, columns: list[str]) -> list[dict]:
    return [{**{c: None for c in columns}, "model": "all", "task": task, "metric": metric, "paper_scale_conditions": "",
             "measured_scale_conditions": "", "status": f"not run: {missing}"}]


def lm_rows(train: pd.DataFrame | None, invalid: str | None, missing: str) -> pd.DataFrame:
    """Table 1's rows: each arch's final held-out loss (nats/token) at each budget."""
    rows = []
    for budget, label in BUDGETS.items():
        task = f"held-out loss, {label}{SUFFIX}"
        mine = train[train["budget"].astype(str) == budget] if train is not None else None
        rows += _cells(mine, "val_loss", task, "val_loss", "nats/token", invalid, TABLE_COLUMNS) \
            if mine is not None and len(mine) else _not_run(task, "val_loss", missing, TABLE_COLUMNS)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def recall_rows(ppl: pd.DataFrame | None, niah: pd.DataFrame | None, invalid_lm: str | None,
                invalid_niah: str | None, missing_ppl: str, missing_niah: str) -> pd.DataFrame:
    """Table 3's rows at equal tokens: held-out loss at positions 513-2048 and NIAH accuracy at 1024 and 2048
    tokens (mean over depths and seeds)."""
    task = f"held-out loss at positions {BEYOND_W}, equal tokens{SUFFIX}"
    ppl = whole_split(ppl) if ppl is not None else None
    beyond = ppl[(ppl["budget"].astype(str) == "tokens") & (ppl["bucket"].astype(str) == BEYOND_W)] \
        if ppl is not None else None
    rows = _cells(beyond, "nll", task, "nll", "nats/token", invalid_lm, RECALL_COLUMNS) \
        if beyond is not None and len(beyond) else _not_run(task, "nll", missing_ppl, RECALL_COLUMNS)
    task = f"NIAH accuracy at {' and '.join(map(str, NIAH_LENGTHS))} tokens, equal tokens{SUFFIX}"
    far = None
    if niah is not None:
        far = niah[(niah["budget"].astype(str) == "tokens") & (niah["status"] == "ok")
                   & pd.to_numeric(niah["context_len"]).isin(NIAH_LENGTHS)]
    rows += _cells(far, "accuracy", task, "accuracy", "fraction", invalid_niah, RECALL_COLUMNS) \
        if far is not None and len(far) else _not_run(task, "accuracy", missing_niah, RECALL_COLUMNS)
    return pd.DataFrame(rows, columns=RECALL_COLUMNS)
