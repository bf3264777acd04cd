"""Needle-in-a-haystack retrieval task: needle formats, training sequences and evaluation prompts.

A needle binds a key to a value and sits in held-out text at a line boundary; a question at the end
names the key and the model must produce the value (RULER's ``niah_single``, paper Sec. 4.4 / Fig. 3).
Four formats:

* ``ruler``: RULER's own English templates and random ``value_digits``-digit numbers (7 in RULER);
  keys are the words of :data:`suite.data.retrieval.KEY_WORDS`. For models large enough to learn it
  (gpu / slurm profiles).
* ``code``: the same task written as Python, the default corpus's own language: the needle is the line
  `` <key> =<value>`` and the question is the line prefix `` <key> =``. Keys are the tokenizer's rarest
  single-token words (rare in the train split, so the haystack rarely holds the same key), values the
  ``value_digits``-digit numbers the tokenizer writes as one token (60 two-digit values with the default
  4K BPE). This departs from RULER's wording and 7-digit values; it is what a 1M-parameter model learns
  on a CPU budget (measured: RULER's templates with 3-digit values stayed at 0.8 at T=128 after 1000
  steps, and English templates at 0.0).
* ``rare``: the code format with values the haystack almost never holds: the tokenizer's rarest alphabetic word
  pieces (BPE merge intermediates such as ``alue`` or ``atrix``, at most one per 32K train tokens each, none of
  them a key; on the gpu profile's corpus the 24 of them occur 0.7 times per 32K test tokens together), so the value
  token marks its needle. In the code format a value is one of ~52 numbers the haystack holds ~190 times per 32K
  tokens (both counts on the gpu profile's corpus), and only the `` =`` before it
  (never followed by a number in the haystack) marks the needle: a Transformer's first layer must keep a sharp
  previous-token feature against 32K keys, which 2-layer 3.7M Transformers did not learn on the H200 (<= 0.7 at
  4K-32K in every recipe tried, results/gpu/CALIBRATION.md) while Orthros, whose 128-token base window gives
  that feature at every length, reached 0.75-0.95. ``value_digits`` does not apply (None).
* ``kv``: the code format without the `` =``: the needle is the line `` <key><value>`` and the question
  `` <key>``, so the value directly follows its key, as in Zoology's MQAR. In the code format the token
  before the answer (`` =``) is the same for every needle and common in the haystack, so finding the
  asked needle means matching the token two back: 2-layer attention models stayed at the copy-any-needle
  loss there (ln(3)/2 with 3 needles a row) on the H200 while GatedDeltaNet, whose short convolution
  sees the previous tokens, matched keys within ~100 steps. With the key adjacent, retrieval is one
  induction step, as on MQAR. Measured on the H200 (results/gpu/CALIBRATION.md): no better than the
  code format (Transformer 0.45 / 0.20 / 0.05 at 4K / 16K / 32K), and Python is full of look-alikes of
  its needles (a word then a bare number: ``int32``, ``base64``); kept for that comparison.

Training sequences (:meth:`NeedleTask.training_sequence`) hold ``n_queries`` needles at random line
boundaries of a train-split crop, then every key asked once in random order, each followed by its
answer; the loss is taken on the answer tokens only. Evaluation prompts
(:meth:`NeedleTask.eval_prompt`) hold one needle at a given depth and one question, and end where
the answer starts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from suite.data.retrieval import KEY_WORDS

FORMATS = ("ruler", "code", "kv", "rare")


@dataclass(frozen=True)
class Templates:
    needle: str
    question: str
    answer: str


TEMPLATES = {
    "ruler": Templates(needle="\nOne of the special magic numbers for {key} is: {value}.\n",
                       question=("\nWhat is the special magic number for {key} mentioned in the provided text? "
                                 "The special magic number for {key} mentioned in the provided text is"),
                       answer=" {value}."),
    "code": Templates(needle="\n {key} ={value}\n", question="\n {key} =", answer="{value}\n"),
    "kv": Templates(needle="\n {key}{value}\n", question="\n {key}", answer="{value}\n"),
}
TEMPLATES["rare"] = TEMPLATES["code"]
LINE_ANSWER_FORMATS = ("code", "kv", "rare")
# values of the rare format: the rarest word pieces that pass its checks (gpu corpus: 0.7 in 32K test tokens)
RARE_VALUES = 24
RARE_SPACING = 32768  # a rare value occurs at most once per this many train tokens


@dataclass
class Prompt:
    """One evaluation prompt: ``ids`` (exactly ``context_len`` token ids), the key and value asked, and
    ``distance``: tokens from the needle's first value token to the last prompt token (where the answer
    is produced). A windowed model whose receptive field is shorter than ``distance`` cannot see the value."""

    ids: list[int]
    key: str
    value: str
    distance: int


class NeedleTask:
    """The retrieval task of one format over one tokenizer.

    Args:
        fmt: one of :data:`FORMATS` (``"ruler"``, ``"code"``, ``"kv"``).
        encode: text -> token ids, no special tokens (e.g. ``lambda s: tok.encode(s, add_special_tokens=False).ids``).
        keys, values: the key words and value strings to draw from.
        newline_ids: token ids whose text holds a line break (needles go right after one; the needle
            itself starts with a newline).
    """

    def __init__(self, fmt: str, encode, keys: list[str], values: list[str] | None, value_digits: int | None,
                 newline_ids: set[int]):
        if fmt not in FORMATS:
            raise ValueError(f"unknown needle format {fmt!r}; known: {FORMATS}")
        self.fmt, self.encode, self.templates = fmt, encode, TEMPLATES[fmt]
        self.keys, self.values, self.value_digits, self.newline_ids = keys, values, value_digits, newline_ids

    @classmethod
    def from_tokenizer(cls, fmt: str, tokenizer, train_tokens: np.ndarray | None = None,
                       value_digits: int | None = 7, n_keys: int = 100) -> "NeedleTask":
        """The task over a ``tokenizers.Tokenizer``. ``code``, ``kv`` and ``rare`` need ``train_tokens`` (flat ids of
        the train split) to pick the rarest single-token words as keys (and, for ``rare``, the rarest word pieces as
        values). Raises ValueError when the tokenizer has too few single-token words, numbers or word pieces for the
        format, for ``value_digits`` < 1, and for a ``value_digits`` given to the ``rare`` format (its values are
        word pieces: pass None)."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown needle format {fmt!r}; known: {FORMATS}")
        if fmt == "rare":
            if value_digits is not None:
                raise ValueError(f"value_digits={value_digits}: the rare format's values are word pieces, not numbers")
        elif value_digits is None or value_digits < 1:
            raise ValueError(f"value_digits={value_digits} must be >= 1")
        vocab = tokenizer.get_vocab()
        encode = lambda s: tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
        newline_ids = {i for t, i in vocab.items() if "\n" in tokenizer.decode([i])}
        if fmt == "ruler":
            return cls(fmt, encode, list(KEY_WORDS), None, value_digits, newline_ids)
        if train_tokens is None:
            raise ValueError(f"the {fmt} needle format needs the train split's tokens to choose rare keys")
        counts = np.bincount(np.asarray(train_tokens, dtype=np.int64), minlength=len(vocab))
        words = sorted((counts[i], t[1:]) for t, i in vocab.items()
                       if t.startswith("\u0120") and re.fullmatch(r"[a-z]{4,9}", t[1:]))
        keys = [w for _, w in words[:n_keys]]
        if fmt == "rare":
            if len(keys) < 8:
                raise ValueError(f"tokenizer has {len(keys)} single-token words; the rare needle format needs >= 8")
            return cls(fmt, encode, keys, rare_values(tokenizer, counts, keys), None, newline_ids)
        lo, hi = (0 if value_digits == 1 else 10 ** (value_digits - 1)), 10 ** value_digits
        before = " =" if fmt == "code" else f" {keys[0]}" if keys else ""  # the token a value follows
        values = [str(n) for n in range(lo, hi) if str(n) in vocab and len(encode(before + str(n))) == 2]
        if len(keys) < 8 or len(values) < 10:
            raise ValueError(f"tokenizer has {len(keys)} single-token words and {len(values)} single-token "
                             f"{value_digits}-digit numbers; the {fmt} needle format needs >= 8 and >= 10")
        return cls(fmt, encode, keys, values, value_digits, newline_ids)

    def draw(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        """``n`` (key, value) pairs with distinct keys (and distinct values when values come from a list)."""
        if not 1 <= n <= len(self.keys):
            raise ValueError(f"n={n} needles out of range [1, {len(self.keys)}]")
        keys = [self.keys[i] for i in rng.choice(len(self.keys), size=n, replace=False)]
        if self.values is not None:
            values = [self.values[i] for i in rng.choice(len(self.values), size=n, replace=n > len(self.values))]
        else:
            lo = 10 ** (self.value_digits - 1)
            values = [str(int(rng.integers(lo, 10 * lo))) for _ in range(n)]
        return list(zip(keys, values))

    def needle_ids(self, key: str, value: str) -> tuple[list[int], int]:
        """Token ids of one needle and the offset of its first value token."""
        head, _ = self.templates.needle.split("{value}")
        ids = self.encode(self.templates.needle.format(key=key, value=value))
        head_ids = self.encode(head.format(key=key))
        shared = 0  # the value starts where the needle's tokens leave the head's (a space may merge into it)
        while shared < min(len(ids), len(head_ids)) and ids[shared] == head_ids[shared]:
            shared += 1
        return ids, shared

    def answer_ids(self, value: str) -> list[int]:
        return self.encode(self.templates.answer.format(value=value))

    def question_ids(self, key: str) -> list[int]:
        return self.encode(self.templates.question.format(key=key))

    def _boundaries(self, hay: np.ndarray) -> np.ndarray:
        """Offsets in ``hay`` right after a token holding a line break (0 and len(hay) always count)."""
        ends = np.flatnonzero(np.isin(hay, list(self.newline_ids))) + 1
        return np.unique(np.concatenate([[0], ends, [len(hay)]]))

    def _crop(self, rng, hay: np.ndarray, n: int) -> np.ndarray:
        if len(hay) <= n:
            raise ValueError(f"haystack of {len(hay)} tokens is shorter than the {n} needed")
        start = int(rng.integers(0, len(hay) - n))
        return np.asarray(hay[start:start + n], dtype=np.int64)

    def _row_parts(self, rng: np.random.Generator, n_queries: int) -> tuple[list[list[int]], list[int], list[int]]:
        """``(needles, tail, labels)`` of one training row: the token ids of ``n_queries`` needles, the questions
        with their answers in random order, and the answer positions in the tail (as ``training_sequence`` labels)."""
        pairs = self.draw(rng, n_queries)
        needles = [self.needle_ids(k, v)[0] for k, v in pairs]
        tail, labels = [], []
        for i in rng.permutation(n_queries):
            key, value = pairs[i]
            tail += self.question_ids(key)
            answer = self.answer_ids(value)
            labels += [len(tail) - 1 + j for j in range(len(answer))]
            tail += answer
        return needles, tail, labels

    def row_tokens(self, n_queries: int, draws: int = 256, seed: int = 0) -> int:
        """Tokens that the needles, questions and answers of one training row of ``n_queries`` needles take: the most
        over ``draws`` random rows (keys and values vary in length). A row of ``seq_len`` must exceed it, to leave
        haystack around the needles: a CLI checks its lengths with this before training (the largest draw is not a
        bound: a rarer, longer one can still fail ``training_sequence``)."""
        rng = np.random.default_rng(seed)
        most = 0
        for _ in range(draws):
            needles, tail, _ = self._row_parts(rng, n_queries)
            most = max(most, len(tail) + sum(map(len, needles)))
        return most

    def training_sequence(self, rng: np.random.Generator, hay: np.ndarray, seq_len: int,
                          n_queries: int) -> tuple[np.ndarray, list[int]]:
        """One training row: ``(ids int64 [seq_len], label_positions)``; position ``t`` in
        ``label_positions`` predicts ``ids[t + 1]``, an answer token. Raises ValueError when ``seq_len``
        cannot hold the needles and questions."""
        needles, tail, labels = self._row_parts(rng, n_queries)
        hay_len = seq_len - len(tail) - sum(map(len, needles))
        if hay_len < 1:
            raise ValueError(f"seq_len {seq_len} too short for {n_queries} needles and questions "
                             f"({seq_len - hay_len} tokens)")
        crop = self._crop(rng, hay, hay_len)
        cuts = np.sort(rng.choice(self._boundaries(crop), size=n_queries, replace=True))
        pieces, prev = [], 0
        for cut, ids in zip(cuts, needles):
            pieces += [crop[prev:cut], np.asarray(ids, dtype=np.int64)]
            prev = cut
        pieces.append(crop[prev:])
        body = np.concatenate(pieces)
        out = np.concatenate([body, np.asarray(tail, dtype=np.int64)])
        assert out.shape == (seq_len,)
        return out, [len(body) + t for t in labels]

    def eval_prompt(self, rng: np.random.Generator, hay: np.ndarray, context_len: int, depth: float) -> Prompt:
        """One needle at the line boundary nearest to ``depth`` (0 = start, 1 = just before the question),
        then the question; exactly ``context_len`` tokens. Raises ValueError for a depth outside [0, 1], a
        context too short for needle and question, or a haystack shorter than needed."""
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth={depth} must be in [0, 1]")
        (key, value), = self.draw(rng, 1)
        needle, value_at = self.needle_ids(key, value)
        question = self.question_ids(key)
        hay_len = context_len - len(needle) - len(question)
        if hay_len < 0:
            raise ValueError(f"context_len={context_len} cannot hold the needle and question "
                             f"({len(needle) + len(question)} tokens)")
        crop = self._crop(rng, hay, hay_len) if hay_len else np.zeros(0, dtype=np.int64)
        bounds = self._boundaries(crop)
        cut = int(bounds[np.argmin(np.abs(bounds - depth * hay_len))])
        ids = crop[:cut].tolist() + needle + crop[cut:].tolist() + question
        return Prompt(ids=ids, key=key, value=value, distance=context_len - 1 - (cut + value_at))


    def correct(self, generated: str, value: str) -> bool:
        """Whether a generation answers ``value``: RULER scores the whole generation (a restated sentence is fine);
        the code, kv and rare formats' answer is its first line, as the needle's value ends its line (numbers as a
        whole digit run in it, a rare word piece as the whole line)."""
        answer = generated.split("\n", 1)[0] if self.fmt in LINE_ANSWER_FORMATS else generated
        if self.fmt == "rare":
            return answer.strip() == value
        return whole_number_match(answer, value)


def rare_values(tokenizer, counts: np.ndarray, keys: list[str], n: int = RARE_VALUES) -> list[str]:
    """The ``n`` rarest word pieces (in ``counts``, token counts of the train split) that can serve as a ``rare``
    value: alphabetic, at least 3 letters, not a key, at most once per :data:`RARE_SPACING` train tokens, and
    tokenized back to the same single token after `` =`` and before a newline. Raises ValueError when fewer than 10
    qualify (a small tokenizer or corpus, whose rarest pieces are common words)."""
    encode = lambda s: tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    eq, newline = encode(" ="), encode("\n")
    most = counts.sum() / RARE_SPACING
    pieces = sorted((counts[i], t) for t, i in tokenizer.get_vocab().items()
                    if re.fullmatch(r"[A-Za-z]{3,}", t) and t not in keys and counts[i] <= most)
    values = [t for _, t in pieces if encode(f" ={t}\n") == eq + [tokenizer.token_to_id(t)] + newline][:n]
    if len(values) < 10:
        raise ValueError(f"tokenizer has {len(values)} word pieces usable as rare values (alphabetic, one token after "
                         f"' =', at most one per {RARE_SPACING} train tokens); the rare format needs >= 10")
    return values


def whole_number_match(text: str, value: str) -> bool:
    """True when ``value`` occurs in ``text`` as a whole digit run ("11234567" does not contain 1234567)."""
    return value in re.findall(r"\d+", text)
