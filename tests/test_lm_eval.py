"""lm-eval integration (suite.eval.harness): local MC, generation and perplexity tasks against independent math."""
import importlib.util
import json
import math
import time

import lm_eval
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from suite.eval import harness
from suite.eval.tiny import make_tiny_checkpoint
from suite.provenance import PROVENANCE_COLUMNS

_spec = importlib.util.spec_from_file_location("based_qa", harness.TASKS_DIR / "recall" / "based_qa.py")
based_qa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(based_qa)

QUESTIONS = ["The capital of France is", "Water boils at", "The opposite of hot is", "A week has",
             "The sky is", "Cats like to", "The sun rises in the", "Two plus two is", "Snow is",
             "Python is a", "The moon orbits the", "Bread is made from"]
CHOICES = [["Paris", "Rome", "a blue whale"], ["100 degrees", "ten", "the sea"], ["cold", "warm", "red tape"],
           ["seven days", "one", "many books"], ["blue", "loud", "a green apple"], ["sleep", "run", "the math"],
           ["east", "west", "north pole"], ["four", "five", "a lot"], ["white", "black", "hot air"],
           ["language", "snake", "the module"], ["earth", "sun", "a cold star"], ["flour", "stone", "a river"]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmeval")
    ckpt = make_tiny_checkpoint(root / "ckpt", max_position_embeddings=512)
    model = AutoModelForCausalLM.from_pretrained(str(ckpt)).eval()
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    lm = harness.OrthrosHFLM(pretrained=str(ckpt), batch_size=1, device="cpu", dtype="float32")
    return root, ckpt, model, tok, lm


def _loglik(model, tok, context, continuation):
    """Sum log p(continuation | context), tokenized as lm-eval does (whole string, context prefix split)."""
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx):]
    ids = torch.tensor([whole])
    with torch.no_grad():
        logp = model(input_ids=ids).logits.log_softmax(-1)[0]
    return sum(float(logp[len(ctx) + i - 1, t]) for i, t in enumerate(cont))


def _mc_config(path):
    return {"task": "tiny_mc", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(path)}},
            "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "{{q}}",
            "doc_to_choice": "{{choices}}", "doc_to_target": "{{gold}}",
            "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}]}


def test_multiple_choice_matches_direct_scoring(tiny):
    root, ckpt, model, tok, lm = tiny
    docs, want_acc, want_norm = [], 0, 0
    for i, (q, choices) in enumerate(zip(QUESTIONS, CHOICES)):
        scores = [_loglik(model, tok, q, " " + c) for c in choices]
        best = max(range(3), key=lambda j: scores[j])
        best_norm = max(range(3), key=lambda j: scores[j] / len(choices[j]))   # lm-eval: per character
        gold = best if i % 2 == 0 else (best + 1) % 3        # half the golds agree with the model's pick
        want_acc += gold == best
        want_norm += gold == best_norm
        docs.append({"q": q, "choices": choices, "gold": gold})
    path = root / "mc.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs))
    out = root / "mc.csv"
    df = harness.run_tasks(ckpt, None, ["tiny_mc"], out, lm=lm, profile="test", arch="llama", size="tiny",
                           extra_tasks={"tiny_mc": (_mc_config(path), ("acc", "acc_norm"))})
    got = dict(zip(df.metric, df.value))
    assert got["acc"] == pytest.approx(want_acc / len(docs))
    assert got["acc_norm"] == pytest.approx(want_norm / len(docs))
    assert (df.status == "ok").all() and (df.n_samples == len(docs)).all()
    assert set(harness.QUALITY_COLUMNS + PROVENANCE_COLUMNS) <= set(df.columns)
    assert (df.lm_eval_version == lm_eval.__version__).all() and df.n_params.iloc[0] > 0
    # The stock `hf` model (what `lm_eval --model hf --model_args pretrained=DIR` runs) agrees.
    stock = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={ckpt},dtype=float32", tasks=[_mc_config(path)],
                                    batch_size=1, device="cpu", log_samples=False,
                                    task_manager=harness.get_task_manager(ckpt))
    assert stock["results"]["tiny_mc"]["acc,none"] == pytest.approx(got["acc"])


def test_recall_generation_task_matches_direct_greedy(tiny):
    root, ckpt, model, tok, lm = tiny
    raw = [("The cat sat on the mat. Alice owns the cat.", "Who owns the cat?"),
           ("Paris is in France. It is large.", "Where is Paris?"),
           ("The meeting moved to Tuesday at noon.", "When is the meeting?"),
           ("Bob planted seven trees in the park.", "How many trees?"),
           ("The river runs north past the mill.", "Which way does the river run?"),
           ("Carol painted the door green last year.", "What color is the door?")]
    docs, expected = [], []
    for i, (context, question) in enumerate(raw):
        prompt = context.strip().strip(".") + ". " + question
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=48,
                                 do_sample=False, pad_token_id=tok.pad_token_id)
        text = tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True).split("\n")[0]
        snippet = text.strip()[:3]
        answer = snippet if (i % 2 == 0 and snippet) else "QZXJ"   # half answerable from the greedy text
        docs.append({"context": context, "question": question, "answers": [answer]})
        expected.append(based_qa.contains_score(text, [answer]))
    assert 0 < sum(expected) < len(expected)                         # the check can tell right from wrong
    path = root / "qa.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs))
    config = {"task": "tiny_drop", "class": based_qa.BasedDrop, "dataset_path": "json",
              "dataset_kwargs": {"data_files": {"validation": str(path)}}}
    df = harness.run_tasks(ckpt, None, ["tiny_drop"], root / "qa.csv", lm=lm,
                           extra_tasks={"tiny_drop": (config, ("contains",))})
    assert df.status.tolist() == ["ok"]
    assert df.value.iloc[0] == pytest.approx(sum(expected) / len(expected))


def test_truncate_context_windows(tiny):
    _, _, _, tok, _ = tiny
    words = [f"w{i}" for i in range(400)]
    context = " ".join(words[:300] + ["ANSWERX"] + words[300:])
    head = based_qa.truncate_context(context, ["ANSWERX"], tok, 60, center_on_answer=False)
    centred = based_qa.truncate_context(context, ["ANSWERX"], tok, 60, center_on_answer=True)
    for cut in (head, centred):
        assert len(tok(cut, add_special_tokens=False)["input_ids"]) <= 60
    assert context.startswith(head) and "ANSWERX" not in head
    assert "ANSWERX" in centred and centred in context
    assert based_qa.truncate_context("short text", ["x"], tok, 60, True) == "short text"


def test_heldout_perplexity_matches_direct_loglik(tiny):
    root, ckpt, model, tok, lm = tiny
    paragraphs = ["hello world, this is some held out text.", "another paragraph of plain words here",
                  "the third one is a little longer than the others, with punctuation; and more words."]
    path = root / "val.txt"
    path.write_text("\n\n".join(paragraphs) + "\n")
    df = harness.run_tasks(ckpt, None, ["val_ppl"], root / "ppl.csv", lm=lm, ppl_data=path)
    total_ll = total_words = total_bytes = 0
    for text in paragraphs:
        ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]   # lm-eval's rolling prefix
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([ids])).logits.log_softmax(-1)[0]
        total_ll += sum(float(logp[i - 1, ids[i]]) for i in range(1, len(ids)))
        total_words += len(text.split())
        total_bytes += len(text.encode())
    got = dict(zip(df.metric, df.value))
    assert got["word_perplexity"] == pytest.approx(math.exp(-total_ll / total_words), rel=1e-4)
    assert got["byte_perplexity"] == pytest.approx(math.exp(-total_ll / total_bytes), rel=1e-4)
    assert got["bits_per_byte"] == pytest.approx(-total_ll / total_bytes / math.log(2), rel=1e-4)
    assert set(df.unit) == {"ppl", "bits/byte"}


def test_unavailable_datasets_give_not_run_rows_fast(tiny):
    root, ckpt, _, _, lm = tiny
    start = time.perf_counter()
    df = harness.run_tasks(ckpt, None, ["arc_easy", "openbookqa", "mmlu", "swde", "drop", "nq"],
                           root / "offline.csv", lm=lm)
    assert time.perf_counter() - start < 30
    assert (df.status == harness.NOT_OFFLINE).all() and df.value.isna().all()
    assert df.task.tolist() == ["arc_easy", "openbookqa", "openbookqa", "mmlu", "swde", "drop", "nq"]
    assert df[df.task == "openbookqa"].metric.tolist() == ["acc", "acc_norm"]


def test_bad_requests_raise(tiny):
    root, ckpt, _, _, lm = tiny
    with pytest.raises(ValueError, match="unknown task"):
        harness.run_tasks(ckpt, None, ["not_a_task"], root / "x.csv", lm=lm)
    with pytest.raises(ValueError, match="ppl_data"):
        harness.run_tasks(ckpt, None, ["val_ppl"], root / "x.csv", lm=lm)
    with pytest.raises(ValueError, match="not found"):
        harness.perplexity_task_config(root / "missing.txt")
    assert lm_eval.api.registry.get_model("orthros-hf") is harness.OrthrosHFLM


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json"])
def test_truncated_checkpoint_file_is_named(tiny, tmp_path, name):
    import re
    import shutil

    _, ckpt, _, _, _ = tiny
    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    blob = (bad / name).read_bytes()
    (bad / name).write_bytes(blob[:len(blob) // 2])
    with pytest.raises(ValueError, match=re.escape(str(bad / name))):
        harness.run_tasks(bad, None, ["val_ppl"], tmp_path / "q.csv", ppl_data=__file__)
    assert not (tmp_path / "q.csv").exists()
