"""The transformers range pyproject.toml declares is the range CI tests: the whole suite at the version the venv
installs, and the tests of the code that calls transformers' API at the declared lower bound (.ci/run)."""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import transformers
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CI = (ROOT / ".ci" / "run").read_text()


def _declared() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [req] = [Requirement(d) for d in deps if Requirement(d).name == "transformers"]
    return req


def _lower_bound() -> str:
    [lower] = [s.version for s in _declared().specifier if s.operator == ">="]
    return lower


def test_installed_transformers_lies_in_the_declared_range():
    assert _declared().specifier.contains(transformers.__version__), transformers.__version__


def test_lower_bound_has_the_model_output_fields_the_models_return():
    # models/backbone.py returns CausalLMOutputWithPast(cache=...): transformers < 5.24 named that field
    # past_key_values, and every forward raised TypeError there
    assert Version(_lower_bound()) >= Version("5.24.0")


def test_ci_runs_the_api_tests_at_the_declared_lower_bound():
    script = re.search(r"^lower=\$\((python -c '.*?')\)$", CI, re.S | re.M).group(1)
    run = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == _lower_bound()
    assert 'pip install -q "transformers==$lower"' in CI
    tests = re.search(r'^COMPAT_TESTS="(.*?)"$', CI, re.S | re.M).group(1).split()
    assert all((ROOT / t).is_file() for t in tests), tests
    # model forward and generate, the decode engine, conversion
    assert {"tests/test_orthros.py", "tests/test_engine.py", "tests/test_convert.py"} <= set(tests)
    assert CI.rstrip().endswith("python -m pytest -q $COMPAT_TESTS")


def test_readme_states_the_tested_range():
    readme = (ROOT / "README.md").read_text()
    assert f"`transformers>={_lower_bound()},<6`" in readme and f"tests at {_lower_bound()}." in readme
