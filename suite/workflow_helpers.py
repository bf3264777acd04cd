"""The study DAG's helper functions (Snakefile, workflows/*.smk), kept here so that the workflow files hold only
rules and the values they share (`snakemake --lint` asks for that). workflows/common.smk binds them to the study
config and the repository root; none of them is a job's code, so none is a rule's code input."""
from __future__ import annotations

import json
from pathlib import Path

from suite.archs import ORTHROS_ARCHS


class Untracked:
    """A rule param that fills its command but stays out of Snakemake's params rerun trigger, which records values
    of builtin types only: the study config's name or path. What a job reads of the config is its `cfg` param, so
    the same values under another file name are the same study (tests/test_dag.py)."""

    def __init__(self, text):
        self.text = str(text)

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Untracked({self.text!r})"


def code_files(root, *parts) -> list[str]:
    """Files and folders a command reads that are not imported modules (a shell script, lm-eval task configs), as
    paths relative to the repository root ``root``: a folder gives its .py, .yaml and .sh files."""
    files = []
    for part in parts:
        p = Path(root) / part
        found = [f for f in p.rglob("*") if f.suffix in (".py", ".yaml", ".sh")] if p.is_dir() else [p]
        files += sorted(str(f.relative_to(root)) for f in found)
    return files


def schema_section(schema, name, but=()) -> list[str]:
    """Every key of a study-config section that the schema knows, less `but`, as dotted paths: for a rule that
    reads the whole section, so that a key added to the schema later is tracked too."""
    return [f"{name}.{key}" for key in sorted(schema["properties"][name]["properties"]) if key not in but]


def arch_config(arch) -> list[str]:
    """Keys of the model window of one arch (as suite.train.model.window_overrides reads them)."""
    return ["window"] if arch in ORTHROS_ARCHS else ["swa_window_ratio"] if arch == "swa" else []


def config_value(study, schema, key):
    """The value at a dotted key of the study config (None when an optional key is absent). Raises ValueError
    for a key that the schema does not know (a typo in workflows/common.smk's RULE_CONFIG)."""
    node, known = study, schema
    for part in key.split("."):
        if part not in known.get("properties", {}):
            raise ValueError(f"workflows/common.smk: unknown study-config key {key!r} "
                             f"(known at this level: {sorted(known.get('properties', {}))})")
        known = known["properties"][part]
        node = node.get(part) if isinstance(node, dict) else None
    return node


def rule_config(study, schema, rule_keys, rule, arch=None) -> str:
    """The study-config values a job of `rule` reads (rule_keys[rule], with the window of `arch`), as canonical
    JSON."""
    keys = rule_keys[rule] + (arch_config(arch) if arch else [])
    return json.dumps({key: config_value(study, schema, key) for key in keys}, sort_keys=True)


def path_inputs(study) -> dict[str, list[str]]:
    """The local files a study config names by path, as the inputs of the rules that read them, by rule: the
    ``data.files`` globs of a ``files`` corpus or the local sources of a ``packages`` one (``corpus``), a ``{gguf:}``
    file or every file of a ``{folder:}`` base model (``base_model``), the local files of
    ``conversion.pretrained.corpus`` sources (``english_data``). Replacing
    one in place makes it newer than the rule's outputs, and a file that a glob gains or loses changes the rule's set of
    inputs: either reruns the rule and what depends on it. A package's archive is pinned by the sha256 in the rule's
    config values instead; a Hub source is not local."""
    from suite.data.doc_sources import matching_files

    data, conversion = study["data"], study["conversion"]
    spec, pretrained = conversion.get("base_model") or {}, conversion.get("pretrained") or {}
    base = []
    if "gguf" in spec:
        base = [str(Path(spec["gguf"]).expanduser())]
    elif "folder" in spec:
        base = sorted(str(f) for f in Path(spec["folder"]).expanduser().rglob("*") if f.is_file())
    corpus = pretrained.get("corpus", [])
    english = [c for c in (corpus if isinstance(corpus, list) else [corpus]) if "package" not in c]
    local = [c for c in data.get("packages") or [] if "package" not in c] if data["source"] == "packages" else []
    main = matching_files(data.get("files", []), data.get("max_files")) if data["source"] == "files" else \
        sorted({f for c in local for f in matching_files(c["files"])})
    return {"corpus": main,
            "base_model": base,
            "english_data": sorted({f for c in english for f in matching_files(c["files"])})}


def folder(path, up=1) -> str:
    """The folder `up` levels above a file (a job's output or input file): a rule's folder param, derived from the
    file so that it stays right wherever the file lives."""
    return str(Path(path).parents[up - 1])


def csv_list(values) -> str:
    return ",".join(str(v) for v in values)


def per_seed(pattern, seeds, **fixed) -> list[str]:
    """`pattern` filled in for each seed (and the `fixed` fields)."""
    return [pattern.format(seed=s, **fixed) for s in seeds]


def runs(pattern, archs, sizes, seeds) -> list[str]:
    """`pattern` filled in for every (arch, size, seed)."""
    return [pattern.format(arch=a, size=s, seed=seed) for a in archs for s in sizes for seed in seeds]


def copy_results(out_pattern, res_pattern, seeds) -> str:
    """Shell that copies each seed's metrics.csv and loss.csv from the run folder into results/."""
    return " && ".join(f"cp {out_pattern.format(seed=s)}/metrics.csv {res_pattern.format(seed=s)}/metrics.csv && "
                       f"cp {out_pattern.format(seed=s)}/loss.csv {res_pattern.format(seed=s)}/loss.csv"
                       for s in seeds)


def train_launch(wildcards, resources) -> str:
    """How a training command starts: one process, or one torchrun process per GPU of one host (FSDP2)."""
    if resources.gpu > 1:
        return f"python -m torch.distributed.run --standalone --nproc_per_node {resources.gpu} -m"
    return "python -m"


def lm_tasks(lm_eval, main_size, size) -> str:
    """lm-eval tasks of one run: the configured ones at every size when the benchmark data is local (lm_eval.data),
    else at the main size only (Hub datasets), held-out perplexity elsewhere."""
    return csv_list(lm_eval["tasks"]) if size == main_size or lm_eval.get("data") else "val_ppl"


def budget_schedule(budget, arch, steps, warmup, budget_file) -> str:
    """A from-scratch long run's --steps and --warmup as shell words: the equal-token budget's (``budget`` tokens), or
    what ``suite.train.budget args`` prints of ``arch``'s line of the equal-time budget file when the job runs."""
    if budget == "tokens":
        return f"'--steps {steps} --warmup {warmup}'"
    return f"$(python -m suite.train.budget args --budget {budget_file} --arch {arch} )"
