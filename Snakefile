# The Orthros study DAG. `snakemake --cores all` runs the default profile (CPU, offline, stdlib corpus);
# `snakemake --cores all --config profile=ci|gpu|slurm` runs another (profiles/<name>.yaml, schema-validated), and
# `--config profile=path/to/my.yaml` a study config of your own (its `profile:` field names its results).
# Every rule is a thin call into an importable module that also runs by hand (python -m ...).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir)))

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
