"""Cloze-style recall QA tasks (DROP, TriviaQA, NQ) in the form of the Based / Just-Read-Twice suite.

The GLA / GatedDeltaNet line reports six recall-intensive tasks (paper Table 3: DROP, NQ, SWDE, TriviaQA, FDA,
SQuAD). lm-eval 0.4.13 ships SWDE, FDA and SQuAD (``swde``, ``fda``, ``squad_completion``) but not the cloze
DROP / TriviaQA / NQ variants, so they are defined here (own code, same protocol):

* prompt: ``"<context>. <question>"`` (TriviaQA markup ``[PAR] [DOC] [TLE]`` removed);
* context truncated to ``recall_context_len - recall_answer_len`` tokens of the model's tokenizer
  (2048 - 50 = 1998 by default): a window centred on the first answer occurrence for NQ, the document head for
  DROP and TriviaQA (as JRT does, these datasets give no answer position); the window is cut from the text at
  token boundaries and re-encoded to check the budget (:func:`truncate_context`);
* greedy generation until ``"\\n"``, at most 48 tokens; metric ``contains`` = case-insensitive substring match of
  any gold answer in the generation, averaged over documents.

Task config ``metadata`` (set by ``suite.eval.harness.run_tasks``) carries ``tokenizer`` (or ``pretrained``),
``recall_context_len`` and ``recall_answer_len``. Without a tokenizer the context is not truncated.
The dataset can be pointed at a local file by overriding ``dataset_path``/``dataset_kwargs`` in the task config.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

GEN_KWARGS = {"until": ["\n"], "max_gen_toks": 48, "do_sample": False}
DEFAULT_CONTEXT_LEN = 2048
DEFAULT_ANSWER_LEN = 50


def contains_score(prediction: str, answers) -> int:
    """1 if any non-empty gold answer occurs (case-insensitive) in ``prediction``, else 0."""
    answers = [a for a in ([answers] if isinstance(answers, str) else list(answers)) if a and a.strip()]
    return int(any(re.search(re.escape(a.strip()), prediction, re.IGNORECASE) for a in answers))


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


class _BasedQA(ConfigurableTask):
    """Shared logic of the cloze QA recall tasks; subclasses set the dataset and the truncation anchor."""

    VERSION = 1
    DATASET_PATH: str = ""
    CENTER_ON_ANSWER = False

    def __init__(self, config: dict | None = None, **kwargs):
        base = {"task": type(self).__name__, "dataset_path": self.DATASET_PATH, "validation_split": "validation",
                "output_type": "generate_until", "generation_kwargs": dict(GEN_KWARGS)}
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        metadata = {"version": self.VERSION} | (config.pop("metadata", None) or {})
        tok = metadata.get("tokenizer") or metadata.get("pretrained")
        self._tok_path = str(tok) if tok else None
        self._max_context = (int(metadata.get("recall_context_len", DEFAULT_CONTEXT_LEN))
                             - int(metadata.get("recall_answer_len", DEFAULT_ANSWER_LEN)))
        if self._max_context <= 0:
            raise ValueError(f"recall_context_len - recall_answer_len = {self._max_context} must be > 0")
        super().__init__(config=base | config | {"metadata": metadata})

    def has_training_docs(self):
        return False

    def has_validation_docs(self):
        return True

    def has_test_docs(self):
        return False

    def validation_docs(self):
        return self.dataset[self.config.validation_split]

    @staticmethod
    def clean(context: str) -> str:
        return context

    def doc_to_text(self, doc):
        context = self.clean(doc["context"].strip())
        if self._tok_path:
            context = truncate_context(context, doc["answers"], _tokenizer(self._tok_path), self._max_context,
                                       self.CENTER_ON_ANSWER)
        question = doc["question"].strip()
        while question and context.lower().endswith(question.lower()):
            context = context[: -len(question)]
        return context.strip().strip(".") + ". " + question

    def doc_to_target(self, doc):
        answers = list(doc["answers"])
        return " " + (answers[0] if answers else "")

    def construct_requests(self, doc, ctx, chat_template=None, apply_chat_template=False, **kwargs):
        return [Instance(request_type="generate_until", doc=doc, arguments=(ctx, dict(GEN_KWARGS)), idx=0,
                         **kwargs)]

    def process_results(self, doc, results):
        return {"contains": contains_score(results[0], doc["answers"])}

    def aggregation(self):
        return {"contains": np.mean}

    def higher_is_better(self):
        return {"contains": True}


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
