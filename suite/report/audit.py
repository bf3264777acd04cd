"""Claims audit: one row per claim of ``paper_tables/claims.yaml``, judged under the rules of
:mod:`suite.report.verdicts` (``docs/verdicts.md``).

Each row has the claim against the paper's own numbers (``paper_verdict``: consistent / inconsistent / misreading)
and, where this suite measures it, the evidence that decides (``measured_kind``: direct measurement, proxy or
implementation check; ``measured_verdict``), with its value in its own unit, the 95% CI, the minimum detectable
effect, the drift floor, the margin over a trivial model, the paper's effect at the nearest scale, the conditions of
the measured rows (params, tokens, steps, T, window, seeds, n, device), the commit they came from and whether they
are stale. Every other evidence of the claim is listed with its own verdict. Renders from the reported CSVs alone;
measured values are added when the results CSVs exist.

CLI: ``python -m suite.report.audit --results results/default --gpu-results results/gpu --out paper_tables``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.cli import in_folder, out_folder, usage_errors
from suite.provenance import read_csv, write_csv, write_text
from suite.report import verdicts
from suite.report.claims import CLAIMS_PATH, load_claims
from suite.report.derived import EPS, load_derived
from suite.report.evidence import Inputs, Judged, evaluate_measure, judge_evidence
from suite.report.findings import findings_markdown
from suite.report.measured import folder_controls, profile_config, read_result
from suite.report.tables import to_markdown
from suite.reported import REPORTED_DIR

__all__ = ["AUDIT_COLUMNS", "audit_claims", "audit_markdown", "build_audit", "evaluate_measure", "save_audit",
           "write_audit"]

AUDIT_COLUMNS = ["id", "asserted_by", "claim", "source", "reported", "unit", "reported_conditions",
                 "paper_check", "recomputed", "reported_minus_recomputed", "paper_verdict", "paper_detail",
                 "measured_kind", "evidence", "measured", "measured_unit", "measured_minus_reported", "ci95_low",
                 "ci95_high", "mde", "drift_floor", "trivial_margin", "scale_check", "baseline_flags",
                 "measured_verdict", "measured_why", "measured_conditions", "rows_commit", "rows_stale",
                 "other_evidence", "detail"]


def _tolerance(claim: dict) -> float:
    if "tolerance" in claim:
        return float(claim["tolerance"])
    text = repr(claim["value"])
    return 0.5 * 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)


def _ids(formula) -> list[str]:
    return formula if isinstance(formula, list) else [formula]


def _formula(claim: dict, ids: list[str], derived: pd.DataFrame) -> tuple[float | None, float | None, str, str]:
    """(recomputed, reported - recomputed, verdict, detail) of a formula check."""
    check, by_id = claim["check"], derived.set_index("id")
    missing = [i for i in ids if i not in by_id.index]
    if missing:
        raise ValueError(f"claim {claim['id']}: unknown formula id(s) {missing} (see paper_tables/derived.csv)")
    rows = by_id.loc[ids]
    bad = rows[rows["status"] == "inconsistent"]
    detail = "; ".join(f"{i}: reported {r['reported_text']} vs recomputed {r['recomputed']:.3f} (diff {r['diff']:+.3f})"
                       for i, r in bad.iterrows())
    head = rows.iloc[0]
    if "expect" in check:  # a claimed property of every listed value (e.g. "about equal": ~1 +/-10%)
        values = ", ".join(f"{i}: {r['recomputed']:.4g}" for i, r in rows.iterrows())
        ok = all(verdicts.meets(float(v), check["expect"]) for v in rows["recomputed"])
        recomputed = float(head["recomputed"])
        return (recomputed, round(float(claim["value"]) - recomputed, 9),
                verdicts.CONSISTENT if ok else verdicts.INCONSISTENT,
                f"{verdicts.expectation(check['expect'])} for every printed value: {values}")
    if len(ids) == 1 or "expect_value" in check:
        recomputed = float(head["recomputed"])
        diff = round(float(claim["value"]) - recomputed, 9)
        agrees = abs(diff) <= _tolerance(claim) + EPS
        if len(ids) > 1:
            detail = (f"{len(ids) - len(bad)}/{len(ids)} formula rows consistent. " + detail).strip()
        formula = f"{head.name}: {head['formula']} [{head['inputs']}]" if len(ids) == 1 else ", ".join(ids)
    else:
        recomputed = float((rows["status"] == "consistent").sum())
        diff = float(claim["value"]) - recomputed
        agrees = diff == 0
        detail = (f"{int(recomputed)}/{len(ids)} consistent. " + detail).strip()
        formula = ", ".join(ids)
    ok = agrees and bad.empty
    verdict = verdicts.CONSISTENT if ok else (verdicts.MISREADING if claim["asserted_by"].startswith("seed")
                                              else verdicts.INCONSISTENT)
    if not agrees and len(ids) == 1 and head["note"] and isinstance(head["note"], str):
        detail = (detail + " " + head["note"]).strip()
    return recomputed, diff, verdict, f"{formula}. {detail}".strip(". ")


def _paper_check(claim: dict, derived: pd.DataFrame) -> dict:
    check = claim.get("check")
    if check is None:
        return dict(paper_check="", recomputed=None, reported_minus_recomputed=None, paper_verdict="",
                    paper_detail="the paper prints no numbers this claim follows from (a figure label or a "
                                 "property of the method): measured only")
    if check["kind"] == "formula":
        rec, diff, verdict, detail = _formula(claim, _ids(check["formula"]), derived)
        return dict(paper_check="formula", recomputed=rec, reported_minus_recomputed=diff, paper_verdict=verdict,
                    paper_detail=detail)
    out = dict(paper_check="reading", recomputed=None, reported_minus_recomputed=None,
               paper_verdict=check["verdict"], paper_detail=check["evidence"])
    if "formula" in check:
        rows = derived.set_index("id").loc[_ids(check["formula"])]
        out["recomputed"] = float(rows["recomputed"].iloc[0])
        if isinstance(claim["value"], (int, float)):
            out["reported_minus_recomputed"] = float(claim["value"]) - out["recomputed"]
        if len(rows) > 1:
            out["paper_detail"] += " " + "; ".join(f"{i}: {r:.4g}" for i, r in rows["recomputed"].items())
    return out


WINDOW_NOTE = ("Window: when the whole sequence fits in the base stream's window w and the scale-offset is the "
               "identity, Orthros computes exactly the Transformer's function (every key lies in the window), so on "
               "such prompts an accuracy gap measures what training made of the weights, not the architecture at "
               "inference; the paper does not discuss this.")


def window_note(results: str | Path | None, note: dict | None = None) -> str:
    """``WINDOW_NOTE`` with the measured share of zero-shot benchmark documents longer than the window of the model
    measured (``note``: its tokenizer and the study-config key of its window, read from ``<results>``'s profile),
    from ``<results>/prompt_lengths.csv`` (the note alone when the file is absent)."""
    path = Path(results) / "prompt_lengths.csv" if results else None
    if path is None or not path.exists():
        return WINDOW_NOTE
    lengths = read_result(path, "prompt_lengths")
    lengths = lengths[pd.to_numeric(lengths["num_fewshot"]) == 0]
    config = profile_config(lengths)
    window = None
    if note and config is not None:
        window = config
        for key in note["window"].split("."):
            window = window.get(key) if isinstance(window, dict) else None
    rows = lengths[lengths["tokenizer"] == note["tokenizer"]] if note else lengths
    if window is None or rows.empty:
        return WINDOW_NOTE
    column = "share_above_window" if (pd.to_numeric(rows["window"]) == window).all() else \
        "share_above_128" if window == 128 else None
    if column is None:
        return f"{WINDOW_NOTE} (prompt lengths were not measured against w = {window})"
    shares = ", ".join(f"{r.task} {100 * getattr(r, column):.0f}%" for r in rows.itertuples())
    return (f"{WINDOW_NOTE} The model measured has w = {window} ({note['window']} of the {config['profile']} "
            f"profile); share of its zero-shot documents longer than w ({note['tokenizer']} tokenizer, {path}): "
            f"{shares}.")


def _prediction(claim: dict, inputs: Inputs) -> str:
    if "prediction" not in claim:
        return ""
    block = {**claim["prediction"], "expect": {"ge": 0}}
    res = evaluate_measure(block, None, None, inputs=inputs)
    if res["status"] != "ok":
        return f"Prediction: none ({res['status']})."
    return (f"Prediction, not a measurement: {res['value']:.3g} {claim['prediction']['unit']} "
            f"({res['conditions']}); it gets no verdict and no diff.")


MEASURED_COLUMNS = AUDIT_COLUMNS[AUDIT_COLUMNS.index("measured_kind"):AUDIT_COLUMNS.index("other_evidence")]


def _measured_columns(chosen: Judged | None, claim: dict) -> dict:
    """The measured columns of a claim's row from its deciding evidence (empty without one)."""
    out = {c: None if c in ("measured", "measured_minus_reported", "ci95_low", "ci95_high", "mde", "drift_floor")
           else "" for c in MEASURED_COLUMNS}
    if chosen is None:
        return out
    measured = chosen.value is not None and chosen.estimate is not None
    ci = chosen.estimate.ci if measured else None
    same_unit = chosen.unit == claim["unit"] and isinstance(claim["value"], (int, float))
    out.update(measured_kind=chosen.kind, evidence=chosen.describe, measured=chosen.value, measured_unit=chosen.unit,
               ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None,
               mde=chosen.estimate.mde if measured else None, drift_floor=chosen.floor,
               trivial_margin=chosen.trivial, scale_check=chosen.scale, baseline_flags="; ".join(chosen.flags),
               measured_verdict=chosen.verdict, measured_why=chosen.why, measured_conditions=chosen.conditions,
               rows_commit=chosen.commits, rows_stale=chosen.stale)
    if same_unit and chosen.value is not None:
        out["measured_minus_reported"] = chosen.value - float(claim["value"])
    return out


def judge_claim(claim: dict, derived: pd.DataFrame, inputs: Inputs) -> tuple[Judged | None, list[Judged]]:
    """(the deciding evidence or None, every evidence judged): benchmark evidence first, so that its detectable
    effect on the paper's metric is known to the scale rule of the others."""
    items = claim.get("evidence", [])
    judged: dict[int, Judged] = {}
    for i, item in enumerate(items):
        if "benchmark" in item:
            judged[i] = judge_evidence(item, claim, derived, inputs)
    mdes = [j.mde_paper for j in judged.values() if j.mde_paper is not None]
    for i, item in enumerate(items):
        if i not in judged:
            judged[i] = judge_evidence(item, claim, derived, inputs, min(mdes) if mdes else None)
    ordered = [judged[i] for i in range(len(items))]
    if not ordered:
        return None, []
    return ordered[verdicts.pick([j.verdict for j in ordered])], ordered


def audit_claims(claims: list[dict], derived: pd.DataFrame, results: str | Path | None = None,
                 gpu_results: str | Path | None = None, controls: pd.DataFrame | None = None,
                 gpu_controls: pd.DataFrame | None = None, inputs: Inputs | None = None) -> pd.DataFrame:
    """One audit row per claim (``AUDIT_COLUMNS``). Measurements are gated by the controls.csv of the results they
    read (``controls`` for ``results``, ``gpu_controls`` for ``gpu_results``); ``inputs`` replaces all four (and
    the staleness judge). Raises ValueError on unknown formula ids or bad result columns."""
    inputs = inputs or Inputs(results, gpu_results, controls, gpu_controls)
    rows = []
    for claim in claims:
        chosen, every = judge_claim(claim, derived, inputs)
        notes = [claim.get("note", "")]
        notes += [window_note(inputs.results, claim["window_note"])] if "window_note" in claim else []
        notes.append(_prediction(claim, inputs))
        rows.append(dict(id=claim["id"], asserted_by=claim["asserted_by"], claim=claim["claim"],
                         source=claim["source"], reported=claim["value"], unit=claim["unit"],
                         reported_conditions="; ".join(f"{k}: {v}" for k, v in claim["conditions"].items()),
                         **_paper_check(claim, derived), **_measured_columns(chosen, claim),
                         other_evidence=" | ".join(j.line() for j in every if j is not chosen),
                         detail=" ".join(n for n in notes if n)))
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, float):
        return "0" if v == 0 else f"{v + 0.0:.4g}"
    return str(v)


def _s(value) -> str:
    """A text cell of the audit CSV as read back ('' for an empty one)."""
    return value if isinstance(value, str) else ""


def _ci(r) -> str:
    return "" if pd.isna(r["ci95_low"]) else f"[{_fmt(r['ci95_low'])}, {_fmt(r['ci95_high'])}]"


def _stale_mark(text) -> str:
    text = str(text) if isinstance(text, str) else ""
    return "stale" if text.startswith("stale") else "commit unknown" if text.startswith("commit unknown") else \
        "current" if text == "current" else ""


def audit_markdown(audit: pd.DataFrame, derived: pd.DataFrame) -> str:
    """The audit as markdown: the rules in brief, the counts (:func:`suite.report.verdicts.count_lines`), one table
    row per claim, the evidence of each claim with its numbers, then every internal inconsistency of the reported
    tables."""
    table = pd.DataFrame({
        "id": audit["id"], "claim": audit["claim"], "reported": audit["reported"].map(_fmt), "unit": audit["unit"],
        "paper_verdict": audit["paper_verdict"], "measured_kind": audit["measured_kind"],
        "measured": audit["measured"].map(_fmt), "measured_unit": audit["measured_unit"],
        "95% CI": [_ci(r) for _, r in audit.iterrows()], "MDE": audit["mde"].map(_fmt),
        "measured_verdict": audit["measured_verdict"], "rows": audit["rows_stale"].map(_stale_mark)})
    lines = ["# Claims audit (Orthros, arXiv 2610.13735)", "",
             "Reported values: `paper_tables/reported/` (transcribed from the seed notes). Recomputed values: "
             "`paper_tables/derived.csv` (formulas in `suite/report/derived.py`). Measured values: results CSVs of "
             "this suite, at its own (much smaller) scale; their conditions are printed beside the paper's.", "",
             "Two verdicts per claim, of different kinds, counted apart: `paper_verdict` reads the claim against the "
             "paper's own numbers and text; `measured_verdict` judges this suite's evidence that decides "
             "(`measured_kind`: a direct measurement of the claim's quantity, a proxy, or an implementation check "
             "of the suite's own code). The rules (`docs/verdicts.md`, `suite/report/verdicts.py`): a failed "
             "control of either arm, or rows that contradict each other, make the evidence `invalid`; a model "
             "near a trivial one, or a paper effect at the nearest reported scale below the minimum detectable "
             "effect (MDE), make it `not testable at this scale`; a claimed difference is `reproduced here` only "
             "with the claimed sign beyond noise (95% CI and the drift floor of re-runs), and `no difference "
             "detected` is its own verdict. `measured` is in `measured_unit`, not the claim's unit; "
             "`measured_minus_reported` only where the two units are one. `rows`: whether the measured rows "
             "predate the last change to the code they ran.", "",
             "## Verdict counts", "", *[f"- {line}" for line in verdicts.count_lines(audit)], "",
             "## Claims", "", to_markdown(table), "", "## Evidence per claim", ""]
    for _, r in audit.iterrows():
        lines += [f"### {r['id']} ({r['asserted_by']}): {r['claim']}", "",
                  f"- Reported: {_fmt(r['reported'])} {r['unit']}; {r['reported_conditions']}"]
        rec = ", ".join(f"{label} {_fmt(r[key])}" for key, label in
                        (("recomputed", "recomputed"), ("reported_minus_recomputed", "reported - recomputed"))
                        if _fmt(r[key]))
        verdict = f"**{_s(r['paper_verdict'])}**: " if _s(r["paper_verdict"]) else ""
        lines.append(f"- Paper check ({_s(r['paper_check']) or 'none'}): {verdict}{rec + '; ' if rec else ''}"
                     f"{_s(r['paper_detail'])}")
        if _s(r["measured_kind"]):
            why = _s(r["measured_why"]).removeprefix(f"{r['measured_verdict']}: ")  # the verdict is said once
            lines.append(f"- Measured ({r['measured_kind']}): {r['evidence']}: **{r['measured_verdict']}**: {why}")
            for key, label in (("trivial_margin", "Margin over a trivial model"), ("scale_check", "Scale"),
                               ("baseline_flags", "Baseline flags"), ("measured_conditions", "Conditions"),
                               ("rows_commit", "Rows from commit"), ("rows_stale", "Staleness")):
                if _s(r[key]) and _s(r[key]) not in _s(r["measured_why"]):
                    lines.append(f"  - {label}: {r[key]}")
        if _s(r["other_evidence"]):
            lines.append("- Other evidence:")
            lines += [f"  - {e}" for e in r["other_evidence"].split(" | ")]
        if _s(r["detail"]):
            lines.append(f"- Note: {r['detail']}")
        lines.append("")
    bad = derived[derived["status"] == "inconsistent"]
    lines += ["## Internal inconsistencies of the reported tables", "",
              "Reported numbers that do not follow from the others (diff = reported - recomputed; tolerance from "
              "the printed precision):", ""]
    columns = ["id", "formula", "inputs", "recomputed", "reported_text", "diff", "tolerance", "note"]
    lines.append(to_markdown(bad[columns]
                             .assign(recomputed=bad["recomputed"].map(lambda v: f"{v:.3f}"),
                                     diff=bad["diff"].map(lambda v: f"{v:+.3f}"),
                                     tolerance=bad["tolerance"].map(lambda v: f"{v:.3f}"))) if len(bad) else "none")
    return "\n".join(lines) + "\n"


def build_audit(results: str | Path | None, gpu_results: str | Path | None, reported_dir: str | Path = REPORTED_DIR,
                claims_path: str | Path = CLAIMS_PATH) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(derived, audit)`` frames, writing nothing; ValueError on a bad claims file, formula id or results CSV."""
    derived = load_derived(reported_dir)
    inputs = Inputs(results, gpu_results, _controls(results), _controls(gpu_results, "gpu_controls"))
    return derived, audit_claims(load_claims(claims_path), derived, inputs=inputs)


def _controls(results: str | Path | None, name: str = "controls") -> pd.DataFrame | None:
    """A folder's controls (``folder_controls``: ``controls.csv`` and the from-scratch study's), or None when absent;
    with the conversion controls (``suite.eval.controls.conversion_controls``) derived from ``pretrained_identity.csv``
    where a controls.csv written before that experiment existed lacks them."""
    controls = folder_controls(results, name)
    if controls is None:
        return None
    identity = Path(results) / "pretrained_identity.csv"
    if identity.exists() and not (controls["experiment"] == "conversion").any():
        from suite.eval.controls import conversion_controls

        extra = pd.DataFrame(conversion_controls(read_result(identity, "pretrained_identity")))
        controls = pd.concat([controls, extra], ignore_index=True)
    return controls


def save_audit(out_dir: str | Path, derived: pd.DataFrame, audit: pd.DataFrame) -> None:
    """Write ``derived.csv``, ``claims_audit.{csv,md}`` and ``findings.md`` (the README's findings at a glance, from
    the CSV as written) into ``out_dir`` (each atomically)."""
    out = Path(out_dir)
    write_csv(derived.round(6), out / "derived.csv")
    write_csv(audit, out / "claims_audit.csv")
    written = read_csv(out / "claims_audit.csv")
    write_text(audit_markdown(written, derived), out / "claims_audit.md")
    write_text(findings_markdown(written), out / "findings.md")


def write_audit(out_dir: str | Path, results: str | Path | None, gpu_results: str | Path | None,
                reported_dir: str | Path = REPORTED_DIR, claims_path: str | Path = CLAIMS_PATH) -> pd.DataFrame:
    """Write ``claims_audit.{csv,md}`` and ``derived.csv`` into ``out_dir``; returns the audit frame."""
    derived, audit = build_audit(results, gpu_results, reported_dir, claims_path)
    save_audit(out_dir, derived, audit)
    return audit


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=in_folder, default=None, help="results/<profile> folder (optional)")
    parser.add_argument("--gpu-results", type=in_folder, default=None, help="results/gpu folder (optional)")
    parser.add_argument("--out", type=out_folder, default="paper_tables")
    args = parser.parse_args(argv)
    with usage_errors(parser, ValueError, FileNotFoundError):  # a damaged results CSV or claims file, named
        derived, audit = build_audit(args.results, args.gpu_results)
    save_audit(args.out, derived, audit)
    for line in verdicts.count_lines(audit):
        print(line)


if __name__ == "__main__":
    main()
