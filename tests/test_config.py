"""Study config: every profile validates; bad keys and values stop with a message naming them."""
import copy
import os
import subprocess
import sys

import pytest
import yaml

from suite.config import PROFILES_DIR, ROOT, ConfigError, load_config, validate, workflow_profile

PROFILES = ["default", "ci", "gpu", "slurm"]


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_load(profile):
    cfg = load_config(profile)
    assert cfg["profile"] == profile
    assert set(cfg["archs"]) == {"orthros", "transformer", "swa", "gdn", "gla", "retnet"}
    assert cfg["window"] <= cfg["train"]["seq_len"]


def test_default_meets_study_shape():
    cfg = load_config("default")
    assert cfg["device"] == "cpu" and cfg["data"]["source"] in ("stdlib", "site_packages")
    assert len(cfg["ablation_sizes"]) >= 3 and len(cfg["seeds"]) >= 3
    # NIAH tests within the training length (the positive control) and beyond it
    niah = cfg["niah"]
    assert min(niah["lengths"]) <= niah["train_len"] < max(niah["lengths"])


def test_gpu_profile_corpus_is_pinned_not_the_machine_s():
    """The gpu profile's rows must not depend on what a machine has installed: its corpus is pinned archives."""
    data = load_config("gpu")["data"]
    assert data["source"] == "packages" and all(len(p["sha256"]) == 64 for p in data["packages"])
    cfg = copy.deepcopy(load_config("gpu"))
    cfg["data"]["source"] = "site_packages"
    with pytest.raises(ConfigError, match="data.packages: read only with source 'packages'"):
        validate(cfg, "gpu copy")
    del cfg["data"]["packages"]
    cfg["data"]["source"] = "packages"
    with pytest.raises(ConfigError, match="data.packages: source 'packages' needs"):
        validate(cfg, "gpu copy")


def test_gpu_profile_reaches_128k():
    cfg = load_config("gpu")
    assert max(cfg["niah"]["lengths"]) >= 131072 and cfg["niah"]["train_len"] >= 32768


def _base():
    return yaml.safe_load((PROFILES_DIR / "ci.yaml").read_text())


def test_unknown_key_is_named():
    cfg = _base()
    cfg["train"]["learning_rate"] = 0.1
    with pytest.raises(ConfigError, match=r"train\.learning_rate: unknown key \(value 0\.1\)"):
        validate(cfg)


def test_unknown_top_level_key_is_named():
    cfg = _base()
    cfg["epochs"] = 3
    with pytest.raises(ConfigError, match=r"epochs: unknown key \(value 3\)"):
        validate(cfg)


def test_task_names_are_checked_with_the_config():
    """A misspelt benchmark task is refused when the study config is read, before any job builds a model; the
    schema's task names are the harness's."""
    import json

    from suite.eval.harness import TASKS

    cfg = _base()
    cfg["lm_eval"]["tasks"] = ["val_ppl", "comonsense"]
    with pytest.raises(ConfigError, match=r"lm_eval\.tasks.*comonsense"):
        validate(cfg)
    cfg["lm_eval"]["tasks"] = []
    with pytest.raises(ConfigError, match=r"lm_eval\.tasks"):
        validate(cfg)
    schema = json.loads((ROOT / "suite" / "config_schema.json").read_text())
    assert sorted(schema["$defs"]["task"]["enum"]) == sorted([*TASKS, "val_ppl", "commonsense", "recall"])


@pytest.mark.parametrize("path,value,pattern", [
    (("train", "lr"), -1.0, r"train\.lr: .*\(value -1\.0\)"),
    (("train", "steps"), "many", r"train\.steps: .*\(value 'many'\)"),
    (("archs",), ["orthros", "mamba"], r"archs\.1: .*\(value 'mamba'\)"),
    (("data", "tokenizer"), "wordpiece", r"data\.tokenizer: .*\(value 'wordpiece'\)"),
    (("niah", "depths"), [0.5, 1.5], r"niah\.depths\.1: .*\(value 1\.5\)"),
    # the SO ablation's variants: registry archs of a study, or orthros_noso; never twice
    (("ablation_variants",), ["orthros", "orthros_nosso"], r"ablation_variants\.1: .*\(value 'orthros_nosso'\)"),
    (("ablation_variants",), ["orthros", "orthros"], r"ablation_variants: .*non-unique elements"),
    (("ablation_variants",), [], r"ablation_variants: \[\] should be non-empty"),
])
def test_bad_value_is_named(path, value, pattern):
    cfg = _base()
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg)


def test_cross_field_checks():
    cfg = _base()
    cfg["window"] = cfg["train"]["seq_len"] * 2
    with pytest.raises(ConfigError, match=r"window: \d+ is larger than train\.seq_len"):
        validate(copy.deepcopy(cfg))
    cfg = _base()
    cfg["main_size"] = "7T"
    with pytest.raises(ConfigError, match=r"main_size: unknown size '7T'"):
        validate(cfg)
    cfg = _base()
    cfg["train"].update(batch_size=12, gpus=8)
    with pytest.raises(ConfigError, match=r"train\.batch_size: 12 is not a multiple of train\.gpus 8"):
        validate(cfg)
    cfg = _base()
    cfg["niah"]["size"] = "7M"
    with pytest.raises(ConfigError, match=r"niah\.size: unknown size '7M'"):
        validate(cfg)
    cfg = _base()
    cfg["niah"]["curriculum"] = [{"len": 48, "frac": 0.6, "rows": 4}, {"len": 64, "frac": 0.6, "rows": 4}]
    with pytest.raises(ConfigError, match=r"niah\.curriculum: the phases' frac must sum to below 1"):
        validate(cfg)
    cfg = _base()
    cfg["niah"]["format"] = "rare"
    with pytest.raises(ConfigError, match=r"niah\.value_digits: the rare format's values are word pieces.*value 1\)"):
        validate(cfg)
    cfg = _base()
    del cfg["niah"]["value_digits"]
    with pytest.raises(ConfigError, match=r"niah\.value_digits: the code format's values are numbers; required"):
        validate(cfg)
    cfg = _base()
    cfg["niah"]["curriculum"] = [{"len": cfg["niah"]["train_len"] * 2, "frac": 0.5, "rows": 4}]
    with pytest.raises(ConfigError, match=r"niah\.curriculum\.0\.len: \d+ is longer than niah\.train_len"):
        validate(cfg)


def _refused_after(cfg: dict, edit, pattern: str) -> None:
    """``cfg`` validates; after ``edit(cfg)`` it is refused with a message matching ``pattern``."""
    validate(copy.deepcopy(cfg))
    edit(cfg)
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg)


@pytest.mark.parametrize("edit, pattern", [
    # the MQAR job trained the 64 cell, then stopped at 63 (a sequence is key-value pairs)
    (lambda c: c["mqar"].update(seq_lens=[32, 31]), r"mqar\.seq_lens\.1: 31 is odd"),
    (lambda c: c.update(swa_window_ratio=0.003), r"swa_window_ratio: 0\.003 x train\.seq_len 128 rounds to an SWA "
                                                r"window of 0 tokens"),
    (lambda c: (c.update(swa_window_ratio=0.005), c["train"].update(seq_len=200)),
     r"swa_window_ratio: 0\.005 x niah\.train_len 96 rounds to an SWA window of 0"),
])
def test_a_config_that_validates_runs(edit, pattern):
    """Conditions a job would meet only once it runs (after other jobs, or some of its own cells) are cross-checks:
    the config is refused, naming the key, before any job starts. A training length too short for a retrieval row
    is the training job's check, with its tokenizer (tests/test_cli_errors.py)."""
    _refused_after(_base(), edit, pattern)


def test_missing_profile_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="no study config"):
        load_config("nonexistent_profile")
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: [unclosed\n")
    with pytest.raises(ConfigError, match="bad YAML"):
        load_config(bad)


def test_snakemake_config_takes_only_the_profile_key():
    """Snakemake's --config selects a study config; any other key (a typo, a would-be override) is refused."""
    assert workflow_profile({}) == "default"
    assert workflow_profile({"profile": "ci"}) == "ci"
    with pytest.raises(ConfigError, match=r"unknown Snakemake config key 'profle' \(did you mean 'profile'\?\).*"
                                          r"known keys: \['profile'\]"):
        workflow_profile({"profle": "ci"})
    with pytest.raises(ConfigError, match=r"key 'nosuch': --config"):
        workflow_profile({"profile": "ci", "nosuch": 1})
    for empty in ("", None, " "):
        with pytest.raises(ConfigError, match=r"--config profile=.*empty; name a profile"):
            workflow_profile({"profile": empty})


def test_scientific_notation_reads_as_a_number(tmp_path):
    """YAML 1.1 reads ``3e-3`` as a string; the study config reads it as the float it means."""
    text = (PROFILES_DIR / "ci.yaml").read_text()
    assert "  lr: 3.0e-3\n" in text
    path = tmp_path / "ci.yaml"
    path.write_text(text.replace("  lr: 3.0e-3\n", "  lr: 3e-3\n", 1))
    cfg = load_config(path)
    assert cfg["train"]["lr"] == 0.003 and isinstance(cfg["train"]["lr"], float)
    path.write_text(text.replace("  steps: 30\n", "  steps: 3e1\n", 1))
    with pytest.raises(ConfigError, match=r"train\.steps: 30\.0 is not of type 'integer'"):
        load_config(path)


def test_override_in_scientific_notation_is_a_number():
    from suite.cli import config_values

    assert config_values(["rope_theta=1e6", "window_size=8", "act=silu"]) == \
        {"rope_theta": 1e6, "window_size": 8, "act": "silu"}
    assert isinstance(config_values(["rope_theta=1e6"])["rope_theta"], float)


def test_config_loads_without_torch():
    """The Snakemake DAG imports suite.config and loads the study config at every parse: neither may import torch
    (directly or through the models package, whose size names the config is checked against)."""
    code = ("import sys, suite.config\n"
            "assert 'torch' not in sys.modules, 'import suite.config imported torch'\n"
            f"for profile in {PROFILES!r}:\n"
            "    suite.config.load_config(profile)\n"
            "cfg = suite.config.load_config('ci')\n"
            "cfg['main_size'] = '7M'\n"
            "try:\n"
            "    suite.config.validate(cfg)\n"
            "except suite.config.ConfigError as err:\n"
            "    assert \"unknown size '7M'\" in str(err) and 'qwen3_8b' in str(err), err\n"
            "else:\n"
            "    raise AssertionError('unknown size accepted')\n"
            "assert 'torch' not in sys.modules, 'load_config imported torch'\n"
            "assert not [m for m in sys.modules if m == 'models' or m.startswith('models.')]\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]



# ---- MQAR grid keys (mqar.sizes, per-seq_len mqar.train_kv) -------------------------------------------------------

def _grid(**mqar):
    """The ci profile with its MQAR section turned into a small grid (two sizes, per-seq_len training pairs)."""
    cfg = _base()
    del cfg["mqar"]["size"]
    cfg["mqar"].update(sizes=["d64", "d128"], seq_lens=[64, 128], num_kv_pairs=[4, 8, 16, 32],
                       train_kv=[[4, 8], [8, 16, 32]], vocab_size=128)
    cfg["mqar"].update(mqar)
    return cfg


def test_gpu_profile_runs_the_zoology_grid():
    """Issue 12: T from 256 to 1024, pairs from 16 to 256, d_model 64/128/256 (two layers), the six archs; plus the
    cell that passed its controls on the H200 (T=128, 8 pairs), where the controls read the largest size."""
    from suite.config import mqar_control_cell, mqar_control_size, mqar_sizes

    cfg = load_config("gpu")
    mqar = cfg["mqar"]
    assert {256, 512, 1024} <= set(mqar["seq_lens"]) and {16, 32, 64, 128, 256} <= set(mqar["num_kv_pairs"])
    assert mqar_sizes(mqar) == ["d64", "d128", "d256"] and "size" not in mqar
    assert mqar_control_cell(mqar) == (128, 8) and mqar_control_size(mqar) == "d256"
    trained = {(t, kv) for t, kvs in zip(mqar["seq_lens"], mqar["train_kv"]) for kv in kvs}
    assert trained == {(128, 8)} | {(t, kv) for t in (256, 512, 1024) for kv in (16, 32, 64, 128, 256) if 4 * kv <= t}
    assert mqar["vocab_size"] // 2 - 1 > 256                         # room for 256 distinct keys
    assert set(cfg["archs"]) == {"orthros", "transformer", "swa", "gdn", "gla", "retnet"}


def test_mqar_helpers_on_both_forms():
    from suite.config import mqar_control_cell, mqar_control_size, mqar_sizes
    from suite.experiments.mqar.recipe import mqar_cli_args

    grid = validate(_grid(tie_embeddings=True))["mqar"]
    assert mqar_sizes(grid) == ["d64", "d128"] and mqar_control_size(grid) == "d128"   # the larger d_model
    assert mqar_control_cell(grid) == (64, 4)
    assert mqar_cli_args(grid) == ["--seq-len", "64,128", "--kv-pairs", "4,8,16,32", "--train-kv", "4,8/8,16,32",
                                   "--window", "4", "--vocab-size", "128", "--steps", "10", "--batch-size", "16",
                                   "--lr", "0.001", "--weight-decay", "0.1", "--num-test", "32", "--log-every", "1",
                                   "--tie-embeddings"]
    curriculum = validate(_grid(first_cell_frac=0.4, constant_tokens=True))["mqar"]
    assert mqar_cli_args(curriculum)[-5:] == ["--log-every", "1", "--first-cell-frac", "0.4", "--constant-tokens"]
    with pytest.raises(ConfigError, match=r"mqar\.first_cell_frac"):
        validate(_grid(first_cell_frac=1.0))
    warm = validate(_grid(warmup=5))["mqar"]                         # honoured: the rule passes it on
    assert mqar_cli_args(warm)[mqar_cli_args(warm).index("--warmup") + 1] == "5"
    assert "--warmup" not in mqar_cli_args(grid)                     # absent: no warmup, the CLI's default
    with pytest.raises(ConfigError, match=r"mqar\.warmup"):
        validate(_grid(warmup=-1))
    with pytest.raises(ConfigError, match=r"mqar\.warmup: 10 must be below mqar\.steps 10"):
        validate(_grid(warmup=10))
    single = load_config("ci")["mqar"]                               # the one-size form: seq_lens [32], train_kv [4]
    assert mqar_sizes(single) == ["1M"] and mqar_control_size(single) == "1M"
    assert mqar_control_cell(single) == (32, 4)
    assert mqar_cli_args(single)[:6] == ["--seq-len", "32", "--kv-pairs", "2,4", "--train-kv", "4"]
    default = load_config("default")["mqar"]
    assert mqar_control_cell(default) == (64, 4) and mqar_sizes(default) == ["1M"]


@pytest.mark.parametrize("edit,pattern", [
    (lambda m: m.update(size="1M"), r"mqar\.size, mqar\.sizes: give exactly one of them \(value size='1M', "
                                    r"sizes=\['d64', 'd128'\]\)"),
    (lambda m: m.pop("sizes"), r"mqar\.size, mqar\.sizes: give exactly one of them \(value size=None, sizes=None\)"),
    (lambda m: m.update(sizes=["d64", "d96"]), r"mqar\.sizes\.1: unknown size 'd96'"),
    (lambda m: m.update(sizes=[]), r"mqar\.sizes: \[\] should be non-empty"),
    (lambda m: m.update(sizes=["d64", "d64"]), r"mqar\.sizes: .*non-unique"),
    (lambda m: m.update(train_kv=[[4, 8]]), r"mqar\.train_kv: 1 per-seq_len lists for the 2 seq_lens \[64, 128\]"),
    (lambda m: m.update(train_kv=[[4, 32], [8]]), r"mqar\.train_kv\.0\.1: 32 pairs do not fit seq_len 64"),
    (lambda m: m.update(train_kv=[[], [8]]), r"mqar\.train_kv\.0: the control cell is the first seq_len's first"),
    (lambda m: m.update(train_kv=[4, [8]]), r"mqar\.train_kv: \[4, \[8\]\] is not valid under any"),
    (lambda m: m.update(train_kv=[["8"], [8]]), r"mqar\.train_kv: .*is not valid under any"),
    (lambda m: m.update(train_kv=[32, 4]), r"mqar\.train_kv: the control cell \(64 tokens, 32 pairs"),
    (lambda m: m.update(vocab_size=64), r"mqar\.vocab_size: 64 is too small for 32 pairs"),
    (lambda m: m.update(tie_embeddings="yes"), r"mqar\.tie_embeddings: 'yes' is not of type 'boolean'"),
    (lambda m: m.update(train_mix=[[64, 4]]), r"mqar\.train_mix: unknown key"),
])
def test_bad_mqar_grid_is_named(edit, pattern):
    cfg = _grid()
    validate(copy.deepcopy(cfg))                                     # the grid itself is valid
    edit(cfg["mqar"])
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg)


@pytest.mark.parametrize("key,value", [("mqar.first_cell_frac", float("nan")), ("train.lr", float("inf"))])
def test_non_finite_numbers_are_refused_by_key(key, value):
    cfg = _grid() if key.startswith("mqar") else _base()
    section, name = key.split(".")
    cfg[section][name] = value
    with pytest.raises(ConfigError, match=rf"{section}\.{name}: not a finite number \(value {value!r}\)"):
        validate(cfg)


def _gpu():
    return yaml.safe_load((PROFILES_DIR / "gpu.yaml").read_text())


@pytest.mark.parametrize("edit, pattern", [
    # the pretrained arms' MMLU job stopped at its first request: each subject's dev split holds 5 examples
    (lambda c: c["conversion"]["pretrained"]["eval"].update(num_fewshot=[0, 6]),
     r"conversion\.pretrained\.eval\.num_fewshot: 6 is more than MMLU's 5 few-shot examples .*mmlu_share is set"),
    (lambda c: c["lm_eval"].update(num_fewshot=[10]),
     r"lm_eval\.num_fewshot: 10 is more than MMLU's 5 .* the prompt_lengths rule measures MMLU"),
    (lambda c: c["lm_eval"].update(tasks=["mmlu"], limit=20, data={"folder": "/x"}),
     r"lm_eval\.limit: 20 documents a task would score 20 of each MMLU subject \(lm_eval\.tasks has mmlu\), "
     r"weighting its 57 subjects equally"),
    (lambda c: c["conversion"]["pretrained"]["eval"].update(tasks=["commonsense", "mmlu"], limit=500),
     r"conversion\.pretrained\.eval\.limit: 500 .* \(conversion\.pretrained\.eval\.mmlu_share takes a share"),
    # the former key: a count a subject
    (lambda c: c["conversion"]["pretrained"]["eval"].update(mmlu_limit=10), r"mmlu_limit: unknown key"),
    (lambda c: c["conversion"]["pretrained"]["eval"].update(mmlu_share=2), r"mmlu_share: 2 is greater than"),
    (lambda c: c["conversion"]["pretrained"]["eval"].update(tasks=["commonsense", "mmlu"], limit=None),
     r"tasks has mmlu and conversion\.pretrained\.eval\.mmlu_share is set: MMLU would be scored twice"),
])
def test_mmlu_settings_its_job_would_refuse_are_refused_with_the_config(edit, pattern):
    _refused_after(_gpu(), edit, pattern)
    fine = _gpu()
    fine["lm_eval"].update(num_fewshot=[0, 5], tasks=["val_ppl", "mmlu"], limit=None)
    del fine["conversion"]["pretrained"]["eval"]["mmlu_share"]
    fine["conversion"]["pretrained"]["eval"].update(tasks=["commonsense", "mmlu"], limit=None)  # every document
    validate(fine)
    del fine["lm_eval"]["data"]
    fine["lm_eval"].update(tasks=["val_ppl", "commonsense"], num_fewshot=[25])  # no MMLU anywhere at these shots
    fine["conversion"]["pretrained"]["eval"].update(tasks=["commonsense"], num_fewshot=[10], limit=500)
    validate(fine)


# ---- one schedule validation; keys that apply to no configured arm; sections the rules need ----------------------

def _default():
    return yaml.safe_load((PROFILES_DIR / "default.yaml").read_text())


@pytest.mark.parametrize("edit, pattern", [
    (lambda c: c["train"].update(warmup=30), r"train\.warmup: 30 must be below train\.steps 30"),
    (lambda c: c["conversion"].update(warmup=10), r"conversion\.warmup: 10 must be below conversion\.extra_steps 10"),
    # without its own warmup the conversion recipe runs train's (suite.train.run --recipe conversion)
    (lambda c: (c["conversion"].pop("warmup"), c["train"].update(warmup=12)),
     r"train\.warmup \(the conversion recipe's\): 12 must be below conversion\.extra_steps 10"),
    (lambda c: c["mqar"].update(warmup=12), r"mqar\.warmup: 12 must be below mqar\.steps 10"),
])
def test_every_schedule_refuses_a_warmup_that_does_not_end(edit, pattern):
    cfg = _base()
    edit(cfg)
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg)


def test_pretrained_recipe_keys_need_an_arm_that_trains():
    """Only base and converted run (the default profile): a continued-training key would be accepted and ignored, so
    it is refused, naming each one; with a trained arm the same keys are required and honoured."""
    cfg = _default()
    cfg["conversion"]["pretrained"].update(steps=100, lr=1e-4, seeds=[1])
    with pytest.raises(ConfigError, match=r"conversion\.pretrained: steps, lr, seeds set the continued training of the "
                                          r"arms \['base_cpt', 'conversion'\], and conversion\.pretrained\.arms "
                                          r"\['base', 'converted'\] has neither"):
        validate(cfg)
    cfg["conversion"]["pretrained"].update(arms=["base", "base_cpt"], seq_len=512, batch_size=2)
    validate(cfg)


@pytest.mark.parametrize("edit, pattern", [
    (lambda c: c["conversion"]["pretrained"].pop("ppl"), r"conversion\.pretrained: 'ppl' is a required property"),
    (lambda c: c["conversion"].pop("size"), r"conversion: 'size' is a required property"),
    (lambda c: c.pop("ablation_variants"), r"<top level>: 'ablation_variants' is a required property"),
    (lambda c: c["conversion"]["pretrained"]["eval"].update(tasks=["val_ppl", "commonsense"]),
     r"conversion\.pretrained\.eval\.tasks: val_ppl is not scored on the pretrained arms"),
])
def test_sections_the_rules_read_are_required(edit, pattern):
    """A profile without conversion.pretrained.ppl (or conversion.size) is a config error naming the key, not a
    KeyError in every snakemake call; val_ppl, which the pretrained arms' harness run is given no data for, is
    refused."""
    cfg = _default()
    edit(cfg)
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg)


@pytest.mark.parametrize("edit, pattern", [
    (lambda c: c["conversion"]["pretrained"].update(lr=1e-4),
     r"conversion\.pretrained: lr and lr_sweep both set; the long runs take the sweep's pick"),
    (lambda c: c["conversion"]["pretrained"].pop("lr_sweep"),
     r"conversion\.pretrained: the arms \['base_cpt', 'conversion'\] train; give lr \(or lr_sweep\)"),
    (lambda c: c["conversion"]["pretrained"]["lr_sweep"].update(warmup=150),
     r"conversion\.pretrained\.lr_sweep\.warmup: 150 must be below conversion\.pretrained\.lr_sweep\.steps 150"),
    (lambda c: c["conversion"]["pretrained"]["lr_sweep"].update(lrs=[1e-4]), r"lr_sweep\.lrs: .*(short|fewer)"),
    (lambda c: c["conversion"]["pretrained"].update(arms=["base", "base_cpt"], compile=["conversion"]),
     r"conversion\.pretrained\.compile: \['conversion'\] not in conversion\.pretrained\.arms"),
    (lambda c: c["conversion"]["pretrained"].update(eval_points=5000),
     r"conversion\.pretrained\.eval_points: 5000 exceeds conversion\.pretrained\.steps"),
    (lambda c: c["conversion"]["pretrained"].update(order="sorted"), r"conversion\.pretrained\.order: 'sorted'"),
])
def test_the_continued_training_rate_sweep_and_run_options_are_checked(edit, pattern):
    """The gpu profile's recipe: a rate sweep (lr_sweep) whose pick the long runs take, so lr beside it is refused and
    one of the two is needed; a sweep warmup that ends; compile and eval_points that fit the arms and steps."""
    _refused_after(_gpu(), edit, pattern)
