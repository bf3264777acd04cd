"""Importing a repository module sets no environment variable (issue 18: one job per module); a CLI sets what it
needs in its main(), before the lazy imports that read it."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "baselines", "benchmarks", "suite", "scripts")


def _import_time_nodes(body):
    """The statements a module runs when imported: everything but function bodies (class bodies do run)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time_nodes(getattr(node, field, []) or [])


def _sets_environment(node) -> bool:
    """``os.environ[...] = ...``, ``os.environ.setdefault/update/pop(...)`` or ``os.putenv(...)`` in ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) and ast.unparse(sub.value) == "os.environ":
            return True
        if isinstance(sub, ast.Call) and ast.unparse(sub.func) in (
                "os.environ.setdefault", "os.environ.update", "os.environ.pop", "os.putenv"):
            return True
    return False


def test_no_module_sets_environment_variables_at_import():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in _import_time_nodes(tree.body):
                compound = (ast.If, ast.Try, ast.For, ast.While, ast.With, ast.ClassDef)
                if not isinstance(node, compound) and _sets_environment(node):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"environment variables set at import time: {found}"


def test_importing_the_cpu_benchmarks_leaves_the_hub_settings_alone():
    """prefill_cpu and fla_vs_naive set HF_HUB_OFFLINE / HF_DATASETS_OFFLINE in main(), not on import."""
    probe = ("import os\n"
             "import benchmarks.fla_vs_naive, benchmarks.prefill_cpu\n"
             "assert 'HF_HUB_OFFLINE' not in os.environ and 'HF_DATASETS_OFFLINE' not in os.environ\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
