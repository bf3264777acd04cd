"""suite.deps: the repository files a module runs, lazy imports included (the DAG's code inputs)."""
import pytest

from suite.deps import module_files, source_digest


def test_lazy_and_dynamic_imports_are_followed():
    niah = set(module_files("suite.experiments.niah.run"))
    # imported inside functions: the checkpoint loader, window_overrides, the registry, which imports baselines
    assert {"suite/experiments/niah/run.py", "suite/data/needles.py", "suite/data/retrieval.py",
            "suite/train/checkpoint.py", "suite/train/model.py", "suite/data/tokenizer.py", "suite/provenance.py",
            "models/registry.py", "models/orthros.py", "baselines/__init__.py", "baselines/linear.py",
            "suite/__init__.py", "suite/experiments/__init__.py", "suite/experiments/niah/__init__.py"} <= niah
    # the modules the CLIs' jobs are split into, and the optimizer module every training loop shares
    assert {"suite/experiments/niah/train.py", "suite/experiments/niah/eval.py", "suite/train/optim.py"} <= niah
    mqar = set(module_files("suite.experiments.mqar.run"))
    assert {f"suite/experiments/mqar/{job}.py" for job in ("data", "eval", "train", "grid")} <= mqar
    assert "suite/train/optim.py" in mqar and "suite/train/optim.py" in module_files("suite.train.run")
    # the registry's table names the baselines as "module:attribute"; the package's relative imports
    harness = set(module_files("suite.eval.harness"))
    assert {"suite/train/checkpoint.py", "models/__init__.py", "models/backbone.py",
            "baselines/transformer.py"} <= harness


def test_files_a_module_does_not_run_are_left_out():
    # the tokenizer reads a built corpus's splits, not the code that builds one (its sources, their checks)
    assert module_files("suite.data.tokenizer") == ["suite/__init__.py", "suite/cli.py", "suite/data/__init__.py",
                                                     "suite/data/splits.py", "suite/data/tokenizer.py"]
    train = module_files("suite.train.run")
    assert "suite/data/needles.py" not in train and "models/convert.py" not in train
    assert "suite/data/corpus.py" not in train and "suite/data/doc_sources.py" not in train
    # the study config's loader is not code a job's results depend on (its values are the rule's params)
    assert "suite/config.py" not in train and "suite/deps.py" not in train


def test_unknown_module_is_named():
    with pytest.raises(ValueError, match="'suite.nope' is not a module"):
        module_files("suite.nope")


def test_source_digest_follows_file_contents(tmp_path):
    pkg = tmp_path / "suite"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from suite import b\n")
    (pkg / "b.py").write_text("X = 1\n")
    assert module_files("suite.a", root=tmp_path) == ["suite/__init__.py", "suite/a.py", "suite/b.py"]
    before = source_digest("suite.a", root=tmp_path)
    (pkg / "b.py").write_text("X = 2\n")
    assert source_digest("suite.a", root=tmp_path) != before


def test_module_attribute_names_are_followed_where_import_module_is_called(tmp_path):
    pkg = tmp_path / "models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "table.py").write_text('import importlib\nT = {"a": "models.a:A"}\nimportlib.import_module("x")\n')
    (pkg / "plain.py").write_text('T = {"a": "models.a:A"}\n')  # no import_module: a string, not an import
    (pkg / "a.py").write_text("A = 1\n")
    assert module_files("models.table", root=tmp_path) == ["models/__init__.py", "models/a.py", "models/table.py"]
    assert module_files("models.plain", root=tmp_path) == ["models/__init__.py", "models/plain.py"]
