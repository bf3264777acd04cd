"""NarrativeQA (SCROLLS) on lm-eval's task API, scored by token F1: the "NQ" column read as NarrativeQA.

lm-eval 0.4.13's ``scrolls_narrativeqa`` cannot load under transformers 5: its module imports
``transformers.data.metrics`` (removed) and fetches the SCROLLS metric script from the Hub. This task reads the same
data, the SCROLLS ``narrative_qa`` validation split (the zipped jsonl lm-eval also reads), and keeps SCROLLS'
protocol (own code):

* rows of one ``id`` are merged into one document with the list of gold answers;
* the ``input`` field is ``question + "\\n\\n" + story``; the prompt is
  ``"<story>\\n\\nQuestion: <question>\\nAnswer:"``, the full story (HFLM left-truncates it to
  ``max_length - 48`` tokens, so the question is kept);
* greedy generation until ``"\\n"``, at most 48 tokens;
* metric ``f1``: SQuAD token F1 (lower case, punctuation and articles a/an/the removed), the best over the gold
  answers, averaged over documents, as a fraction in [0, 1] (SCROLLS reports it x 100).

The dataset can be pointed at a local jsonl of SCROLLS rows (``id``, ``input``, ``output``) by overriding
``dataset_path``/``dataset_kwargs`` in the task config.
"""
from __future__ import annotations

import re
import string
from collections import Counter

import datasets
import numpy as np
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

SCROLLS_ZIP = "https://huggingface.co/datasets/tau/scrolls/resolve/main/narrative_qa.zip"
DATA_FILES = {"validation": f"zip://narrative_qa/validation.jsonl::{SCROLLS_ZIP}"}
GEN_KWARGS = {"until": ["\n"], "max_gen_toks": 48, "do_sample": False}


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the normalised word bags of ``prediction`` and ``reference`` (1.0 when both are empty)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers) -> float:
    """The best :func:`token_f1` of ``prediction`` over the gold ``answers`` (0.0 without answers)."""
    return max((token_f1(prediction, a) for a in answers), default=0.0)


def merge_rows(rows) -> datasets.Dataset:
    """SCROLLS rows (``id``, ``input``, ``output``) -> one document per id: ``question``, ``text``, ``answers``."""
    docs: dict[str, dict] = {}
    for row in rows:
        doc = docs.get(row["id"])
        if doc is None:
            question, _, text = row["input"].partition("\n\n")
            doc = docs[row["id"]] = {"id": row["id"], "question": question.strip(), "text": text.strip(),
                                     "answers": []}
        doc["answers"].append(row["output"])
    return datasets.Dataset.from_list(list(docs.values()))


class NarrativeQA(ConfigurableTask):
    """SCROLLS NarrativeQA, generation scored by token F1 (see the module docstring)."""

    VERSION = 1

    def __init__(self, config: dict | None = None, **kwargs):
        base = {"task": "narrativeqa_scrolls", "dataset_path": "json", "dataset_kwargs": {"data_files": DATA_FILES},
                "validation_split": "validation", "output_type": "generate_until",
                "generation_kwargs": dict(GEN_KWARGS)}
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        metadata = {"version": self.VERSION} | (config.pop("metadata", None) or {})
        super().__init__(config=base | config | {"metadata": metadata})

    def has_training_docs(self):
        return False

    def has_validation_docs(self):
        return True

    def has_test_docs(self):
        return False

    def validation_docs(self):
        return merge_rows(self.dataset[self.config.validation_split])

    def doc_to_text(self, doc):
        return f"{doc['text']}\n\nQuestion: {doc['question']}\nAnswer:"

    def doc_to_target(self, doc):
        return " " + (doc["answers"][0] if doc["answers"] else "")

    def construct_requests(self, doc, ctx, chat_template=None, apply_chat_template=False, **kwargs):
        return [Instance(request_type="generate_until", doc=doc, arguments=(ctx, dict(GEN_KWARGS)), idx=0,
                         **kwargs)]

    def process_results(self, doc, results):
        return {"f1": f1_score(results[0], doc["answers"])}

    def aggregation(self):
        return {"f1": np.mean}

    def higher_is_better(self):
        return {"f1": True}
