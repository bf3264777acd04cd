"""The verdict rules of the claims audit, written once (``docs/verdicts.md`` states them in words).

Every claim gets up to two verdicts, each of one kind:

- a **reading of the paper** (``paper_verdict``): the claim against the paper's own printed numbers and text:
  ``consistent with the paper's own tables``, ``inconsistent`` (the paper's numbers contradict each other) or
  ``misreading`` (a seed note's reading that the paper does not support);
- a **measurement** (``measured_verdict``) of one kind: a ``direct measurement`` (the claim's own quantity, under
  stated conditions that may differ in hardware or software), a ``proxy`` (another metric, or a much smaller scale),
  or an ``implementation check`` (a property of this suite's own code, not a reproduction).

Measured verdicts, in the order the rules apply (:func:`judge`):

1. ``not run``: no measured rows; ``invalid``: a control of the experiment failed (either arm's), or its rows
   contradict each other;
2. ``not testable at this scale``: a compared model is within ``TRIVIAL_MARGIN`` of a trivial model (the unigram
   cross-entropy of a language model, chance for a benchmark), or the paper's own effect at its reported scale
   nearest the measured one is below the smallest effect this suite's measurement on the paper's metric can detect
   (:func:`scale_gate`);
3. for a claimed **difference** (``direction``): ``reproduced here`` only when the 95% CI excludes no difference,
   the effect exceeds the drift floor (re-runs of the same cells: nothing differs below it) and its sign is the
   claimed one; ``not reproduced here`` when it is beyond noise with the other sign; otherwise ``no difference
   detected``, its own verdict, never counted as reproduced; a claimed win on **most groups** (``per``: tasks,
   domains) applies this to each group and is reproduced only where more than half are won beyond noise
   (:func:`judge_wins`);
4. for a claimed **value** (``expect``: ``~x +/-tol``, ``>= x``, ``<= x``): ``reproduced here`` when the measured
   value meets it, else ``not reproduced here``; an implementation check reads ``passed`` / ``failed``.

:func:`count_lines` gives the verdict counts per kind that the README and ``claims_audit.md`` both print.
"""
from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from suite.report.stats import Estimate

EPS = 1e-9
TRIVIAL_MARGIN = 0.10  # a model whose held-out loss is less than 10% below the unigram cross-entropy is near trivial

CONSISTENT, INCONSISTENT, MISREADING = "consistent with the paper's own tables", "inconsistent", "misreading"
PAPER_VERDICTS = (CONSISTENT, INCONSISTENT, MISREADING)
REPRODUCED, NOT_REPRODUCED, NO_DIFFERENCE = "reproduced here", "not reproduced here", "no difference detected"
NOT_TESTABLE, INVALID, NOT_RUN = "not testable at this scale", "invalid", "not run"
PASSED, FAILED = "implementation check passed", "implementation check failed"
MEASURED_VERDICTS = (REPRODUCED, NOT_REPRODUCED, NO_DIFFERENCE, PASSED, FAILED, NOT_TESTABLE, INVALID, NOT_RUN)
DECISIVE = (REPRODUCED, NOT_REPRODUCED, NO_DIFFERENCE, PASSED, FAILED)

READING, DIRECT, PROXY, IMPLEMENTATION = "reading of the paper", "direct measurement", "proxy", "implementation check"
MEASURED_KINDS = (DIRECT, PROXY, IMPLEMENTATION)


def meets(value: float, expect: dict) -> bool:
    """Whether ``value`` meets a claim's ``expect`` (``approx`` with ``rel_tol``, ``ge``, ``le``)."""
    ok = True
    if "approx" in expect:
        ok &= abs(value / expect["approx"] - 1) <= expect["rel_tol"] + EPS
    if "ge" in expect:
        ok &= value >= expect["ge"] - EPS
    if "le" in expect:
        ok &= value <= expect["le"] + EPS
    return bool(ok)


def expectation(expect: dict) -> str:
    """``expected ~3.45 +/-25%`` or ``expected >= 0.9``."""
    parts = []
    if "approx" in expect:
        parts.append(f"~{expect['approx']:g} +/-{100 * expect['rel_tol']:g}%")
    if "ge" in expect:
        parts.append(f">= {expect['ge']:g}")
    if "le" in expect:
        parts.append(f"<= {expect['le']:g}")
    return "expected " + " and ".join(parts)


def judge(est: Estimate, *, direction: str | None = None, expect: dict | None = None, floor: float = 0.0,
          untestable: list[str] | tuple = (), kind: str = PROXY) -> tuple[str, str]:
    """(verdict, why with the numbers) of one measured comparison (module docstring, rules 2-4). ``direction``:
    the claimed sign of ``value - null`` (``lower`` or ``higher``); ``floor``: the drift floor in the value's unit."""
    if untestable:
        return NOT_TESTABLE, "; ".join(untestable)
    if direction is not None:
        claimed = f"claimed {direction} than {est.null:g}"
        differs = est.beyond(floor)
        drift = f"drift floor {floor:.3g}" if floor else "drift floor not measured"
        if differs is None:
            return NOT_TESTABLE, f"{claimed}; {est.text()}: a claimed difference needs a noise estimate"
        if not differs:
            return NO_DIFFERENCE, f"{claimed}; {est.text()}; {drift}: CI holds {est.null:g} or the effect is " \
                                  "below the drift floor"
        right = est.value < est.null if direction == "lower" else est.value > est.null
        return (REPRODUCED if right else NOT_REPRODUCED), f"{claimed}; {est.text()}; {drift}"
    ok = meets(est.value, expect)
    verdict = (PASSED if ok else FAILED) if kind == IMPLEMENTATION else (REPRODUCED if ok else NOT_REPRODUCED)
    return verdict, f"{expectation(expect)}; measured {est.text()}"


def judge_wins(groups: dict[str, Estimate], *, direction: str, floor: float = 0.0,
               untestable: list[str] | tuple = ()) -> tuple[str, float | None, str]:
    """(verdict, groups won, why) of a claim that one arm wins on most of several groups (Table 1's "better on 5 of
    7 tasks"), each group's estimate read as a claimed difference (rule 3): ``reproduced here`` when the claimed sign
    holds beyond noise on more than half the groups, ``not reproduced here`` when the other sign does on at least
    half, otherwise ``no difference detected``."""
    if untestable:
        return NOT_TESTABLE, None, "; ".join(untestable)
    wins = losses = 0
    parts = []
    for name, est in groups.items():
        differs = est.beyond(floor)
        if differs is None:
            return NOT_TESTABLE, None, f"{name}: {est.text()}: a claimed difference needs a noise estimate"
        right = est.value < est.null if direction == "lower" else est.value > est.null
        wins, losses = wins + (differs and right), losses + (differs and not right)
        parts.append(f"{name} {est.text()}")
    n = len(groups)
    verdict = REPRODUCED if wins > n / 2 else NOT_REPRODUCED if losses >= n / 2 else NO_DIFFERENCE
    null = next(iter(groups.values())).null
    drift = f"drift floor {floor:.3g}" if floor else "drift floor not measured"
    return verdict, float(wins), (f"claimed {direction} than {null:g} on most of {n}; beyond noise on {wins} of "
                                  f"{n} with the claimed sign, {losses} with the other ({drift}): " + "; ".join(parts))


def comparison_text(est: Estimate, floor: float = 0.0) -> str:
    """A table cell's comparison under the same rule: ``differs: <estimate>`` only beyond the CI (and ``floor``),
    ``no difference detected: <estimate>`` otherwise, ``<estimate>`` without a noise estimate."""
    beyond = est.beyond(floor)
    return est.text() if beyond is None else f"{'differs' if beyond else NO_DIFFERENCE}: {est.text()}"


def trivial(losses: dict[str, float], unigram: float | None) -> tuple[str | None, str]:
    """(not-testable reason or None, margin text) of language models' held-out losses (nats/token, per arm)
    against the unigram cross-entropy of the same val split."""
    if unigram is None or not losses:
        return None, "margin over unigram not measured"
    parts = [f"{arch} {loss:.4g} ({100 * (1 - loss / unigram):.1f}% below)" for arch, loss in losses.items()]
    text = f"held-out loss vs the unigram cross-entropy {unigram:.4g} nats/token: " + ", ".join(parts)
    near = [arch for arch, loss in losses.items() if loss > (1 - TRIVIAL_MARGIN) * unigram]
    if near:
        return (f"{', '.join(near)} less than {100 * TRIVIAL_MARGIN:g}% better than a unigram model ({text})", text)
    return None, text


def at_chance(values: dict[str, float], chance: float, margin: float) -> tuple[str | None, str]:
    """(not-testable reason or None, margin text) of accuracies against chance: every arm within ``margin``."""
    text = f"accuracy vs chance {chance:.3g}: " + ", ".join(f"{a} {v:.3g}" for a, v in values.items())
    if values and all(v <= chance + margin for v in values.values()):
        return f"every compared model within {margin:g} of chance ({text})", text
    return None, text


SCALE_NAME = r"[0-9.]+[KMB]"  # a reported scale as scale_gate reads it: 160M, 1.3B, 8B


def _log_distance(params: float, scale: str) -> float:
    number = float(scale.rstrip("KMB")) * {"K": 1e3, "M": 1e6, "B": 1e9}.get(scale[-1], 1.0)
    return abs(math.log(params) - math.log(number))


def scale_gate(effects: dict[str, float], params: float | None, mde: float | None,
               unit: str = "accuracy points") -> tuple[str | None, str]:
    """(not-testable reason or None, text): the paper's own effect at its reported scale (``effects``: scale name ->
    effect in the claim's unit) nearest the measured ``params``, against ``mde``, the smallest effect this suite's
    measurement on the paper's metric can detect (same unit)."""
    if not effects or params is None or not params:
        return None, ""
    nearest = min(effects, key=lambda s: _log_distance(params, s))
    listed = "paper: " + ", ".join(f"{s} {v:+.3g}" for s, v in effects.items())
    effect = (f"the paper's own effect at its reported scale nearest this one ({nearest}) is {effects[nearest]:+.3g} "
              f"{unit}")
    if mde is None:
        return None, f"{effect} ({listed}); no measurement on the paper's metric to compare it with"
    below = abs(effects[nearest]) < mde
    text = (f"{effect}, {'below' if below else 'above'} the {mde:.3g} {unit} that this suite's benchmark measurement "
            f"of the same claim (the paper's metric) can detect ({listed})")
    return (text if below else None), text


RANK = {v: i for i, v in enumerate([*DECISIVE, NOT_TESTABLE, INVALID, NOT_RUN])}


def pick(verdicts: list[str]) -> int:
    """The evidence that decides a claim's measured verdict: the first decisive one (list order: closest to the
    claim first), else the first not testable, invalid, then not run."""
    ranks = [0 if v in DECISIVE else RANK[v] for v in verdicts]
    return min(range(len(verdicts)), key=lambda i: (ranks[i], i))


def count_lines(audit: pd.DataFrame) -> list[str]:
    """The verdict counts per kind, one line each (the same lines in the README and ``claims_audit.md``)."""
    paper = Counter(v for v in audit["paper_verdict"] if isinstance(v, str) and v)
    lines = [f"Reading of the paper (its own tables and text): {paper[CONSISTENT]} consistent, "
             f"{paper[INCONSISTENT]} inconsistent, {paper[MISREADING]} misreadings by its summaries."]
    labels = {DIRECT: "Direct measurements (the claim's quantity; other hardware or software)",
              PROXY: "Proxies (another metric or a far smaller scale)",
              IMPLEMENTATION: "Implementation checks (the suite's own code)"}
    for kind in MEASURED_KINDS:
        mine = audit[audit["measured_kind"] == kind]
        counts = Counter(mine["measured_verdict"])
        shown = [f"{counts[v]} {v.replace('implementation check ', '')}" for v in MEASURED_VERDICTS if counts[v]]
        lines.append(f"{labels[kind]}: {', '.join(shown) or 'none'}.")
    return lines
