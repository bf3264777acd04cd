"""lm-eval integration: commonsense, recall-intensive and held-out perplexity rows of ``results/{profile}/quality.csv``.

Paper sections: commonsense table (acc / acc_norm), Table 3 (recall-intensive: DROP, NQ, SWDE, TriviaQA, FDA,
SQuAD) and held-out perplexity. Every task goes through lm-eval 0.4.13's Python API (``simple_evaluate``) and
the ``orthros-hf`` model, a thin subclass of lm-eval's ``HFLM`` that first imports ``models`` and ``baselines``
(``models.registry.register_auto_classes``) so their configs are registered with ``AutoConfig`` /
``AutoModelForCausalLM``.

Offline rule: the Hub is never contacted (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``, set by
:func:`force_offline` before a model or task loads, not at import). A task whose dataset is not in the local Hugging
Face cache gets one row per metric with status ``"not run: dataset unavailable offline"``; the check is the task
load itself, which fails in milliseconds when offline.

CLI::

    python -m suite.eval.harness --checkpoint DIR [--tokenizer DIR] --tasks commonsense,recall,val_ppl \\
        --ppl-data data/val.txt --out results/smoke/lm_eval/orthros/tiny/seed0/quality.csv --profile smoke
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
    out_file,
    positive_float,
    positive_int,
    usage_errors,
)
from suite.data.corpus import EOS_TOKEN
from suite.provenance import provenance, write_csv
from suite.train.checkpoint import check_folder, checkpoint_folder

log = logging.getLogger(__name__)

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
NOT_OFFLINE = "not run: dataset unavailable offline"
QUALITY_COLUMNS = ["arch", "size", "n_params", "tokens", "seq_len", "task", "metric", "value", "unit", "status",
                   "stderr", "n_samples", "limit", "lm_eval_task", "variant", "task_version", "lm_eval_version"]
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
    "arc_challenge": TaskSpec("arc_challenge", ("acc_norm",), f"{_LM} arc_challenge, 0-shot"),
    "arc_easy": TaskSpec("arc_easy", ("acc",), f"{_LM} arc_easy, 0-shot"),
    "hellaswag": TaskSpec("hellaswag", ("acc_norm",), f"{_LM} hellaswag, 0-shot"),
    "openbookqa": TaskSpec("openbookqa", ("acc", "acc_norm"), f"{_LM} openbookqa, 0-shot"),
    "piqa": TaskSpec("piqa", ("acc",), f"{_LM} piqa, 0-shot"),
    "social_iqa": TaskSpec("social_iqa", ("acc",), f"{_LM} social_iqa, 0-shot"),
    "winogrande": TaskSpec("winogrande", ("acc",), f"{_LM} winogrande, 0-shot"),
    "mmlu": TaskSpec("mmlu", ("acc",), f"{_LM} mmlu group (57 subjects), 0-shot"),
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
COMMONSENSE = ["arc_challenge", "arc_easy", "hellaswag", "openbookqa", "piqa", "social_iqa", "winogrande", "mmlu"]
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
    token's text, ``suite.data.corpus.DOC_SEPARATOR``), each document into ``sample_by`` units, every unit
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
    corpus's ``val.txt``: documents joined by ``suite.data.corpus.DOC_SEPARATOR``), one scored document per
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
    """Build the lm-eval task (downloads nothing offline); ``(task_dict, None)`` or ``(None, status)``."""
    try:
        return task_manager.load([spec]), None
    except Exception as err:  # datasets raises many types when offline; classify by message
        text = f"{type(err).__name__}: {err}"
        offline = any(s in text for s in ("Offline", "offline", "Couldn't reach", "ConnectionError",
                                          "DatasetNotFound", "doesn't exist on the Hub", "not found"))
        if offline:
            return None, NOT_OFFLINE
        return None, f"not run: task load failed ({text[:160]})"


def _top_level(loaded: dict) -> list:
    """The built tasks/groups that are not members of another group (what was asked for)."""
    members = {child for children in loaded.get("group_map", {}).values() for child in children}
    objects = {**loaded["tasks"], **loaded["groups"]}
    return [obj for name, obj in objects.items() if name not in members]


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
            raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS) + ['val_ppl', *extra_tasks]}")
    return names


def run_tasks(checkpoint: str | Path, tokenizer: str | Path | None, tasks: list[str], out_csv: str | Path,
              limit: int | float | None = None, *, ppl_data: str | Path | None = None, ppl_sample_by: str = "paragraph",
              extra_tasks: dict[str, tuple[dict, tuple[str, ...]]] | None = None, profile: str = "smoke",
              arch: str = "", size: str = "", tokens: int | None = None, seq_len: int | None = None,
              batch_size: int = 1, device: str = "cpu", dtype: str = "float32", backend: str = "hf", seed: int = 0,
              max_length: int | None = None, boundary_token: str = "eos", lm=None):
    """Evaluate ``checkpoint`` on ``tasks`` with lm-eval and write quality rows to ``out_csv`` (atomic).

    ``tasks``: names from ``TASKS`` (``"commonsense"`` / ``"recall"`` expand to those lists), ``"val_ppl"`` (needs
    ``ppl_data``), or keys of ``extra_tasks`` (``name -> (lm-eval task config dict, metrics)``, used for local
    task fixtures). One row per (task, metric): value, stderr, unit, status ``"ok"`` or ``"not run: <why>"``, the
    lm-eval task name, variant, task version and lm-eval version, plus provenance (wall_s = seconds for that task).
    ``limit``: lm-eval's per-task document limit (int count or float fraction); ``None`` = the full split.

    Held-out perplexity is scored the way the model was trained: ``max_length`` (the training length) bounds the
    rolling windows, so no token sits past a position the model saw in training, and ``boundary_token`` ("eos" or
    "bos") is the token each document is conditioned on first (the suite trains with EOS between documents;
    lm-eval's default is BOS). Both are recorded in the ``window_tokens`` and ``boundary_token`` columns.
    Returns the DataFrame written. Raises ValueError for an unknown task name, a missing ``ppl_data`` or a
    boundary token the tokenizer lacks.
    """
    import pandas as pd

    force_offline()
    extra_tasks = extra_tasks or {}
    names = task_names(tasks, extra_tasks)
    if "val_ppl" in names and ppl_data is None:
        raise ValueError("task 'val_ppl' needs ppl_data=<held-out file>")

    tokenizer = str(tokenizer or checkpoint)
    if lm is None:
        model_args = {"pretrained": str(checkpoint), "tokenizer": tokenizer, "dtype": dtype, "device": device,
                      "batch_size": batch_size}
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

    rows = []
    for name in names:
        if name == "val_ppl":
            spec_obj = perplexity_task_config(ppl_data, "val_ppl", ppl_sample_by)
            data_path = Path(spec_obj["metadata"]["data_path"])
            if data_path.is_absolute() and data_path.is_relative_to(Path.cwd()):
                data_path = data_path.relative_to(Path.cwd())  # so results do not depend on the clone's location
            spec = TaskSpec("val_ppl", PPL_METRICS, f"local loglikelihood_rolling over {data_path}"
                                                   f" (sample_by={ppl_sample_by}; windows of {lm.max_length} "
                                                   f"tokens; documents start after {boundary_token.upper()})")
        elif name in extra_tasks:
            spec_obj, metrics = extra_tasks[name]
            spec = TaskSpec(spec_obj["task"], tuple(metrics), "local task config")
        else:
            spec = TASKS[name]
            spec_obj = spec.lm_eval_task
        start = time.perf_counter()
        loaded, status = _load_task(task_manager, spec_obj)
        results, versions, n_samples = {}, {}, {}
        if loaded is not None:
            try:
                out = lm_eval.simple_evaluate(model=lm, tasks=_top_level(loaded), limit=limit,
                                              task_manager=task_manager, random_seed=seed,
                                              numpy_random_seed=seed, torch_random_seed=seed,
                                              fewshot_random_seed=seed, bootstrap_iters=1000, log_samples=False)
                results, versions = out["results"], out.get("versions", {})
                n_samples = out.get("n-samples", {})
                status = "ok"
            except Exception as err:  # keep the other tasks' rows; record why this one failed
                log.exception("task %s failed", name)
                status = f"not run: evaluation failed ({type(err).__name__}: {str(err)[:160]})"
        wall = time.perf_counter() - start
        block = results.get(spec.lm_eval_task, {})
        for metric in spec.metrics:
            value = _value(block, f"{metric},none")
            row_status = status if status != "ok" or value is not None else f"not run: metric {metric} missing"
            rows.append({"arch": arch, "size": size, "n_params": n_params, "tokens": tokens, "seq_len": seq_len,
                         "task": name, "metric": metric, "value": value if row_status == "ok" else None,
                         "unit": UNITS.get(metric, ""), "status": row_status,
                         "stderr": _value(block, f"{metric}_stderr,none"),
                         "n_samples": (n_samples.get(spec.lm_eval_task) or {}).get("effective"), "limit": limit,
                         "lm_eval_task": spec.lm_eval_task, "variant": spec.variant,
                         "task_version": versions.get(spec.lm_eval_task), "lm_eval_version": lm_eval.__version__,
                         "window_tokens": lm.max_length, "boundary_token": f"{boundary_token}:{boundary_id}",
                         **provenance(profile, seed, dtype, backend, device, wall)})
    frame = pd.DataFrame(rows, columns=QUALITY_COLUMNS + [c for c in rows[0] if c not in QUALITY_COLUMNS]
                         if rows else QUALITY_COLUMNS)
    write_csv(frame, out_csv)
    return frame


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, nargs="+", help="checkpoint dir(s); one --out (and --seed) each")
    p.add_argument("--tokenizer", type=in_folder, default=None, help="tokenizer dir (default: the checkpoint)")
    p.add_argument("--tasks", default="commonsense,recall", help="comma list: task names, commonsense, recall, val_ppl")
    p.add_argument("--out", required=True, nargs="+", type=out_file,
                   help="output CSV (quality rows), one per checkpoint")
    p.add_argument("--limit", type=positive_float, default=None, help="docs per task (>=1: count, <1: fraction)")
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
    limit = None if a.limit is None else (int(a.limit) if a.limit >= 1 else a.limit)
    for checkpoint, out, seed in zip(a.checkpoint, a.out, seeds):
        frame = run_tasks(checkpoint, a.tokenizer, [t for t in a.tasks.split(",") if t], out, limit,
                          ppl_data=a.ppl_data, ppl_sample_by=a.ppl_sample_by, profile=a.profile, arch=a.arch,
                          size=a.size, tokens=a.tokens, seq_len=a.seq_len, batch_size=a.batch_size, device=a.device,
                          dtype=a.dtype, seed=seed, max_length=a.max_length, boundary_token=a.boundary_token)
        print(out)
        print(frame[["task", "metric", "value", "status"]].to_string(index=False))


if __name__ == "__main__":
    main()
