"""The architecture registry (issue 18): one table of architectures, the study config's arch enum drawn from it,
every architecture registered with the HF Auto classes, and a package layering without import cycles (also between
the modules of suite/, each on its floor; benchmarks/ on top, imported by none of them)."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.registry import ARCHS, known_archs, make_config, packages, register_auto_classes, resolve

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "suite" / "config_schema.json").read_text(encoding="utf-8"))
# top-level packages of the repository: folders at its root with an __init__.py
TOP_PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())


def _enums(node, path="#"):
    """(JSON pointer, values) of every enum in the schema."""
    if isinstance(node, dict):
        if "enum" in node:
            yield path, node["enum"]
        for key, value in node.items():
            yield from _enums(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _enums(value, f"{path}/{i}")


def test_schema_arch_enums_equal_the_registry_study_archs():
    """Every enum of suite/config_schema.json that lists architectures lists exactly the registry's study archs, but
    the SO ablation's, which adds the registry's ``orthros_noso``.

    The registry also holds architectures no study config may list (``study=False``: the SO ablation's
    ``orthros_noso``, the GPU benchmarks' ``linear_hybrid`` and ``orthros_h``), so the enum is compared with the
    study ones; a registry entry either is in the enum or says why not (``study=False``)."""
    study = sorted(name for name, arch in ARCHS.items() if arch.study)
    arch_enums = {path: values for path, values in _enums(SCHEMA) if set(values) & set(ARCHS)}
    # one enum shared by `archs` and `niah.archs`, and the SO ablation's (`ablation_variants`)
    assert set(arch_enums) == {"#/$defs/arch", "#/$defs/ablation_variant"}, arch_enums
    for path, values in arch_enums.items():
        assert len(values) == len(set(values)), path
    assert sorted(arch_enums["#/$defs/arch"]) == study, (arch_enums, study)
    assert sorted(arch_enums["#/$defs/ablation_variant"]) == sorted(study + ["orthros_noso"]), arch_enums
    assert not ARCHS["orthros_noso"].study and ARCHS["orthros_noso"].defaults == {"scale_offset": False}
    assert SCHEMA["properties"]["ablation_variants"]["items"] == {"$ref": "#/$defs/ablation_variant"}
    for key in (("archs",), ("niah", "archs")):
        node = SCHEMA
        for part in key:
            node = node["properties"][part]
        assert node["items"] == {"$ref": "#/$defs/arch"}, key
    assert all(isinstance(arch.study, bool) for arch in ARCHS.values())


def test_every_arch_resolves_and_is_registered_with_the_auto_classes():
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    assert known_archs() == sorted(ARCHS) and packages() == ["baselines", "models"]
    assert register_auto_classes() == ["baselines", "models"]
    for name, arch in ARCHS.items():
        config_cls, model_cls = arch.config_cls, arch.model_cls
        assert model_cls.config_class is config_cls, name
        package = arch.config.split(".")[0]
        assert (config_cls, model_cls) in resolve(f"{package}:AUTO_CLASSES"), name  # registered by its own package
        assert CONFIG_MAPPING[config_cls.model_type] is config_cls, name
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(make_config(name, "1M", vocab_size=64))
        assert type(model) is model_cls, name
    known = "gdn, gla, linear_hybrid, orthros, orthros_h, orthros_noso, retnet, swa, transformer"
    with pytest.raises(ValueError, match=f"unknown architecture 'mamba7'; known: {known}$"):
        make_config("mamba7", "1M")


def test_importing_models_imports_no_package_above_it():
    """models/ imports neither baselines/ nor suite/ (the registry names the baselines; it imports them on use)."""
    probe = ("import sys, models, models.registry, models.convert\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'baselines', 'suite', 'tests'}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "[]", out.stdout


def _package_imports() -> dict[str, dict[str, list[str]]]:
    """{package: {imported package: ["file:line", ...]}} over every static import at any depth of every file
    (imports inside functions included); relative imports stay inside their package."""
    edges: dict[str, dict[str, list[str]]] = {p: {} for p in TOP_PACKAGES}
    for package in TOP_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in edges and top != package:
                        edges[package].setdefault(top, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return edges


def _first_cycle(edges: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """The first import cycle of ``edges`` ({node: {imported node: [where, ...]}}, depth first in sorted order) as
    ``[a, b, ..., a]``, or None."""
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                return trail[trail.index(target):] + [target]
            if target not in state:
                found = visit(target, trail + [target])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def _where(edges: dict[str, dict[str, list[str]]], cycle: list[str]) -> dict[str, list[str]]:
    return {f"{a} -> {b}": edges[a][b][:3] for a, b in zip(cycle, cycle[1:])}


def test_no_import_cycle_between_top_level_packages():
    edges = _package_imports()
    assert {"models", "baselines", "suite"} <= set(edges)
    cycle = _first_cycle(edges)
    assert cycle is None, f"import cycle between packages {' -> '.join(cycle)}: {_where(edges, cycle)}"


def test_models_imports_nothing_above_it():
    """No import of baselines/ or suite/ anywhere in models/; the one reference by name is the registry's table
    (documented in models/registry.py), resolved only when a model is configured or built."""
    edges = _package_imports()["models"]
    assert not edges, f"models/ imports {edges}"
    by_name = re.compile(r"(baselines|suite|tests)(\.\w+)*(\.\w+|:\w+)")  # "pkg.module" or "pkg.module:attribute"
    named, dynamic = set(), set()
    for path in (ROOT / "models").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and by_name.fullmatch(node.value):
                named.add(str(path.relative_to(ROOT)))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                    "import_module", "__import__"):
                dynamic.add(str(path.relative_to(ROOT)))
    assert named == dynamic == {"models/registry.py"}, (named, dynamic)


def test_benchmarks_stand_above_the_package():
    """benchmarks/ (the timing CLIs beside the package, as FLA's benchmarks/) imports models/, baselines/ and suite/;
    nothing of those imports it back, at any depth, nor names one of its modules for a dynamic import."""
    edges = _package_imports()
    assert {"benchmarks", "suite", "models"} <= set(edges) and "suite" in edges["benchmarks"]
    below = {package: where for package in ("models", "baselines", "suite")
             for target, where in edges[package].items() if target == "benchmarks"}
    assert not below, f"imports of benchmarks/ from below it: {below}"
    assert set(edges["benchmarks"]) <= {"models", "baselines", "suite"}, edges["benchmarks"]
    by_name = re.compile(r"benchmarks(\.\w+)+(:\w+)?")
    named = {str(path.relative_to(ROOT)) for package in ("models", "baselines", "suite")
             for path in (ROOT / package).rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and by_name.fullmatch(node.value)}
    assert not named, f"modules of benchmarks/ named in {sorted(named)}"


def _suite_module_imports() -> dict[str, dict[str, list[str]]]:
    """{module of suite/: {suite module it imports: ["file:line", ...]}} over every import at any depth of its file
    (imports inside functions included); ``from pkg import name`` counts as an import of ``pkg.name`` where that is a
    module, else of ``pkg``."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in sorted((ROOT / "suite").rglob("*.py"))}
    edges: dict[str, dict[str, list[str]]] = {m: {} for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + [base])
                base = base.strip(".")
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for name in dict.fromkeys(names):
                if name in files and name != module:
                    edges[module].setdefault(name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return edges


def test_no_import_cycle_between_suite_modules():
    """No module of suite/ imports itself back through others, lazy imports included (the study config's loader once
    imported the command line's types, which import the loader)."""
    edges = _suite_module_imports()
    assert {"suite.config", "suite.cli", "suite.data.corpus", "suite.train.run"} <= set(edges)
    cycle = _first_cycle(edges)
    assert cycle is None, f"import cycle in suite/ {' -> '.join(cycle)}: {_where(edges, cycle)}"


# suite/'s floors, bottom to top; a module imports only modules of its own floor or below (modules not named here
# are held only to the cycle test)
FLOORS = (("suite.config", "suite.provenance", "suite.base_source"),  # the study config and the columns of every row
          ("suite.cli",),  # the command lines' types, on the study config's loader
          ("suite.data",),
          ("suite.train", "suite.eval"),
          ("suite.report",))


def _floor(module: str) -> int | None:
    for i, floor in enumerate(FLOORS):
        if any(module == name or module.startswith(name + ".") for name in floor):
            return i
    return None


def test_config_stands_on_the_ground_floor():
    """suite/config.py imports nothing of the command line, the data, training, evaluation or the report."""
    config = _suite_module_imports()["suite.config"]
    assert not [m for m in config if _floor(m) != 0], config
    assert not [m for m in config if m == "suite.cli" or m.startswith("suite.data")], config


def test_no_suite_module_imports_one_above_it():
    upward = {f"{module} -> {target}": where for module, targets in _suite_module_imports().items()
              for target, where in targets.items()
              if _floor(module) is not None and _floor(target) is not None and _floor(target) > _floor(module)}
    assert not upward, upward
