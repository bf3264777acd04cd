#!/usr/bin/env bash
# Create .venv (if needed) and install the suite with its dependencies, CPU build of torch first.
# A bare `torch` requirement on a machine without torch pulls a multi-GB CUDA build; torch==2.13.0 is the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
python -m pip install -q -e ".[test]"
python - <<'PY'
import torch, transformers, fla, lm_eval, snakemake
print(f"setup ok: torch {torch.__version__}, transformers {transformers.__version__}, fla {fla.__version__}, "
      f"snakemake {snakemake.__version__}")
PY
