"""lm-eval integration (suite.eval.harness): local MC, generation and perplexity tasks against independent math."""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time

import lm_eval
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from suite.eval import harness
from suite.provenance import PROVENANCE_COLUMNS
from tests.tiny import make_tiny_checkpoint

ROOT = harness.TASKS_DIR.parents[2]

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
    docs, want_acc, want_norm, per_doc = [], 0, 0, []
    for i, (q, choices) in enumerate(zip(QUESTIONS, CHOICES)):
        scores = [_loglik(model, tok, q, " " + c) for c in choices]
        best = max(range(3), key=lambda j: scores[j])
        best_norm = max(range(3), key=lambda j: scores[j] / len(choices[j]))   # lm-eval: per character
        gold = best if i % 2 == 0 else (best + 1) % 3        # half the golds agree with the model's pick
        want_acc += gold == best
        want_norm += gold == best_norm
        per_doc.append({"acc": float(gold == best), "acc_norm": float(gold == best_norm)})
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
    # each document's outcome, beside the rows: the same scoring, document by document
    outcomes = pd.read_csv(harness.documents_path(out))
    assert list(outcomes.columns) == harness.DOC_COLUMNS and len(outcomes) == 2 * len(docs)
    for metric in ("acc", "acc_norm"):
        rows = outcomes[outcomes["metric"] == metric].sort_values("doc_id")
        assert list(rows["doc_id"]) == list(range(len(docs))) and rows["doc_hash"].str.fullmatch("[0-9a-f]{64}").all()
        assert list(rows["value"]) == [d[metric] for d in per_doc]
    assert set(outcomes["lm_eval_task"]) == {"tiny_mc"} and set(outcomes["arch"]) == {"llama"}


def _greedy_line(model, tok, prompt):
    """The first line of the model's greedy continuation of ``prompt`` (48 new tokens at most)."""
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=48,
                             do_sample=False, pad_token_id=tok.pad_token_id)
    return tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True).split("\n")[0]


def _run_local_task(tiny, name, task_class, rows, metric):
    """Run ``task_class`` through run_tasks with ``rows`` (a local jsonl) as its validation split; the result row."""
    root, ckpt, _, _, lm = tiny
    path = root / f"{name}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    config = {"task": name, "class": task_class, "dataset_path": "json",
              "dataset_kwargs": {"data_files": {"validation": str(path)}}}
    df = harness.run_tasks(ckpt, None, [name], root / f"{name}.csv", lm=lm, extra_tasks={name: (config, (metric,))})
    assert df.status.tolist() == ["ok"]
    return df.iloc[0]


def test_recall_generation_task_matches_direct_greedy(tiny):
    _, _, model, tok, _ = tiny
    raw = [("The cat sat on the mat. Alice owns the cat.", "Who owns the cat?"),
           ("Paris is in France. It is large.", "Where is Paris?"),
           ("The meeting moved to Tuesday at noon.", "When is the meeting?"),
           ("Bob planted seven trees in the park.", "How many trees?"),
           ("The river runs north past the mill.", "Which way does the river run?"),
           ("Carol painted the door green last year.", "What color is the door?")]
    docs, expected = [], []
    for i, (context, question) in enumerate(raw):
        text = _greedy_line(model, tok, context.strip().strip(".") + ". " + question)
        snippet = text.strip()[:3]
        answer = snippet if (i % 2 == 0 and snippet) else "QZXJ"   # half answerable from the greedy text
        docs.append({"context": context, "question": question, "answers": [answer]})
        expected.append(based_qa.contains_score(text, [answer]))
    assert 0 < sum(expected) < len(expected)                         # the check can tell right from wrong
    row = _run_local_task(tiny, "tiny_drop", based_qa.BasedDrop, docs, "contains")
    assert row.value == pytest.approx(sum(expected) / len(expected))
    outcomes = pd.read_csv(tiny[0] / "tiny_drop_docs.csv").sort_values("doc_id")   # each generation's own score
    assert list(outcomes["value"]) == expected and set(outcomes["metric"]) == {"contains"}


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


@pytest.mark.parametrize("profile", ["default", "ci"])
def test_recall_prompt_holds_its_answer_at_the_window_the_dag_evaluates_with(tiny, profile):
    """The DAG evaluates a model with ``--max-length`` = the profile's training length (workflows/eval.smk) and
    lm-eval's HFLM keeps the last max_length - 48 tokens of a generation prompt; the recall tasks cut their
    prompts to that budget, so what the model receives is the whole prompt: the answer-centred window with its
    answer (NQ), the document head (DROP), and the question. They once cut to a fixed 1998 tokens, and lm-eval then
    kept only the prompt's tail."""
    from suite.config import load_config

    root, ckpt, _, tok, _ = tiny
    lm_args = re.search(r"^LM_ARGS = \((.*?)\)$", (ROOT / "workflows" / "eval.smk").read_text(), re.S | re.M).group(1)
    assert "--max-length {TRAIN_LEN}" in lm_args and "TRAIN_LEN = STUDY[\"train\"][\"seq_len\"]" in \
        (ROOT / "workflows" / "eval.smk").read_text()
    window = load_config(profile)["train"]["seq_len"]
    lm = harness.OrthrosHFLM(pretrained=str(ckpt), batch_size=1, device="cpu", dtype="float32", max_length=window)
    filler = [f"w{i}" for i in range(3 * window)]
    nq = {"context": " ".join(filler[:2 * window] + ["the key is QZXANSWER ."] + filler[2 * window:]),
          "question": "What is the key?", "answers": ["QZXANSWER"]}
    drop = {"context": "HEADMARK opens the document . " + " ".join(filler), "question": "What opens the document?",
            "answers": ["HEADMARK"]}
    seen = []
    generate = lm._model_generate
    lm._model_generate = lambda context, *a, **kw: seen.append(context[0].tolist()) or generate(context, *a, **kw)
    try:
        for name, task_class, doc in (("tiny_nq", based_qa.BasedNQ, nq), ("tiny_drop", based_qa.BasedDrop, drop)):
            path = root / f"{name}_{profile}.jsonl"
            path.write_text(json.dumps(doc))
            config = {"task": name, "class": task_class, "dataset_path": "json",
                      "dataset_kwargs": {"data_files": {"validation": str(path)}}}
            df = harness.run_tasks(ckpt, None, [name], root / f"{name}_{profile}.csv", lm=lm,
                                   extra_tasks={name: (config, ("contains",))})
            assert df.status.tolist() == ["ok"] and df.window_tokens.tolist() == [window]
    finally:
        del lm._model_generate
    assert len(seen) == 2
    for ids, doc in zip(seen, (nq, drop)):
        prompt = tok.decode([t for t in ids if t != tok.pad_token_id])
        assert len(tok(prompt, add_special_tokens=False)["input_ids"]) <= window - 48
        assert doc["answers"][0] in prompt and prompt.endswith(". " + doc["question"]), prompt
    assert tok.decode(seen[1]).lstrip().startswith("HEADMARK opens the document")
    with pytest.raises(ValueError, match="give max_length"):
        based_qa.BasedNQ(config={"metadata": {"tokenizer": str(ckpt)}})


def _direct_loglik(model, context_ids, continuation_ids):
    """Sum log p(continuation_ids | context_ids), one forward, positions counted by hand."""
    ids = torch.tensor([context_ids + continuation_ids])
    with torch.no_grad():
        logp = model(input_ids=ids).logits.log_softmax(-1)[0]
    return sum(float(logp[len(context_ids) + i - 1, t]) for i, t in enumerate(continuation_ids))


def test_loglikelihood_scores_the_whole_continuation_when_a_token_spans_the_join(tiny, caplog):
    """With this BPE, encoding context + continuation together puts a token across the join: lm-eval's
    split then leaves no continuation token ("Return the mod" + "ule": its empty-continuation assertion)
    or scores a part ("Call ro" + "utines" scores "tines"). Right value: the continuation's own tokens."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    _, _, model, tok, lm = tiny
    enc = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    spanning = [("Return the mod", "ule"), ("Call ro", "utines")]
    aligned = [("The capital of France is", " Paris")]
    for context, continuation in spanning:  # the premise: the inherited split is wrong here
        _, cont = HFLM._encode_pair(lm, context, continuation)
        assert tok.decode(cont) != continuation
    requests = [Instance("loglikelihood", doc={}, arguments=pair, idx=0) for pair in spanning + aligned]
    with caplog.at_level("INFO", logger="suite.eval.harness"):
        got = lm.loglikelihood(requests, disable_tqdm=True)
    for (context, continuation), (ll, _) in zip(spanning + aligned, got):
        ctx_ids, cont_ids = enc(context), enc(continuation)
        assert cont_ids and tok.decode(cont_ids) == continuation
        assert ll == pytest.approx(_direct_loglik(model, ctx_ids, cont_ids), abs=1e-4)
    assert "encoded separately" in caplog.text and "Call ro" in caplog.text


def test_truncate_context_cuts_on_token_boundaries_within_budget(tiny):
    """Multi-byte characters take two byte tokens here: a cut between them must not decode to U+FFFD,
    and the cut text, encoded again, must fit the budget."""
    _, _, _, tok, _ = tiny
    context = " ".join(f"café{i} naïve{i} résumé{i}" for i in range(60))
    enc = tok(context, add_special_tokens=False, return_offsets_mapping=True)
    starts = {a for a, _ in enc["offset_mapping"]}
    ends = {b for _, b in enc["offset_mapping"]}
    for budget in range(50, 70):
        for centre in (False, True):
            cut = based_qa.truncate_context(context, ["résumé30"], tok, budget, centre)
            where = context.find(cut)
            assert where >= 0, (budget, centre, cut[:20])
            assert where in starts and where + len(cut) in ends  # both ends on token boundaries
            n = len(tok(cut, add_special_tokens=False)["input_ids"])
            assert budget - 4 <= n <= budget
            assert ("résumé30" in cut) == centre


def test_narrativeqa_loads_its_task_and_reaches_the_dataset(tiny, monkeypatch):
    """lm-eval's scrolls_narrativeqa dies importing transformers.data.metrics; the suite's task loads its config
    and gets as far as reading the SCROLLS data, which offline is unavailable."""
    import datasets

    root, ckpt, _, _, lm = tiny
    calls, real = [], datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    df = harness.run_tasks(ckpt, None, ["narrativeqa"], root / "narrativeqa.csv", lm=lm)
    assert df.status.tolist() == [harness.NOT_OFFLINE], df.status.tolist()
    assert df.metric.tolist() == ["f1"] and df.unit.tolist() == ["fraction"]
    assert "NarrativeQA" in df.task_variant.iloc[0] and "F1" in df.task_variant.iloc[0]
    assert any("narrative_qa" in str(c.get("data_files")) for c in calls)


def test_narrativeqa_f1_matches_direct_greedy_generation(tiny):
    _, _, model, tok, _ = tiny
    stories = [("Who owns the cat?", "Alice owns a grey cat. The cat sleeps all day."),
               ("Where does Bob live?", "Bob lives in a small house near the river."),
               ("What did Carol paint?", "Carol painted the garden door green."),
               ("When is the meeting?", "The meeting moved to Tuesday at noon.")]
    rows, expected = [], []
    for i, (question, story) in enumerate(stories):
        text = _greedy_line(model, tok, f"{story}\n\nQuestion: {question}\nAnswer:")
        # gold answers: the greedy text itself (F1 = 1) on even documents, words it does not hold (F1 = 0) on all
        answers = ["QZXJ wug", text] if i % 2 == 0 else ["QZXJ wug"]
        assert text.strip() and "qzxj" not in text.lower() and "wug" not in text.lower()
        for answer in answers:  # SCROLLS: one row per (question, answer), merged by id
            rows.append({"id": f"q{i}", "pid": f"q{i}_{len(rows)}", "input": f"{question}\n\n{story}",
                         "output": answer})
        expected.append(1.0 if i % 2 == 0 else 0.0)
    row = _run_local_task(tiny, "tiny_narrativeqa", based_qa.NarrativeQA, rows, "f1")
    assert row.n_samples == len(stories)  # the rows of one id are one document
    assert row.value == pytest.approx(sum(expected) / len(expected))
    outcomes = pd.read_csv(tiny[0] / "tiny_narrativeqa_docs.csv").sort_values("doc_id")
    assert list(outcomes["value"]) == pytest.approx(expected)   # a generation task's per-document F1
    # token F1 by hand: {cat, sat} vs {cat, sat, down}: P = 1, R = 2/3; {tuesday, at, noon} vs 4 words: R = 3/4
    assert based_qa.token_f1("The Cat sat.", "a cat sat down") == pytest.approx(0.8)
    assert based_qa.f1_score("Tuesday, at noon", ["Friday", "at noon on Tuesday"]) == pytest.approx(6 / 7)
    assert based_qa.token_f1("noon noon", "noon") == pytest.approx(2 / 3)  # shared words counted once each


def test_heldout_perplexity_matches_direct_loglik(tiny):
    root, ckpt, model, tok, lm = tiny
    paragraphs = ["hello world, this is some held out text.", "another paragraph of plain words here",
                  "the third one is a little longer than the others, with punctuation; and more words."]
    path = root / "val.txt"
    path.write_text("\n\n".join(paragraphs) + "\n")
    df = harness.run_tasks(ckpt, None, ["val_ppl"], root / "ppl.csv", lm=lm, ppl_data=path)
    assert pd.read_csv(root / "ppl_docs.csv").empty   # perplexity is a corpus ratio, no per-document outcome
    total_ll = total_words = total_bytes = 0
    for text in paragraphs:
        ids = [tok.eos_token_id] + tok(text, add_special_tokens=False)["input_ids"]   # the training boundary token
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
    assert set(df.boundary_token) == {f"eos:{tok.eos_token_id}"}


def test_heldout_perplexity_scores_document_text_only(tiny):
    """val.txt as the corpus writes it (documents joined by DOC_SEPARATOR, the EOS token's text on a line of its
    own): what is scored is exactly the documents' paragraphs (lines, whole documents), never the separator, whose
    text encodes as EOS; sampling the file by paragraph once left it at the head or inside a scored document."""
    import datasets

    from suite.data.splits import DOC_SEPARATOR, EOS_TOKEN

    root, ckpt, model, tok, lm = tiny
    docs = ["def f():\n    return 1\n\n\ndef g():\n    pass\n", "x = 1\ny = 2", "# a comment\n\nz = 3\n"]
    path = root / "corpus_val.txt"
    path.write_text(DOC_SEPARATOR.join(docs))
    units = {"paragraph": [u.strip() for d in docs for u in d.split("\n\n") if u.strip()],
             "line": [u.strip() for d in docs for u in d.splitlines() if u.strip()],
             "document": [d.strip() for d in docs]}
    raw = datasets.load_dataset("text", data_files={"test": str(path)}, sample_by="document")["test"]
    for sample_by, want in units.items():
        got = harness.perplexity_task_config(path, sample_by=sample_by)["process_docs"](raw)["text"]
        assert got == want and not any(EOS_TOKEN in text for text in got), sample_by
    inputs = []
    hook = lm.model.register_forward_pre_hook(lambda m, args, kw: inputs.append(kw.get("input_ids", args and args[0])),
                                              with_kwargs=True)
    try:
        df = harness.run_tasks(ckpt, None, ["val_ppl"], root / "corpus_ppl.csv", lm=lm, ppl_data=path)
    finally:
        hook.remove()
    assert inputs and all(int((ids[:, 1:] == tok.eos_token_id).sum()) == 0 for ids in inputs)  # EOS only first
    total_ll = total_bytes = 0
    for text in units["paragraph"]:
        ids = [tok.eos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([ids])).logits.log_softmax(-1)[0]
        total_ll += sum(float(logp[i - 1, ids[i]]) for i in range(1, len(ids)))
        total_bytes += len(text.encode())
    got = dict(zip(df.metric, df.value))
    assert got["byte_perplexity"] == pytest.approx(math.exp(-total_ll / total_bytes), rel=1e-4)


def _doc_loglik(model, tok, text, boundary_id, window):
    """Independent rolling log-likelihood: the document after ``boundary_id`` in consecutive chunks of ``window``
    predicted tokens; a chunk's inputs are the ``window`` tokens before its last target (never more)."""
    ids = [boundary_id] + tok(text, add_special_tokens=False)["input_ids"]
    total, start = 0.0, 1
    while start < len(ids):
        end = min(start + window, len(ids))               # predict ids[start:end]
        lo = max(0, end - 1 - window)
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([ids[lo:end - 1]])).logits.log_softmax(-1)[0]
        total += sum(float(logp[i - 1 - lo, ids[i]]) for i in range(start, end))
        start = end
    return total


def test_perplexity_uses_the_training_boundary_token_and_length(tiny):
    """Documents start after the token training put between them (EOS here, not lm-eval's BOS), and no window is
    longer than the training length: a long paragraph is scored in windows of max_length tokens."""
    root, ckpt, model, tok, _ = tiny
    text = " ".join(["a long paragraph of held out words that runs well past the training length"] * 4)
    path = root / "long.txt"
    path.write_text(text + "\n")
    lm = harness.OrthrosHFLM(pretrained=str(ckpt), batch_size=1, device="cpu", dtype="float32", max_length=16)
    seen = []
    hook = lm.model.register_forward_pre_hook(lambda m, args, kw: seen.append((kw.get("input_ids", args[0] if args
                                                                                    else None)).shape[-1]),
                                              with_kwargs=True)
    try:
        eos = harness.run_tasks(ckpt, None, ["val_ppl"], root / "eos.csv", lm=lm, ppl_data=path)
        bos = harness.run_tasks(ckpt, None, ["val_ppl"], root / "bos.csv", lm=lm, ppl_data=path, boundary_token="bos")
    finally:
        hook.remove()
    n_tokens = len(tok(text, add_special_tokens=False)["input_ids"])
    assert n_tokens > 3 * 16 and seen and max(seen) <= 16
    n_bytes = len(text.encode())
    for frame, boundary in ((eos, tok.eos_token_id), (bos, tok.bos_token_id)):
        want = math.exp(-_doc_loglik(model, tok, text, boundary, 16) / n_bytes)
        got = dict(zip(frame.metric, frame.value))["byte_perplexity"]
        assert got == pytest.approx(want, rel=1e-4)
    assert set(eos.window_tokens) == {16} and set(bos.boundary_token) == {f"bos:{tok.bos_token_id}"}
    assert dict(zip(eos.metric, eos.value))["byte_perplexity"] != dict(zip(bos.metric, bos.value))["byte_perplexity"]
    with pytest.raises(ValueError, match="boundary_token"):
        harness.run_tasks(ckpt, None, ["val_ppl"], root / "x.csv", lm=lm, ppl_data=path, boundary_token="pad")


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


def test_import_leaves_the_environment_alone():
    """Importing the harness sets no environment variable of its own; force_offline (what run_tasks and the model
    call first) makes the Hub offline."""
    from suite.config import ROOT

    code = ("import os\n"
            "import suite.eval.harness as harness\n"
            "assert 'HF_HUB_OFFLINE' not in os.environ and 'HF_DATASETS_OFFLINE' not in os.environ\n"
            "harness.force_offline()\n"
            "import datasets.config, huggingface_hub.constants\n"
            "assert os.environ['HF_HUB_OFFLINE'] == os.environ['HF_DATASETS_OFFLINE'] == '1'\n"
            "assert huggingface_hub.constants.HF_HUB_OFFLINE and datasets.config.HF_DATASETS_OFFLINE\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**env, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
