"""Seed statistics for the tables and the audit: mean +- std over seeds, and comparisons with a 95% CI.

A comparison of two arms is an :class:`Estimate`: the measured ratio or difference, its standard error, a t-based
95% confidence interval and the minimum detectable effect (``mde``: the smallest true effect a two-sided test at
5% finds with 80% power, ``(t_0.975 + t_0.80) x SE``). Arms that share seeds (and so data order) are compared
**paired** (:func:`paired`): the per-pair ratio or difference, a one-sample t interval over the pairs. Arms with
fewer than 2 shared pairs but 2 or more values each are compared unpaired (Welch, :func:`unpaired`); accuracies over
held-out answers of one seed by the binomial standard error (:func:`binomial`). One value per arm gives no noise
estimate (``se`` None). Two arms scored on the same benchmark documents are compared per document: McNemar's test
(:func:`mcnemar`, one task of 0/1 outcomes) or a paired bootstrap over the documents (:func:`paired_bootstrap`, a mean
over tasks, or scores that are not 0/1); their intervals are given explicitly (``Estimate.interval``). The rules that
turn an estimate into a verdict: :mod:`suite.report.verdicts`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

ALPHA, POWER = 0.05, 0.80
EXACT_BELOW = 25  # discordant documents below which McNemar's test is the exact binomial test
BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED = 9999, 0  # a fixed seed: the same rows render the same interval


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
    interval: tuple[float, float] | None = None  # a 95% CI not of the form value +- t x se (exact, bootstrap)

    @property
    def ci(self) -> tuple[float, float] | None:
        """The 95% confidence interval (None without a noise estimate): ``interval`` where given, else t-based."""
        if self.interval is not None:
            return self.interval
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


def mcnemar(a: np.ndarray, b: np.ndarray) -> Estimate:
    """McNemar's test of two arms' 0/1 outcomes on the same documents (``a[i]``, ``b[i]``: document i): the accuracy
    difference ``mean(a) - mean(b)`` with a 95% CI that excludes 0 exactly when the test rejects at 5%.

    Only the discordant documents count: n10 (a right, b wrong) and n01, m = n10 + n01 of n. Below ``EXACT_BELOW``
    discordant documents the test is exact (n10 ~ Binomial(m, 1/2), ``scipy.stats.binomtest``) and the CI is the
    Clopper-Pearson interval of n10 / m mapped to the difference (2p - 1) m / n, given m; otherwise the asymptotic
    test, z = (n10 - n01) / sqrt(m), and the CI the difference +- z_0.975 sqrt(m) / n. ``se`` = sqrt(max(m, k^2)) / n
    with k = z_0.975 + z_0.80, so the MDE is McNemar's power approximation, but never below k^2 / n: the smallest
    difference the test finds even when every discordant document favours one arm (with few or no discordant
    documents the observed spread says nothing about the power). No discordant document: the difference is 0 with
    the CI [0, 0]. Raises ValueError for arrays of unequal length or outcomes other than 0 and 1."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"McNemar needs two outcome arrays over the same documents; got shapes {a.shape}, {b.shape}")
    if not np.isin(np.concatenate([a, b]), (0.0, 1.0)).all():
        raise ValueError("McNemar needs 0/1 outcomes; use paired_bootstrap for other scores")
    n, n10, n01 = len(a), int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    m, value = n10 + n01, (n10 - n01) / n
    k = _quantile(1 - ALPHA / 2, math.inf) + _quantile(POWER, math.inf)
    se = math.sqrt(max(m, k * k)) / n
    if m == 0:
        return Estimate(0.0, 0.0, se, math.inf, n, f"McNemar, no discordant document of {n}", (0.0, 0.0))
    if m < EXACT_BELOW:
        test = sps.binomtest(n10, m, 0.5)
        lo, hi = test.proportion_ci(1 - ALPHA, method="exact")
        interval, kind = ((2 * lo - 1) * m / n, (2 * hi - 1) * m / n), "exact binomial"
        p = test.pvalue
    else:
        z = _quantile(1 - ALPHA / 2, math.inf)
        half = z * math.sqrt(m) / n
        interval, kind = (value - half, value + half), "asymptotic"
        p = float(sps.chi2.sf((n10 - n01) ** 2 / m, 1))
    return Estimate(value, 0.0, se, math.inf, n,
                    f"McNemar {kind}, {n10} vs {n01} discordant of {n} documents, p {p:.3g}", interval)


def paired_bootstrap(samples: Sequence[np.ndarray], what: str = "documents", strata: str = "strata",
                     n_resamples: int = BOOTSTRAP_RESAMPLES, span: float = 1.0) -> Estimate:
    """Paired bootstrap of a mean difference over documents: each of ``samples`` holds one stratum's (a task's)
    per-document differences a - b (the arms paired by document); the value is the mean over strata of the stratum
    means (one stratum: the mean difference). The documents are resampled with replacement within each stratum
    (``scipy.stats.bootstrap``, which resamples several samples independently), ``n_resamples`` times with a fixed
    seed; the CI is the 95% percentile interval, ``se`` the standard deviation of the resampled means (its MDE
    normal), never below k x ``span`` / n (k = z_0.975 + z_0.80, n documents, ``span`` the most one document's
    difference can be: 1 for 0/1 outcomes, 100 for them in points): with 0/1 outcomes no paired test finds a
    difference smaller than k^2 / n (:func:`mcnemar`), however little the resamples spread. ``what`` and ``strata``
    name the documents and strata in the method text. Raises ValueError for no stratum or an empty one."""
    samples = [np.asarray(s, dtype=float) for s in samples]
    if not samples or any(s.ndim != 1 or not len(s) for s in samples):
        raise ValueError("a paired bootstrap needs at least one stratum of per-document differences, none empty")
    value = float(np.mean([s.mean() for s in samples]))
    n = sum(len(s) for s in samples)
    within = f" in {len(samples)} {strata}" if len(samples) > 1 else ""
    method = f"paired bootstrap over {n} {what}{within}, {n_resamples} resamples"
    floor = (_quantile(1 - ALPHA / 2, math.inf) + _quantile(POWER, math.inf)) * span / n
    if all(np.ptp(s) == 0 for s in samples):  # every resample gives the same mean
        return Estimate(value, 0.0, floor, math.inf, n, method, (value, value))

    def statistic(*strata_values, axis=-1):
        return np.mean([x.mean(axis=axis) for x in strata_values], axis=0)

    res = sps.bootstrap(samples, statistic, n_resamples=n_resamples, vectorized=True, paired=False,
                        method="percentile", confidence_level=1 - ALPHA, batch=max(1, 2_000_000 // n),
                        rng=np.random.default_rng(BOOTSTRAP_SEED))
    interval = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    return Estimate(value, 0.0, max(float(res.standard_error), floor), math.inf, n, method, interval)
