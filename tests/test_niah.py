"""NIAH prompt construction, scoring and CLI (suite.eval.niah)."""
import re

import numpy as np
import pandas as pd
import pytest
import torch

from suite.data.retrieval import NEEDLE_TEMPLATE, QUESTION_TEMPLATE
from suite.eval import niah
from suite.eval.tiny import make_tiny_checkpoint, stdlib_text
from suite.provenance import PROVENANCE_COLUMNS


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("niah")
    ckpt = make_tiny_checkpoint(root / "ckpt", max_position_embeddings=1024)
    hay_file = root / "test.txt"
    hay_file.write_text("\n\n".join(stdlib_text()), encoding="utf-8")
    model, tok = niah.load_model(ckpt)
    return ckpt, hay_file, model, tok


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_prompt_has_exact_length_needle_at_depth_and_question_last(setup, depth):
    _, hay_file, _, tok = setup
    hay = niah.haystack_ids(tok, hay_file)
    prompt = niah.build_prompt(tok, hay, 400, depth, "falcon", "1234567", np.random.default_rng(0))
    assert len(prompt) == 400
    text = tok.decode(prompt)
    needle = NEEDLE_TEMPLATE.format(key="falcon", value="1234567")
    question = QUESTION_TEMPLATE.format(key="falcon")
    assert text.count(needle) == 1 and text.endswith("\n" + question)
    needle_ids = tok("\n" + needle + "\n", add_special_tokens=False)["input_ids"]
    q_len = len(tok("\n" + question, add_special_tokens=False)["input_ids"])
    hay_len = 400 - len(needle_ids) - q_len
    cut = round(depth * hay_len)
    assert prompt[cut:cut + len(needle_ids)] == needle_ids


def test_bad_inputs_raise(setup, tmp_path):
    _, hay_file, _, tok = setup
    hay = niah.haystack_ids(tok, hay_file)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="depth"):
        niah.build_prompt(tok, hay, 400, 1.5, "falcon", "1234567", rng)
    with pytest.raises(ValueError, match="context_len"):
        niah.build_prompt(tok, hay, 10, 0.5, "falcon", "1234567", rng)
    with pytest.raises(ValueError, match="not found"):
        niah.haystack_ids(tok, tmp_path / "missing.txt")


class Oracle(torch.nn.Module):
    """Stands in for a model: 'generates' the value of the asked key found in the prompt (or a wrong one)."""

    def __init__(self, tok, wrong=False):
        super().__init__()
        self.tok, self.wrong = tok, wrong
        self.p = torch.nn.Parameter(torch.zeros(1))

    def generate(self, input_ids, **kwargs):
        text = self.tok.decode(input_ids[0])
        key = re.search(r"magic number for (\w+) mentioned in the provided text is$", text).group(1)
        value = re.search(rf"magic numbers for {key} is: (\d+)\.", text).group(1)
        answer = str(int(value) + 1) if self.wrong else value
        new = self.tok(" " + answer + ".", add_special_tokens=False)["input_ids"]
        return torch.cat([input_ids, torch.tensor([new])], dim=1)


def test_scoring_with_oracle_models(setup):
    _, hay_file, _, tok = setup
    right = niah.run_niah(Oracle(tok), tok, hay_file, [200, 300], [0.0, 0.5, 1.0], trials=3)
    wrong = niah.run_niah(Oracle(tok, wrong=True), tok, hay_file, [200], [0.5], trials=3)
    assert [r["accuracy"] for r in right] == [1.0] * 6
    assert wrong[0]["accuracy"] == 0.0


def test_generation_uses_cache_and_matches_plain_greedy(setup):
    _, hay_file, model, tok = setup
    hay = niah.haystack_ids(tok, hay_file)
    prompt = niah.build_prompt(tok, hay, 256, 0.5, "falcon", "1234567", np.random.default_rng(1))
    text = niah.generate_answer(model, tok, prompt, max_new_tokens=6)
    ids = torch.tensor([prompt])
    with torch.inference_mode():          # reference: greedy decoding by full forward passes, no cache
        for _ in range(6):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert text == tok.decode(ids[0, len(prompt):], skip_special_tokens=True)


def test_cli_writes_grid_with_not_run_cell(setup, tmp_path):
    ckpt, hay_file, _, _ = setup
    out = tmp_path / "niah.csv"
    niah.main(["--checkpoint", str(ckpt), "--haystack", str(hay_file), "--lengths", "128,10000000",
               "--depths", "0,1", "--trials", "2", "--out", str(out), "--profile", "test", "--arch", "llama"])
    df = pd.read_csv(out)
    assert set(niah.NIAH_COLUMNS + PROVENANCE_COLUMNS) <= set(df.columns)
    assert len(df) == 4 and (df["n_params"] > 0).all()
    ok = df[df.context_len == 128]
    assert (ok.status == "ok").all() and ok.accuracy.between(0, 1).all() and (ok.wall_s > 0).all()
    assert df[df.context_len == 10000000].status.str.startswith("not run: haystack").all()


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
