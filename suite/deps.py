"""The repository files a module runs: its static import closure within this repository.

The DAG lists ``sources("suite.experiments.niah.run")`` as a rule's code inputs, so an edit reruns exactly the jobs
whose commands run the edited file, and training records a digest of the same files in its run_config.json, so a run
that Snakemake reruns after a code edit starts afresh instead of resuming a checkpoint of other code.

``module_files`` follows every ``import`` and ``from ... import`` of a repository module at any depth of a file
(the suite imports heavy modules inside functions), string literals naming a repository module, or an attribute of
one as ``"module:attribute"``, in a file that calls ``importlib.import_module`` (``models/registry.py``'s table of
architectures), and the ``__init__.py`` of every package on the way. It does not enter ``NOT_FOLLOWED``:
``suite.config`` only loads and validates the study config (the values a job reads are its ``params``, see
workflows/common.smk, so a change in how a value is read shows there), and this module is the DAG's own machinery.

CLI: ``python -m suite.deps suite.experiments.niah.run`` prints the files, one a line.
"""
from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("suite", "models", "baselines", "benchmarks")
NOT_FOLLOWED = ("suite.config", "suite.deps")
_ATTRIBUTE_OF = re.compile(r"([\w.]+):\w+")  # "module:attribute", as models/registry.py names its classes


def module_path(name: str, root: Path = ROOT) -> Path | None:
    """The file of repository module ``name`` (``a/b.py`` or ``a/b/__init__.py``), or None."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=None)
def _imports(name: str, root: Path) -> tuple[str, ...]:
    """Repository modules that module ``name`` imports anywhere in its file (not yet transitively)."""
    path = module_path(name, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found, dynamic, literals = [], False, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found.append(base)
            found += [f"{base}.{alias.name}" for alias in node.names]  # `from pkg import module`
        elif isinstance(node, ast.Call):
            dynamic |= getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = _ATTRIBUTE_OF.fullmatch(node.value)
            literals.append(named.group(1) if named else node.value)
    if dynamic:
        found += literals
    return tuple(sorted({m for m in found if module_path(m, root) is not None}))


def module_files(*names: str, root: Path = ROOT) -> list[str]:
    """Repository files (paths relative to the repository root, sorted) that running the modules ``names`` imports,
    the modules themselves included. Raises ValueError naming a module that is not in the repository."""
    root = Path(root)
    todo, seen = [], set()
    for name in names:
        if module_path(name, root) is None:
            raise ValueError(f"{name!r} is not a module of {root} (packages: {', '.join(PACKAGES)})")
        todo.append(name)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way are imported first
            mod = ".".join(parts[:i])
            if mod not in seen and mod not in NOT_FOLLOWED and module_path(mod, root) is not None:
                seen.add(mod)
                todo += _imports(mod, root)
    return sorted(str(module_path(m, root).relative_to(root)) for m in seen)


def source_digest(*names: str, root: Path = ROOT) -> str:
    """sha256 over the paths and contents of ``module_files(*names)``: which code a run ran."""
    digest = hashlib.sha256()
    for rel in module_files(*names, root=root):
        digest.update(rel.encode() + b"\0" + (Path(root) / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> None:
    from suite.cli import usage_errors

    parser = argparse.ArgumentParser(prog="python -m suite.deps", description="Print the repository files that "
                                     "running the modules imports, one a line.")
    parser.add_argument("modules", nargs="+", metavar="MODULE", help="e.g. suite.experiments.niah.run")
    args = parser.parse_args(argv)
    with usage_errors(parser):  # not a module of the repository
        print("\n".join(module_files(*args.modules)))


if __name__ == "__main__":
    main()
