"""The documents of one English text source: a package's members (or local files) chosen by path, as prose.

A source (one entry of ``conversion.pretrained.corpus``) is ``{package: NAME==VERSION, kind: deb, sha256: HEX,
files: [PREFIX, ...]}`` (the archive members under those prefixes) or ``{files: [GLOB, ...]}`` (local files), with:

- ``format``: ``html``, ``pod`` or ``text`` (:mod:`suite.data.markup`; default ``text``, the file as it is);
- ``include`` / ``exclude``: ``fnmatch`` patterns on the member path (``*`` also matches ``/``): a member is read when
  it matches an ``include`` pattern (all do when there is none) and no ``exclude`` pattern;
- ``language``: ``{dir: PATH, keep: [NAME, ...]}`` for a package organised by language: a member in a sub-folder of
  ``dir`` other than those ``keep`` names is dropped as another language (counted);
- ``licence``: for a package whose copyright file is not machine-readable (DEP-5), the licence to record.

:func:`read_source` yields each chosen member as a :class:`Doc` (its name ``PACKAGE:PATH``, or a local file's path
relative to its globs' root folder: :func:`document_names`) with its prose, and counts the members dropped by
``language``; :func:`licence_of` reads a package's licence;
:func:`read_sources` reads a list of sources, checks each document by its source's ``check`` (English prose, or code
kept as it is) and keeps a text once across them (the English, from-scratch and gpu main-study corpora).
"""
from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from suite.data import code_text, markup, packages, prose


@dataclass
class Doc:
    name: str
    text: str


@dataclass
class SourceLog:
    """Where one source's documents came from, and how many of its members each rule dropped."""

    label: str
    package: str = ""
    version: str = ""
    sha256: str = ""
    licence: str = ""
    members: int = 0  # members chosen by prefix, include and exclude
    # language: in another language's folder; stopwords: too few English stopwords (another language, or not prose)
    dropped: dict = field(default_factory=lambda: {"language": 0, "stopwords": 0, "short": 0, "dup": 0})


def matching_files(patterns: Iterable[str], max_files: int | None = None) -> list[str]:
    """The local files glob ``patterns`` name (``~`` expanded, ``**`` allowed): sorted, the first ``max_files``. What
    a local source and a ``files`` corpus (:func:`suite.data.corpus.file_documents`) read, and the inputs of the DAG
    rules that read them (:mod:`suite.workflow_helpers`)."""
    return sorted({p for pat in patterns for p in glob.glob(os.path.expanduser(pat), recursive=True)
                   if os.path.isfile(p)})[:max_files]


def _glob_root(pattern: str) -> str:
    """The folder a glob ``pattern`` starts from: its leading parts with no wildcard (``*``, ``?``, ``[``), absolute;
    for a pattern with no wildcard (one file), that file's folder."""
    parts = Path(os.path.expanduser(pattern)).parts
    wild = next((i for i, part in enumerate(parts) if re.search(r"[*?[]", part)), None)
    root = Path(*parts).parent if wild is None else Path(*parts[:wild]) if wild else Path(".")
    return os.path.abspath(root)


def document_names(patterns: Iterable[str], paths: Iterable[str]) -> dict[str, str]:
    """Each local file of ``paths`` (:func:`matching_files` of ``patterns``) -> its document name: its path relative
    to the patterns' common root folder (:func:`_glob_root`), ``/``-separated. A document's split follows its name
    (:func:`suite.data.corpus.split_of`), so the name must not depend on where the folder lies or how it is spelt
    (``./x``, ``x``, ``/abs/x``): the same files give the same split anywhere."""
    patterns = list(patterns)
    root = os.path.commonpath([_glob_root(p) for p in patterns]) if patterns else os.path.abspath(".")
    return {p: Path(os.path.relpath(os.path.abspath(p), root)).as_posix() for p in paths}


def label_of(spec: dict) -> str:
    """A source's name in the records: its package's name, else ``files``."""
    return packages.parse_pin(spec["package"])[0] if "package" in spec else "files"


def chosen(name: str, spec: dict) -> bool:
    """Whether member ``name`` passes the source's ``include`` and ``exclude`` patterns."""
    include, exclude = spec.get("include") or ["*"], spec.get("exclude") or []
    return (any(fnmatch.fnmatchcase(name, p) for p in include)
            and not any(fnmatch.fnmatchcase(name, p) for p in exclude))


def other_language(name: str, spec: dict) -> bool:
    """Whether member ``name`` lies in a language folder of ``spec["language"]["dir"]`` that is not kept."""
    lang = spec.get("language")
    if not lang:
        return False
    root = lang["dir"].rstrip("/") + "/"
    parts = name[len(root):].split("/") if name.startswith(root) else []
    return len(parts) > 1 and parts[0] not in lang.get("keep", [])


def licence_of(copyright_text: str) -> str | None:
    """The licence of a Debian copyright file in the machine-readable format (DEP-5): the ``License`` of the stanza
    whose ``Files`` lists ``*``, else of the first stanza with ``Files``; None for a file in another format."""
    if not copyright_text.startswith("Format:"):
        return None
    first = None
    for stanza in re.split(r"\n\s*\n", copyright_text):
        files = re.search(r"^Files:((?:.*\n?)(?:[ \t].*\n?)*)", stanza, re.M)
        found = re.search(r"^License:[ \t]*(.+)", stanza, re.M)
        if files and found:
            if "*" in files.group(1).split():
                return found.group(1).strip()
            first = first or found.group(1).strip()
    return first


def read_source(spec: dict, cache: str | Path, log: SourceLog) -> Iterator[Doc]:
    """The documents of one source, in member order, as prose; fills ``log`` (package, version, sha256, licence,
    members, language drops). Raises PackageError (fetch, sha256, a prefix with no member) or ValueError (no local
    file matches; an unknown format)."""
    fmt = spec.get("format", "text")
    if "package" in spec:
        name, version = packages.parse_pin(spec["package"])
        archive = packages.fetch(spec, cache)
        files = packages.read_files(archive, list(spec["files"]))
        empty = [p for p in spec["files"] if not any(n.startswith(p) for n in files)]
        if empty:
            raise packages.PackageError(f"{archive.name} holds no file under {empty}")
        copyright_file = f"usr/share/doc/{name}/copyright"
        notice = packages.read_files(archive, [copyright_file]).get(copyright_file, b"").decode("utf-8", "replace")
        log.package, log.version, log.sha256 = spec["package"], version, spec["sha256"]
        log.licence = licence_of(notice) or spec.get("licence") or "not stated (copyright file not DEP-5)"
        members = ((m, files[m], f"{name}:{m}") for m in sorted(files))
    else:
        paths = matching_files(spec["files"])
        if not paths:
            raise ValueError(f"no file matches {list(spec['files'])}")
        log.licence = spec.get("licence", "not stated (local files)")
        names = document_names(spec["files"], paths)
        members = ((p, Path(p).read_bytes(), names[p]) for p in paths)
    for member, data, doc_name in members:
        if not chosen(member, spec):
            continue
        log.members += 1
        if other_language(member, spec):
            log.dropped["language"] += 1
            continue
        yield Doc(doc_name, markup.to_text(data, fmt))


CHECKS = {"prose": prose.verdict, "code": code_text.verdict}  # a source's ``check``: its document check


def read_sources(sources: list[dict], cache: str | Path) -> tuple[list[tuple[str, str]], dict[str, str], list]:
    """The kept documents of ``sources`` as (name, text), in order; each document's source label by name; and each
    source's :class:`~suite.data.doc_sources.SourceLog` (drops counted: language by path or stopwords, short, dup).
    """
    docs, label, logs, seen = [], {}, [], set()
    for spec in sources:
        log = SourceLog(label_of(spec))
        check = spec.get("check", "prose")
        if check == "code":
            log.dropped.update((why, 0) for why in code_text.WHY if why not in log.dropped)
        logs.append(log)
        for doc in read_source(spec, cache, log):
            why = CHECKS[check](doc.text)
            key = prose.dedup_key(doc.text)
            if why is None and key in seen:
                why = "dup"
            if why:
                log.dropped[why] += 1
                continue
            seen.add(key)
            docs.append((doc.name, doc.text))
            label[doc.name] = log.label
    return docs, label, logs
