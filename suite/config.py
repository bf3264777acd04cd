"""Load and validate the study config of a profile (``profiles/<name>.yaml``).

The schema (``suite/config_schema.json``, JSON Schema draft 2020-12) forbids unknown keys at every
level. ``load_config`` raises ``ConfigError`` (a ValueError) listing every problem with its key path
and offending value, e.g. ``train.lr: -1 is less than or equal to the minimum of 0``.

Numbers: ``load_yaml`` reads scientific notation without a decimal point (``3e-3``, ``1e6``) as a float,
where YAML 1.1 (PyYAML) reads it as a string. An ``integer`` field needs a plain integer: ``steps: 1e4``
is a float and is rejected, naming the key (``30.0 is not of type 'integer'``).

The ground floor of the suite: the command lines, the data and every job read the study config through this
module, and it imports no module of the suite but :mod:`suite.base_source` (a local base model's config). A check
that needs the data (a tokenizer) is the job's, made before its first step.

CLI: ``python -m suite.config default`` validates a profile and prints it as JSON.
"""
from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = Path(__file__).with_name("config_schema.json")
PROFILES_DIR = ROOT / "profiles"
SIZES_PATH = ROOT / "models" / "sizes.py"


class ConfigError(ValueError):
    """The study config is invalid; the message names each bad key path and value."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, plus floats in scientific notation without a dot (``3e-3``, ``-1E+6``)."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
                              list("-+0123456789"))
# JSON Schema counts 30.0 as an integer; the suite's integer fields (steps, sizes, seeds) need an int.
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                          type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
                                              "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)))


def load_yaml(text: str):
    """``yaml.safe_load`` that also reads ``3e-3`` / ``1e6`` as floats (YAML 1.1 reads them as strings)."""
    return yaml.load(text, Loader=_Loader)


def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validate(config: dict, source: str = "config") -> dict:
    """Validate a config dict against the schema; return it. Raises ConfigError naming key paths and values."""
    validator = _Validator(schema())
    problems = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        path = ".".join(map(str, err.absolute_path)) or "<top level>"
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            for key in extra:
                problems.append(f"{path + '.' if err.absolute_path else ''}{key}: unknown key "
                                f"(value {err.instance[key]!r}); allowed: {sorted(err.schema['properties'])}")
        else:
            problems.append(f"{path}: {err.message} (value {err.instance!r})")
    problems += [f"{path}: not a finite number (value {value!r})" for path, value in _non_finite(config)]
    if not problems:
        problems = _cross_checks(config)
    if problems:
        raise ConfigError(f"invalid study config {source}:\n  " + "\n  ".join(problems))
    return config


def _non_finite(node, path: str = ""):
    """(dotted key path, value) of every NaN or infinite float (YAML's .nan / .inf), which JSON Schema's bounds let
    through."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _non_finite(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _non_finite(value, f"{path}[{i}]")
    elif isinstance(node, float) and not math.isfinite(node):
        yield path, node


def warmup_problem(warmup: int, steps: int, warmup_key: str = "warmup", steps_key: str = "steps") -> str | None:
    """Why a linear warmup of ``warmup`` steps cannot run in a schedule of ``steps`` (None when it can): it must end
    before the last step, or the lr never reaches its peak, nor the decay its floor. The one rule of every schedule,
    in the study config (:func:`validate`) and in every training run's recipe (:class:`suite.train.optim.Recipe`;
    the command lines name their own options)."""
    if warmup and warmup >= steps:
        return (f"{warmup_key}: {warmup} must be below {steps_key} {steps} (a warmup that does not end before the "
                f"last step never reaches the peak lr)")
    return None


def curriculum_problem(fracs, key: str = "curriculum", rest: str = "the final length") -> str | None:
    """Why curriculum phases that take the shares ``fracs`` of the steps cannot run (None when they can): the shares
    must sum to below 1, the remaining steps training at the final length. The one rule of a NIAH curriculum, in the
    study config (``niah.curriculum``, :func:`validate`) and in the NIAH training
    (:func:`suite.experiments.niah.train.check_curriculum`), which name their own key and final length."""
    if sum(fracs) >= 1:
        return f"{key}: the phases' frac must sum to below 1 (the rest trains at {rest}; value {list(fracs)})"
    return None


def _cross_checks(config: dict) -> list[str]:
    """Constraints between fields that JSON Schema cannot express."""
    problems = []
    train, data = config["train"], config["data"]
    if config["window"] > train["seq_len"]:
        problems.append(f"window: {config['window']} is larger than train.seq_len {train['seq_len']}")
    if train["batch_size"] % train.get("gpus", 1):
        problems.append(f"train.batch_size: {train['batch_size']} is not a multiple of train.gpus {train['gpus']}")
    conversion = config.get("conversion", {})
    schedules = [(train["warmup"], train["steps"], "train.warmup", "train.steps"),
                 # the conversion recipe takes train.warmup where it gives none (suite.train.run --recipe conversion)
                 (conversion.get("warmup", train["warmup"]), conversion["extra_steps"],
                  "conversion.warmup" if "warmup" in conversion else "train.warmup (the conversion recipe's)",
                  "conversion.extra_steps")]
    if "mqar" in config:
        schedules.append((config["mqar"].get("warmup", 0), config["mqar"]["steps"], "mqar.warmup", "mqar.steps"))
    problems += [p for p in (warmup_problem(*s) for s in schedules) if p]
    if data.get("val_fraction", 0.05) + data.get("test_fraction", 0.05) >= 1:
        problems.append(f"data.val_fraction + data.test_fraction: must be < 1 "
                        f"(value {data.get('val_fraction')} + {data.get('test_fraction')})")
    if data["source"] == "files" and not data.get("files"):
        problems.append("data.files: source 'files' needs at least one glob (value [])")
    if data["source"] == "packages" and not data.get("packages"):
        problems.append("data.packages: source 'packages' needs at least one pinned source (value None)")
    if data["source"] != "packages" and data.get("packages"):
        problems.append(f"data.packages: read only with source 'packages', not {data['source']!r}; remove the key "
                        "or set data.source: packages")
    if data["source"] == "hf" and not data.get("hf"):
        problems.append("data.hf: source 'hf' needs a dataset spec {path, name, split, n_docs} (value None)")
    if data["tokenizer"] == "bytes" and data["vocab_size"] != 260:
        problems.append(f"data.vocab_size: the bytes tokenizer has 260 tokens (value {data['vocab_size']})")
    niah = config.get("niah", {})
    phases = niah.get("curriculum", [])
    curriculum = curriculum_problem([p["frac"] for p in phases], "niah.curriculum", "niah.train_len")
    if curriculum:
        problems.append(curriculum)
    if niah.get("format") == "rare" and "value_digits" in niah:
        problems.append(f"niah.value_digits: the rare format's values are word pieces, not numbers; remove the key "
                        f"(value {niah['value_digits']})")
    if niah.get("format") not in (None, "rare") and "value_digits" not in niah:
        problems.append(f"niah.value_digits: the {niah['format']} format's values are numbers; required (value None)")
    for i, p in enumerate(phases):
        if "train_len" in niah and p["len"] > niah["train_len"]:
            problems.append(f"niah.curriculum.{i}.len: {p['len']} is longer than niah.train_len {niah['train_len']}")
    if "mqar" in config:
        problems += _mqar_checks(config["mqar"])
    problems += _run_time_checks(config)
    if conversion.get("pretrained"):
        problems += _pretrained_checks(conversion)
    if "scratch" in config:
        problems += _scratch_checks(config)
    sizes = _size_names()
    if sizes is None:
        return problems
    named = [("main_size", config["main_size"])] + [(f"ablation_sizes.{i}", s) for i, s in
                                                    enumerate(config["ablation_sizes"])]
    named += [(f"{sec}.size", config[sec]["size"]) for sec in ("conversion", "mqar", "niah")
              if "size" in config.get(sec, {})]
    named += [(f"mqar.sizes.{i}", s) for i, s in enumerate(config.get("mqar", {}).get("sizes", []))]
    named += [("scratch.size", config["scratch"]["size"])] if "scratch" in config else []
    problems += [f"{key}: unknown size {val!r}; known: {sorted(sizes)}" for key, val in named if val not in sizes]
    return problems


TRAINED_ARMS = ("base_cpt", "conversion")  # the conversion.pretrained arms that continue training
# conversion.pretrained keys only a continued-training arm reads (rule pretrained_train,
# suite/experiments/conversion/pretrained.smk)
TRAINING_KEYS = ("seq_len", "steps", "batch_size", "lr", "lr_sweep", "warmup", "min_lr_ratio", "weight_decay", "dtype",
                 "seeds", "order", "eval_points", "compile")
IDENTITY_LEN = 2048  # conversion.pretrained.identity_len where the config gives none


def _pretrained_checks(conversion: dict) -> list[str]:
    """The real-model arms (``conversion.pretrained``): a base model, the recipe keys exactly when an arm trains, a
    warmup that ends, a window below the training length, no task the arms' harness run does not score; and, where
    the base model's config is readable now (a gguf or folder source), the model itself
    (:func:`base_model_problems`)."""
    problems, pretrained = [], conversion["pretrained"]
    if "base_model" not in conversion:
        problems.append("conversion.pretrained: needs conversion.base_model, the model its arms start from")
    trains = [arm for arm in pretrained["arms"] if arm in TRAINED_ARMS]
    unused = [key for key in TRAINING_KEYS if key in pretrained]
    if unused and not trains:
        problems.append(f"conversion.pretrained: {', '.join(unused)} set the continued training of the arms "
                        f"{list(TRAINED_ARMS)}, and conversion.pretrained.arms {pretrained['arms']} has neither: "
                        "remove them or add an arm that trains")
    missing = [key for key in ("seq_len", "steps", "batch_size", "seeds") if trains and key not in pretrained]
    if trains and "lr" not in pretrained and "lr_sweep" not in pretrained:
        missing.append("lr (or lr_sweep)")
    if missing:
        problems.append(f"conversion.pretrained: the arms {trains} train; give {', '.join(missing)}")
    elif trains:
        problems += [p for p in [warmup_problem(pretrained.get("warmup", 0), pretrained["steps"],
                                                "conversion.pretrained.warmup", "conversion.pretrained.steps")] if p]
    if "lr" in pretrained and "lr_sweep" in pretrained:
        problems.append("conversion.pretrained: lr and lr_sweep both set; the long runs take the sweep's pick, so "
                        "give one of them")
    sweep = pretrained.get("lr_sweep")
    if sweep:
        key = "conversion.pretrained.lr_sweep"
        problems += [p for p in [warmup_problem(sweep["warmup"], sweep["steps"], f"{key}.warmup", f"{key}.steps")] if p]
    stray = [arm for arm in pretrained.get("compile", []) if arm not in pretrained["arms"]]
    if stray:
        problems.append(f"conversion.pretrained.compile: {stray} not in conversion.pretrained.arms "
                        f"{pretrained['arms']}")
    if "eval_points" in pretrained and "steps" in pretrained and pretrained["eval_points"] > pretrained["steps"]:
        problems.append(f"conversion.pretrained.eval_points: {pretrained['eval_points']} exceeds "
                        f"conversion.pretrained.steps {pretrained['steps']}")
    if trains and not missing and pretrained["window"] >= pretrained["seq_len"]:
        problems.append(f"conversion.pretrained.window: {pretrained['window']} must be below "
                        f"conversion.pretrained.seq_len {pretrained['seq_len']} (else no token sees past the window)")
    if "val_ppl" in pretrained["eval"]["tasks"]:
        problems.append("conversion.pretrained.eval.tasks: val_ppl is not scored on the pretrained arms (their "
                        "held-out perplexity is conversion.pretrained.ppl, by position bucket); remove it")
    spec = conversion.get("base_model") or {}
    if not problems and ("gguf" in spec or "folder" in spec):  # its config is a file read away
        from suite.base_source import local_config

        kind = "gguf" if "gguf" in spec else "folder"
        try:
            source = local_config(spec)
        except ValueError as err:
            return [str(err)]
        problems += [f"conversion.base_model.{kind} ({spec[kind]}): {p}"
                     for p in base_model_problems(source, pretrained)]
    return problems


def scratch_warmup(scratch: dict, steps: int) -> int:
    """The warmup steps of a from-scratch run of ``steps`` steps: ``scratch.warmup_frac`` of them, rounded."""
    return round(scratch["warmup_frac"] * steps)


def scratch_corpus(config: dict) -> list[dict]:
    """The sources of the from-scratch corpus: ``conversion.pretrained.corpus``'s first where
    ``scratch.corpus.include_english`` is set (its one-source form as one source, read as a list's source is: as prose),
    then ``scratch.corpus.sources``."""
    corpus = config["scratch"]["corpus"]
    english = config["conversion"].get("pretrained", {}).get("corpus") if corpus.get("include_english") else []
    return ([english] if isinstance(english, dict) else list(english)) + list(corpus["sources"])


def _scratch_checks(config: dict) -> list[str]:
    """The from-scratch section: its window below the training length, position buckets that rise and end within it,
    NIAH lengths within it, schedules that end, archs named by compile and equal_time among its archs, and English
    sources to include."""
    problems, scratch = [], config["scratch"]
    archs, key = scratch["archs"], "scratch"
    if scratch["window"] >= scratch["seq_len"]:
        problems.append(f"{key}.window: {scratch['window']} must be below {key}.seq_len {scratch['seq_len']} (else no "
                        "position lies beyond the window)")
    buckets = scratch["buckets"]
    if any(b <= a for a, b in zip(buckets, buckets[1:])) or buckets[-1] > scratch["seq_len"]:
        problems.append(f"{key}.buckets: must rise, the last at most {key}.seq_len {scratch['seq_len']} "
                        f"(value {buckets})")
    niah = scratch.get("niah", {}).get("lengths", [])
    if any(n > scratch["seq_len"] for n in niah):
        problems.append(f"{key}.niah.lengths: {niah} must lie within {key}.seq_len {scratch['seq_len']} (the models "
                        "are read within their training length)")
    sweep = scratch["lr_sweep"]
    problems += [p for p in (warmup_problem(sweep["warmup"], sweep["steps"], f"{key}.lr_sweep.warmup",
                                            f"{key}.lr_sweep.steps"),
                             warmup_problem(scratch_warmup(scratch, scratch["steps"]), scratch["steps"],
                                            f"{key}.warmup_frac x {key}.steps", f"{key}.steps")) if p]
    if scratch.get("eval_points", 0) > scratch["steps"]:
        problems.append(f"{key}.eval_points: {scratch['eval_points']} exceeds {key}.steps {scratch['steps']}")
    stray = [("compile", a) for a in scratch.get("compile", []) if a not in archs]
    stray += [("lr_sweep.extend", a) for a in sweep.get("extend", {}) if a not in archs]
    problems += [f"{key}.lr_sweep.extend.{a}: {r:g} is swept already (lr_sweep.lrs {sweep['lrs']})"
                 for a, rates in sweep.get("extend", {}).items() for r in rates if r in sweep["lrs"]]
    timed = scratch["equal_time"]
    stray += [("equal_time.archs", a) for a in timed["archs"] if a not in archs]
    stray += [("equal_time.reference", timed["reference"])] if timed["reference"] not in archs else []
    problems += [f"{key}.{where}: {arch} is not in {key}.archs {archs}" for where, arch in stray]
    if timed["reference"] in timed["archs"]:
        problems.append(f"{key}.equal_time.archs: holds the reference {timed['reference']} itself (its budget is the "
                        "equal-token run)")
    if scratch["corpus"].get("include_english") and not config["conversion"].get("pretrained", {}).get("corpus"):
        problems.append(f"{key}.corpus.include_english: needs conversion.pretrained.corpus, the English sources")
    return problems


def base_model_problems(source_config, pretrained: dict | None) -> list[str]:
    """Why the base model of transformers config ``source_config`` cannot serve the real-model arms: every reason it
    would not convert exactly to Orthros (:func:`models.convert.source_problems`), and each length of the
    ``conversion.pretrained`` section (None: none) that its positions cannot hold, naming the key. Read when the study
    config is (a gguf or folder source) or by the base-model job before it reads any weights (a package or Hub
    source)."""
    from models.convert import source_problems

    problems = source_problems(source_config)
    if pretrained is None:
        return problems
    positions = source_config.max_position_embeddings
    lengths = [("identity_len", pretrained.get("identity_len", IDENTITY_LEN)), ("window", pretrained["window"])]
    if any(arm in TRAINED_ARMS for arm in pretrained["arms"]):
        lengths.append(("seq_len", pretrained.get("seq_len")))
    lengths += [("ppl.max_len", pretrained.get("ppl", {}).get("max_len")),
                ("niah.lengths", max(pretrained.get("niah", {}).get("lengths", [0])) or None)]
    problems += [f"conversion.pretrained.{key}: {value} exceeds the base model's {positions} positions "
                 "(max_position_embeddings)" for key, value in lengths if value is not None and value > positions]
    return problems


def _run_time_checks(config: dict) -> list[str]:
    """Lengths a job would find too short only once it runs (after other jobs, or after some of its own cells):
    SWA's window at each length it trains at; and MMLU settings its job would refuse (:func:`_mmlu_checks`). A
    training length too short for a retrieval row needs the tokenizer: the training job refuses it before its first
    step (:mod:`suite.train.run`)."""
    problems = []
    ratio, train = config["swa_window_ratio"], config["train"]
    for key, length, archs in (("train.seq_len", train["seq_len"], config["archs"]),
                               ("niah.train_len", config.get("niah", {}).get("train_len"),
                                config.get("niah", {}).get("archs", []))):
        if "swa" in archs and length is not None and round(ratio * length) < 1:  # baselines.transformer.swa_window
            problems.append(f"swa_window_ratio: {ratio} x {key} {length} rounds to an SWA window of 0 tokens")
    return problems + _mmlu_checks(config)


MMLU_SHOTS = 5  # MMLU's few-shot examples: each subject's dev split holds 5


def _mmlu_checks(config: dict) -> list[str]:
    """What MMLU cannot run as configured, found only once its job runs: a shot count past its 5 dev examples, and
    a document count per task where MMLU runs (it would score that many of each subject, weighting the 57 subjects
    equally, where MMLU weights them by size; conversion.pretrained.eval.mmlu_share takes a share of each)."""
    problems = []
    lm = config["lm_eval"]
    pre = (config.get("conversion", {}).get("pretrained") or {}).get("eval")
    # (section key, its settings, why MMLU runs at its shot counts)
    sections = [("lm_eval", lm, "lm_eval.tasks has mmlu" if "mmlu" in lm["tasks"] else
                 "the prompt_lengths rule measures MMLU at these shot counts" if lm.get("data") else None)]
    if pre:
        sections.append(("conversion.pretrained.eval", pre,
                         "conversion.pretrained.eval.tasks has mmlu" if "mmlu" in pre["tasks"] else
                         "conversion.pretrained.eval.mmlu_share is set" if "mmlu_share" in pre else None))
    if pre and "mmlu" in pre["tasks"] and "mmlu_share" in pre:
        problems.append("conversion.pretrained.eval.tasks has mmlu and conversion.pretrained.eval.mmlu_share is set: "
                        "MMLU would be scored twice (every document, and the share); remove mmlu from tasks to score "
                        "the share, or mmlu_share to score every document")
    for key, section, why in sections:
        shots = max(section.get("num_fewshot", [0]))
        if why and shots > MMLU_SHOTS:
            problems.append(f"{key}.num_fewshot: {shots} is more than MMLU's {MMLU_SHOTS} few-shot examples (each "
                            f"subject's dev split), and {why}")
        if "mmlu" in section["tasks"] and section["limit"] is not None:
            share = " (conversion.pretrained.eval.mmlu_share takes a share of each)" if key != "lm_eval" else ""
            problems.append(f"{key}.limit: {section['limit']} documents a task would score {section['limit']} of each "
                            f"MMLU subject ({key}.tasks has mmlu), weighting its 57 subjects equally where MMLU "
                            f"weights them by size; give null or remove mmlu from {key}.tasks{share}")
    return problems


def _mqar_checks(mqar: dict) -> list[str]:
    """The MQAR section's constraints between fields: one of size/sizes, per-seq_len
    train_kv lists that match seq_lens and fit them, a control cell that fits, and a vocabulary with room for the
    largest pair count."""
    problems = []
    if ("size" in mqar) == ("sizes" in mqar):
        problems.append(f"mqar.size, mqar.sizes: give exactly one of them (value size={mqar.get('size')!r}, "
                        f"sizes={mqar.get('sizes')!r})")
    seq_lens, train = mqar["seq_lens"], mqar.get("train_kv")
    problems += [f"mqar.seq_lens.{i}: {t} is odd; an MQAR sequence is key-value pairs, so every length is even"
                 for i, t in enumerate(seq_lens) if t % 2]
    if train and isinstance(train[0], list):
        if len(train) != len(seq_lens):
            problems.append(f"mqar.train_kv: {len(train)} per-seq_len lists for the {len(seq_lens)} seq_lens "
                            f"{seq_lens} (value {train})")
        problems += [f"mqar.train_kv.{i}.{j}: {kv} pairs do not fit seq_len {t} (4 x pairs <= seq_len)"
                     for i, (t, kvs) in enumerate(zip(seq_lens, train)) for j, kv in enumerate(kvs) if 4 * kv > t]
        if not train[0]:
            problems.append("mqar.train_kv.0: the control cell is the first seq_len's first training pair count; "
                            "the list is empty (value [])")
            return problems
    seq_len, kv = mqar_control_cell(mqar)
    if 4 * kv > seq_len:
        key = "mqar.train_kv" if train else "mqar.num_kv_pairs"
        problems.append(f"{key}: the control cell ({seq_len} tokens, {kv} pairs: the first seq_len and its first "
                        f"{'training ' if train else ''}pair count) does not fit (4 x pairs <= seq_len)")
    groups = [*(train or []), mqar["num_kv_pairs"]]
    flat = [kv for item in groups for kv in (item if isinstance(item, list) else [item])]
    if max(flat) >= mqar["vocab_size"] // 2 - 1:
        problems.append(f"mqar.vocab_size: {mqar['vocab_size']} is too small for {max(flat)} pairs (distinct keys "
                        f"need pairs < vocab_size / 2 - 1)")
    return problems


def mqar_sizes(mqar: dict) -> list[str]:
    """The MQAR model sizes of a study config's ``mqar`` section (``sizes``, or the one ``size``)."""
    return list(mqar["sizes"]) if "sizes" in mqar else [mqar["size"]]


def mqar_control_cell(mqar: dict) -> tuple[int, int]:
    """``(seq_len, num_kv_pairs)`` of the MQAR controls: the first seq_len and its first training pair count (the
    first ``num_kv_pairs`` entry without ``train_kv``)."""
    train = mqar.get("train_kv")
    if not train:
        return mqar["seq_lens"][0], mqar["num_kv_pairs"][0]
    return mqar["seq_lens"][0], train[0][0] if isinstance(train[0], list) else train[0]


def mqar_control_size(mqar: dict) -> str:
    """The MQAR size the controls read: the one ``size``, or the largest of ``sizes`` (by hidden size, then layers,
    as ``models/sizes.py`` defines them; the last entry when that file is absent)."""
    sizes = mqar_sizes(mqar)
    table = _size_table()
    if table is None or any(s not in table for s in sizes):
        return sizes[-1]
    return max(sizes, key=lambda s: (table[s].hidden_size, table[s].num_hidden_layers))


def _size_names() -> list[str] | None:
    """The names of ``models.sizes.SIZES``, or None when that file is absent."""
    table = _size_table()
    return None if table is None else list(table)


def _size_table() -> dict | None:
    """``models.sizes.SIZES`` (name -> Size), or None when that file is absent.

    The file is run on its own (it imports only the standard library), not as ``models.sizes``: importing the
    ``models`` package imports torch and registers the models, and the Snakemake DAG loads this config at every
    parse. A module already imported (a training process) is used as it is.
    """
    if "models.sizes" in sys.modules:
        return dict(sys.modules["models.sizes"].SIZES)
    if not SIZES_PATH.is_file():
        return None
    name = "_suite_config_model_sizes"
    spec = importlib.util.spec_from_file_location(name, SIZES_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return dict(module.SIZES)


def load_config(profile_or_path: str | Path) -> dict:
    """The validated study config of a profile name (``default``, ``ci``, ``gpu``, ``slurm``) or a YAML path.

    Raises ConfigError for a missing file, bad YAML, or any schema violation.
    """
    path = Path(profile_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{profile_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
        raise ConfigError(f"no study config {path} (profiles: {known})")
    try:
        config = load_yaml(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"bad YAML in {path}: {err}") from err
    if not isinstance(config, dict):
        raise ConfigError(f"{path} must hold a mapping, got {type(config).__name__}")
    return validate(config, str(path))


WORKFLOW_KEYS = ("profile",)  # what Snakemake's --config / --configfile may set


def workflow_profile(overrides: dict) -> str:
    """The study config that Snakemake's ``config`` (``--config``, ``--configfile``, an executor profile's
    ``config:``) names: its one key ``profile`` (a profile name or a YAML path; default ``default``).

    ``--config`` selects a study config; it does not override the config's values (those live in the YAML, which
    is validated as a whole). Raises ConfigError naming any other key, with the closest known key, so that a typo
    (``profle=ci``) or a would-be override (``train.steps=5``) never runs the default study silently."""
    unknown = [str(key) for key in overrides if key not in WORKFLOW_KEYS]
    if unknown:
        close = {key: difflib.get_close_matches(key, WORKFLOW_KEYS, 1) for key in unknown}
        named = ", ".join(repr(key) + (f" (did you mean {m[0]!r}?)" if m else "") for key, m in close.items())
        raise ConfigError(f"unknown Snakemake config key {named}: --config (or --configfile) takes only profile="
                          f"NAME_OR_YAML (known keys: {list(WORKFLOW_KEYS)}). It selects a study config; to change a "
                          "value, copy profiles/<name>.yaml and pass --config profile=path/to/copy.yaml")
    profile = overrides.get("profile", "default")
    if profile is None or not str(profile).strip():
        raise ConfigError(f"--config profile={'' if profile is None else profile}: empty; name a profile "
                          f"(profiles/<name>.yaml) or a study config's YAML path")
    return str(profile)




def curriculum_arg(phases: list[dict]) -> str:
    """A config's ``niah.curriculum`` as ``suite.experiments.niah.run --curriculum``'s
    ``LEN:FRAC:ROWS[:QUERIES],...``."""
    return ",".join(":".join(str(p[k]) for k in ("len", "frac", "rows", "queries") if k in p) for p in phases)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m suite.config", description="Validate and print a study config.")
    given = parser.add_argument("config", nargs="?", default="default",
                                help="profile name or path/to/config.yaml (default: default)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as err:  # worded as argparse words a bad argument (suite.cli.study_config)
        parser.error(str(argparse.ArgumentError(given, str(err))))
    print(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
