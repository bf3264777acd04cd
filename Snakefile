# The Orthros study DAG. `snakemake --cores all` runs the default profile (CPU, offline, stdlib corpus);
# `snakemake --cores all --config profile=ci|gpu|slurm` runs another (profiles/<name>.yaml, schema-validated), and
# `--config profile=path/to/my.yaml` a study config of your own (its `profile:` field names its results).
# Every rule is a thin call into an importable module that also runs by hand (python -m ...). `--use-conda` runs the
# rules in workflows/envs/suite.yaml instead of the environment that runs Snakemake.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir)))

include: "workflows/common.smk"
include: "workflows/data.smk"
include: "workflows/train.smk"
include: "workflows/eval.smk"
# the experiments, one folder each (suite/experiments/README.md)
include: "suite/experiments/quality/rules.smk"
include: "suite/experiments/so_ablation/rules.smk"
include: "suite/experiments/mqar/rules.smk"
include: "suite/experiments/niah/rules.smk"
include: "suite/experiments/conversion/rules.smk"
PRETRAINED_OUT = []  # Table 2 on a real pretrained LM, where the study config names one (conversion.pretrained)
if STUDY["conversion"].get("pretrained"):

    include: "suite/experiments/conversion/pretrained.smk"
if "scratch" in STUDY:  # from scratch at one size (the opt-in target scratch)

    include: "suite/experiments/from_scratch/rules.smk"
include: "workflows/controls.smk"
include: "workflows/bench.smk"
include: "workflows/report.smk"

# Snakemake (>= 7.7) does not rebuild a file whose inputs are missing while the file itself exists and is newer than
# the inputs that do (snakemake issue #2011), so a collected CSV whose list of runs grew (a new arch, size or seed in
# the config) would read "Nothing to be done". Say so instead of staying silent. (In a fresh clone the per-job CSVs,
# which git ignores, are missing too, but the code is newer than the committed results and everything reruns.)
for _rule in workflow.rules:
    if _rule.name.startswith("collect_") and all(Path(str(o)).exists() for o in _rule.output):
        _missing = [str(i) for i in _rule.input if not Path(str(i)).exists()]
        _made = min(Path(str(o)).stat().st_mtime for o in _rule.output)
        if _missing and all(Path(str(i)).stat().st_mtime <= _made for i in _rule.input if Path(str(i)).exists()):
            print(f"WARNING: {', '.join(map(str, _rule.output))} exists but {len(_missing)} of the files it collects "
                  f"do not (e.g. {_missing[0]}); snakemake does not rebuild it for that: add --forcerun {_rule.name}",
                  file=sys.stderr)

rule all:
    input:
        rules.render.output,


onsuccess:
    # where this profile's outputs are (printed after a run that executed jobs; not after a dry run or "Nothing to
    # be done")
    _where = [("results", RES), ("paper tables", f"{RENDER_PREFIX}paper_tables"),
              ("figures", f"{RENDER_PREFIX}figures"), ("claims audit", f"{RENDER_PREFIX}paper_tables/claims_audit.md")]
    print(f"\nOrthros study, profile {PROFILE}:")
    for _label, _path in _where:
        print(f"  {_label + ':':14}{_path}" + ("" if Path(_path).exists() else "  (not written yet)"))
    print("  one page with every table and figure: snakemake --report report.html" + (
        "" if CONFIG_ARG == "default" else f" --config profile={CONFIG_ARG}"))
