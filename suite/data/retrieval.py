"""Synthetic long-context retrieval sequences mixed into training (RULER-style needle in a haystack).

A sequence is a crop of TRAIN-split text (the haystack; no val/test text leaks in) with one or more
needles ``NEEDLE_TEMPLATE`` inserted at random depths, then ``QUESTION_TEMPLATE`` about one of the keys
and the answer ``ANSWER_TEMPLATE``. Keys are random words from ``KEY_WORDS``, values random 7-digit
numbers; extra needles carry other keys and act as distractors (RULER's multi-key NIAH). The whole
sequence is trained on with the ordinary next-token loss.

``suite.experiments.niah.run`` evaluates with the same template strings, imported from here.

Departure from the paper: its NIAH result (Sec. 4.4, Fig. 3) comes from Qwen3-8B converted to Orthros
and then trained on 20B tokens of ProLong long-context data before being evaluated up to 128K. A tiny
model trained on a few million tokens has no such budget, so the suite instead mixes a documented
fraction (``data.retrieval_fraction`` of the study config) of these synthetic retrieval sequences into
pretraining. NIAH numbers from this suite therefore measure whether the architecture *can learn* to
retrieve across its training length and beyond, not what the paper's 8B + ProLong model does.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

NEEDLE_TEMPLATE = "One of the special magic numbers for {key} is: {value}."
QUESTION_TEMPLATE = ("What is the special magic number for {key} mentioned in the provided text? "
                     "The special magic number for {key} mentioned in the provided text is")
ANSWER_TEMPLATE = " {value}."
KEY_WORDS = (
    "apple", "river", "candle", "mountain", "violin", "garden", "rocket", "window", "tiger", "harbor",
    "pencil", "meadow", "lantern", "falcon", "copper", "island", "saddle", "thunder", "marble", "orchid",
    "glacier", "compass", "basket", "dragon", "feather", "engine", "puzzle", "velvet", "canyon", "whistle",
    "anchor", "blossom", "crystal", "dolphin", "ember", "forest", "granite", "horizon", "ivory", "jungle",
    "kettle", "lemon", "mirror", "nectar", "oyster", "pepper", "quartz", "raven", "silver", "tunnel",
    "umbrella", "valley", "walnut", "yogurt", "zebra", "bridge", "cactus", "desert", "eagle", "fountain",
    "guitar", "hammer", "iceberg", "jasmine", "koala", "ladder", "magnet", "needle", "octopus", "parrot",
)


def make_needles(rng: np.random.Generator, n_keys: int) -> list[tuple[str, str]]:
    """``n_keys`` (key, value) pairs with distinct random keys and random 7-digit values (as strings)."""
    if not 1 <= n_keys <= len(KEY_WORDS):
        raise ValueError(f"n_keys {n_keys} out of range [1, {len(KEY_WORDS)}]")
    keys = rng.choice(len(KEY_WORDS), size=n_keys, replace=False)
    return [(KEY_WORDS[k], str(int(rng.integers(1_000_000, 10_000_000)))) for k in keys]


def needle_text(key: str, value: str) -> str:
    return "\n" + NEEDLE_TEMPLATE.format(key=key, value=value) + "\n"


def tail_text(key: str, value: str) -> str:
    """The question about ``key`` and its answer, which end a retrieval sequence."""
    return "\n" + QUESTION_TEMPLATE.format(key=key) + ANSWER_TEMPLATE.format(value=value)


def shortest_seq_len(count: Callable[[str], int], draws: int = 256, seed: int = 0) -> int:
    """The shortest sequence that holds, for each of ``draws`` random keys and values, one needle, the question and
    the answer (``count``: text -> its number of tokens) and a token of haystack. A training length below it fails
    at a retrieval batch; one at it can still meet a rarer, longer draw. ``count`` may be a lower bound of the
    tokenizer's count (the pre-tokens of a byte-level BPE), giving a lower bound."""
    rng = np.random.default_rng(seed)
    pairs = [make_needles(rng, 1)[0] for _ in range(draws)]
    return 1 + max(count(needle_text(k, v)) + count(tail_text(k, v)) for k, v in pairs)


class RetrievalSampler:
    """Builds retrieval training sequences from a haystack token array.

    Args:
        haystack: flat train-split token ids, shape [n_tokens] (any integer dtype).
        encode: text -> list of token ids (no special tokens), e.g. ``tokenizers.Tokenizer``'s
            ``lambda s: tok.encode(s, add_special_tokens=False).ids``.
        max_keys: each sequence carries 1..max_keys needles (uniform); the question asks for one.
    """

    def __init__(self, haystack: np.ndarray, encode: Callable[[str], list[int]], max_keys: int = 4):
        self.haystack, self.encode, self.max_keys = haystack, encode, max_keys

    @classmethod
    def from_tokenizer_dir(cls, haystack: np.ndarray, tokenizer_dir, max_keys: int = 4) -> "RetrievalSampler":
        from suite.data.tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer_dir)
        return cls(haystack, lambda s: tok.encode(s, add_special_tokens=False).ids, max_keys)

    def sample(self, rng: np.random.Generator, seq_len: int) -> np.ndarray:
        """One sequence of exactly ``seq_len`` token ids, int64 [seq_len]: haystack with needles at random
        depths, then question and answer at the end. Raises ValueError when ``seq_len`` cannot hold the
        needles, question and answer, or the haystack is shorter than the sequence."""
        needles = make_needles(rng, int(rng.integers(1, self.max_keys + 1)))
        key, value = needles[0]  # the needles are in random order, so asking for the first is a random pick
        needle_ids = [self.encode(needle_text(k, v)) for k, v in needles]
        tail = self.encode(tail_text(key, value))
        while len(needle_ids) > 1 and len(tail) + sum(map(len, needle_ids)) >= seq_len:
            needle_ids.pop()  # short sequences hold fewer distractors
        hay_len = seq_len - len(tail) - sum(map(len, needle_ids))
        if hay_len < 1:
            raise ValueError(f"seq_len {seq_len} too short for a retrieval sequence "
                             f"({seq_len - hay_len} tokens of needle, question and answer)")
        if len(self.haystack) <= hay_len:
            raise ValueError(f"haystack of {len(self.haystack)} tokens is shorter than {hay_len}")
        start = int(rng.integers(0, len(self.haystack) - hay_len))
        hay = np.asarray(self.haystack[start:start + hay_len], dtype=np.int64)
        depths = np.sort(rng.integers(0, hay_len + 1, size=len(needle_ids)))
        pieces, prev = [], 0
        for depth, ids in zip(depths, needle_ids):
            pieces += [hay[prev:depth], np.asarray(ids, dtype=np.int64)]
            prev = depth
        pieces += [hay[prev:], np.asarray(tail, dtype=np.int64)]
        out = np.concatenate(pieces)
        assert out.shape == (seq_len,)
        return out
