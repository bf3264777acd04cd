"""Claims audit: one row per claim of ``paper_tables/claims.yaml`` with reported vs recomputed/measured value.

Verdicts: "consistent with the paper's own tables", "inconsistent" (the paper's numbers do not follow from each
other), "misreading" (a seed's reading the tables contradict), "reproduced here" / "not reproduced here" (a
measurement by this suite meets / misses the claim's ``expect``), "not testable here (why)", "not run: why".
Renders from the reported CSVs alone; measured values are added when the results CSVs exist. A NaN measurement is
"not measured": NaN values are dropped, and a claim with none left is "not run: no measured value (all NaN)".

CLI: ``python -m suite.report.audit --results results/default --gpu-results results/gpu --out paper_tables``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.cli import in_folder, out_folder, usage_errors
from suite.eval.controls import invalid_reason
from suite.provenance import read_csv, write_csv, write_text
from suite.report.bench_audit import evaluate_benchmark
from suite.report.claims import CLAIMS_PATH, load_claims
from suite.report.derived import EPS, load_derived
from suite.report.findings import findings_markdown
from suite.report.measured import mqar_control_rows, read_controls, read_result, scale_text, select
from suite.report.schema import NUMBER, check_columns
from suite.report.stats import NOISE_RULE, compare
from suite.report.tables import to_markdown
from suite.reported import REPORTED_DIR

CONSISTENT = "consistent with the paper's own tables"
AUDIT_COLUMNS = ["id", "asserted_by", "claim", "source", "reported", "unit", "check", "recomputed", "measured", "diff",
                 "reported_conditions", "measured_conditions", "verdict", "detail", "measured_proxy"]


def _tolerance(claim: dict) -> float:
    if "tolerance" in claim:
        return float(claim["tolerance"])
    text = repr(claim["value"])
    return 0.5 * 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)


def evaluate_measure(measure: dict, results: str | Path | None, gpu: str | Path | None,
                     controls: pd.DataFrame | None = None, gpu_controls: pd.DataFrame | None = None) -> dict:
    """Evaluate a ``measure`` block against the results CSVs.

    Returns dict(value (float|None), ok (bool|None), status ("ok", "not run: <why>" or "invalid: <why>"),
    conditions (str), path, noise (str)). ``op`` ratio = mean(numerator rows) / mean(denominator rows); difference
    = numerator - denominator; value = mean of the numerator rows. Only rows passing ``where`` (normally
    ``status: ok``) are used; NaN measurements are dropped ("not measured", never a verdict).

    ``cell: mqar_control`` keeps only the rows the MQAR controls read (``suite.report.measured.mqar_control_rows``).
    ``controls: <experiment>`` gives a verdict only when both controls of that experiment passed (else status
    "invalid: ...", value None; a measurement that did not run stays "not run: ..."): the controls of the results
    the measure reads, ``controls`` for ``{results}/...`` and ``gpu_controls`` for ``{gpu}/...``.
    ``seed_noise: true`` compares numerator and denominator per seed under the noise rule of
    :mod:`suite.report.stats`: for a claim of equality ("on par") no difference passes; for a claim that the two
    differ (``claim_is_difference: true``) no difference fails; a difference beyond the noise is judged by ``expect``.
    Raises ValueError naming the file and column when the CSV fails its schema (``suite.report.schema``) or lacks
    a column the claim names, or the claim's column is not numeric.
    """
    res = _measure(measure, results, gpu)
    own = gpu_controls if measure["results"].startswith("{gpu}") else controls
    reason = invalid_reason(own, measure["controls"]) if "controls" in measure else None
    if reason and res["status"] == "ok":  # no verdict and no number from an experiment whose control failed
        return {**res, "value": None, "ok": None, "noise": "", "status": reason}
    return res


def _measure(measure: dict, results: str | Path | None, gpu: str | Path | None) -> dict:
    path = Path(measure["results"].format(results=results or "<no --results>", gpu=gpu or "<no --gpu-results>"))
    out = dict(value=None, ok=None, conditions="", path=str(path), noise="")
    if not path.exists():
        return {**out, "status": f"not run: {path} missing"}
    frame = read_result(path, ("gpu_" if measure["results"].startswith("{gpu}") else "") + path.stem)
    col = measure["column"]
    named = [col] + [c for key in ("where", "numerator", "denominator") for c in measure.get(key) or {}]
    if any(c not in frame.columns for c in named):
        raise ValueError(f"{path}: column(s) {[c for c in named if c not in frame.columns]} named by a claim missing")
    check_columns(frame, path, {col: NUMBER})
    if measure.get("cell") == "mqar_control":
        frame = mqar_control_rows(frame)
    base = select(frame, measure["where"])
    num = select(base, measure.get("numerator"))
    den = select(base, measure.get("denominator")) if measure["op"] != "value" else num
    if num.empty or den.empty:
        loose = select(frame, {k: v for k, v in measure["where"].items() if k != "status"})
        loose = select(loose, measure.get("numerator"))
        statuses = sorted(set(loose["status"].astype(str)) - {"ok"}) if "status" in loose else []  # why not run
        cell = " at the MQAR controls' cell" if measure.get("cell") else ""
        why = "; ".join(statuses) or \
            f"no rows match {measure['where']}{cell} {measure.get('numerator', '')} / {measure.get('denominator', '')}"
        return {**out, "status": why if why.startswith("not run") else f"not run: {why}"}
    a, b = pd.to_numeric(num[col]).dropna(), pd.to_numeric(den[col]).dropna()
    if a.empty or b.empty:
        return {**out, "status": "not run: no measured value (all NaN)"}
    rows = f"({len(a)}+{len(b)} rows)"
    a, b = a.mean(), b.mean()
    value = {"ratio": a / b if b else float("nan"), "difference": a - b, "value": a}[measure["op"]]
    exp = measure["expect"]
    ok = True
    if "approx" in exp:
        ok &= abs(value / exp["approx"] - 1) <= exp["rel_tol"] + EPS
    if "ge" in exp:
        ok &= value >= exp["ge"] - EPS
    if "le" in exp:
        ok &= value <= exp["le"] + EPS
    noise = ""
    if measure.get("seed_noise") and measure["op"] != "value":
        cmp = compare(num.rename(columns={col: "value"}) if col != "value" else num,
                      den.rename(columns={col: "value"}) if col != "value" else den)
        noise = cmp.text()
        if cmp.differs is False:
            ok = not measure.get("claim_is_difference", False)
    cond = scale_text(pd.concat([num, den]).drop_duplicates())
    return {**out, "value": float(value), "ok": bool(ok), "status": "ok", "noise": noise,
            "conditions": f"{cond} {rows}"}


def _formula(claim: dict, ids: list[str], derived: pd.DataFrame) -> tuple[float | None, float | None, str, str]:
    by_id = derived.set_index("id")
    missing = [i for i in ids if i not in by_id.index]
    if missing:
        raise ValueError(f"claim {claim['id']}: unknown formula id(s) {missing} (see paper_tables/derived.csv)")
    rows = by_id.loc[ids]
    bad = rows[rows["status"] == "inconsistent"]
    detail = "; ".join(f"{i}: reported {r['reported_text']} vs recomputed {r['recomputed']:.3f} (diff {r['diff']:+.3f})"
                       for i, r in bad.iterrows())
    head = rows.iloc[0]
    if len(ids) == 1 or "expect_value" in claim["check"]:
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
    verdict = CONSISTENT if ok else ("misreading" if claim["asserted_by"].startswith("seed") else "inconsistent")
    if not agrees and len(ids) == 1 and head["note"] and isinstance(head["note"], str):
        detail = (detail + " " + head["note"]).strip()
    return recomputed, diff, verdict, f"{formula}. {detail}".strip(". ")


def _expectation(measure: dict) -> str:
    """The pass rule of a measurement, e.g. ``expected ~3.45 +/-25%`` or ``expected >= 0.9``."""
    exp, parts = measure["expect"], []
    if "approx" in exp:
        parts.append(f"~{exp['approx']:g} +/-{100 * exp['rel_tol']:g}%")
    if "ge" in exp:
        parts.append(f">= {exp['ge']:g}")
    if "le" in exp:
        parts.append(f"<= {exp['le']:g}")
    return "expected " + " and ".join(parts)


def _measured_verdict(res: dict, measure: dict) -> str:
    if res["status"] != "ok":
        return res["status"]
    rule = _expectation(measure)
    if res.get("noise"):
        rule += f"; {res['noise']}"
    if "controls" in measure:
        rule += f"; {measure['controls']} controls passed"
    return ("reproduced here" if res["ok"] else "not reproduced here") + f" ({rule})"


WINDOW_CLAIMS = ("C01", "C04")  # accuracy claims whose benchmark prompts are short against w (prompt_lengths.csv)
WINDOW_NOTE = ("Window: when the whole sequence fits in the window w and the scale-offset is the identity, Orthros "
               "computes exactly the Transformer's function (every key lies in the base stream's window), so on "
               "such prompts an accuracy gap measures what training made of the weights, not the architecture at "
               "inference; the paper does not discuss this.")


def window_note(results: str | Path | None) -> str:
    """``WINDOW_NOTE`` with the measured share of zero-shot benchmark documents longer than w = 128 per tokenizer
    (``<results>/prompt_lengths.csv``; the note alone when the file is absent)."""
    path = Path(results) / "prompt_lengths.csv" if results else None
    if path is None or not path.exists():
        return WINDOW_NOTE
    lengths = read_result(path, "prompt_lengths")
    parts = []
    for (tokenizer, shots), g in lengths.groupby(["tokenizer", "num_fewshot"]):
        shares = ", ".join(f"{r.task} {100 * r.share_above_128:.0f}%" for r in g.itertuples())
        parts.append(f"{tokenizer} tokenizer, {int(shots)}-shot: {shares}")
    return f"{WINDOW_NOTE} Share of scored documents longer than 128 tokens ({path}): " + "; ".join(parts) + "."


def _join(*texts: str) -> str:
    return " ".join(t.strip() for t in texts if t and t.strip())


def _bench_detail(bench: dict) -> str:
    if bench["detail"]:
        noise = f"; {bench['noise']}" if bench["noise"] else ""
        return f"Measured on the paper's metric: {bench['detail']}{noise}."
    return f"Paper's metric: {bench['status']}."


def _bench_verdict(bench: dict, block: dict) -> str:
    """The audit text of a benchmark block: its verdict, or why it has none."""
    if bench["status"] != "ok":
        return f"paper's metric: {bench['status']}"
    if bench["ok"] is None:
        return f"paper's metric, measured only: {bench['value']:.4g} ({block['op']}; the claim is about the " \
               "paper's own tables, no pass rule)"
    rule = _expectation(block)
    if bench["noise"]:
        rule += f"; {bench['noise']}"
    return ("reproduced here" if bench["ok"] else "not reproduced here") + \
        f" (paper's metric: {block['op']}; {rule}; benchmark controls passed)"


def audit_claims(claims: list[dict], derived: pd.DataFrame, results: str | Path | None = None,
                 gpu_results: str | Path | None = None, controls: pd.DataFrame | None = None,
                 gpu_controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """One audit row per claim (``AUDIT_COLUMNS``); quality measurements are gated by the controls.csv of the
    results they read (``controls`` for ``results``, ``gpu_controls`` for ``gpu_results``).
    Raises ValueError on unknown formula ids or bad result columns."""
    rows = []
    for claim in claims:
        check = claim["check"]
        kind = check["kind"]
        row = dict(id=claim["id"], asserted_by=claim["asserted_by"], claim=claim["claim"], source=claim["source"],
                   reported=claim["value"], unit=claim["unit"], check=kind, recomputed=None, measured=None, diff=None,
                   reported_conditions="; ".join(f"{k}: {v}" for k, v in claim["conditions"].items()),
                   measured_conditions="", detail="", measured_proxy="")
        if kind == "formula":
            ids = check["formula"] if isinstance(check["formula"], list) else [check["formula"]]
            row["recomputed"], row["diff"], row["verdict"], row["detail"] = _formula(claim, ids, derived)
        elif kind == "reading":
            inconsistent = check["verdict"] == "inconsistent"
            row["verdict"] = check["verdict"] + (" (paper contradicts itself)" if inconsistent else "")
            row["detail"] = check["evidence"]
            if "formula" in check:
                rec = derived.set_index("id").loc[check["formula"], "recomputed"]
                row["recomputed"] = float(rec)
                if isinstance(claim["value"], (int, float)):
                    row["diff"] = float(claim["value"]) - float(rec)
        else:
            res = evaluate_measure(check["measure"], results, gpu_results, controls, gpu_controls)
            row["measured"], row["measured_conditions"] = res["value"], res["conditions"] or res["path"]
            if res["value"] is not None and isinstance(claim["value"], (int, float)):
                row["diff"] = res["value"] - float(claim["value"])
            if kind == "cost_model":
                why = check.get("untestable_reason", "needs hardware this suite lacks")
                pred = f"cost-model prediction {res['value']:.2f}x, not a measurement" if res["value"] is not None \
                    else f"no cost-model prediction ({res['status']})"
                row["verdict"] = f"not testable here ({why}; {pred})"
            else:
                row["verdict"] = _measured_verdict(res, check["measure"])
                if res["status"] != "ok" and "gpu" in check["measure"]["results"]:
                    row["verdict"] = f"{res['status']} (GPU benchmark; this machine has no GPU)"
        bench = None
        if "benchmark" in claim:
            block = claim["benchmark"]
            bench = evaluate_benchmark(block, results, gpu_results,
                                       gpu_controls if block["results"].startswith("{gpu}") else controls)
            row["detail"] = _join(row["detail"], _bench_detail(bench))
            if bench["value"] is not None:
                row["measured"], row["measured_conditions"] = bench["value"], bench["conditions"]
            row["measured_proxy"] = _bench_verdict(bench, block)
        if "measure" in claim and (bench is None or bench["status"] != "ok"):
            res = evaluate_measure(claim["measure"], results, gpu_results, controls, gpu_controls)
            proxy = claim["measure"].get("proxy", "")
            row["measured"], row["measured_conditions"] = res["value"], res["conditions"] or res["path"]
            row["measured_proxy"] = _measured_verdict(res, claim["measure"]) + (f" [{proxy}]" if proxy else "")
            if bench is not None:
                row["detail"] = _join(row["detail"], "No verdict on the paper's metric: the verdict and the "
                                                     "measured value are the proxy's.")
        if claim["id"] in WINDOW_CLAIMS:
            row["detail"] = _join(row["detail"], window_note(results))
        rows.append(row)
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


def audit_markdown(audit: pd.DataFrame, derived: pd.DataFrame) -> str:
    """The audit as markdown: the per-claim table, then every internal inconsistency of the reported tables."""
    def fmt(v):
        if isinstance(v, float) and v == 0:
            return "0"
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return ""
        return f"{v + 0.0:.4g}" if isinstance(v, float) else str(v)

    view = audit.assign(**{c: audit[c].map(fmt) for c in ["reported", "recomputed", "measured", "diff"]})
    cols = ["id", "asserted_by", "claim", "reported", "unit", "check", "recomputed", "measured", "diff", "verdict",
            "detail", "reported_conditions", "measured_conditions", "measured_proxy"]
    bad = derived[derived["status"] == "inconsistent"]
    lines = ["# Claims audit (Orthros, arXiv 2610.13735)", "",
             "Reported values: `paper_tables/reported/` (transcribed from the seed notes). Recomputed values: "
             "`paper_tables/derived.csv` (formulas in `suite/report/derived.py`). Measured values: results CSVs of "
             "this suite, at its own (much smaller) scale; their conditions are printed beside the paper's.", "",
             "Two verdicts per claim: `verdict` judges the claim itself (against the paper's own tables, or against a "
             "measurement of the same quantity); `measured_proxy` judges a smaller-scale proxy this suite measures "
             "instead (e.g. held-out perplexity for accuracy, MQAR for the recall tasks). A claim can therefore be "
             "consistent with the paper's tables and not reproduced by the proxy. `measured` is in the proxy's unit "
             "(ratio or difference, as the proxy text says), not the claim's; pass thresholds are in "
             "`claims.yaml`.", "",
             "Quality proxies are judged only where the experiment's positive and negative controls passed "
             "(`controls.csv`, `suite/eval/controls.py`); otherwise the verdict reads `invalid: <which control> "
             f"failed`. Seed noise: two models {NOISE_RULE}; a smaller difference is \"no difference\", whatever "
             "its sign.", "",
             "## Verdict counts", ""]
    for verdict, n in audit["verdict"].str.replace(r" \(.*", "", regex=True).value_counts().items():
        lines.append(f"- {verdict}: {n}")
    proxies = audit["measured_proxy"].fillna("").str.extract(r"^(reproduced here|not reproduced here|not run)")[0]
    for verdict, n in proxies.dropna().value_counts().items():
        lines.append(f"- measured proxy, {verdict}: {n}")
    lines += ["", "## Claims", "", to_markdown(view[cols]), "",
              "## Internal inconsistencies of the reported tables", "",
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
    return derived, audit_claims(load_claims(claims_path), derived, results, gpu_results, _controls(results),
                                 _controls(gpu_results, "gpu_controls"))


def _controls(results: str | Path | None, name: str = "controls") -> pd.DataFrame | None:
    """``<results>/controls.csv`` through the one controls loader (``read_controls``), or None when absent; with the
    conversion controls (``suite.eval.controls.conversion_controls``) derived from ``pretrained_identity.csv`` where
    a controls.csv written before that experiment existed lacks them."""
    path = Path(results) / "controls.csv" if results else None
    if path is None or not path.exists():
        return None
    controls = read_controls(path, name)
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
    write_text(audit_markdown(audit, derived), out / "claims_audit.md")
    write_text(findings_markdown(read_csv(out / "claims_audit.csv")), out / "findings.md")


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
    print(audit["verdict"].value_counts().to_string())


if __name__ == "__main__":
    main()
