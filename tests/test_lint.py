"""The tree passes the ruff configuration of pyproject.toml (the same check as the pre-commit hook), the workflow
passes `snakemake --lint` with no finding in every profile, and the rules' conda environment lists the suite's
dependencies."""
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    venv_ruff = Path(sys.executable).with_name("ruff")  # the pinned one of the test extra, before any on PATH
    ruff = str(venv_ruff) if venv_ruff.exists() else shutil.which("ruff") or "ruff"
    run = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


# every profile: gpu has every rule (the system benchmarks, seq_parallel), slurm its executor profile's settings
PROFILES = {"default": ["--config", "profile=default"], "ci": ["--config", "profile=ci"],
            "gpu": ["--config", "profile=gpu"], "slurm": ["--profile", "profiles/snakemake/slurm"]}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_snakemake_lint_finds_nothing(profile):
    run = subprocess.run([sys.executable, "-m", "snakemake", "--lint", *PROFILES[profile]], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    found = re.findall(r"^    \* (.+?):?$", out, flags=re.M)
    assert run.returncode == 0 and not found, "\n".join(found) or out[-4000:]


def test_conda_environment_lists_the_suite_dependencies():
    """workflows/envs/suite.yaml (every rule's `conda:`, used with --use-conda) pins what pyproject.toml does."""
    env = yaml.safe_load((ROOT / "workflows" / "envs" / "suite.yaml").read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert pip == project["dependencies"]
    assert f"python {project['requires-python']}" in env["dependencies"]
