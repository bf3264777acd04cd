"""The NIAH retrieval run (paper Sec. 4.4 / Fig. 3): a fresh model learns the retrieval task of
:mod:`suite.data.needles` on train-split haystacks, after a curriculum of shorter phases, with the loss on the answer
tokens only (the SFT regime of Sec. 3.2, so Orthros carries an output-stream token only at answer positions).
What is NIAH's here is its data (:class:`NeedleBatches`) and its loss (:func:`answer_loss`);
:func:`suite.train.loop.fit` trains, with AdamW and the lr schedule of :mod:`suite.train.optim`.
:mod:`suite.experiments.niah.run` is the command line.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from suite.common import autocast
from suite.config import curriculum_problem
from suite.data.needles import NeedleTask
from suite.train.loop import Batch, fit
from suite.train.optim import Recipe

WARMUP = 30  # linear-warmup steps of the lr schedule (fewer in a run of at most 30 steps: it must end before the last)


class NeedleBatches:
    """The training rows of step ``i`` (0-based), drawn from ``np.random.default_rng([seed, i])``: the curriculum
    phase it falls in (or, with ``replay``, an earlier phase drawn at random), else ``batch_size`` rows of
    ``seq_len`` tokens with ``n_queries`` needles; the labels are the answer tokens, -100 elsewhere."""

    def __init__(self, task: NeedleTask, hay: np.ndarray, steps: int, seq_len: int, batch_size: int,
                 n_queries: int, curriculum, replay: float, seed: int):
        self.task, self.hay, self.replay, self.seed = task, hay, replay, seed
        self.final = (seq_len, batch_size, n_queries)
        self.phases, end = [], 0  # (until step, length, rows, queries)
        for n, frac, rows, q in [tuple(p) + (n_queries,) * (4 - len(p)) for p in curriculum]:
            end += int(frac * steps)
            self.phases.append((end, n, rows, q))

    def __call__(self, i: int) -> Batch:
        rng = np.random.default_rng([self.seed, i])
        now = next((k for k, (until, *_) in enumerate(self.phases) if i < until), len(self.phases))
        if now and self.replay and rng.random() < self.replay:
            now = int(rng.integers(now))
        length, rows, queries = self.phases[now][1:] if now < len(self.phases) else self.final
        seqs = [self.task.training_sequence(rng, self.hay, length, queries) for _ in range(rows)]
        x = np.stack([s for s, _ in seqs])
        labels = np.full_like(x, -100)
        for row, (_, positions) in enumerate(seqs):  # on the host: one copy per step, not one sync per row
            labels[row, positions] = x[row, np.asarray(positions) + 1]
        return Batch((torch.from_numpy(x), torch.from_numpy(labels)), x.size,
                     f"seq_len {length}, {queries} needles, {rows} rows")


def answer_loss(device: str, dtype: str, lm_weight: float = 0.0):
    """NIAH's loss: cross-entropy on the answer tokens only (the suite's models compute logits at those positions
    alone: ``output_mask``); with ``lm_weight`` > 0, ``(answer loss + lm_weight x next-token loss on every token,
    answer loss)``: the model computes every position's logits then (the PT regime)."""
    def loss(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]):
        x, labels = (t.to(device) for t in data)
        if lm_weight:
            with autocast(device, dtype):
                logits = model(input_ids=x).logits
            scored = labels != -100
            answer = F.cross_entropy(logits[scored].float(), labels[scored])
            lm = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x[:, 1:].flatten())
            return answer + lm_weight * lm, answer
        mask = (labels != -100).any(0)
        with autocast(device, dtype):
            logits = model(input_ids=x, output_mask=mask).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), labels[:, mask].flatten(), ignore_index=-100)
    return loss


def train_needle_model(model, task: NeedleTask, hay: np.ndarray, *, seq_len: int, steps: int, batch_size: int,
                       lr: float, n_queries: int = 3, curriculum: list[tuple] = (),
                       warmup: int | None = None, weight_decay: float = 0.05, lm_weight: float = 0.0,
                       replay: float = 0.0, schedule: str = "cosine", seed: int = 0, device: str = "cpu",
                       dtype: str = "float32", progress: bool = True) -> dict:
    """Train ``model`` in place on retrieval rows (loss on answer tokens only); returns
    ``{"final_loss", "tokens", "train_s"}``. ``curriculum``: phases ``(length, fraction of the steps, rows)`` or
    ``(length, fraction, rows, queries)`` run first, in order (queries default to ``n_queries``); the remaining
    steps use ``seq_len``, ``batch_size`` and ``n_queries``. ``warmup``: linear-warmup steps (default
    :data:`WARMUP`, or ``steps - 1`` in a shorter run; it must end before the last step). More queries per row give a
    long row more supervised answers for the same compute. ``lm_weight`` > 0 adds that weight times the next-token
    loss on every token (the haystack too: the PT regime, so Orthros's output stream then covers every position), which
    gives the copy circuit a dense signal; 0 keeps the SFT regime (answer tokens only). ``replay`` in [0, 1): after the
    first phase, that share of the steps (drawn at random) repeats an earlier phase's shape instead, so the short rows
    that built the copy circuit keep training it while the context grows. ``schedule``: ``"cosine"`` (linear warmup
    times a cosine over all steps) or ``"wsd"`` (warmup-stable-decay, ``transformers.get_wsd_schedule``: the peak lr
    until the last :data:`suite.train.optim.WSD_DECAY` of the steps, then a cosine to 0), so the long phases at the
    end of a curriculum train at the peak lr (:func:`suite.train.optim.lr_schedule`). AdamW with weight decay by
    parameter role, gradients clipped at 1.0. ``progress``: the bar, else a log line every 1/40 of the steps.
    Raises ValueError for bad settings; :class:`suite.train.loop.TrainingDivergedError` naming the step for a
    non-finite loss or gradient norm (before that step updates the model)."""
    if steps < 1 or batch_size < 1 or n_queries < 1:
        raise ValueError(f"steps={steps}, batch_size={batch_size} and n_queries={n_queries} must be >= 1")
    if not lm_weight >= 0:
        raise ValueError(f"lm_weight={lm_weight} must be >= 0")
    if not 0 <= replay < 1:
        raise ValueError(f"replay={replay} must be in [0, 1)")
    check_curriculum(curriculum)
    recipe = Recipe(lr=lr, weight_decay=weight_decay, steps=steps, schedule=schedule,
                    warmup=min(WARMUP, steps - 1) if warmup is None else warmup, grad_clip=1.0)
    batches = NeedleBatches(task, hay, steps, seq_len, batch_size, n_queries, curriculum, replay, seed)
    torch.manual_seed(seed)
    model.to(device)
    run = fit(model, batches, answer_loss(device, dtype, lm_weight), recipe, name="NIAH training", progress=progress,
              log_every=0 if progress else max(1, steps // 40))
    model.eval()
    return {"final_loss": run.final_loss, "tokens": run.tokens, "train_s": run.wall_s}


def check_curriculum(phases) -> None:
    """Raise ValueError unless every phase ``(len, frac, rows[, queries])`` has len, rows and queries >= 1 and frac
    in (0, 1), the fractions summing to below 1 (the remaining steps train at the final length;
    :func:`suite.config.curriculum_problem`, the study config's rule too)."""
    for phase in phases:
        if len(phase) not in (3, 4) or min(phase[0], *phase[2:]) < 1 or not 0 < phase[1] < 1:
            raise ValueError(f"curriculum phase {tuple(phase)}: LEN, ROWS and QUERIES must be >= 1 and FRAC in (0, 1)")
    problem = curriculum_problem([p[1] for p in phases])
    if problem:
        raise ValueError(problem)
