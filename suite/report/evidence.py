"""One claim's evidence judged: a ``measure``, ``benchmark`` or ``soundness`` item of ``claims.yaml`` against the
results CSVs, under the rules of :mod:`suite.report.verdicts`.

:func:`evaluate_measure` selects the rows and computes the :class:`suite.report.stats.Estimate`;
:func:`judge_evidence` adds what the rules need (the experiment's controls, rows that contradict each other, the
margin over a trivial model, the paper's own effect at the nearest scale, the drift floor) and returns the verdict
with its numbers, the conditions of the rows and whether they are stale (:mod:`suite.report.staleness`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from suite.eval.controls import MQAR_CHANCE_MARGIN, invalid_reason
from suite.report import soundness, staleness, verdicts
from suite.report.bench_audit import evaluate_benchmark
from suite.report.drift import NONE, Drift, drift, reruns
from suite.report.measured import (
    mqar_control_rows,
    mqar_control_size_rows,
    profile_config,
    read_result,
    scale_text,
    select,
    train_runs,
    with_run_conditions,
)
from suite.report.schema import NUMBER, check_columns
from suite.report.stats import Estimate, binomial, one_sample, paired

TRAINED = {"quality", "ablation", "conversion", "mqar", "niah", "pretrained", "pretrained_train", "pretrained_ppl",
           "pretrained_niah", "pretrained_loss"}  # results files of trained models (they ran suite/train/optim.py)
KEYS = ("size", "seed")  # what pairs two arms' rows: the same size and seed (seed fixes init and data order)


@dataclass
class Inputs:
    """The folders the evidence reads and what comes with them: each folder's controls, training runs, study
    config and re-runs are read once (``tag``: ``results`` or ``gpu``); ``stale`` judges rows' commits."""

    results: str | Path | None = None
    gpu: str | Path | None = None
    controls: pd.DataFrame | None = None
    gpu_controls: pd.DataFrame | None = None
    stale: Callable[[list[str], list[str], bool], str] = staleness.staleness
    _cache: dict = field(default_factory=dict)

    def folder(self, tag: str) -> str | Path | None:
        return self.gpu if tag == "gpu" else self.results

    def own_controls(self, tag: str) -> pd.DataFrame | None:
        return self.gpu_controls if tag == "gpu" else self.controls

    def cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def runs(self, tag: str) -> pd.DataFrame | None:
        return self.cached(("runs", tag), lambda: train_runs(self.folder(tag)))

    def drift(self, tag: str, name: str, filters: dict, column: str = "value") -> Drift:
        runs = self.cached(("reruns", tag, name), lambda: reruns(self.folder(tag), name))
        keep = {k: v for k, v in filters.items() if k not in ("arch", "variant")}
        chosen = {run: select(rows, {k: v for k, v in keep.items() if k in rows}) for run, rows in runs.items()}
        return drift(chosen, column) if len(chosen) > 1 else NONE

    def flags(self, tag: str) -> list[soundness.Flag]:
        """The baseline-soundness flags of a folder's MQAR grid and main LM comparison."""
        def make():
            floor = self.drift(tag, "quality", {"task": "val_ppl", "metric": "byte_perplexity"}).floor or 0.0
            return soundness.mqar_flags(self.frame(tag, "mqar")) + soundness.lm_flags(
                self.frame(tag, "quality"), self.runs(tag), soundness.unigram_of(self.own_controls(tag)), floor)
        return self.cached(("flags", tag), make)

    def frame(self, tag: str, name: str) -> pd.DataFrame | None:
        folder = self.folder(tag)
        path = Path(folder) / f"{name}.csv" if folder else None
        return self.cached(("frame", tag, name), lambda: read_result(path, ("gpu_" if tag == "gpu" else "") + name)
                           if path is not None and path.exists() else None)


def _tag(results: str) -> str:
    return "gpu" if results.startswith("{gpu}") else "results"


def _path(spec: str, inputs: Inputs) -> Path:
    return Path(spec.format(results=inputs.results or "<no --results>", gpu=inputs.gpu or "<no --gpu-results>"))


def evaluate_measure(measure: dict, results: str | Path | None, gpu: str | Path | None,
                     controls: pd.DataFrame | None = None, gpu_controls: pd.DataFrame | None = None,
                     inputs: Inputs | None = None) -> dict:
    """The rows and the estimate of a ``measure`` block: ``dict(value, estimate, status ("ok", "not run: <why>",
    "invalid: <why>"), num, den (the rows compared), conditions, path)``.

    ``op`` ratio: per (size, seed) pair numerator / denominator, paired (``suite.report.stats.paired``); difference:
    numerator - denominator; value: the numerator's mean. ``per``: one such estimate per value of that column held
    by both arms (``groups``, no overall ``estimate``); ``weight``: means weighted by that column. ``best_of`` takes
    the denominator per pair as the best of its archs; ``stats: binomial`` compares accuracies cell by cell over
    held-out answers. Only rows passing ``where`` count; NaN values are "not measured". ``cell``: the MQAR controls'
    cell at the widest size (``mqar_control``) or every cell of that size (``mqar_control_size``). ``controls``: no
    number from an experiment whose controls failed (status ``invalid: ...``). Raises ValueError naming the file and
    column when the CSV fails its schema or lacks a column the block names."""
    inputs = inputs or Inputs(results, gpu, controls, gpu_controls)
    path = _path(measure["results"], inputs)
    out = dict(value=None, estimate=None, conditions="", path=str(path), num=None, den=None)
    if not path.exists():
        return {**out, "status": f"not run: {path} missing"}
    tag = _tag(measure["results"])
    frame = read_result(path, ("gpu_" if tag == "gpu" else "") + path.stem)
    col = measure["column"]
    named = [col] + [c for key in ("where", "numerator", "denominator") for c in measure.get(key) or {}] + \
        [measure[key] for key in ("per", "weight") if measure.get(key)]
    if any(c not in frame.columns for c in named):
        raise ValueError(f"{path}: column(s) {[c for c in named if c not in frame.columns]} named by a claim missing")
    check_columns(frame, path, {col: NUMBER, **({measure["weight"]: NUMBER} if measure.get("weight") else {})})
    if measure.get("cell") == "mqar_control":
        frame = mqar_control_rows(frame)
    elif measure.get("cell") == "mqar_control_size":
        frame = mqar_control_size_rows(frame)
    base = select(frame, measure["where"])
    num = select(base, measure.get("numerator"))
    den = select(base, measure.get("denominator")) if measure["op"] != "value" else num
    if num.empty or den.empty:
        loose = select(select(frame, {k: v for k, v in measure["where"].items() if k != "status"}),
                       measure.get("numerator"))
        statuses = sorted(set(loose["status"].astype(str)) - {"ok"}) if "status" in loose else []  # why not run
        cell = " at the MQAR controls' cell" if measure.get("cell") else ""
        why = "; ".join(statuses) or \
            f"no rows match {measure['where']}{cell} {measure.get('numerator', '')} / {measure.get('denominator', '')}"
        return {**out, "status": why if why.startswith("not run") else f"not run: {why}"}
    num, den = (g[pd.to_numeric(g[col], errors="coerce").notna()] for g in (num, den))
    if num.empty or den.empty:
        return {**out, "status": "not run: no measured value (all NaN)"}
    if "controls" in measure:
        reason = invalid_reason(inputs.own_controls(tag), measure["controls"])
        if reason:  # no verdict and no number from an experiment whose control failed
            return {**out, "status": reason, "num": num, "den": den}
    conditions = f"{scale_text(pd.concat([num, den]).drop_duplicates())} ({len(num)}+{len(den)} rows)"
    if measure.get("per"):
        per = measure["per"]
        alone = sorted(set(num[per].astype(str)) ^ set(den[per].astype(str)))
        if alone:  # a group measured for one arm only: counting the others alone would shrink the claim
            return {**out, "status": f"not run: {per} {', '.join(alone)} has rows of one arm only", "num": num,
                    "den": den}
        groups = _per_group(measure, num, den, col)
        return {**out, "groups": groups, "status": "ok", "num": num, "den": den, "conditions": conditions}
    est = _estimate(measure, num, den, col)
    return {**out, "value": est.value, "estimate": est, "status": "ok", "num": num, "den": den,
            "conditions": conditions}


def _per_group(measure: dict, num: pd.DataFrame, den: pd.DataFrame, col: str) -> dict[str, Estimate]:
    """``per``: the estimate of each value of that column held by both arms' rows (e.g. each domain)."""
    per = measure["per"]
    names = sorted(set(num[per].astype(str)) & set(den[per].astype(str)))
    return {g: _estimate(measure, num[num[per].astype(str) == g], den[den[per].astype(str) == g], col)
            for g in names}


def _estimate(measure: dict, num: pd.DataFrame, den: pd.DataFrame, col: str) -> Estimate:
    op = measure["op"]
    if op == "value":
        return one_sample(pd.to_numeric(num[col]).groupby(_key(num)).mean(), "seeds")
    if measure.get("stats") == "binomial":
        cells = [c for c in ("size", "seq_len", "num_kv_pairs") if c in num and c in den]
        both = pd.merge(_answers(num, col, cells), _answers(den, col, cells), left_index=True, right_index=True,
                        suffixes=("_a", "_b"))
        if both.empty or both[["_n_a", "_n_b"]].isna().any().any():  # rows that do not say how many answers
            return Estimate(float(pd.to_numeric(num[col]).mean() - pd.to_numeric(den[col]).mean()), 0.0,
                            method="no answer counts in the rows, no noise estimate")
        return binomial(both[f"{col}_a"], both["_n_a"], both[f"{col}_b"], both["_n_b"])
    a = _mean(num, col, measure.get("weight"))
    if measure.get("best_of"):
        per_arch = pd.to_numeric(den[col]).groupby([_key(den), den["arch"]]).mean().unstack()
        b = per_arch.min(axis=1) if measure["best_of"] == "min" else per_arch.max(axis=1)
    else:
        b = _mean(den, col, measure.get("weight"))
    keys = [k for k in KEYS if k in num and k in den and num[k].nunique() > 1]
    return paired(a, b, op, " x ".join(keys) + " pairs" if keys else "pairs")


def _mean(rows: pd.DataFrame, col: str, weight: str | None) -> pd.Series:
    """Per pairing key, the mean of ``col``; with ``weight``, weighted by that column (e.g. the token counts of
    position buckets, so that their mean is the loss over every scored token)."""
    values = pd.to_numeric(rows[col])
    if not weight:
        return values.groupby(_key(rows)).mean()
    w = pd.to_numeric(rows[weight])
    key = _key(rows)
    return (values * w).groupby(key).sum() / w.groupby(key).sum()


def _answers(rows: pd.DataFrame, col: str, cells: list[str]) -> pd.DataFrame:
    """Per MQAR cell: the accuracy in ``col`` and its held-out answers ``_n`` (``n_far`` for ``accuracy_far``, else
    ``n_near + n_far``; NaN where the rows do not record them)."""
    names = ["n_far"] if col == "accuracy_far" else ["n_near", "n_far"]
    n = rows[names].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=len(names)) \
        if all(c in rows for c in names) else pd.Series(float("nan"), index=rows.index)
    return rows.assign(_n=n, **{col: pd.to_numeric(rows[col])}).groupby(cells)[[col, "_n"]].mean()


def _key(rows: pd.DataFrame) -> pd.Series:
    """Each row's pairing key: its size and seed as text (a seed may read 42 or 42.0), '' where absent."""
    parts = [rows[k].map(_text) if k in rows else pd.Series("", index=rows.index) for k in KEYS]
    return parts[0].str.cat(parts[1:], sep="|")


def _text(value) -> str:
    if pd.isna(value):
        return ""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


@dataclass
class Judged:
    """One evidence item with its verdict and everything the audit prints about it."""

    kind: str
    describe: str
    verdict: str
    why: str
    value: float | None = None
    unit: str = ""
    estimate: Estimate | None = None
    floor: float | None = None
    trivial: str = ""
    scale: str = ""
    conditions: str = ""
    commits: str = ""
    stale: str = ""
    mde_paper: float | None = None   # benchmark evidence: its MDE on the paper's metric (points)
    flags: list[str] = field(default_factory=list)  # soundness flags of the compared baselines

    def line(self) -> str:
        value = "" if self.value is None else f" {self.value:.4g} ({self.unit})"
        flags = f"; baseline flags: {'; '.join(self.flags)}" if self.flags else ""
        return f"[{self.kind}] {self.describe}:{value} {self.verdict} ({self.why}){flags}" + \
            (f"; rows {self.stale}" if self.stale.startswith(("stale", "commit unknown")) else "")


def _status_verdict(status: str) -> str:
    return next(v for v in (verdicts.INVALID, verdicts.NOT_TESTABLE, verdicts.NOT_RUN) if status.startswith(v)) \
        if status.startswith((verdicts.INVALID, verdicts.NOT_TESTABLE, verdicts.NOT_RUN)) else verdicts.NOT_RUN


def _effects(claim: dict, derived: pd.DataFrame) -> dict[str, float]:
    by_id = derived.set_index("id")["recomputed"]
    return {scale: float(by_id[fid]) for scale, fid in claim.get("scale_effects", {}).items()}


def _claimed_effect(claim: dict, block: dict) -> dict[str, float]:
    """The claim's own value as its effect at its stated scale, for a benchmark difference in the claim's unit
    (accuracy points) where the paper gives no effect per scale: a claimed 0.26-point gap is not testable by a
    measurement that can only detect 3 points."""
    scale = str(claim.get("conditions", {}).get("scale", ""))
    if block.get("op") != "difference" or not str(claim.get("unit", "")).startswith("accuracy points") \
            or not re.fullmatch(verdicts.SCALE_NAME, scale):
        return {}
    return {scale: float(claim["value"])}


def _params(rows: pd.DataFrame | None) -> float | None:
    if rows is None or "n_params" not in rows:
        return None
    values = pd.to_numeric(rows["n_params"], errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def _provenance(rows: pd.DataFrame, stem: str, inputs: Inputs) -> tuple[str, str]:
    commits = sorted(rows["commit"].dropna().astype(str).unique()) if "commit" in rows else []
    archs = sorted(rows["arch"].dropna().astype(str).unique()) if "arch" in rows else []
    return "/".join(commits), inputs.stale(commits, archs, stem in TRAINED)


def _conditions(rows: pd.DataFrame, est: Estimate | None, tag: str, stem: str, inputs: Inputs) -> str:
    """Params, tokens, steps, T, window, device, ... (``scale_text``), then seeds and n, of the compared rows; a
    trained model's steps and window come from its run (:func:`suite.report.measured.with_run_conditions`)."""
    if stem in TRAINED:
        rows = with_run_conditions(rows, inputs.runs(tag), profile_config(rows))
    parts = [scale_text(rows.drop(columns=["seed"], errors="ignore"))]
    if "seed" in rows and rows["seed"].notna().any():
        seeds = sorted({_text(s) for s in rows["seed"].dropna()})
        parts.append(f"seeds {'/'.join(seeds)}")
    if est is not None:
        parts.append(f"n={est.n} ({est.method})")
    return ", ".join(p for p in parts if p)


def judge_evidence(item: dict, claim: dict, derived: pd.DataFrame, inputs: Inputs,
                   mde_paper: float | None = None) -> Judged:
    """The verdict of one evidence item (module docstring). ``mde_paper``: the smallest effect on the paper's
    metric the claim's benchmark evidence can detect, for the scale rule (:func:`suite.report.verdicts.scale_gate`)."""
    kind, describe = item["kind"], item["describe"]
    if "soundness" in item:
        return _judge_soundness(item, inputs, kind, describe)
    if "benchmark" in item:
        return _judge_benchmark(item["benchmark"], claim, derived, inputs, kind, describe)
    measure = item["measure"]
    tag, stem = _tag(measure["results"]), Path(measure["results"]).stem
    res = evaluate_measure(measure, None, None, inputs=inputs)
    judged = Judged(kind, describe, verdicts.NOT_RUN, res["status"], unit=measure["unit"])
    if res["num"] is not None:
        rows = pd.concat([res["num"], res["den"]]).drop_duplicates()
        judged.commits, judged.stale = _provenance(rows, stem, inputs)
        judged.conditions = _conditions(rows, res["estimate"], tag, stem, inputs)
        experiment = {"quality": "lm", "ablation": "lm", "mqar": "mqar"}.get(stem)
        judged.flags = _flags(rows, tag, experiment, inputs) if experiment else []
    if res["status"] != "ok":
        judged.verdict = _status_verdict(res["status"])
        return judged
    est, rows = res["estimate"], pd.concat([res["num"], res["den"]])
    contradiction = _contradiction(measure, rows, inputs)
    if contradiction:
        judged.verdict, judged.why = verdicts.INVALID, f"contradictory rows: {contradiction}"
        return judged
    untestable = []
    if measure.get("trivial") == "unigram":
        reason, judged.trivial = _unigram(res, tag, inputs, measure.get("controls", "lm"))
        untestable += [reason] if reason else []
    elif measure.get("trivial") == "chance":
        reason, judged.trivial = _chance(res, measure["column"])
        untestable += [reason] if reason else []
    gate, judged.scale = verdicts.scale_gate(_effects(claim, derived), _params(res["num"]), mde_paper)
    untestable += [gate] if gate else []
    floor = 0.0
    if measure["op"] == "ratio" and not measure.get("stats"):
        found = inputs.drift(tag, stem, {**measure["where"], **(measure.get("numerator") or {})}, measure["column"])
        judged.floor = found.floor
        floor = found.floor or 0.0
    if "groups" in res:
        judged.verdict, judged.value, judged.why = verdicts.judge_wins(
            res["groups"], direction=measure["direction"], floor=floor, untestable=untestable)
        return judged
    judged.value, judged.estimate = est.value, est
    judged.verdict, judged.why = verdicts.judge(est, direction=measure.get("direction"), expect=measure.get("expect"),
                                                floor=floor, untestable=untestable, kind=kind)
    return judged


def _flags(rows: pd.DataFrame, tag: str, experiment: str, inputs: Inputs) -> list[str]:
    """The soundness flags of ``experiment`` on the baselines among ``rows`` (their arch, at their sizes)."""
    archs = set(rows["arch"].astype(str)) if "arch" in rows else set()
    sizes = set(rows["size"].dropna().astype(str)) if "size" in rows else set()
    return [why for exp, arch, size, why in inputs.flags(tag)
            if exp == experiment and arch in archs and (size is None or size in sizes)]


def _contradiction(measure: dict, rows: pd.DataFrame, inputs: Inputs) -> str:
    if not measure.get("batch_prefill"):
        return ""
    found = soundness.batch_contradictions(inputs.frame("gpu", "e2e"), inputs.frame("gpu", "prefill"))
    return "; ".join(found[a] for a in sorted(set(rows["arch"])) if a in found)


def _unigram(res: dict, tag: str, inputs: Inputs, experiment: str = "lm") -> tuple[str | None, str]:
    """The compared models' held-out loss (their training runs' val_loss, mean over seeds and sizes; the from-scratch
    study's: over seeds, per budget) against the unigram cross-entropy of ``experiment``'s positive control."""
    unigram = soundness.unigram_of(inputs.own_controls(tag), experiment)
    if experiment == "scratch_lm":
        return verdicts.trivial(_scratch_losses(res, inputs.frame(tag, "scratch_train")), unigram)
    runs, losses = inputs.runs(tag), {}
    for rows in (res["num"], res["den"]):
        for arch, g in rows.groupby("arch"):
            sizes = g["size"].dropna().astype(str).unique() if "size" in g else [None]
            values = [soundness.held_out_loss(runs, str(arch), s) for s in sizes]
            values = [v for v in values if v is not None]
            if values:
                losses[str(arch)] = max(values)  # the size nearest the unigram
    return verdicts.trivial(losses, unigram)


def _scratch_losses(res: dict, train: pd.DataFrame | None) -> dict[str, float]:
    """arch -> its from-scratch runs' held-out loss (``scratch_train.csv``, mean over seeds) at each budget the
    compared rows name, the budget nearest the unigram."""
    losses: dict[str, float] = {}
    if train is None or train.empty:
        return losses
    for rows in (res["num"], res["den"]):
        for (arch, budget), _ in rows.groupby(["arch", "budget"]):
            mine = train[(train["arch"] == arch) & (train["budget"].astype(str) == str(budget))]
            values = pd.to_numeric(mine["val_loss"], errors="coerce").dropna()
            if len(values):
                losses[str(arch)] = max(losses.get(str(arch), 0.0), float(values.mean()))
    return losses


def _chance(res: dict, column: str) -> tuple[str | None, str]:
    values = {str(a): float(pd.to_numeric(g[column]).mean()) for rows in (res["num"], res["den"])
              for a, g in rows.groupby("arch")}
    chance = float(pd.to_numeric(pd.concat([res["num"], res["den"]])["chance"]).mean())
    return verdicts.at_chance(values, chance, MQAR_CHANCE_MARGIN)


def _judge_benchmark(block: dict, claim: dict, derived: pd.DataFrame, inputs: Inputs, kind: str,
                     describe: str) -> Judged:
    tag = _tag(block["results"])
    bench = evaluate_benchmark(block, inputs.results, inputs.gpu, inputs.own_controls(tag))
    judged = Judged(kind, describe, verdicts.NOT_RUN, bench["status"], value=bench["value"], unit=bench["unit"],
                    estimate=bench["estimate"], mde_paper=bench["mde"])
    if bench["rows"] is not None:
        judged.commits, judged.stale = _provenance(bench["rows"], Path(block["results"]).stem, inputs)
        judged.conditions = _conditions(bench["rows"], bench["estimate"], tag, Path(block["results"]).stem, inputs)
    detail = f"{bench['detail']}; " if bench["detail"] else ""
    if bench["status"] != "ok":
        judged.verdict, judged.why = _status_verdict(bench["status"]), detail + bench["status"]
        if judged.verdict == verdicts.INVALID:
            judged.value = None  # no number from an experiment whose control failed
        return judged
    effects = _effects(claim, derived) or _claimed_effect(claim, block)
    gate, judged.scale = verdicts.scale_gate(effects, _params(bench["rows"]), bench["mde"])
    judged.verdict, why = verdicts.judge(bench["estimate"], direction=block.get("direction"),
                                         expect=block.get("expect"), untestable=[gate] if gate else [], kind=kind)
    judged.why = detail + why
    return judged


def _judge_soundness(item: dict, inputs: Inputs, kind: str, describe: str) -> Judged:
    flags, commits, stale = [], [], []
    for spec in item["soundness"]:
        tag = _tag(spec)
        folder = inputs.folder(tag)
        flags += [f"{folder}: {why}" for *_, why in inputs.flags(tag)]
        for name in ("mqar", "quality"):
            rows = inputs.frame(tag, name)
            if rows is not None:
                c, s = _provenance(rows, name, inputs)
                commits += c.split("/")
                stale.append((s, f"{name}.csv of {folder}: {s}"))
    if not commits:
        return Judged(kind, describe, verdicts.NOT_RUN, "not run: no MQAR or quality rows in any profile")
    verdict = verdicts.FAILED if flags else verdicts.PASSED
    why = "; ".join(flags) if flags else "every baseline passes its own control criterion"
    return Judged(kind, describe, verdict, why, value=float(len(flags)), unit="baseline flags",
                  commits="/".join(dict.fromkeys(c for c in commits if c)),
                  stale=("stale: " if any(s.startswith("stale") for s, _ in stale) else "")
                  + "; ".join(text for _, text in stale))
