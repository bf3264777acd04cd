"""The NIAH retrieval run (paper Sec. 4.4 / Fig. 3): a fresh model learns the retrieval task of
:mod:`suite.data.needles` on train-split haystacks, after a curriculum of shorter phases, with the loss on the answer
tokens only (the SFT regime of Sec. 3.2, so Orthros carries an output-stream token only at answer positions).
AdamW and the lr schedule come from :mod:`suite.train.optim`; :mod:`suite.eval.niah` is the command line.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from suite.common import autocast
from suite.config import curriculum_problem, warmup_problem
from suite.data.needles import NeedleTask
from suite.train.optim import adamw, clip_gradients, lr_schedule, stop_if_not_finite

WARMUP = 30  # linear-warmup steps of the lr schedule (fewer in a run of at most 30 steps: it must end before the last)


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
    end of a curriculum train at the peak lr (:func:`suite.train.optim.lr_schedule`). Raises ValueError for bad
    settings; :class:`suite.train.optim.TrainingDivergedError` naming the step for a non-finite loss or gradient norm
    (before that step updates the model)."""
    if steps < 1 or batch_size < 1 or n_queries < 1:
        raise ValueError(f"steps={steps}, batch_size={batch_size} and n_queries={n_queries} must be >= 1")
    if not lm_weight >= 0:
        raise ValueError(f"lm_weight={lm_weight} must be >= 0")
    if not 0 <= replay < 1:
        raise ValueError(f"replay={replay} must be in [0, 1)")
    check_curriculum(curriculum)
    if warmup is None:
        warmup = min(WARMUP, steps - 1)
    if warmup_problem(warmup, steps):
        raise ValueError(warmup_problem(warmup, steps))
    curriculum = [tuple(p) + (n_queries,) * (4 - len(p)) for p in curriculum]
    phases, end = [], 0
    for n, frac, rows, q in curriculum:
        end += int(frac * steps)
        phases.append((end, n, rows, q))
    torch.manual_seed(seed)
    model.to(device).train()
    opt = adamw(model, lr, weight_decay)
    sched = lr_schedule(opt, schedule, steps, warmup)
    start, tokens, loss_val = time.perf_counter(), 0, float("nan")
    bar = tqdm(range(steps), desc="niah train", disable=not progress, mininterval=2.0)
    for step in bar:
        rng = np.random.default_rng([seed, step])
        now = next((i for i, (until, *_) in enumerate(phases) if step < until), len(phases))
        if now and replay and rng.random() < replay:
            now = int(rng.integers(now))
        T, rows, queries = phases[now][1:] if now < len(phases) else (seq_len, batch_size, n_queries)
        seqs = [task.training_sequence(rng, hay, T, queries) for _ in range(rows)]
        x_np = np.stack([s for s, _ in seqs])
        labels_np = np.full_like(x_np, -100)
        for row, (_, positions) in enumerate(seqs):  # on the host: one copy per step, not one sync per row
            labels_np[row, positions] = x_np[row, np.asarray(positions) + 1]
        x, labels = torch.from_numpy(x_np).to(device), torch.from_numpy(labels_np).to(device)
        if lm_weight:
            with autocast(device, dtype):
                logits = model(input_ids=x).logits
            scored = labels != -100
            loss = F.cross_entropy(logits[scored].float(), labels[scored])
            lm = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x[:, 1:].flatten())
            total = loss + lm_weight * lm
        else:
            mask = (labels != -100).any(0)
            with autocast(device, dtype):
                logits = model(input_ids=x, output_mask=mask).logits
            loss = total = F.cross_entropy(logits.flatten(0, 1).float(), labels[:, mask].flatten(), ignore_index=-100)
        where, hint = f"NIAH training step {step} of {steps}", f"lower the lr ({lr})"
        loss_val = stop_if_not_finite(float(loss.detach()), "the answer loss", where, hint)
        opt.zero_grad(set_to_none=True)
        total.backward()
        clip_gradients(model.parameters(), 1.0, where, hint)
        opt.step()
        sched.step()
        tokens += x.numel()
        bar.set_postfix(loss=f"{loss_val:.3f}")
        if not progress and (step % max(1, steps // 40) == 0 or step == steps - 1):  # the rule's log: a loss curve
            print(f"niah train step {step}/{steps} T={T} rows={rows} queries={queries} answer_loss={loss_val:.4f} "
                  f"lr={sched.get_last_lr()[0]:.2e} {time.perf_counter() - start:.0f}s", flush=True)
    model.eval()
    return {"final_loss": loss_val, "tokens": tokens, "train_s": time.perf_counter() - start}


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
