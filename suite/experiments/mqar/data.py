"""MQAR data (multi-query associative recall, Zoology's generator).

Sequence layout (length ``seq_len``): ``num_kv_pairs`` key-value pairs ``k1 v1 k2 v2 ...`` (keys drawn without
replacement from ``[1, vocab_size // 2)``, values from ``[vocab_size // 2, vocab_size)``), then every key is queried
once in the remaining ``seq_len - 2 * num_kv_pairs`` slots at even offsets ``2 * gap``, where the gaps are drawn
without replacement with probability ``p(gap = i) ∝ (i + 1) ** (power_a - 1)`` (power-law: most queries come soon
after the context, as repeated bigrams do in text). All other positions hold uniform random tokens.

``labels[b, t]`` is the token the model must output after reading ``input_ids[b, :t + 1]`` (already shifted, so do
not pass it to a Hugging Face model's ``labels=``): the paired value at each query position, ``-100`` elsewhere.

Departure from Zoology: the rows of one training batch share their query slots (keys, values and which key is
asked where stay random per row), so every model computes logits at the query slots only, and Orthros runs its
SFT regime (output-stream tokens only at answer positions, Sec. 3.2) instead of paying for T_out = T.
"""
from __future__ import annotations

import numpy as np
import torch

Cell = tuple[int, int]  # (seq_len, num_kv_pairs)


def mqar_data(vocab_size: int, seq_len: int, num_kv_pairs: int, num_examples: int, seed: int,
              power_a: float = 0.01, random_non_queries: bool = True,
              shared_slots: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """MQAR examples as ``(input_ids, labels)``, both int64 tensors of shape ``[num_examples, seq_len]``.

    ``shared_slots``: every row of this call puts its queries in the same slots (drawn once; keys, values and
    which key is asked where stay per row). Batches drawn this way let a model compute logits at the query
    slots only (Orthros's SFT regime: output-stream tokens only at answer positions).

    Raises ValueError unless ``seq_len`` is even, ``4 * num_kv_pairs <= seq_len`` (room for the queries),
    ``num_kv_pairs < vocab_size // 2`` and ``power_a > 0``.
    """
    if seq_len % 2 or seq_len <= 0:
        raise ValueError(f"seq_len={seq_len} must be a positive even number")
    if num_kv_pairs < 1 or 4 * num_kv_pairs > seq_len:
        raise ValueError(f"num_kv_pairs={num_kv_pairs} must be >= 1 and <= seq_len / 4 = {seq_len // 4}")
    if num_kv_pairs >= vocab_size // 2 - 1:
        raise ValueError(f"vocab_size={vocab_size} too small for num_kv_pairs={num_kv_pairs} distinct keys")
    if num_examples < 1 or power_a <= 0:
        raise ValueError(f"num_examples={num_examples} must be >= 1 and power_a={power_a} > 0")
    rng = np.random.default_rng(seed)
    half, context = vocab_size // 2, 2 * num_kv_pairs
    space = (seq_len - context) // 2
    gap_p = np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    gap_p /= gap_p.sum()

    inputs = np.zeros((num_examples, seq_len), dtype=np.int64)
    labels = np.full((num_examples, seq_len), -100, dtype=np.int64)
    shared = context + 2 * rng.choice(space, size=num_kv_pairs, replace=False, p=gap_p) if shared_slots else None
    for row in range(num_examples):
        keys = rng.choice(np.arange(1, half), size=num_kv_pairs, replace=False)
        values = rng.choice(np.arange(half, vocab_size), size=num_kv_pairs, replace=False)
        inputs[row, 0:context:2], inputs[row, 1:context:2] = keys, values
        if shared is None:
            query_pos = context + 2 * rng.choice(space, size=num_kv_pairs, replace=False, p=gap_p)
        else:
            query_pos = rng.permutation(shared)
        inputs[row, query_pos], labels[row, query_pos] = keys, values
    if random_non_queries:
        filler = inputs == 0
        inputs[filler] = rng.integers(0, vocab_size, size=int(filler.sum()))
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def query_distances(input_ids: torch.Tensor, labels: torch.Tensor, num_kv_pairs: int) -> torch.Tensor:
    """For every answer position (``labels != -100``, row-major order): tokens from its value in the context
    (position ``2 i + 1`` of key ``i``) to the query, int64 ``[n_answers]``."""
    keys = input_ids[:, 0:2 * num_kv_pairs:2]                        # [B, kv]
    rows, cols = (labels != -100).nonzero(as_tuple=True)
    which = (keys[rows] == input_ids[rows, cols, None]).float().argmax(-1)
    return cols - (2 * which + 1)


def test_set(vocab_size: int, seq_len: int, num_kv_pairs: int, num_test: int, seed: int, power_a: float = 0.01,
             chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out MQAR examples in chunks of ``chunk`` rows that share query slots (see ``mqar_data``)."""
    parts = [mqar_data(vocab_size, seq_len, num_kv_pairs, min(chunk, num_test - i), seed + i, power_a,
                       shared_slots=True) for i in range(0, num_test, chunk)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])
