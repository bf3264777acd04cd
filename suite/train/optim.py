"""The recipe of every training run: the optimizer, its learning-rate schedule and gradient clipping, as
:func:`suite.train.loop.fit` runs them for LM training (:mod:`suite.train.lm`), the NIAH retrieval run
(:mod:`suite.eval.niah_train`) and MQAR (:mod:`suite.eval.mqar_train`).

- :class:`Recipe`: the settings (lr, weight decay, schedule and warmup, clipping, AdamW's betas) of one run;
- :func:`adamw`: AdamW with weight decay by parameter role (:func:`decays`: the weight matrices of the projections,
  the MLP, the short convolutions and the embeddings; not norms, biases, gates or Orthros's query scale-offset; the
  paper's Table 5 recipe), or on every parameter in one group (``decay_all``: Zoology's MQAR recipe).
- :func:`cosine_to_min_lr`: linear warmup, then a cosine from the peak to ``min_lr_ratio`` of it
  (``transformers.get_cosine_with_min_lr_schedule_with_warmup``; LM training and conversion: ``"cosine_to_min"``).
- :func:`warmup_cosine`: a linear warmup ramp times a cosine to 0 over all steps (:func:`warmup_cosine_factor`;
  NIAH's ``cosine`` and MQAR). transformers' cosine schedules start their cosine after the warmup instead.
- :func:`wsd`: warmup-stable-decay (``transformers.get_wsd_schedule``; NIAH's ``wsd``).
- :func:`clip_gradients`: the total gradient norm, clipped where the recipe clips (the loop checks it is finite
  before the optimizer step).

Every schedule is a ``torch.optim.lr_scheduler.LambdaLR`` stepped once per optimizer step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from suite.config import warmup_problem

SCHEDULES = ("cosine", "wsd")  # the names NIAH's --schedule takes
LR_SCHEDULES = (*SCHEDULES, "cosine_to_min")  # every schedule a Recipe names (lr_schedule)
WSD_DECAY = 0.2  # share of the steps over which the "wsd" schedule decays


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """How a run of ``steps`` optimizer steps updates its model: AdamW (:func:`adamw`) at peak ``lr`` with
    ``weight_decay`` by parameter role (``decay_all``: on every parameter), ``betas``, ``fused``; the lr ``schedule``
    (:data:`LR_SCHEDULES`, :func:`lr_schedule`) with ``warmup`` steps and, for ``"cosine_to_min"``, its floor
    ``min_lr_ratio``; the gradient norm clipped to ``grad_clip`` (None: measured only, e.g. Zoology's MQAR recipe).

    Raises ValueError naming the setting for a bad value, or a warmup that does not end before the last step
    (:func:`suite.config.warmup_problem`)."""

    lr: float
    weight_decay: float
    steps: int
    schedule: str
    warmup: int = 0
    min_lr_ratio: float = 0.0
    grad_clip: float | None = 1.0
    decay_all: bool = False
    betas: tuple[float, float] = (0.9, 0.95)
    fused: bool | None = None

    def __post_init__(self):
        checks = [(isinstance(self.steps, int) and self.steps >= 1, f"steps={self.steps} must be an integer >= 1"),
                  (self.lr > 0, f"lr={self.lr} must be > 0"),
                  (self.weight_decay >= 0, f"weight_decay={self.weight_decay} must be >= 0"),
                  (self.warmup >= 0, f"warmup={self.warmup} must be >= 0"),
                  (0 <= self.min_lr_ratio <= 1, f"min_lr_ratio={self.min_lr_ratio} must be in [0, 1]"),
                  (self.grad_clip is None or self.grad_clip > 0, f"grad_clip={self.grad_clip} must be > 0 or None"),
                  (self.schedule in LR_SCHEDULES, f"schedule={self.schedule!r}; known: {LR_SCHEDULES}")]
        problems = [why for ok, why in checks if not ok]
        if problems:
            raise ValueError("; ".join(problems))
        if warmup_problem(self.warmup, self.steps):
            raise ValueError(warmup_problem(self.warmup, self.steps))

    def optimizer(self, model: torch.nn.Module) -> torch.optim.AdamW:
        return adamw(model, self.lr, self.weight_decay, decay_all=self.decay_all, betas=self.betas, fused=self.fused)

    def scheduler(self, optimizer: torch.optim.Optimizer):
        return lr_schedule(optimizer, self.schedule, self.steps, self.warmup, self.min_lr_ratio)


def clip_gradients(parameters, max_norm: float | None) -> torch.Tensor:
    """The total L2 norm of the gradients of ``parameters`` (before clipping), as a tensor on their device (no host
    sync), the gradients clipped to ``max_norm`` (None: measured only, for a recipe without clipping). Under FSDP2
    the norm is the full model's (a collective)."""
    parameters = [p for p in parameters if p.grad is not None]
    if max_norm is None:
        norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
    else:
        norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    return norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # a DTensor under FSDP2


DECAYED_MODULES = (torch.nn.Linear, torch.nn.Embedding, torch.nn.Conv1d)  # FLA's ShortConvolution is a Conv1d


def decays(model: torch.nn.Module) -> dict[str, bool]:
    """Whether weight decay applies to each trainable parameter of ``model``, by name (``named_parameters``; a tied
    tensor once): True for the ``weight`` of an ``nn.Linear``, ``nn.Embedding`` or ``nn.Conv1d`` (projections, MLP,
    LM head, embeddings, short convolutions), False for everything else: norms, biases, gates such as GDN's
    ``A_log`` / ``dt_bias``, and the scale-offset alpha, beta, alpha', beta' (``[H, d]`` matrices by shape, but
    decaying them pulls alpha towards 0 instead of its identity 1, so the rule is by role, not by dimensions)."""
    owners = {id(m.weight): m for m in model.modules()
              if isinstance(m, DECAYED_MODULES) and isinstance(getattr(m, "weight", None), torch.nn.Parameter)}
    return {name: id(p) in owners for name, p in model.named_parameters() if p.requires_grad}


def adamw(model: torch.nn.Module, lr: float, weight_decay: float, *, decay_all: bool = False,
          betas: tuple[float, float] = (0.9, 0.95), fused: bool | None = None) -> torch.optim.AdamW:
    """AdamW (eps 1e-8) over the trainable parameters of ``model``: two groups, ``weight_decay`` on those
    :func:`decays` marks and none on the rest; with ``decay_all`` one group of all parameters, all decayed.
    ``fused`` as ``torch.optim.AdamW`` takes it (one kernel a step on a GPU)."""
    if decay_all:
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=1e-8, weight_decay=weight_decay,
                                 fused=fused)
    params, decayed = dict(model.named_parameters()), decays(model)
    groups = [{"params": [params[n] for n, d in decayed.items() if d], "weight_decay": weight_decay},
              {"params": [params[n] for n, d in decayed.items() if not d], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8, fused=fused)


def cosine_to_min_lr(opt: torch.optim.Optimizer, steps: int, warmup: int, min_lr_ratio: float):
    """Linear warmup over ``warmup`` steps, then a cosine from the peak lr to ``min_lr_ratio`` times it at ``steps``."""
    from transformers import get_cosine_with_min_lr_schedule_with_warmup

    return get_cosine_with_min_lr_schedule_with_warmup(opt, warmup, steps, min_lr_rate=min_lr_ratio)


def warmup_cosine_factor(step: int, steps: int, warmup: int = 0) -> float:
    """The lr multiplier of step ``step`` (0-based): ``(step + 1) / warmup`` during the first ``warmup`` steps (no
    ramp at 0), times the cosine decay ``0.5 * (1 + cos(pi * step / steps))`` over all steps."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    return ramp * 0.5 * (1 + math.cos(math.pi * step / steps))


def warmup_cosine(opt: torch.optim.Optimizer, steps: int, warmup: int = 0):
    """The schedule of :func:`warmup_cosine_factor`."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine_factor(s, steps, warmup))


def wsd(opt: torch.optim.Optimizer, steps: int, warmup: int, decay: float = WSD_DECAY):
    """Warmup-stable-decay (``transformers.get_wsd_schedule``): a linear warmup ``s / warmup`` over at most
    ``steps - 1`` steps (step 0 at lr 0), the peak lr, then a cosine to 0 over the last ``decay`` share of the steps
    (at least one)."""
    from transformers import get_wsd_schedule

    n_warmup = min(warmup, steps - 1)
    n_decay = min(steps - n_warmup, max(1, round(decay * steps)))
    return get_wsd_schedule(opt, n_warmup, num_decay_steps=n_decay, num_training_steps=steps)


def lr_schedule(opt: torch.optim.Optimizer, schedule: str, steps: int, warmup: int, min_lr_ratio: float = 0.0):
    """The schedule named ``schedule``: ``"cosine"`` (:func:`warmup_cosine`), ``"wsd"`` (:func:`wsd`) or
    ``"cosine_to_min"`` (:func:`cosine_to_min_lr`, to ``min_lr_ratio`` of the peak). Raises ValueError for another
    name."""
    if schedule == "wsd":
        return wsd(opt, steps, warmup)
    if schedule == "cosine_to_min":
        return cosine_to_min_lr(opt, steps, warmup, min_lr_ratio)
    if schedule != "cosine":
        raise ValueError(f"schedule={schedule!r}; known: {LR_SCHEDULES}")
    return warmup_cosine(opt, steps, warmup)
