"""Whether measured rows predate the last change to the code they ran (git), for the claims audit.

A row names the commit that produced it (``commit``). The code it ran: ``models/`` for every architecture, the
baseline's own files for a baseline (its registry module under ``baselines/`` and the ``baselines`` modules that one
imports), and for a trained model ``suite/train/optim.py`` too. A row is **stale** when the last commit that changed
that code (``git log -1 -- <paths>`` at the checkout's HEAD) is not an ancestor of the row's commit
(``git merge-base --is-ancestor``); **commit unknown** when git does not know the row's commit; and unchecked when
there is no git repository. Each git answer is asked once per (paths) or (commit, change) pair.
"""
from __future__ import annotations

import ast
import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINING_CODE = "suite/train/optim.py"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)


@functools.cache
def has_git() -> bool:
    return _git("rev-parse", "--git-dir").returncode == 0


@functools.cache
def baseline_files(arch: str) -> tuple[str, ...]:
    """The ``baselines/`` files an architecture's registered model runs: its module and the package modules that
    module imports (none for an architecture defined in ``models/``)."""
    from models.registry import ARCHS

    if arch not in ARCHS:
        return ()
    module = ARCHS[arch].model.split(":")[0]
    if not module.startswith("baselines."):
        return ()
    files, todo = [], [module.split(".", 1)[1]]
    while todo:
        name = todo.pop()
        path = f"baselines/{name}.py"
        if path in files or not (ROOT / path).exists():
            continue
        files.append(path)
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [alias.name for alias in node.names]
    return tuple(sorted(files))


def code_paths(archs: list[str], trained: bool) -> tuple[str, ...]:
    """The code the rows of ``archs`` ran (module docstring)."""
    paths = {"models/"} | {f for arch in archs for f in baseline_files(str(arch))}
    return tuple(sorted(paths | ({TRAINING_CODE} if trained else set())))


@functools.cache
def last_change(paths: tuple[str, ...]) -> str | None:
    out = _git("log", "-1", "--format=%H", "--", *paths)
    return out.stdout.strip() or None


@functools.cache
def known(commit: str) -> str | None:
    """The full hash of ``commit``, or None when git does not know it."""
    out = _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return out.stdout.strip() if out.returncode == 0 else None


@functools.cache
def _is_ancestor(older: str, newer: str) -> bool:
    return _git("merge-base", "--is-ancestor", older, newer).returncode == 0


def staleness(commits: list[str], archs: list[str], trained: bool) -> str:
    """``current``, ``stale: ...`` (naming the row commits and the later change), ``commit unknown: ...`` or
    ``not checked (no git repository)`` for rows of ``commits`` that ran the code of ``archs``."""
    commits = sorted({str(c) for c in commits if str(c) not in ("", "nan", "None")})
    if not commits:
        return "commit unknown: the rows name no commit"
    if not has_git():
        return "not checked (no git repository)"
    unknown = [c for c in commits if known(c) is None]
    if unknown:
        return f"commit unknown: {', '.join(unknown)} not in this repository's history"
    paths = code_paths(archs, trained)
    change = last_change(paths)
    if change is None:
        return "current"
    old = [c for c in commits if not _is_ancestor(change, known(c))]
    if not old:
        return "current"
    later = [f"{p} ({c[:7]})" for p in paths if (c := last_change((p,))) and any(not _is_ancestor(c, known(o))
                                                                                   for o in old)]
    return f"stale: rows at {', '.join(old)} predate the last change to {', '.join(later)}"
