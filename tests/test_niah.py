"""NIAH: needle task (suite.data.needles), scoring, generation budget, training and CLI (suite.experiments.niah.run)."""
import argparse
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from suite.data.needles import NeedleTask, whole_number_match
from suite.experiments.niah import eval as niah_eval
from suite.experiments.niah import run as niah
from suite.provenance import PROVENANCE_COLUMNS
from suite.train import optim
from tests.tiny import make_tiny_checkpoint, stdlib_data, stdlib_text


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("niah")
    ckpt = make_tiny_checkpoint(root / "ckpt", max_position_embeddings=1024)
    hay_file = root / "test.txt"
    hay_file.write_text("\n\n".join(stdlib_text()), encoding="utf-8")
    model, tok = niah.load_model(ckpt)
    task = NeedleTask.from_tokenizer("ruler", niah.raw_tokenizer(tok), value_digits=7)
    return ckpt, hay_file, model, tok, task


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_prompt_has_exact_length_one_needle_at_a_line_boundary_and_question_last(setup, depth):
    _, hay_file, _, tok, task = setup
    hay = niah.haystack_ids(tok, hay_file)
    prompt = task.eval_prompt(np.random.default_rng(0), hay, 400, depth)
    assert len(prompt.ids) == 400 and len(prompt.value) == 7
    text = tok.decode(prompt.ids)
    needle = f"One of the special magic numbers for {prompt.key} is: {prompt.value}."
    assert text.count(needle) == 1
    assert text.endswith(f"The special magic number for {prompt.key} mentioned in the provided text is")
    needle_ids = tok("\n" + needle + "\n", add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(prompt.ids)) if prompt.ids[i:i + len(needle_ids)] == needle_ids)
    at_end = tok.decode(prompt.ids[at + len(needle_ids):]).startswith("\nWhat is the special magic number")
    assert at == 0 or at_end or "\n" in tok.decode([prompt.ids[at - 1]]), "needle starts after a line break"
    value_pos = at + len(tok("\nOne of the special magic numbers for " + prompt.key + " is:",
                             add_special_tokens=False)["input_ids"])
    while not any(c.isdigit() for c in tok.decode([prompt.ids[value_pos]])):  # a lone space token before the value
        value_pos += 1
    assert tok.decode(prompt.ids[value_pos:value_pos + 3]).strip().startswith(prompt.value[0])
    assert prompt.distance == 399 - value_pos
    q_len = len(tok("\nWhat is the special magic number for " + prompt.key + " mentioned in the provided text? The "
                    "special magic number for " + prompt.key + " mentioned in the provided text is",
                    add_special_tokens=False)["input_ids"])
    hay_len = 400 - len(needle_ids) - q_len
    assert abs(at - depth * hay_len) <= hay_len  # nearest boundary; exact position depends on the text


def test_bad_inputs_raise(setup, tmp_path):
    _, hay_file, _, tok, task = setup
    hay = niah.haystack_ids(tok, hay_file)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="depth"):
        task.eval_prompt(rng, hay, 400, 1.5)
    with pytest.raises(ValueError, match="context_len"):
        task.eval_prompt(rng, hay, 10, 0.5)
    with pytest.raises(ValueError, match="not found"):
        niah.haystack_ids(tok, tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="needle format"):
        NeedleTask.from_tokenizer("yaml", niah.raw_tokenizer(tok))


@pytest.mark.parametrize("text,right", [("1234567", True), (" 1234567.", True),
                                        ("The number you want is 1234567.", True), ("11234567", False),
                                        ("12345670", False), ("123456", False), ("1234567 and 7654321", True),
                                        ("12,34567", False)])
def test_whole_number_match(text, right):
    assert whole_number_match(text, "1234567") is right


class Oracle(torch.nn.Module):
    """Stands in for a model: 'generates' ``template`` around the value of the asked key found in the prompt."""

    def __init__(self, tok, template="{value}.", wrong=False):
        super().__init__()
        self.tok, self.template, self.wrong = tok, template, wrong
        self.p = torch.nn.Parameter(torch.zeros(1))
        self.prompts = []

    def generate(self, input_ids, max_new_tokens, **kwargs):
        self.prompts.append(input_ids[0].tolist())
        text = self.tok.decode(input_ids[0])
        key = re.search(r"magic number for (\w+) mentioned in the provided text is$", text).group(1)
        value = re.search(rf"magic numbers for {key} is: (\d+)\.", text).group(1)
        answer = self.template.format(value=value + "0" if self.wrong else value)
        new = self.tok(answer, add_special_tokens=False)["input_ids"][:max_new_tokens]
        return torch.cat([input_ids, torch.tensor([new])], dim=1)


def test_scoring_with_oracle_models(setup, capsys):
    _, hay_file, _, tok, task = setup
    hay = niah.haystack_ids(tok, hay_file)
    right = niah.run_niah(Oracle(tok), tok, task, hay, [200, 300], [0.0, 0.5, 1.0], trials=3, progress=False)
    wrong = niah.run_niah(Oracle(tok, wrong=True), tok, task, hay, [200], [0.5], trials=3, progress=False)
    assert [r["accuracy"] for r in right] == [1.0] * 6
    assert wrong[0]["accuracy"] == 0.0  # "12345670" does not contain 1234567 as a whole number
    # without a progress bar, the log gets one line per cell (how far a run cut by a time cap got)
    log = [line for line in capsys.readouterr().out.splitlines() if line.startswith("niah eval ")]
    assert len(log) == 7 and log[0].startswith("niah eval context=200 depth=0.0 correct=3/3 status=ok")
    assert "correct=0/3" in log[-1]


def test_budget_covers_a_restated_answer(setup):
    """An answer phrased as a sentence (11+ tokens) still fits: the budget comes from the tokenizer, not a constant."""
    _, hay_file, _, tok, task = setup
    hay = niah.haystack_ids(tok, hay_file)
    oracle = Oracle(tok, template=" The special magic number for you mentioned in the provided text is {value}.")
    rows = niah.run_niah(oracle, tok, task, hay, [300], [0.5], trials=2, progress=False)
    assert rows[0]["accuracy"] == 1.0 and rows[0]["max_new_tokens"] > 11


def test_tokenizer_bos_is_kept(setup, tmp_path):
    """A tokenizer that adds BOS (as BOS-trained HF checkpoints do) gets it at the start of every prompt."""
    from tokenizers.processors import TemplateProcessing

    _, hay_file, _, tok, task = setup
    bos_tok = tok.__class__.from_pretrained(str(setup[0]))
    bos_tok.backend_tokenizer.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", bos_tok.bos_token_id)])
    assert niah_eval.prefix_ids(bos_tok) == [bos_tok.bos_token_id] and niah_eval.prefix_ids(tok) == []
    oracle = Oracle(bos_tok)
    niah.run_niah(oracle, bos_tok, task, niah.haystack_ids(tok, hay_file), [256], [0.5], trials=2, progress=False)
    assert all(p[0] == bos_tok.bos_token_id and len(p) == 256 for p in oracle.prompts)


def test_generation_uses_cache_and_matches_plain_greedy(setup):
    _, hay_file, model, tok, task = setup
    hay = niah.haystack_ids(tok, hay_file)
    prompt = task.eval_prompt(np.random.default_rng(1), hay, 256, 0.5).ids
    text = niah_eval.generate_answer(model, tok, prompt, max_new_tokens=6)
    ids = torch.tensor([prompt])
    with torch.inference_mode():          # reference: greedy decoding by full forward passes, no cache
        for _ in range(6):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert text == tok.decode(ids[0, len(prompt):], skip_special_tokens=True)


def test_cli_writes_grid_with_not_run_cell(setup, tmp_path):
    ckpt, hay_file, _, _, _ = setup
    out = tmp_path / "niah.csv"
    niah.main(["--checkpoint", str(ckpt), "--haystack", str(hay_file), "--lengths", "128,10000000",
               "--depths", "0,1", "--trials", "2", "--out", str(out), "--profile", "test", "--label-arch", "llama",
               "--no-progress"])
    df = pd.read_csv(out)
    assert set(niah_eval.NIAH_COLUMNS + PROVENANCE_COLUMNS) <= set(df.columns)
    assert len(df) == 4 and (df["n_params"] > 0).all() and (df["arch"] == "llama").all()
    ok = df[df.context_len == 128]
    assert (ok.status == "ok").all() and ok.accuracy.between(0, 1).all() and (ok.wall_s > 0).all()
    assert (ok.distance_min <= ok.distance_max).all()
    assert df[df.context_len == 10000000].status.str.startswith("not run: haystack").all()


@pytest.fixture(scope="module")
def suite_data(tmp_path_factory):
    return stdlib_data(tmp_path_factory.mktemp("needles"))


def test_code_task_rows_and_labels(suite_data):
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    counts = np.bincount(np.asarray(train, dtype=np.int64), minlength=tok.get_vocab_size())
    key_counts = [counts[tok.token_to_id("\u0120" + k)] for k in task.keys]
    assert max(key_counts) <= np.median(counts[counts > 0]) * 10  # rare words
    assert all(len(tok.encode(" =" + v, add_special_tokens=False).ids) == 2 for v in task.values)
    rng = np.random.default_rng(3)
    ids, labels = task.training_sequence(rng, train, 96, n_queries=3)
    assert ids.shape == (96,) and len(labels) == 6            # the value and the line end, per question
    text = tok.decode(ids.tolist())
    pairs = dict(re.findall(r"\n (\w+) =(\d)\n", text))
    assert len(pairs) == 3, text
    for t in labels[0::2]:  # position t predicts the value stored for the key just asked, then the line ends
        asked = tok.decode([int(ids[t - 1])]).strip()
        assert tok.decode([int(ids[t + 1])]) == pairs[asked] and tok.decode([int(ids[t + 2])]) == "\n"
    assert [t + 1 for t in labels[0::2]] == labels[1::2]
    assert task.correct("7\n memory =3", "7") and not task.correct("3\n memory =7", "7")  # the first line answers
    with pytest.raises(ValueError, match="too short"):
        task.training_sequence(rng, train, 20, n_queries=3)


@pytest.fixture(scope="module")
def rare_data(tmp_path_factory):
    """200 stdlib files and a 2K BPE: enough train tokens (~0.8M) for word pieces rarer than one per 32K tokens."""
    return stdlib_data(tmp_path_factory.mktemp("rare"), max_files=200, vocab_size=2048, held_out=0.1)


def test_rare_task_values_are_the_rarest_word_pieces(rare_data, suite_data):
    from suite.data.needles import RARE_SPACING
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(rare_data / "tokenizer")
    train = load_tokens(rare_data, "train")
    task = NeedleTask.from_tokenizer("rare", tok, train, value_digits=None)
    counts = np.bincount(np.asarray(train, dtype=np.int64), minlength=tok.get_vocab_size())
    eligible = sorted(counts[i] for t, i in tok.get_vocab().items() if re.fullmatch(r"[A-Za-z]{3,}", t))
    value_counts = [counts[tok.token_to_id(v)] for v in task.values]
    assert task.value_digits is None and 10 <= len(task.values) and not set(task.values) & set(task.keys)
    assert max(value_counts) <= min(len(train) / RARE_SPACING, eligible[len(eligible) // 2])  # the rare end
    eq, newline = tok.encode(" =").ids, tok.encode("\n").ids
    for v in task.values:  # one token after ' =' and before the line end, as in the needle
        assert tok.encode(f" ={v}\n").ids == eq + [tok.token_to_id(v)] + newline
    rng = np.random.default_rng(5)
    prompt = task.eval_prompt(rng, train, 200, 0.5)
    assert tok.decode(prompt.ids).count(f" {prompt.key} ={prompt.value}\n") == 1
    assert task.correct(f"{prompt.value}\n x =1", prompt.value)
    assert not task.correct(f"x{prompt.value}\n", prompt.value) and not task.correct(f"\n{prompt.value}", prompt.value)
    with pytest.raises(ValueError, match="word pieces"):
        NeedleTask.from_tokenizer("rare", tok, train, value_digits=2)
    small_tok, small_train = load_tokenizer(suite_data / "tokenizer"), load_tokens(suite_data, "train")
    with pytest.raises(ValueError, match="word pieces usable as rare values"):  # its rarest pieces are common words
        NeedleTask.from_tokenizer("rare", small_tok, small_train, value_digits=None)
    with pytest.raises(ValueError, match="value_digits=None"):
        NeedleTask.from_tokenizer("code", tok, train, value_digits=None)
    with pytest.raises(SystemExit):  # the CLI refuses --value-digits for it before loading anything
        niah.main(["--arch", "transformer", "--size", "1M", "--data-dir", str(rare_data), "--haystack", "x",
                   "--format", "rare", "--value-digits", "2", "--out", "x.csv"])


def test_cli_names_the_format_a_tokenizer_cannot_write(suite_data, capsys):
    base = ["--arch", "transformer", "--size", "1M", "--data-dir", str(suite_data), "--haystack",
            str(suite_data / "test.txt"), "--out", "x.csv"]
    for extra, message in [(["--format", "code", "--value-digits", "0"],
                            "argument --value-digits: must be an integer >= 1, got 0"),
                           (["--format", "code", "--lm-weight", "inf"],
                            "argument --lm-weight: must be a number >= 0, got inf"),
                           (["--format", "code", "--value-digits", "7"],
                            "--format code --value-digits 7: tokenizer has"),
                           (["--format", "rare"], "--format rare: tokenizer has")]:
        with pytest.raises(SystemExit):
            niah.main(base + extra)
        assert message in capsys.readouterr().err, extra


def test_kv_task_puts_the_value_right_after_its_key(suite_data):
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("kv", tok, train, value_digits=1)
    key, value = task.keys[0], task.values[0]
    ids, value_at = task.needle_ids(key, value)
    assert [tok.decode([i]) for i in ids] == ["\n", " " + key, value, "\n"] and value_at == 2
    assert task.question_ids(key) == ids[:2]   # the question is the needle up to its value
    ids, labels = task.training_sequence(np.random.default_rng(5), train, 96, n_queries=3)
    text = tok.decode(ids.tolist())
    pairs = dict(re.findall(r"\n (\w+?)(\d)\n", text))
    assert len(pairs) >= 3, text
    for t in labels[0::2]:  # the token asked is the key itself, and the next one its value
        assert tok.decode([int(ids[t + 1])]) == pairs[tok.decode([int(ids[t])]).strip()]
    prompt = task.eval_prompt(np.random.default_rng(6), train, 64, 0.5)
    assert prompt.ids[-1] == tok.token_to_id("\u0120" + prompt.key) and len(prompt.ids) == 64
    assert task.correct("4\n memory3", "4") and not task.correct("3\n memory4", "4")


def test_training_a_suite_model_lowers_the_answer_loss(suite_data):
    from models.registry import build
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    torch.manual_seed(0)
    model = build("orthros", "1M", vocab_size=tok.get_vocab_size(), window_size=8)
    fit = niah.train_needle_model(model, task, train, seq_len=64, steps=40, batch_size=8, lr=3e-3, n_queries=2,
                                  curriculum=[(32, 0.5, 16)], progress=False)
    assert np.isfinite(fit["final_loss"]) and fit["final_loss"] < np.log(len(task.values)) + 2
    assert fit["tokens"] == 20 * 16 * 32 + 20 * 8 * 64


def test_a_nan_gradient_stops_niah_training_naming_the_step(suite_data):
    """The step guard of every training loop (suite.train.loop.fit): the run stops at the step whose gradient is NaN,
    before the optimizer writes it into the weights."""
    from models.registry import build
    from suite.data.tokenizer import load_tokenizer, load_tokens
    from suite.train.loop import TrainingDivergedError

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    from tests.tiny import nan_gradient_on_call

    model = nan_gradient_on_call(build("transformer", "1M", vocab_size=tok.get_vocab_size()), 3)
    with pytest.raises(TrainingDivergedError, match=r"the gradient norm is nan at step 3 of 5 \(NIAH training, "):
        niah.train_needle_model(model, task, train, seq_len=32, steps=5, batch_size=2, lr=1e-3, progress=False)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _damaged_copy(ckpt, dest, name):
    """A copy of checkpoint folder ``ckpt`` whose file ``name`` is cut to half its length."""
    import shutil

    shutil.copytree(ckpt, dest)
    blob = (dest / name).read_bytes()
    (dest / name).write_bytes(blob[:len(blob) // 2])
    return dest


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "config.json"])
def test_load_model_names_a_truncated_file(setup, tmp_path, name):
    ckpt = setup[0]
    bad = _damaged_copy(ckpt, tmp_path / "bad", name)
    with pytest.raises(ValueError, match=rf"{re.escape(str(bad / name))}"):
        niah.load_model(bad)
    model_dir, tokenizer_dir = (ckpt, bad) if name == "tokenizer.json" else (bad, ckpt)
    with pytest.raises(ValueError, match=rf"{re.escape(str(bad / name))}"):  # also with a separate tokenizer folder
        niah.load_model(model_dir, tokenizer_dir)


def _recording_task(suite_data, monkeypatch):
    """(task, train tokens, a fresh 1M Transformer, seen): ``seen`` gets (length, queries) of every training row."""
    from models.registry import build
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    seen = []
    real = task.training_sequence
    monkeypatch.setattr(task, "training_sequence",
                        lambda rng, hay, n, q: seen.append((n, q)) or real(rng, hay, n, q))
    return task, train, build("transformer", "1M", vocab_size=tok.get_vocab_size()), seen


def test_curriculum_phases_use_their_own_needle_count(suite_data, monkeypatch):
    task, train, model, seen = _recording_task(suite_data, monkeypatch)
    fit = niah.train_needle_model(model, task, train, seq_len=64, steps=10, batch_size=2, lr=1e-3, n_queries=2,
                                  curriculum=[(32, 0.2, 3), (48, 0.3, 1, 4)], lm_weight=0.5, progress=False)
    assert seen == [(32, 2)] * 6 + [(48, 4)] * 3 + [(64, 2)] * 10   # 2 steps x 3 rows, 3 x 1, 5 x 2
    assert np.isfinite(fit["final_loss"]) and fit["tokens"] == 6 * 32 + 3 * 48 + 10 * 64
    with pytest.raises(ValueError, match="curriculum"):
        niah.train_needle_model(model, task, train, seq_len=64, steps=10, batch_size=2, lr=1e-3,
                                curriculum=[(32, 0.2, 3, 0)], progress=False)
    with pytest.raises(ValueError, match="lm_weight"):
        niah.train_needle_model(model, task, train, seq_len=64, steps=10, batch_size=2, lr=1e-3, lm_weight=-1.0,
                                progress=False)
    with pytest.raises(ValueError, match="replay"):
        niah.train_needle_model(model, task, train, seq_len=64, steps=10, batch_size=2, lr=1e-3, replay=1.0,
                                progress=False)


@pytest.mark.parametrize("arch", ["transformer", "orthros"])
def test_answer_loss_is_the_same_with_the_next_token_loss(suite_data, arch):
    """The answer loss train_needle_model reports (before its first update) is the mean cross-entropy over the answer
    tokens, with or without the next-token loss beside it (PT vs SFT regime): checked against a per-position fp64
    loop over the same rows."""
    import copy

    from models.registry import build
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    torch.manual_seed(0)
    model = build(arch, "1M", vocab_size=tok.get_vocab_size())
    reported = {w: niah.train_needle_model(copy.deepcopy(model), task, train, seq_len=64, steps=1, batch_size=2,
                                           lr=1e-3, lm_weight=w, seed=3, progress=False)["final_loss"]
                for w in (0.0, 0.7)}
    rng = np.random.default_rng([3, 0])  # the rows of step 0
    reference = copy.deepcopy(model).double().eval()
    nll = []
    for ids, positions in [task.training_sequence(rng, train, 64, 3) for _ in range(2)]:
        with torch.no_grad():
            logits = reference(input_ids=torch.from_numpy(ids)[None]).logits[0]
        nll += [-torch.log_softmax(logits[t], -1)[ids[t + 1]].item() for t in positions]
    want = sum(nll) / len(nll)
    assert reported[0.0] == pytest.approx(want, rel=1e-4) and reported[0.7] == pytest.approx(want, rel=1e-4)


def test_replay_repeats_only_earlier_phases(suite_data, monkeypatch):
    task, train, model, seen = _recording_task(suite_data, monkeypatch)
    niah.train_needle_model(model, task, train, seq_len=64, steps=40, batch_size=1, lr=1e-3,
                            curriculum=[(32, 0.25, 1), (48, 0.25, 1)], replay=0.5, progress=False)
    lengths = [n for n, _ in seen]
    first, second, last = lengths[:10], lengths[10:20], lengths[20:]
    assert first == [32] * 10                                  # the first phase has nothing to replay
    assert set(second) == {32, 48} and set(last) == {32, 48, 64}  # 0.5: some of each (fixed seed)
    assert last.count(64) >= 4 and second.count(48) >= 2


def test_phase_parser_and_rope_theta_reach_only_rope_models():
    assert niah._phases("48:0.2:64,4096:0.1:8:16") == [(48, 0.2, 64), (4096, 0.1, 8, 16)]
    for bad in ("48:0.2", "48:0.2:64:1:2", "a:0.2:3", "48:0.2:64:0", "48:1.5:4"):
        with pytest.raises(argparse.ArgumentTypeError, match="LEN"):
            niah._phases(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="sum to below 1"):
        niah._phases("48:0.6:4,64:0.6:4")
    from models.registry import build

    assert build("transformer", "1M", **niah._model_overrides("transformer", 256, None, 128, 5e5)).config.rope_theta \
        == 5e5
    assert build("swa", "1M", **niah._model_overrides("swa", 256, None, 128)).config.rope_theta == 10000.0


def test_training_uses_the_schedule_asked_for(suite_data, monkeypatch):
    task, train, model, _ = _recording_task(suite_data, monkeypatch)
    asked = []
    real = optim.lr_schedule
    monkeypatch.setattr(optim, "lr_schedule", lambda opt, name, steps, warmup, floor: asked.append(name) or
                        real(opt, name, steps, warmup))
    niah.train_needle_model(model, task, train, seq_len=32, steps=2, batch_size=1, lr=1e-3, schedule="wsd",
                            progress=False)
    assert asked == ["wsd"]
    with pytest.raises(ValueError, match="schedule='step'"):
        niah.train_needle_model(model, task, train, seq_len=32, steps=2, batch_size=1, lr=1e-3, schedule="step",
                                progress=False)
    with pytest.raises(SystemExit):  # a checkpoint run trains nothing: its training options are refused
        niah.main(["--checkpoint", "x", "--haystack", "y", "--schedule", "cosine", "--out", "z.csv"])


def test_save_model_resumes_the_evaluation_without_training(suite_data, tmp_path, monkeypatch, capsys):
    """--save-model: a rerun with the same training evaluates the saved model (no training step runs) and writes the
    same rows; other training arguments train again and replace the folder."""
    saved = tmp_path / "model"
    args = ["--arch", "transformer", "--size", "1M", "--data-dir", str(suite_data), "--haystack",
            str(suite_data / "test.txt"), "--format", "code", "--value-digits", "1", "--train-len", "64",
            "--steps", "4", "--batch-size", "4", "--lengths", "64", "--depths", "0.5", "--trials", "2",
            "--no-progress", "--save-model", str(saved)]
    niah.main(args + ["--out", str(tmp_path / "a.csv")])
    assert (saved / "niah_trained.json").is_file() and not (tmp_path / "model.tmp").exists()

    def no_training(*a, **k):
        raise AssertionError("trained again")

    with monkeypatch.context() as m:
        m.setattr(niah, "train_needle_model", no_training)
        niah.main(args + ["--out", str(tmp_path / "b.csv")])
    assert "evaluating the model trained before" in capsys.readouterr().out
    first, again = (pd.read_csv(tmp_path / f).drop(columns=["wall_s"]) for f in ("a.csv", "b.csv"))
    pd.testing.assert_frame_equal(first, again)

    calls = []
    with monkeypatch.context() as m:
        real = niah.train_needle_model
        m.setattr(niah, "train_needle_model", lambda *a, **k: calls.append(1) or real(*a, **k))
        niah.main(args + ["--steps", "5", "--out", str(tmp_path / "c.csv")])
    assert calls and "other steps" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "c.csv")["steps"].eq(5).all()

    (saved / "niah_trained.json").write_text('{"stamp": [1, 2]}')  # readable, but no record of ours: train again
    niah.main(args + ["--out", str(tmp_path / "d.csv")])
    assert "unreadable" in capsys.readouterr().out and (tmp_path / "d.csv").is_file()


def test_save_model_never_deletes_a_folder_it_did_not_write(suite_data, tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("x")
    args = ["--arch", "transformer", "--size", "1M", "--data-dir", str(suite_data), "--format", "code",
            "--value-digits", "1", "--train-len", "64", "--steps", "2", "--batch-size", "4", "--lengths", "64",
            "--no-progress", "--out", str(tmp_path / "a.csv")]
    with pytest.raises(SystemExit):
        niah.main(args + ["--haystack", str(suite_data / "test.txt"), "--save-model", str(precious)])
    assert "holds no niah_trained.json" in capsys.readouterr().err and (precious / "notes.txt").is_file()
    with pytest.raises(SystemExit):  # a missing haystack is refused before any training
        niah.main(args + ["--haystack", str(tmp_path / "none.txt")])
    assert "--haystack" in capsys.readouterr().err and not (tmp_path / "a.csv").exists()


def test_save_model_is_refused_for_a_checkpoint(capsys):
    with pytest.raises(SystemExit):
        niah.main(["--checkpoint", "x", "--haystack", "y", "--save-model", "m", "--out", "z.csv"])
    assert "--save-model" in capsys.readouterr().err


def test_row_tokens_is_what_a_training_row_needs_besides_haystack(suite_data):
    """Code format with one-token keys and values: every needle, question and answer has the same length, so a row
    of q needles takes q times the tokens of one (counted here from the templates' text), and one more token of
    haystack must fit."""
    from suite.data.tokenizer import load_tokenizer, load_tokens

    tok = load_tokenizer(suite_data / "tokenizer")
    train = load_tokens(suite_data, "train")
    task = NeedleTask.from_tokenizer("code", tok, train, value_digits=1)
    key, value = task.keys[0], task.values[0]
    one = sum(len(tok.encode(text, add_special_tokens=False).ids)
              for text in (f"\n {key} ={value}\n", f"\n {key} =", f"{value}\n"))
    assert one == 10  # "\n", " key", " =", "v", "\n"; then "\n", " key", " ="; then "v", "\n"
    for queries in (1, 3):
        assert task.row_tokens(queries) == queries * one
        rng = np.random.default_rng(queries)
        assert task.training_sequence(rng, train, queries * one + 1, queries)[0].shape == (queries * one + 1,)
        with pytest.raises(ValueError, match="too short"):
            task.training_sequence(rng, train, queries * one, queries)


def test_default_arguments_train_and_evaluate(suite_data, tmp_path, monkeypatch):
    """Only the required arguments: the default --train-len holds the default --queries needles of the default
    (ruler) format, and the default lengths evaluate. Only the step count, batch and trials are cut here (so the
    test is short); every length, the format and the queries are the CLI's defaults."""
    seen = {}
    real_train, real_eval = niah.train_needle_model, niah.run_niah

    def short_training(model, task, hay, **kw):
        seen["train"] = (task.fmt, task.value_digits, kw["seq_len"], kw["n_queries"], kw["curriculum"])
        return real_train(model, task, hay, **{**kw, "steps": 2, "batch_size": 2})

    def short_evaluation(model, tokenizer, task, hay, lengths, depths, trials, **kw):
        seen["eval"] = (lengths, depths, trials)
        return real_eval(model, tokenizer, task, hay, lengths, [0.5], 1, **kw)

    monkeypatch.setattr(niah, "train_needle_model", short_training)
    monkeypatch.setattr(niah, "run_niah", short_evaluation)
    out = tmp_path / "niah.csv"
    niah.main(["--arch", "transformer", "--size", "1M", "--data-dir", str(suite_data), "--haystack",
               str(suite_data / "test.txt"), "--no-progress", "--out", str(out)])
    assert seen["train"] == ("ruler", 7, 512, 3, [])
    assert seen["eval"] == ([1024, 4096], [0.0, 0.5, 1.0], 4)
    rows = pd.read_csv(out)
    assert list(rows["context_len"]) == [1024, 4096] and (rows["train_len"] == 512).all()
    assert (rows["status"] == "ok").all(), rows["status"].tolist()


@pytest.mark.parametrize("extra, message", [
    (["--train-len", "128"], r"--train-len 128 is too short for 3 needles and questions of the ruler format: they "
                             r"take up to \d+ tokens with this tokenizer; give a length above \d+"),
    (["--curriculum", "64:0.5:8:2"], r"--curriculum phase 64:0.5:8:2 is too short for 2 needles"),
    (["--format", "code", "--value-digits", "1", "--train-len", "29"], r"--train-len 29 is too short .* above 30"),
    (["--queries", "0"], r"argument --queries: must be an integer >= 1, got 0"),
])
def test_lengths_too_short_for_the_needles_are_refused_before_training(suite_data, tmp_path, monkeypatch, capsys,
                                                                       extra, message):
    monkeypatch.setattr(niah, "train_needle_model", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit) as stop:
        niah.main(["--arch", "transformer", "--size", "1M", "--data-dir", str(suite_data), "--haystack",
                   str(suite_data / "test.txt"), "--out", str(tmp_path / "n.csv"), *extra])
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_checkpoint_run_labels_come_from_the_run_beside_it(tmp_path):
    """A --checkpoint run without --label-arch/--size/--train-len takes them from the suite run that wrote the
    checkpoint (run_config.json beside it); the flags win; without a run_config: 'checkpoint', no size, 512."""
    from types import SimpleNamespace

    from suite.experiments.niah.run import _checkpoint_defaults

    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "run_config.json").write_text(json.dumps({"arch": "orthros", "size": "1M", "seq_len": 256}))
    a = SimpleNamespace(checkpoint=str(tmp_path / "checkpoint"), label_arch=None, size=None, train_len=None)
    _checkpoint_defaults(a)
    assert (a.label_arch, a.size, a.train_len) == ("orthros", "1M", 256)
    a = SimpleNamespace(checkpoint=str(tmp_path / "checkpoint"), label_arch="x", size="2M", train_len=64)
    _checkpoint_defaults(a)
    assert (a.label_arch, a.size, a.train_len) == ("x", "2M", 64)
    (tmp_path / "other").mkdir()
    a = SimpleNamespace(checkpoint=str(tmp_path / "other" / "ck"), label_arch=None, size=None, train_len=None)
    _checkpoint_defaults(a)
    assert (a.label_arch, a.size, a.train_len) == ("checkpoint", None, 512)
    a = SimpleNamespace(checkpoint=None, label_arch=None, size="1M", train_len=None)
    _checkpoint_defaults(a)
    assert a.train_len == 512


@pytest.mark.parametrize("text, message", [("{not json", "not valid JSON"), ("[1]", "expected a JSON object")])
def test_a_corrupt_run_config_beside_a_checkpoint_is_named(tmp_path, text, message):
    from types import SimpleNamespace

    from suite.experiments.niah.run import _checkpoint_defaults

    (tmp_path / "run_config.json").write_text(text)
    a = SimpleNamespace(checkpoint=str(tmp_path / "checkpoint"), label_arch=None, size=None, train_len=None)
    with pytest.raises(SystemExit, match=f"{re.escape(str(tmp_path / 'run_config.json'))}: {message}"):
        _checkpoint_defaults(a)
