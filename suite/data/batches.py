"""Deterministic, resumable [B, T] token batches from a flat token array.

Batch ``step`` is a pure function of (seed, step), so resuming at step s yields exactly the batches an
uninterrupted run would have seen. Two orders:

* ``"random"``: rows are random crops of the train array, and a fraction of rows (``retrieval_fraction``) are
  synthetic retrieval sequences (``suite.data.retrieval``); a token may be read several times or never.
* ``"epoch"``: the array is cut into non-overlapping windows of ``seq_len`` tokens, read in a seeded random order,
  each exactly once per epoch (each epoch its own order and cut offset): ``epochs(steps)`` says how often a run of
  ``steps`` reads the data.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import torch

from suite.data.retrieval import RetrievalSampler

ORDERS = ("random", "epoch")


class TokenBatches:
    """Iterator of int64 batches of shape [batch_size, seq_len].

    Args:
        tokens: flat token ids, shape [n_tokens], n_tokens > seq_len.
        batch_size, seq_len: batch shape B, T.
        seed: base seed; batch ``step`` uses ``np.random.default_rng([seed, step])``.
        retrieval: sampler for retrieval rows, required when ``retrieval_fraction > 0``.
        retrieval_fraction: expected fraction of rows that are retrieval sequences, in [0, 1]:
            floor(f * B) rows per batch, plus one more with probability frac(f * B).
        start_step: first step yielded by iteration (resume).
        order: ``"random"`` crops or ``"epoch"`` (non-overlapping windows, each read once an epoch; no retrieval
            rows).
    Raises ValueError for a too-short array or bad arguments.
    """

    def __init__(self, tokens: np.ndarray, batch_size: int, seq_len: int, seed: int,
                 retrieval: RetrievalSampler | None = None, retrieval_fraction: float = 0.0, start_step: int = 0,
                 order: str = "random"):
        if batch_size < 1 or seq_len < 1:
            raise ValueError(f"batch_size {batch_size} and seq_len {seq_len} must be >= 1")
        if len(tokens) <= seq_len:
            raise ValueError(f"token array of {len(tokens)} tokens is too short for seq_len {seq_len}")
        if not 0.0 <= retrieval_fraction <= 1.0:
            raise ValueError(f"retrieval_fraction {retrieval_fraction} not in [0, 1]")
        if retrieval_fraction > 0 and retrieval is None:
            raise ValueError("retrieval_fraction > 0 needs a RetrievalSampler")
        if order not in ORDERS:
            raise ValueError(f"order {order!r} not in {ORDERS}")
        if order == "epoch" and retrieval_fraction > 0:
            raise ValueError("order 'epoch' reads the token array only; it takes no retrieval rows "
                             f"(retrieval_fraction {retrieval_fraction})")
        self.tokens, self.batch_size, self.seq_len, self.seed = tokens, batch_size, seq_len, seed
        self.retrieval, self.retrieval_fraction, self.step = retrieval, retrieval_fraction, start_step
        self.order = order
        # epoch order: windows start at offset + i * seq_len, i < n_windows, for an offset in [0, seq_len)
        self.n_windows = max(1, (len(tokens) - seq_len) // seq_len)
        self._perm: tuple[int, np.ndarray, int] | None = None  # (epoch, window order, offset) of the last epoch read

    def epochs(self, steps: int) -> float:
        """How many times a run of ``steps`` batches reads the train array (``"epoch"`` order: windows read over
        windows held; ``"random"``: tokens read over tokens held)."""
        if self.order == "epoch":
            return steps * self.batch_size / self.n_windows
        return steps * self.batch_size * self.seq_len / len(self.tokens)

    def batch(self, step: int) -> torch.Tensor:
        """The batch of ``step``: LongTensor [batch_size, seq_len]."""
        if self.order == "epoch":
            return self._epoch_batch(step)
        rng = np.random.default_rng([self.seed, step])
        expected = self.retrieval_fraction * self.batch_size
        n_ret = math.floor(expected) + int(rng.random() < expected - math.floor(expected))
        starts = rng.integers(0, len(self.tokens) - self.seq_len, size=self.batch_size - n_ret)
        rows = [np.asarray(self.tokens[s:s + self.seq_len], dtype=np.int64) for s in starts]
        rows += [self.retrieval.sample(rng, self.seq_len) for _ in range(n_ret)]
        return torch.from_numpy(np.stack(rows))

    def _epoch_batch(self, step: int) -> torch.Tensor:
        rows = []
        for g in range(step * self.batch_size, (step + 1) * self.batch_size):
            epoch, i = divmod(g, self.n_windows)
            if self._perm is None or self._perm[0] != epoch:
                rng = np.random.default_rng([self.seed, 1 << 32, epoch])  # a stream apart from random order's
                self._perm = (epoch, rng.permutation(self.n_windows), int(rng.integers(0, self.seq_len)))
            start = self._perm[2] + int(self._perm[1][i]) * self.seq_len
            rows.append(np.asarray(self.tokens[start:start + self.seq_len], dtype=np.int64))
        return torch.from_numpy(np.stack(rows))

    def __iter__(self) -> Iterator[torch.Tensor]:
        while True:
            out = self.batch(self.step)
            self.step += 1
            yield out

    def state_dict(self) -> dict:
        return {"step": self.step, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        if state["seed"] != self.seed:
            raise ValueError(f"batch state has seed {state['seed']}, this loader seed {self.seed}")
        self.step = int(state["step"])


def eval_windows(tokens: np.ndarray, batch_size: int, seq_len: int, n_batches: int) -> list[torch.Tensor]:
    """``n_batches`` fixed LongTensor batches [batch_size, seq_len] of evenly spaced windows over
    ``tokens`` (the same for every model, independent of any seed). Windows overlap only if the array
    holds fewer than n_batches * batch_size * seq_len tokens. Raises ValueError if too short."""
    if len(tokens) <= seq_len:
        raise ValueError(f"token array of {len(tokens)} tokens is too short for seq_len {seq_len}")
    n = n_batches * batch_size
    starts = np.linspace(0, len(tokens) - seq_len, num=n).astype(np.int64)
    rows = np.stack([np.asarray(tokens[s:s + seq_len], dtype=np.int64) for s in starts])
    return [torch.from_numpy(rows[i * batch_size:(i + 1) * batch_size]) for i in range(n_batches)]
