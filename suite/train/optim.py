"""The optimizer and learning-rate schedules of every training loop: LM training (:mod:`suite.train.loop`), the NIAH
retrieval run (:mod:`suite.eval.niah_train`) and MQAR (:mod:`suite.eval.mqar_train`).

- :func:`adamw`: AdamW with weight decay by parameter role (:func:`decays`: the weight matrices of the projections,
  the MLP, the short convolutions and the embeddings; not norms, biases, gates or Orthros's query scale-offset; the
  paper's Table 5 recipe), or on every parameter in one group (``decay_all``: Zoology's MQAR recipe).
- :func:`cosine_to_min_lr`: linear warmup, then a cosine from the peak to ``min_lr_ratio`` of it
  (``transformers.get_cosine_with_min_lr_schedule_with_warmup``; LM training and conversion).
- :func:`warmup_cosine`: a linear warmup ramp times a cosine to 0 over all steps (:func:`warmup_cosine_factor`;
  NIAH's ``cosine`` and MQAR). transformers' cosine schedules start their cosine after the warmup instead.
- :func:`wsd`: warmup-stable-decay (``transformers.get_wsd_schedule``; NIAH's ``wsd``).
- :func:`clip_gradients`: every loop's gradient step guard: the total gradient norm (clipped where the recipe clips),
  and a :class:`TrainingDivergedError` naming the step when it is NaN or infinite, before the optimizer could write it
  into the weights (:func:`stop_if_not_finite` does the same for a loss).

Every schedule is a ``torch.optim.lr_scheduler.LambdaLR`` stepped once per optimizer step.
"""
from __future__ import annotations

import math

import torch

SCHEDULES = ("cosine", "wsd")  # the names lr_schedule (NIAH's --schedule) takes
WSD_DECAY = 0.2  # share of the steps over which the "wsd" schedule decays


class TrainingDivergedError(RuntimeError):
    """A loss or gradient norm became NaN or infinite; the message names the step."""


def stop_if_not_finite(value: float, what: str, where: str, hint: str = "") -> float:
    """``value``, or TrainingDivergedError ``"{what} is {value} at {where}; {hint}"`` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise TrainingDivergedError(f"{what} is {value} at {where}" + (f"; {hint}" if hint else ""))
    return value


def clip_gradients(parameters, max_norm: float | None, where: str, hint: str = "") -> float:
    """The total L2 norm of the gradients of ``parameters`` (before clipping), clipped to ``max_norm`` (None: measured
    only, for a recipe without clipping). Raises TrainingDivergedError naming ``where`` when the norm is NaN or
    infinite: call it between ``backward()`` and ``optimizer.step()``, so that a non-finite gradient never reaches the
    weights. Under FSDP2 the norm is the full model's (a collective: every rank raises together)."""
    parameters = [p for p in parameters if p.grad is not None]
    if max_norm is None:
        norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
    else:
        norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # a DTensor under FSDP2
    return stop_if_not_finite(float(norm), "the gradient norm", where, hint)


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


def lr_schedule(opt: torch.optim.Optimizer, schedule: str, steps: int, warmup: int):
    """The schedule named ``schedule``: ``"cosine"`` (:func:`warmup_cosine`) or ``"wsd"`` (:func:`wsd`). Raises
    ValueError for another name."""
    if schedule == "wsd":
        return wsd(opt, steps, warmup)
    if schedule != "cosine":
        raise ValueError(f"schedule={schedule!r}; known: {SCHEDULES}")
    return warmup_cosine(opt, steps, warmup)
