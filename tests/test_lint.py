"""The tree passes the ruff configuration of pyproject.toml (the same check as the pre-commit hook)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    venv_ruff = Path(sys.executable).with_name("ruff")  # the pinned one of the test extra, before any on PATH
    ruff = str(venv_ruff) if venv_ruff.exists() else shutil.which("ruff") or "ruff"
    run = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
