"""Numbers recomputed from the paper's own tables, each with a stated formula, compared with what is reported.

Every row of ``paper_tables/derived.csv`` has an ``id`` (the formula id that ``claims.yaml`` cites), the formula in
words, its inputs, the recomputed value, the reported value it is checked against (from a table, or a number the
seed notes computed), ``diff = reported - recomputed``, a rounding ``tolerance`` and a ``status``:
"consistent" (|diff| <= tolerance), "inconsistent" (a reported number that does not follow from the others; the
size of the discrepancy is kept, never rounded away) or "derived only" (nothing reported to compare with).

Tolerances come from the printed precision: a reported value with d decimals is exact to +-0.5*10^-d; an average of
cells printed with d_c decimals is off by at most 0.5*10^-d_c; ratios propagate the inputs' rounding to first order.

CLI: ``python -m suite.report.derived --reported paper_tables/reported --out paper_tables/derived.csv``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.cli import in_folder, out_file, usage_errors
from suite.provenance import write_csv
from suite.reported import AVERAGE_TASKS, REPORTED_DIR, cell, load_notes_derived, load_tables

DERIVED_COLUMNS = ["id", "kind", "table", "formula", "inputs", "recomputed", "reported", "reported_text",
                   "reported_source", "diff", "rel_diff", "tolerance", "status", "note"]
CONFIGS = ["128K/128", "127K/1K", "120K/8K"]
EPS = 1e-9


def _half_unit(decimals: int) -> float:
    return 0.5 * 10.0 ** (-int(decimals))


def _row(id_, kind, table, formula, inputs, recomputed, reported=None, reported_text="", source="", tolerance=None,
         note="") -> dict:
    row = dict(id=id_, kind=kind, table=table, formula=formula, inputs=inputs, recomputed=recomputed,
               reported=reported, reported_text=reported_text, reported_source=source, diff=None, rel_diff=None,
               tolerance=tolerance, status="derived only", note=note)
    if reported is not None and not pd.isna(reported):
        diff = round(reported - recomputed, 9)
        row.update(diff=diff, rel_diff=diff / recomputed if recomputed else None,
                   status="consistent" if abs(diff) <= tolerance + EPS else "inconsistent")
    return row


def averages(tables: pd.DataFrame) -> list[dict]:
    """Every reported average whose cells are all given, recomputed as the plain mean of its cells."""
    rows = []
    avg_rows = tables[tables["task"].isin(list(AVERAGE_TASKS))]
    for _, avg in avg_rows.iterrows():
        same = ((tables["table"] == avg["table"]) & (tables["model"] == avg["model"]) &
                (tables["variant"] == avg["variant"]) & (tables["scale"] == avg["scale"]) &
                ~tables["task"].isin(list(AVERAGE_TASKS)))
        cells = tables[same]
        n = AVERAGE_TASKS[avg["task"]]
        which = avg["variant"] if avg["table"] == "Table 2" else avg["scale"]
        key = f"d_avg_{avg['table'].split()[-1]}_{avg['model']}_{which}"
        if len(cells) != n:
            if avg["task"] == "avg6_recall" and len(cells):
                rest = n * avg["value"] - cells["value"].sum()
                missing = "DROP + NarrativeQA"
                given = ", ".join(f"{r.task_label}={r.value_text}" for r in cells.itertuples())
                rows.append(_row(key + "_implied_missing", "implied", avg["table"],
                                 f"{n} x reported avg - sum of the {len(cells)} given cells = sum of the missing "
                                 f"cells ({missing})",
                                 f"avg={avg['value_text']}; cells=" + given,
                                 rest, note=f"only {len(cells)} of {n} cells are in the notes; the average cannot be "
                                            "recomputed"))
            continue
        mean = cells["value"].mean()
        tol = _half_unit(avg["decimals"]) + _half_unit(cells["decimals"].max())
        rows.append(_row(key, "average", avg["table"], f"mean of the {n} task cells ({avg['task']})",
                         ", ".join(f"{r.task_label}={r.value_text}" for r in cells.itertuples()), mean,
                         avg["value"], avg["value_text"], avg["source"], tol))
    return rows


def differences(tables: pd.DataFrame) -> list[dict]:
    """Average differences the notes quote: Table 1 Orthros-Transformer, Table 2 conversion vs Base / CPT,
    Table 7 Orthros vs Transformer and vs w/o SO at every size, Table 2 MMLU conversion vs CPT."""
    rows = []

    def diff_row(id_, table, a, b, label):
        rows.append(_row(id_, "difference", table, f"{label}: avg(a) - avg(b) on the printed values",
                         f"a={a['value_text']} ({a['model']} {a['variant']} {a['scale']}), "
                         f"b={b['value_text']} ({b['model']} {b['variant']} {b['scale']})",
                         a["value"] - b["value"]))

    diff_row("d_t1_orthros_minus_transformer", "Table 1", cell(tables, "Table 1", "orthros", "avg7"),
             cell(tables, "Table 1", "transformer", "avg7"), "Orthros - Transformer (7-task avg, 1.3B, 100B)")
    for model in ["llama3.1-8b", "qwen3-8b"]:
        conv = cell(tables, "Table 2", model, "avg8", variant="conversion")
        for ref in ["base", "base_cpt"]:
            diff_row(f"d_t2_{model}_conversion_minus_{ref}", "Table 2", conv,
                     cell(tables, "Table 2", model, "avg8", variant=ref), f"{model} conversion - {ref} (8-task avg)")
        diff_row(f"d_t2_{model}_mmlu_conversion_minus_base_cpt", "Table 2",
                 cell(tables, "Table 2", model, "mmlu", variant="conversion"),
                 cell(tables, "Table 2", model, "mmlu", variant="base_cpt"), f"{model} MMLU conversion - base_cpt")
    linear = [cell(tables, "Table 1", m, "avg7") for m in ("gdn", "gla", "retnet")]
    best = max(linear, key=lambda r: r["value"])
    diff_row("d_t1_orthros_minus_best_linear", "Table 1", cell(tables, "Table 1", "orthros", "avg7"), best,
             "Orthros - the best linear baseline of GDN, GLA, RetNet (7-task avg, 1.3B, 100B)")
    t1_wins = 0
    for task in ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande"]:
        o, t = cell(tables, "Table 1", "orthros", task), cell(tables, "Table 1", "transformer", task)
        diff_row(f"d_t1_{task}_orthros_minus_transformer", "Table 1", o, t, f"{o['task_label']}: Orthros - Transformer")
        t1_wins += int(o["value"] > t["value"])
    rows.append(_row("d_t1_orthros_task_wins", "count", "Table 1", "number of the 7 tasks where Orthros > Transformer",
                     "Table 1 cells", float(t1_wins)))
    diff_row("d_t3_orthros_minus_transformer", "Table 3", cell(tables, "Table 3", "orthros", "avg6_recall"),
             cell(tables, "Table 3", "transformer", "avg6_recall"), "Orthros - Transformer (6 recall tasks avg)")
    for task in ["fda", "swde", "squad", "triviaqa"]:
        o, t = cell(tables, "Table 3", "orthros", task), cell(tables, "Table 3", "transformer", task)
        diff_row(f"d_t3_{task}_orthros_minus_transformer", "Table 3", o, t, f"{o['task_label']}: Orthros - Transformer")
    for ref in ["gdn", "gla", "retnet", "swa"]:
        diff_row(f"d_t3_orthros_minus_{ref}", "Table 3", cell(tables, "Table 3", "orthros", "avg6_recall"),
                 cell(tables, "Table 3", ref, "avg6_recall"), f"Orthros - {ref} (6 recall tasks avg)")
    advantage, so_wins = [], 0
    for scale in tables.loc[tables["table"] == "Table 7", "scale"].unique():
        so = cell(tables, "Table 7", "orthros", "avg6", scale=scale)
        for ref in ["transformer", "orthros_noso"]:
            diff_row(f"d_t7_{scale}_orthros_minus_{ref}", "Table 7", so,
                     cell(tables, "Table 7", ref, "avg6", scale=scale),
                     f"{scale} Orthros (w/ SO) - {ref} (6-task avg, 10B)")
        advantage.append((scale, rows[-2]["recomputed"]))
        so_wins += int(rows[-1]["recomputed"] > 0)
    drops = [f"{a[0]}->{b[0]}" for a, b in zip(advantage, advantage[1:]) if b[1] < a[1]]
    rows.append(_row("d_t7_advantage_drops", "count", "Table 7",
                     "number of size steps (160M->...->6.8B) where Orthros - Transformer (avg6) shrinks",
                     ", ".join(f"{s}: {d:+.2f}" for s, d in advantage), float(len(drops)),
                     note="shrinks at " + (", ".join(drops) or "none")))
    rows.append(_row("d_t7_so_wins", "count", "Table 7", "number of the 6 sizes where Orthros w/ SO > w/o SO (avg6)",
                     "Table 7 averages", float(so_wins)))
    return rows


def table4(tables: pd.DataFrame) -> list[dict]:
    """Table 4 (1x H100, SGLang, batch 2): speedups, output throughput and decode-only throughput recomputed.

    output throughput = batch x output_len / E2E (tok/s, includes prefill);
    decode-only throughput = batch x output_len / (E2E - TTFT) (tok/s);
    for the hybrids (no TTFT reported): implied TTFT = E2E - batch x output_len / decode-only (s).
    """
    rows = []
    t4 = tables[tables["table"] == "Table 4"]

    def get(model, config, metric):
        return cell(t4, "Table 4", model, metric=metric, setting=config)

    for config in CONFIGS:
        for metric, label in [("ttft_s", "ttft"), ("e2e_s", "e2e")]:
            t, o = get("transformer", config, metric), get("orthros", config, metric)
            ratio = t["value"] / o["value"]
            rows.append(_row(f"d_t4_{label}_speedup_{config}", "ratio", "Table 4",
                             f"{label.upper()} speedup = Transformer {metric} / Orthros {metric}",
                             f"{t['value_text']} / {o['value_text']} s", ratio, tolerance=ratio * 1e-3,
                             note="prefill-dominated" if label == "ttft" else "end to end, batch 2, 1x H100"))
        t, o = get("transformer", config, "output_tok_s"), get("orthros", config, "output_tok_s")
        rows.append(_row(f"d_t4_output_tput_ratio_{config}", "ratio", "Table 4",
                         "Orthros output tok/s / Transformer output tok/s (printed, rounded values)",
                         f"{o['value_text']} / {t['value_text']} tok/s", o["value"] / t["value"],
                         note="equals the E2E speedup up to rounding of the printed throughputs; includes prefill"))
        spans = {}
        for model in ["transformer", "orthros"]:
            spans[model] = (get(model, config, "e2e_s")["value"] - get(model, config, "ttft_s")["value"],
                            get(model, config, "decode_tok_s"))
        (span_t, dec_t), (span_o, dec_o) = spans["transformer"], spans["orthros"]
        rep_ratio = dec_o["value"] / dec_t["value"]
        rows.append(_row(f"d_t4_decode_ratio_{config}", "ratio", "Table 4",
                         "decode-only ratio Orthros/Transformer = (E2E-TTFT)_Transformer / (E2E-TTFT)_Orthros "
                         "(same tokens)",
                         f"({span_t:.3f} / {span_o:.3f}) s; printed {dec_o['value_text']} / {dec_t['value_text']} "
                         "tok/s",
                         span_t / span_o, rep_ratio, f"{dec_o['value_text']}/{dec_t['value_text']}", dec_o["source"],
                         rep_ratio * (_half_unit(dec_o["decimals"]) / dec_o["value"]
                                      + _half_unit(dec_t["decimals"]) / dec_t["value"]),
                         note="> 1 means Orthros decodes faster"))
        rows.append(_row(f"d_t4_decode_printed_ratio_{config}", "ratio", "Table 4",
                         "Orthros decode-only tok/s / Transformer decode-only tok/s (printed values)",
                         f"{dec_o['value_text']} / {dec_t['value_text']} tok/s", rep_ratio,
                         note="the claim's own comparison of decode cost; > 1 means Orthros decodes faster"))
        h, oh = get("linear_hybrid", config, "e2e_s"), get("orthros_h", config, "e2e_s")
        rows.append(_row(f"d_t4_hybrid_e2e_speedup_{config}", "ratio", "Table 4",
                         "E2E speedup = Linear Hybrid e2e_s / Orthros-H e2e_s",
                         f"{h['value_text']} / {oh['value_text']} s", h["value"] / oh["value"]))
        for model in ["transformer", "orthros", "linear_hybrid", "orthros_h"]:
            e2e = get(model, config, "e2e_s")
            tokens = e2e["batch"] * e2e["output_len"]
            out_rep = t4[(t4["model"] == model) & (t4["setting"] == config) & (t4["metric"] == "output_tok_s")]
            out = tokens / e2e["value"]
            if len(out_rep):
                rep = out_rep.iloc[0]
                tol = _half_unit(rep["decimals"]) + out * _half_unit(e2e["decimals"]) / e2e["value"]
                rows.append(_row(f"d_t4_output_tput_{model}_{config}", "throughput", "Table 4",
                                 "output throughput = batch x output_len / E2E",
                                 f"{int(e2e['batch'])} x {int(e2e['output_len'])} / {e2e['value_text']} s", out,
                                 rep["value"], rep["value_text"], rep["source"], tol))
            else:
                rows.append(_row(f"d_t4_output_tput_{model}_{config}", "throughput", "Table 4",
                                 "output throughput = batch x output_len / E2E",
                                 f"{int(e2e['batch'])} x {int(e2e['output_len'])} / {e2e['value_text']} s", out,
                                 note="not printed in Table 4 for the hybrids"))
            dec = get(model, config, "decode_tok_s")
            ttft_rows = t4[(t4["model"] == model) & (t4["setting"] == config) & (t4["metric"] == "ttft_s")]
            if len(ttft_rows):
                ttft = ttft_rows.iloc[0]
                span = e2e["value"] - ttft["value"]
                value = tokens / span
                tol = _half_unit(dec["decimals"]) + value * 2 * _half_unit(e2e["decimals"]) / span
                alt = e2e["batch"] * (e2e["output_len"] - 1) / span
                rows.append(_row(f"d_t4_decode_tput_{model}_{config}", "throughput", "Table 4",
                                 "decode-only throughput = batch x output_len / (E2E - TTFT)",
                                 f"{int(e2e['batch'])} x {int(e2e['output_len'])} / "
                                 f"({e2e['value_text']} - {ttft['value_text']}) s",
                                 value, dec["value"], dec["value_text"], dec["source"], tol,
                                 note=f"with output_len-1 decode steps per request: {alt:.2f} tok/s "
                                      f"({'also off' if abs(dec['value'] - alt) > tol + EPS else 'within rounding'})"))
            else:
                implied = e2e["value"] - tokens / dec["value"]
                rows.append(_row(f"d_t4_implied_ttft_{model}_{config}", "implied", "Table 4",
                                 "implied TTFT = E2E - batch x output_len / decode-only throughput (assumes the "
                                 "decode-only formula above)",
                                 f"{e2e['value_text']} s - {int(tokens)} / {dec['value_text']} tok/s", implied,
                                 note="TTFT not printed for the hybrids"))
    return rows


def from_notes(derived: pd.DataFrame, notes: pd.DataFrame) -> list[dict]:
    """Check each number the seed notes computed against the formula row it names (same recomputed value)."""
    rows = []
    by_id = derived.set_index("id")
    for _, note in notes.iterrows():
        fid = note["formula_id"]
        if fid == "d_s003_100k_prompt":
            value, formula, inputs = 30.0 / 21.9, "seed 003's 30 s prompt / 21.9", "30 s / 21.9"
        elif fid in by_id.index:
            base = by_id.loc[fid]
            value, formula, inputs = base["recomputed"], base["formula"], base["inputs"]
        else:
            raise ValueError(f"notes_derived.csv: {note['id']} names unknown formula id {fid!r}")
        rows.append(_row(note["id"], "seed-notes number", "notes", formula, inputs, value, note["value"],
                         note["value_text"], note["source"], _half_unit(note["decimals"]), note=note["statement"]))
    return rows


def compute_derived(tables: pd.DataFrame, notes: pd.DataFrame) -> pd.DataFrame:
    """All derived rows (see module docstring) as a DataFrame with ``DERIVED_COLUMNS``; ids are unique."""
    core = pd.DataFrame(averages(tables) + differences(tables) + table4(tables))
    frame = pd.concat([core, pd.DataFrame(from_notes(core, notes))], ignore_index=True)[DERIVED_COLUMNS]
    if frame["id"].duplicated().any():
        raise ValueError(f"duplicate derived id {frame.loc[frame['id'].duplicated(), 'id'].iloc[0]!r}")
    return frame


def load_derived(reported_dir: str | Path = REPORTED_DIR) -> pd.DataFrame:
    """Convenience: read the reported CSVs and compute the derived rows."""
    return compute_derived(load_tables(reported_dir), load_notes_derived(reported_dir))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reported", type=in_folder, default=str(REPORTED_DIR))
    parser.add_argument("--out", type=out_file, default="paper_tables/derived.csv")
    args = parser.parse_args(argv)
    with usage_errors(parser, ValueError, FileNotFoundError):  # a damaged reported table, named
        frame = load_derived(args.reported)
    write_csv(frame.round(6), args.out)
    bad = frame[frame["status"] == "inconsistent"]
    print(f"{len(frame)} derived rows, {len(bad)} inconsistent -> {args.out}")
    for r in bad.itertuples():
        print(f"  {r.id}: reported {r.reported_text} vs recomputed {r.recomputed:.3f} (diff {r.diff:+.3f})")


if __name__ == "__main__":
    main()
