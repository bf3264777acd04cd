"""Prompt length against the window: how long the sequences a benchmark scores are, in tokens of a given tokenizer.

For each local benchmark task (:mod:`suite.eval.lm_eval_tasks`) and shot count, lm-eval builds the requests it would
score (the same prompts, few-shot examples and documents as ``suite.eval.harness``, the first ``limit`` documents);
a document's length is that of its longest scored sequence: context + continuation (the longest choice) for
multiple choice, prompt + gold answer for generation. The CSV gives per (tokenizer, task, shot count) the median,
90th percentile and maximum, and the share of documents longer than the paper's window w = 128 and than the
study's own ``window``.

Why it matters: when a whole sequence fits in the window and the scale-offset is the identity, Orthros computes
exactly the Transformer's function (the base stream's sliding window sees every key, and so does the output
stream). A task whose sequences stay under w therefore tests what training made of the weights, not the
architecture at inference.

CLI::

    python -m suite.eval.prompt_lengths --benchmark-data D --tokenizer "suite BPE=data/tokenizer" \\
        --tasks commonsense,mmlu,recall --num-fewshot 0,5 --limit 20 --window 32 --out results/<p>/prompt_lengths.csv
"""
from __future__ import annotations

import argparse
import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from suite.archs import PAPER_WINDOW
from suite.cli import in_folder, number_list, out_file, positive_float, positive_int
from suite.provenance import PROVENANCE_COLUMNS, provenance, write_csv

COLUMNS = ["tokenizer", "task", "num_fewshot", "n_docs", "limit", "median_tokens", "p90_tokens", "max_tokens",
           f"share_above_{PAPER_WINDOW}", "window", "share_above_window", "split", "source", "tokenizer_path"]


def _doc_lengths(task, tokenizer, limit) -> list[int]:
    """Tokens of the longest scored sequence of each of the first ``limit`` documents of a built lm-eval task."""
    n = len(task.eval_docs)
    limit = None if limit is None else (int(math.ceil(n * limit)) if limit < 1 else int(limit))
    task.set_fewshot_seed(seed=0)
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    longest: dict[int, int] = {}
    for inst in task.instances:
        context, rest = inst.arguments[0], inst.arguments[1]
        tail = rest if isinstance(rest, str) else str(task.doc_to_target(inst.doc))  # generation: the gold answer
        n_tokens = len(tokenizer(context + tail, add_special_tokens=False)["input_ids"])
        longest[inst.doc_id] = max(longest.get(inst.doc_id, 0), n_tokens)
    return list(longest.values())


UNCUT = 1 << 20  # the recall tasks' window here: their prompts as the task writes them, before a model's window cuts


def prompt_lengths(folder: str | Path, tokenizers: dict[str, str], tasks: list[str], shots: list[int],
                   limit: int | float | None, window: int, profile: str = "smoke") -> pd.DataFrame:
    """``COLUMNS`` rows (plus provenance: no model, no seed) for every tokenizer (label -> folder), task and shot
    count (recall tasks: zero-shot only). Tasks whose data the folder lacks are left out (their quality rows say
    why)."""
    from transformers import AutoTokenizer

    from suite.eval import lm_eval_tasks
    from suite.eval.harness import RECALL, get_task_manager

    root = lm_eval_tasks.data_root(folder)
    rows = []
    for label, path in tokenizers.items():
        tok = AutoTokenizer.from_pretrained(path)
        manager = get_task_manager(path, path, UNCUT)
        for name in tasks:
            if lm_eval_tasks.missing(name, root):
                continue
            split, source = lm_eval_tasks.split_of(name, folder)
            for k in ([0] if name in RECALL else shots):
                loaded = lm_eval_tasks.load(name, root, k, manager)
                lengths = np.array([n for task in loaded["tasks"].values() for n in _doc_lengths(task, tok, limit)])
                rows.append({"tokenizer": label, "task": name, "num_fewshot": k, "n_docs": len(lengths),
                             "limit": limit, "median_tokens": round(float(np.median(lengths)), 1),
                             "p90_tokens": round(float(np.percentile(lengths, 90)), 1),
                             "max_tokens": int(lengths.max()),
                             f"share_above_{PAPER_WINDOW}": round(float((lengths > PAPER_WINDOW).mean()), 4),
                             "window": window, "share_above_window": round(float((lengths > window).mean()), 4),
                             "split": split,
                             "source": source, "tokenizer_path": str(path),
                             **provenance(profile, None, "", "tokenizer")})
    return pd.DataFrame(rows, columns=COLUMNS + PROVENANCE_COLUMNS)


def _labelled_folder(text: str) -> tuple[str, str]:
    """argparse ``type=`` of ``--tokenizer LABEL=DIR``: ``(label, folder)``, the folder existing."""
    label, sep, path = text.rpartition("=")
    if not sep or not label:
        raise argparse.ArgumentTypeError(f"expected LABEL=DIR, got {text!r}")
    return label, in_folder(path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark-data", required=True, type=in_folder, help="folder prepared by suite.data.lm_eval_data")
    p.add_argument("--tokenizer", required=True, nargs="+", metavar="LABEL=DIR", type=_labelled_folder,
                   help="tokenizer folder(s), each with the label its rows carry")
    p.add_argument("--tasks", default="commonsense,mmlu,recall", help="comma list: task names, commonsense, recall")
    p.add_argument("--num-fewshot", default="0,5", type=functools.partial(
        number_list, name="--num-fewshot", minimum=0, error=argparse.ArgumentTypeError))
    p.add_argument("--limit", type=positive_float, default=None, help="documents per task (as the harness's --limit)")
    p.add_argument("--window", type=positive_int, default=PAPER_WINDOW, help="the study's window w (tokens)")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--out", required=True, type=out_file)
    a = p.parse_args(argv)
    from suite.data.lm_eval_data import source
    from suite.eval.harness import task_names

    tokenizers = dict(a.tokenizer)
    try:
        source(a.benchmark_data)
        names = task_names([t for t in a.tasks.split(",") if t])
    except (FileNotFoundError, ValueError) as err:
        p.error(str(err))
    if "val_ppl" in names:
        p.error("--tasks: val_ppl has no prompts; give benchmark tasks")
    limit = None if a.limit is None else (int(a.limit) if a.limit >= 1 else a.limit)
    frame = prompt_lengths(a.benchmark_data, tokenizers, names, a.num_fewshot, limit, a.window, a.profile)
    write_csv(frame, a.out)
    print(frame[["tokenizer", "task", "num_fewshot", "n_docs", "median_tokens", "p90_tokens",
                 f"share_above_{PAPER_WINDOW}"]].to_string(index=False))


if __name__ == "__main__":
    main()
