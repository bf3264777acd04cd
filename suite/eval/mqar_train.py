"""MQAR training (Zoology's recipe): a fresh model trained on a mixture of cells ``(seq_len, num_kv_pairs)``, one
cell per step in turn, then evaluated on held-out examples (:mod:`suite.eval.mqar_eval`); the model factories.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F

from suite.common import autocast
from suite.config import warmup_problem
from suite.eval.mqar_data import Cell, mqar_data, test_set
from suite.eval.mqar_eval import mqar_accuracy, slot_logits
from suite.train.optim import adamw, clip_gradients, warmup_cosine


def train_and_eval(model_factory: Callable[[int, int], torch.nn.Module], mixture: list[Cell], steps: int, *,
                   vocab_size: int = 8192, batch_size: int = 64, lr: float = 1e-3, weight_decay: float = 0.1,
                   num_test: int = 1000, seed: int = 0, power_a: float = 0.01, eval_cells: list[Cell] | None = None,
                   far_distance: int | None = None, device: str = "cpu", dtype: str = "float32",
                   shared_slots: bool = True, log_every: int = 0, first_cell_frac: float = 0.0,
                   constant_tokens: bool = False, warmup: int = 0, stop_after: int | None = None) -> dict:
    """Train a fresh model on a mixture of MQAR cells with AdamW (weight decay on every parameter; the schedule
    :func:`suite.train.optim.warmup_cosine`: linear warmup over ``warmup`` steps times a cosine decay over ``steps``);
    measure held-out accuracy.

    ``mixture``: the training cells ``(seq_len, num_kv_pairs)``; step ``s`` trains on ``batch_size`` fresh rows of
    cell ``mixture[s % len(mixture)]`` (Zoology's mixture, one cell a batch), drawn from ``(seed, s)``, whose rows
    share query slots (no example repeats); loss: cross-entropy on answer positions only. ``first_cell_frac``: the
    first ``round(first_cell_frac * steps)`` steps train on ``mixture[0]`` alone (a curriculum: the first cell, the
    profiles' easiest, forms the recall circuit before the long cells dilute it, as Zoology's mixtures weight their
    shortest cell), the rest cycle through the mixture. ``constant_tokens``: a step at ``seq_len`` T draws
    ``max(1, batch_size * T0 // T)`` rows, T0 the mixture's shortest seq_len (the same tokens a step, as Zoology's
    batch sizes halve per doubling). ``stop_after``: train only the first ``stop_after`` steps of that schedule, then
    evaluate (a calibration of the schedule's early phase, tools/offline_gpu/mqar_control.py; default: all ``steps``).
    ``model_factory(vocab_size, seq_len)`` returns an untrained causal LM (logits ``[B, T, V]``) for sequences up to
    the longest ``seq_len`` of the mixture and of ``eval_cells``. Held-out data: ``num_test`` examples per evaluated
    cell (``eval_cells``, default the training cells) from other seeds.
    Returns ``{"by_cell": {(seq_len, kv): mqar_accuracy dict}, "final_train_loss", "n_params", "train_s" (seconds),
    "num_train" (rows), "tokens" (training tokens, rows x seq_len summed over the steps), "num_test"}``.
    Raises ValueError for an empty mixture, ``steps`` or ``batch_size`` < 1, ``warmup`` < 0, ``stop_after`` outside [1,
    steps], a ``warmup`` that does not end before the last step, or a cell the generator cannot fill;
    :class:`suite.train.optim.TrainingDivergedError` naming the step for a non-finite loss or gradient norm (before that
    step updates the model).
    """
    if steps < 1 or batch_size < 1 or not mixture:
        raise ValueError(f"steps={steps}, batch_size={batch_size} must be >= 1 and the mixture non-empty ({mixture})")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} must be >= 0")
    if warmup_problem(warmup, steps):
        raise ValueError(warmup_problem(warmup, steps))
    if stop_after is not None and not 1 <= stop_after <= steps:
        raise ValueError(f"stop_after={stop_after} must be in [1, steps={steps}]")
    if not 0.0 <= first_cell_frac < 1.0:
        raise ValueError(f"first_cell_frac={first_cell_frac} must be in [0, 1)")
    eval_cells = eval_cells or list(mixture)
    for seq_len, kv in sorted(set(mixture) | set(eval_cells)):
        mqar_data(vocab_size, seq_len, kv, 1, 0, power_a)         # fail fast on a cell the generator cannot fill
    torch.manual_seed(seed)
    model = model_factory(vocab_size, max(t for t, _ in [*mixture, *eval_cells])).to(device)
    model.train()
    # fused on a GPU: one kernel a step instead of a few per parameter group (these models are launch-bound)
    opt = adamw(model, lr, weight_decay, decay_all=True, betas=(0.9, 0.999), fused=torch.device(device).type == "cuda")
    sched = warmup_cosine(opt, steps, warmup)
    first_steps, shortest = round(first_cell_frac * steps), min(t for t, _ in mixture)
    start, loss, num_train, tokens = time.perf_counter(), torch.tensor(float("nan")), 0, 0
    for step in range(steps if stop_after is None else stop_after):
        seq_len, kv = mixture[0] if step < first_steps else mixture[(step - first_steps) % len(mixture)]
        rows = max(1, batch_size * shortest // seq_len) if constant_tokens else batch_size
        num_train, tokens = num_train + rows, tokens + rows * seq_len
        x, y = mqar_data(vocab_size, seq_len, kv, rows, seed * 1_000_003 + step, power_a,
                         shared_slots=shared_slots)
        slots = (y != -100).any(0)
        with autocast(device, dtype):
            logits = slot_logits(model, x.to(device), slots)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y[:, slots].flatten().to(device), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # one host sync a step: a non-finite loss gives a non-finite gradient norm (Zoology's recipe does not clip)
        clip_gradients(model.parameters(), None, f"MQAR training step {step} of {steps} (seq_len {seq_len}, "
                       f"{kv} pairs)", f"lower the lr ({lr})")
        opt.step()
        sched.step()
        if log_every and step % log_every == 0:
            print(f"step {step} seq_len {seq_len} kv {kv} rows {rows} loss {loss.item():.4f} "
                  f"{time.perf_counter() - start:.0f}s", flush=True)
    train_s = time.perf_counter() - start
    by_cell = {}
    for seq_len, kv in eval_cells:
        test_x, test_y = test_set(vocab_size, seq_len, kv, num_test, seed * 1_000_003 + 10_000_000, power_a)
        with autocast(device, dtype):
            by_cell[(seq_len, kv)] = mqar_accuracy(model, test_x, test_y, kv, far_distance)
    from models.sizes import count_parameters  # after the timed training: the import is not part of train_s

    return {"by_cell": by_cell, "final_train_loss": float(loss.item()), "n_params": count_parameters(model),
            "train_s": train_s, "num_train": num_train, "tokens": tokens, "num_test": num_test}


def llama_factory(hidden_size: int = 64, num_layers: int = 2,
                  num_heads: int = 4) -> Callable[[int, int], torch.nn.Module]:
    """Factory for a small ``LlamaForCausalLM`` (a full-attention reference; used by tests and smoke runs)."""
    def build(vocab_size: int, seq_len: int) -> torch.nn.Module:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                          num_hidden_layers=num_layers, num_attention_heads=num_heads,
                          num_key_value_heads=num_heads, max_position_embeddings=seq_len)
        return LlamaForCausalLM(cfg)
    return build


def registry_factory(arch: str, size: str, **overrides) -> Callable[[int, int], torch.nn.Module]:
    """Factory over ``models.registry.build(arch, size, vocab_size=..., **overrides)`` (project models/baselines)."""
    def build(vocab_size: int, seq_len: int) -> torch.nn.Module:
        from models import registry

        return registry.build(arch, size, vocab_size=vocab_size, **overrides)
    return build
