"""Seed statistics for the quality tables and the audit: mean +- std over seeds, and the noise rule.

Noise rule (stated in every verdict that uses it): two groups *differ* only when ``|mean_a - mean_b| > 2 x pooled
std``, the pooled std being ``sqrt((s_a^2 + s_b^2) / 2)`` of the per-seed values (sample std, ddof=1). A smaller
difference is "no difference", whatever its sign. With fewer than 2 seeds in a group there is no noise estimate
and no comparison is made.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

NOISE_RULE = "differs only if |delta| > 2 x pooled seed std"


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


@dataclass
class Comparison:
    delta: float
    pooled_std: float | None
    n_a: int
    n_b: int

    @property
    def differs(self) -> bool | None:
        """True/False under the noise rule; None when a group has fewer than 2 seeds."""
        if self.pooled_std is None:
            return None
        return abs(self.delta) > 2 * self.pooled_std

    def text(self) -> str:
        if self.pooled_std is None:
            return f"delta {self.delta:+.4g}; no seed-noise estimate ({self.n_a} vs {self.n_b} seeds)"
        verdict = "differs" if self.differs else "no difference"
        return (f"{verdict}: |delta| {abs(self.delta):.4g} {'>' if self.differs else '<='} 2 x pooled std = "
                f"{2 * self.pooled_std:.4g} ({self.n_a} vs {self.n_b} seeds; {NOISE_RULE})")


def compare(a: pd.DataFrame, b: pd.DataFrame, column: str = "value") -> Comparison:
    """Per-seed means of ``a`` minus those of ``b`` under the noise rule."""
    sa, sb = per_seed(a, column), per_seed(b, column)
    if sa.empty or sb.empty:
        raise ValueError("compare needs at least one value in each group")
    pooled = None
    if len(sa) > 1 and len(sb) > 1:
        pooled = math.sqrt((sa.var(ddof=1) + sb.var(ddof=1)) / 2)
    return Comparison(float(sa.mean() - sb.mean()), pooled, len(sa), len(sb))

