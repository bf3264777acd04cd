"""MQAR training (Zoology's recipe): a fresh model trained on a mixture of cells ``(seq_len, num_kv_pairs)``, one
cell per step in turn, then evaluated on held-out examples (:mod:`suite.experiments.mqar.eval`). What is MQAR's here
is its data (:class:`MqarBatches`) and its loss (:func:`slot_loss`); :func:`suite.train.loop.fit` trains.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from suite.common import autocast
from suite.experiments.mqar.data import Cell, mqar_data, test_set
from suite.experiments.mqar.eval import mqar_accuracy, slot_logits
from suite.train.loop import Batch, fit
from suite.train.optim import Recipe


class MqarBatches:
    """The training batches of a mixture of cells: step ``i`` (0-based) draws fresh rows of cell
    ``mixture[i % len(mixture)]`` from ``(seed, i)``, sharing their query slots; the first ``first_steps`` steps
    draw from ``mixture[0]`` alone; ``constant_tokens``: ``max(1, batch_size * T0 // T)`` rows at ``seq_len`` T, T0
    the mixture's shortest."""

    def __init__(self, mixture: list[Cell], vocab_size: int, batch_size: int, seed: int, power_a: float,
                 shared_slots: bool, first_steps: int, constant_tokens: bool):
        self.mixture, self.vocab_size, self.batch_size, self.seed = mixture, vocab_size, batch_size, seed
        self.power_a, self.shared_slots, self.first_steps = power_a, shared_slots, first_steps
        self.constant_tokens, self.shortest = constant_tokens, min(t for t, _ in mixture)

    def cell(self, i: int) -> tuple[int, int, int]:
        """``(seq_len, num_kv_pairs, rows)`` of step ``i``."""
        first = self.first_steps
        seq_len, kv = self.mixture[0] if i < first else self.mixture[(i - first) % len(self.mixture)]
        return seq_len, kv, max(1, self.batch_size * self.shortest // seq_len) if self.constant_tokens \
            else self.batch_size

    def __call__(self, i: int) -> Batch:
        seq_len, kv, rows = self.cell(i)
        x, y = mqar_data(self.vocab_size, seq_len, kv, rows, self.seed * 1_000_003 + i, self.power_a,
                         shared_slots=self.shared_slots)
        return Batch((x, y), rows * seq_len, f"seq_len {seq_len}, {kv} pairs, {rows} rows")


def slot_loss(device: str, dtype: str):
    """MQAR's loss: cross-entropy on the answer positions only, from the logits at the batch's shared query slots
    (:func:`suite.experiments.mqar.eval.slot_logits`)."""
    def loss(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = data
        slots = (y != -100).any(0)
        with autocast(device, dtype):
            logits = slot_logits(model, x.to(device), slots)
        return F.cross_entropy(logits.flatten(0, 1).float(), y[:, slots].flatten().to(device), ignore_index=-100)
    return loss


def train_and_eval(model_factory: Callable[..., torch.nn.Module], mixture: list[Cell], steps: int, *,
                   vocab_size: int = 8192, batch_size: int = 64, lr: float = 1e-3, weight_decay: float = 0.1,
                   num_test: int = 1000, seed: int = 0, power_a: float = 0.01, eval_cells: list[Cell] | None = None,
                   far_distance: int | None = None, device: str = "cpu", dtype: str = "float32",
                   shared_slots: bool = True, log_every: int = 0, first_cell_frac: float = 0.0,
                   constant_tokens: bool = False, warmup: int = 0, stop_after: int | None = None) -> dict:
    """Train a fresh model on a mixture of MQAR cells with AdamW (weight decay on every parameter, betas (0.9, 0.999),
    no clipping; the schedule :func:`suite.train.optim.warmup_cosine`: linear warmup over ``warmup`` steps times a
    cosine decay over ``steps``); measure held-out accuracy.

    ``mixture``: the training cells ``(seq_len, num_kv_pairs)``; step ``s`` trains on ``batch_size`` fresh rows of
    cell ``mixture[s % len(mixture)]`` (Zoology's mixture, one cell a batch), drawn from ``(seed, s)``, whose rows
    share query slots (no example repeats); loss: cross-entropy on answer positions only. ``first_cell_frac``: the
    first ``round(first_cell_frac * steps)`` steps train on ``mixture[0]`` alone (a curriculum: the first cell, the
    profiles' easiest, forms the recall circuit before the long cells dilute it, as Zoology's mixtures weight their
    shortest cell), the rest cycle through the mixture. ``constant_tokens``: a step at ``seq_len`` T draws
    ``max(1, batch_size * T0 // T)`` rows, T0 the mixture's shortest seq_len (the same tokens a step, as Zoology's
    batch sizes halve per doubling). ``stop_after``: train only the first ``stop_after`` steps of that schedule, then
    evaluate (a calibration of the schedule's early phase, tools/offline_gpu/mqar_control.py; default: all ``steps``).
    ``log_every``: a log line every that many steps (0: none).
    ``model_factory(vocab_size=...)`` returns an untrained causal LM (logits ``[B, T, V]``) for sequences up to the
    longest ``seq_len`` of the mixture and of ``eval_cells``: ``functools.partial(models.registry.build, arch, size,
    **overrides)``, or :func:`llama_factory`'s reference. Held-out data: ``num_test`` examples per evaluated cell
    (``eval_cells``, default the training cells) from other seeds.
    Returns ``{"by_cell": {(seq_len, kv): mqar_accuracy dict}, "final_train_loss", "n_params", "train_s" (seconds),
    "num_train" (rows), "tokens" (training tokens, rows x seq_len summed over the steps), "num_test"}``.
    Raises ValueError for an empty mixture, ``steps`` or ``batch_size`` < 1, ``warmup`` < 0, ``stop_after`` outside [1,
    steps], a ``warmup`` that does not end before the last step (:class:`suite.train.optim.Recipe`), or a cell the
    generator cannot fill; :class:`suite.train.loop.TrainingDivergedError` naming the step for a non-finite loss or
    gradient norm (before that step updates the model).
    """
    if steps < 1 or batch_size < 1 or not mixture:
        raise ValueError(f"steps={steps}, batch_size={batch_size} must be >= 1 and the mixture non-empty ({mixture})")
    # fused on a GPU: one kernel a step instead of a few per parameter group (these models are launch-bound)
    recipe = Recipe(lr=lr, weight_decay=weight_decay, steps=steps, schedule="cosine", warmup=warmup, grad_clip=None,
                    decay_all=True, betas=(0.9, 0.999), fused=torch.device(device).type == "cuda")
    if stop_after is not None and not 1 <= stop_after <= steps:
        raise ValueError(f"stop_after={stop_after} must be in [1, steps={steps}]")
    if not 0.0 <= first_cell_frac < 1.0:
        raise ValueError(f"first_cell_frac={first_cell_frac} must be in [0, 1)")
    eval_cells = eval_cells or list(mixture)
    for seq_len, kv in sorted(set(mixture) | set(eval_cells)):
        mqar_data(vocab_size, seq_len, kv, 1, 0, power_a)         # fail fast on a cell the generator cannot fill
    batches = MqarBatches(mixture, vocab_size, batch_size, seed, power_a, shared_slots,
                          round(first_cell_frac * steps), constant_tokens)
    torch.manual_seed(seed)
    model = model_factory(vocab_size=vocab_size).to(device)
    run = fit(model, batches, slot_loss(device, dtype), recipe, name="MQAR training", stop_after=stop_after,
              progress=False, log_every=log_every)
    by_cell = {}
    for seq_len, kv in eval_cells:
        test_x, test_y = test_set(vocab_size, seq_len, kv, num_test, seed * 1_000_003 + 10_000_000, power_a)
        with autocast(device, dtype):
            by_cell[(seq_len, kv)] = mqar_accuracy(model, test_x, test_y, kv, far_distance)
    from models.sizes import count_parameters

    return {"by_cell": by_cell, "final_train_loss": run.final_loss, "n_params": count_parameters(model),
            "train_s": run.wall_s, "num_train": sum(batches.cell(i)[2] for i in range(len(run.rows))),
            "tokens": run.tokens, "num_test": num_test}


def llama_factory(hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                  max_len: int = 2048) -> Callable[..., torch.nn.Module]:
    """Factory of a small ``LlamaForCausalLM`` for sequences up to ``max_len`` (a full-attention reference outside
    the registry; MQAR's ``--arch llama``, tests and smoke runs): ``factory(vocab_size=...)``."""
    def build(vocab_size: int) -> torch.nn.Module:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                          num_hidden_layers=num_layers, num_attention_heads=num_heads,
                          num_key_value_heads=num_heads, max_position_embeddings=max_len)
        return LlamaForCausalLM(cfg)
    return build
