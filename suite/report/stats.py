"""Seed statistics for the tables and the audit: mean +- std over seeds, and comparisons with a 95% CI.

A comparison of two arms is an :class:`Estimate`: the measured ratio or difference, its standard error, a t-based
95% confidence interval and the minimum detectable effect (``mde``: the smallest true effect a two-sided test at
5% finds with 80% power, ``(t_0.975 + t_0.80) x SE``). Arms that share seeds (and so data order) are compared
**paired** (:func:`paired`): the per-pair ratio or difference, a one-sample t interval over the pairs. Arms with
fewer than 2 shared pairs but 2 or more values each are compared unpaired (Welch, :func:`unpaired`); accuracies over
held-out answers of one seed by the binomial standard error (:func:`binomial`). One value per arm gives no noise
estimate (``se`` None). The rules that turn an estimate into a verdict: :mod:`suite.report.verdicts`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

ALPHA, POWER = 0.05, 0.80


def per_seed(rows: pd.DataFrame, column: str = "value") -> pd.Series:
    """Mean of ``column`` per seed (one value per seed; rows without a seed column form one group)."""
    values = pd.to_numeric(rows[column], errors="coerce")
    if "seed" not in rows.columns:
        return values.dropna().reset_index(drop=True)
    return values.groupby(rows["seed"].astype(str)).mean().dropna()


def mean_std(rows: pd.DataFrame, column: str = "value") -> tuple[float | None, float | None, int]:
    """(mean, sample std or None with one seed, number of seeds) of ``column`` over seeds."""
    seeds = per_seed(rows, column)
    if seeds.empty:
        return None, None, 0
    return float(seeds.mean()), (float(seeds.std(ddof=1)) if len(seeds) > 1 else None), int(len(seeds))


def _quantile(p: float, df: float) -> float:
    return float(sps.norm.ppf(p) if math.isinf(df) else sps.t.ppf(p, df))


@dataclass(frozen=True)
class Estimate:
    """A measured ratio (``null`` 1) or difference (``null`` 0) of two arms, or one arm's value (``null`` None)."""

    value: float
    null: float | None
    se: float | None = None
    df: float = math.inf
    n: int = 1
    method: str = "one value, no noise estimate"

    @property
    def ci(self) -> tuple[float, float] | None:
        """The 95% confidence interval (None without a noise estimate)."""
        if self.se is None:
            return None
        half = _quantile(1 - ALPHA / 2, self.df) * self.se
        return self.value - half, self.value + half

    @property
    def mde(self) -> float | None:
        """Minimum detectable effect, in the value's unit (distance from ``null``)."""
        if self.se is None:
            return None
        return (_quantile(1 - ALPHA / 2, self.df) + _quantile(POWER, self.df)) * self.se

    def beyond(self, floor: float = 0.0) -> bool | None:
        """True when the CI excludes ``null`` and ``|value - null|`` exceeds ``floor`` (the drift floor, in the
        value's unit); None without a noise estimate or a null."""
        if self.ci is None or self.null is None:
            return None
        lo, hi = self.ci
        return not (lo <= self.null <= hi) and abs(self.value - self.null) > floor

    def text(self) -> str:
        """``0.9639, 95% CI [0.9431, 0.9847], MDE 0.02566 (paired t over 3 seeds)``."""
        if self.ci is None:
            return f"{self.value:.4g} ({self.method})"
        lo, hi = self.ci
        return f"{self.value:.4g}, 95% CI [{lo:.4g}, {hi:.4g}], MDE {self.mde:.4g} ({self.method})"


def _per_pair(a: pd.Series, b: pd.Series, op: str) -> pd.Series:
    return a / b if op == "ratio" else a - b


def paired(a: pd.Series, b: pd.Series, op: str, what: str = "pairs") -> Estimate:
    """``a`` against ``b`` (both indexed by the pairing key, e.g. seed or (size, seed)): the mean per-pair ratio or
    difference with a one-sample t interval over the pairs. Fewer than 2 shared pairs: :func:`unpaired`."""
    a, b = a.dropna(), b.dropna()
    shared = a.index.intersection(b.index)
    if len(shared) < 2:
        return unpaired(a.to_numpy(), b.to_numpy(), op)
    d = _per_pair(a.loc[shared], b.loc[shared], op)
    null = 1.0 if op == "ratio" else 0.0
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    return Estimate(float(d.mean()), null, se, len(d) - 1, len(d), f"paired t over {len(d)} {what}")


def unpaired(a: np.ndarray, b: np.ndarray, op: str) -> Estimate:
    """Welch's comparison of two samples (ratio: mean(a) / mean(b), its SE to first order); no noise estimate when
    either sample has a single value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    null = 1.0 if op == "ratio" else 0.0
    ma, mb = float(a.mean()), float(b.mean())
    value = ma / mb if op == "ratio" else ma - mb
    if len(a) < 2 or len(b) < 2:
        return Estimate(value, null, method=f"{len(a)} vs {len(b)} values, no noise estimate")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else math.inf
    if op == "ratio":
        se = abs(value) * math.sqrt(va / ma ** 2 + vb / mb ** 2)
    return Estimate(value, null, se, df, min(len(a), len(b)), f"Welch t, {len(a)} vs {len(b)} values (unpaired)")


def binomial(p_a: np.ndarray, n_a: np.ndarray, p_b: np.ndarray, n_b: np.ndarray) -> Estimate:
    """Mean over cells of the accuracy difference ``p_a - p_b``, each accuracy over ``n`` held-out answers: the
    binomial standard error of each, normal interval (unpaired per answer; one training seed, so training variance
    is not in it)."""
    p_a, n_a, p_b, n_b = (np.asarray(x, dtype=float) for x in (p_a, n_a, p_b, n_b))
    k = len(p_a)
    var = (p_a * (1 - p_a) / n_a + p_b * (1 - p_b) / n_b).sum() / k ** 2
    return Estimate(float((p_a - p_b).mean()), 0.0, math.sqrt(var), math.inf, k,
                    f"binomial SE over {int(n_a.sum() + n_b.sum())} answers in {k} cell{'s' * (k > 1)}, one seed")


def one_sample(values: pd.Series, what: str = "seeds") -> Estimate:
    """One arm's mean with a t interval over ``values`` (no null: a value, not a comparison)."""
    values = values.dropna()
    if len(values) < 2:
        return Estimate(float(values.mean()), None)
    return Estimate(float(values.mean()), None, float(values.std(ddof=1) / math.sqrt(len(values))),
                    len(values) - 1, len(values), f"t over {len(values)} {what}")
