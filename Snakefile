# The Orthros study DAG. `snakemake --cores all` runs the default profile (CPU, offline, stdlib corpus);
# `snakemake --cores all --config profile=ci|gpu|slurm` runs another (profiles/<name>.yaml, schema-validated), and
# `--config profile=path/to/my.yaml` a study config of your own (its `profile:` field names its results).
# Every rule is a thin call into an importable module that also runs by hand (python -m ...).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir)))
from suite.config import load_config, schema

CONFIG_ARG = config.get("profile", "default")
STUDY = load_config(CONFIG_ARG)          # stops with a message naming any bad key or value
PROFILE = STUDY["profile"]               # the study's own name, also when it was given as a YAML path
SCHEMA = schema()
WORK = STUDY["work_dir"]
DATA = STUDY["data"]["data_dir"]
RES = STUDY.get("results_dir", f"results/{PROFILE}")
RENDER = STUDY.get("render_dir", ".")
SEEDS = STUDY["seeds"]
SEED = SEEDS[0]                          # single-run experiments (MQAR, NIAH, benchmarks)
THREADS = STUDY.get("threads", 1)
PY = f"{sys.executable} -m"
# One torch thread per job and as many jobs as cores: tiny models run far faster that way than with
# two threads fighting over two cores.
shell.prefix(f"set -euo pipefail; export OMP_NUM_THREADS={THREADS} MKL_NUM_THREADS={THREADS} "
             "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false; ")
CFG = f"--config {CONFIG_ARG}"

include: "workflows/common.smk"
include: "workflows/data.smk"
include: "workflows/train.smk"
include: "workflows/eval.smk"
include: "workflows/bench.smk"
include: "workflows/report.smk"

rule all:
    input:
        rules.render.output,
        GPU_EXTRA,
