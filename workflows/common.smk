# What each rule depends on besides its input files, in one place - the repository code its command runs
# (`sources`, `code`: code inputs) and the study-config values it reads (`rule_config`: its `params: cfg=`).
# Snakemake reruns a job when an input is newer than its outputs or its params changed (both default rerun
# triggers), but it does not look into imported modules or into the study config, and it records the shell
# command only as written, before `{...}` is filled in. So every rule lists both, and an edit reruns exactly the
# jobs that read the edited file or value, and what depends on them.
# Included first by the Snakefile: the study config and the globals every workflow file reads, so that no file
# depends on the include order of the others. The helper functions are in suite/workflow_helpers.py.
import sys
from functools import partial
from pathlib import Path
from shlex import quote

from snakemake.settings.types import DeploymentMethod

from suite.config import IDENTITY_LEN, ConfigError, load_config, schema, scratch_warmup, workflow_profile
from suite.deps import module_files
from suite.workflow_helpers import (Untracked, budget_schedule, code_files, copy_results, csv_list, folder, lm_tasks,
                                    path_inputs, per_seed, runs, schema_section, train_launch)
from suite.workflow_helpers import rule_config as _rule_config

try:  # a bad --config key or study config stops with its message alone (sys.exit: no Snakemake traceback lines)
    CONFIG_ARG = workflow_profile(config)
    STUDY = load_config(CONFIG_ARG)
except ConfigError as err:
    sys.exit(f"error: {err}")
PROFILE = STUDY["profile"]               # the study's own name, also when it was given as a YAML path
SCHEMA = schema()
WORK = STUDY["work_dir"]
DATA = STUDY["data"]["data_dir"]
RES = STUDY.get("results_dir", f"results/{PROFILE}")
RENDER = STUDY.get("render_dir", ".")
SEEDS = STUDY["seeds"]
SEED = SEEDS[0]                          # single-run experiments (MQAR, NIAH, benchmarks)
THREADS = STUDY.get("threads", 1)
# The commands call `python`: with --use-conda the one of the rule's environment (CONDA_ENV), else the interpreter
# that runs Snakemake (a shell function; the environment of the job, like its thread counts, is not a param).
CONDA_ENV = str(Path(workflow.basedir, "workflows", "envs", "suite.yaml"))  # for the rules of every folder
IN_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PYTHON = "" if IN_CONDA else f'python() {{{{ {quote(sys.executable)} "$@"; }}}}; '
# One torch thread per job and as many jobs as cores: tiny models run far faster that way than with
# two threads fighting over two cores.
shell.prefix(f"set -euo pipefail; export OMP_NUM_THREADS={THREADS} MKL_NUM_THREADS={THREADS} "
             f"HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false; {PYTHON}")
# A command takes everything but its files from `params`: the study config's name (STUDY_ARG, which the params rerun
# trigger leaves out: a job's `cfg` holds what it reads), config values, and folders - derived from a declared file in
# them where the rule has one, else a function returning the study's folder (a plain string that begins one of the
# rule's paths reads to `snakemake --lint` as a hard-coded prefix).
STUDY_ARG = Untracked(CONFIG_ARG)        # a job's `--config {params.study}`: the name or path, not its values
ARCHS = STUDY["archs"]
ARCH_LIST = ",".join(ARCHS)
MAIN = STUDY["main_size"]
GPU_OUT = "results/gpu"                  # the gpu profile's committed results, which every profile's report reads

# the local files the study config names by path (a files corpus, a gguf or folder base model, local English text),
# by the rule that reads them: its inputs, so that replacing one in place reruns what depends on it
PATH_INPUTS = path_inputs(STUDY)
sources = partial(module_files, root=workflow.basedir)  # the repository files that running these modules imports
code = partial(code_files, workflow.basedir)            # files a command reads that are not imported modules
section = partial(schema_section, SCHEMA)

# Study-config keys (dotted paths) each job reads, through `--config` or on its command line. Not listed: paths (inputs
# and outputs carry them), `seeds`, `archs`, `main_size`, `ablation_sizes`, `ablation_variants`, `niah.archs`,
# `niah.size`, `mqar.size`, `mqar.sizes`, `conversion.seeds` (they name the jobs and their files), `description`,
# `train.save_every` (checkpoint frequency: a resumed run is bit-identical to an uninterrupted one) and `threads` of
# jobs whose result does not measure time.
RUN_KEYS = (section("train", but=("save_every",)) + ["data.retrieval_fraction", "data.retrieval_max_keys", "device",
                                                      "dtype", "profile"])  # what every suite.train.run job reads
LM_EVAL_KEYS = ["train.seq_len", "lm_eval.limit", "lm_eval.ppl_limit", "lm_eval.num_fewshot", "lm_eval.batch_size",
                "profile"]  # + the tasks param (by size); the benchmark data: an input file
RULE_CONFIG = {
    "corpus": ["data.source", "data.files", "data.hf", "data.packages", "data.max_files", "data.val_fraction",
               "data.test_fraction"],
    "tokenizer": ["data.tokenizer", "data.vocab_size"],
    "train": RUN_KEYS,
    # Base CPT / conversion (--recipe conversion): conversion.extra_steps steps (not train.steps) from batch
    # base_steps on, with conversion's optimizer settings where it gives them, else train's
    "conversion": [k for k in RUN_KEYS if k != "train.steps"] + section("conversion", but=("seeds",)),
    "lm_eval": LM_EVAL_KEYS,
    "conversion_lm_eval": LM_EVAL_KEYS + ["conversion.size"],
    "niah": section("niah", but=("archs", "size", "seeds")) + ["device", "profile"],
    "mqar": section("mqar", but=("size", "sizes", "gla_probe")) + ["device", "profile"],
    "mqar_gla_probe": section("mqar", but=("sizes",)) + ["device", "profile"],
    "prefill_cpu": section("prefill_cpu") + ["threads", "profile"],
    "prefill_cpu_128k": ["threads", "profile"],
    "benchmark_data": ["lm_eval.data"],
    "prompt_lengths": ["lm_eval.limit", "lm_eval.num_fewshot", "window", "profile"],
    # Table 2 on a real pretrained LM (suite/experiments/conversion/pretrained.smk)
    # (it also refuses conversion.pretrained lengths past the model's positions: a check that changes no output)
    "base_model": ["conversion.base_model"],
    "english_data": ["conversion.pretrained.corpus", "data.val_fraction", "data.test_fraction"],
    "convert_base": ["conversion.pretrained.window"],
    "conversion_identity": ["conversion.pretrained.identity_len", "conversion.pretrained.window", "device", "profile"],
    "pretrained_train": [f"conversion.pretrained.{k}" for k in ("seq_len", "steps", "batch_size", "lr", "warmup",
                                                                 "min_lr_ratio", "weight_decay", "dtype", "order",
                                                                 "eval_points", "compile")]
    + ["device", "profile"],
    "pretrained_lr_sweep": [f"conversion.pretrained.{k}" for k in ("seq_len", "batch_size", "lr_sweep", "min_lr_ratio",
                                                                    "weight_decay", "dtype", "order")]
    + ["device", "profile"],
    "pretrained_benchmarks": ["conversion.pretrained.eval", "device", "profile"],
    "pretrained_ppl": ["conversion.pretrained.ppl", "device", "profile"],
    "pretrained_niah": ["conversion.pretrained.niah", "device", "dtype", "profile"],
    "fp8_kv_real": ["conversion.pretrained.window", "device", "profile"],
    # the MQAR cell the controls read, and (for a grid) which size is the largest
    "controls": ["mqar.seq_lens", "mqar.train_kv", "mqar.num_kv_pairs", "mqar.sizes"],
    # the from-scratch study (suite/experiments/from_scratch/rules.smk)
    "scratch_data": ["scratch.corpus", "scratch.tokenizer", "conversion.pretrained.corpus", "data.val_fraction",
                     "data.test_fraction"],
    "scratch_lr_sweep": [f"scratch.{k}" for k in ("size", "window", "seq_len", "batch_size", "lr_sweep", "min_lr_ratio",
                                                  "weight_decay", "dtype", "order")] + ["dtype", "device", "profile"],
    "scratch_train": [f"scratch.{k}" for k in ("size", "window", "seq_len", "batch_size", "steps", "warmup_frac",
                                               "min_lr_ratio", "weight_decay", "dtype", "order", "eval_points",
                                               "compile")] + ["dtype", "device", "profile"],
    "scratch_budget": [f"scratch.{k}" for k in ("equal_time", "steps", "warmup_frac", "batch_size", "seq_len")],
    "scratch_ppl": [f"scratch.{k}" for k in ("buckets", "ppl", "seq_len", "dtype")] + ["dtype", "device", "profile"],
    "scratch_niah": ["scratch.niah", "device", "profile"],
}

rule_config = partial(_rule_config, STUDY, SCHEMA, RULE_CONFIG)  # (rule, arch=None): its `params: cfg=`
