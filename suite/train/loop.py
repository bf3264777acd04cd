"""The training loop of every run in the suite: :func:`fit` takes a model, a batch source and a loss.

The three runs give their data and their loss, and nothing else: the next-token loss on the study's token arrays
(LM pretraining and continued training, :mod:`suite.train.lm`), the loss on the answer tokens only (the NIAH
retrieval run, :mod:`suite.experiments.niah.train`) and the loss on the logits at the query slots (MQAR,
:mod:`suite.experiments.mqar.train`). The loop owns the rest:

- the optimizer and its learning-rate schedule, from the run's :class:`suite.train.optim.Recipe`, stepped once a
  batch;
- gradient clipping (the recipe's ``grad_clip``; a recipe without clipping still measures the norm);
- the divergence check: a non-finite loss or gradient norm stops the run with :class:`TrainingDivergedError` naming
  the step, before the optimizer could write it into the weights (the loss and the norm are read in one host sync a
  step); a checkpoint of non-finite weights is never written;
- checkpoints and resume (:class:`Checkpoints`): model, optimizer, schedule and RNG state with the per-step rows
  (``loss.csv``), every ``every`` steps and at the end; a resumed run continues at the exact step and sample;
- the progress bar, or a log line every ``log_every`` steps;
- ``compile``: the training step's forward and backward through ``torch.compile``; the model handed to
  ``after_step`` (evaluations) and saved stays eager.

Several GPUs: ``ctx`` (:mod:`suite.train.distributed`) is the process's place in a torchrun job: the loss is
averaged over ranks, rank 0 alone shows progress and writes files.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

from suite.provenance import read_csv, write_csv
from suite.train import checkpoint as ckpt_io
from suite.train import distributed
from suite.train.optim import Recipe, clip_gradients

__all__ = ["Batch", "Checkpoints", "Fit", "TrainingDivergedError", "fit", "rows_until", "stop_if_not_finite"]

LOSS_CSV = "loss.csv"  # the per-step rows a checkpointed run writes beside its checkpoint


class TrainingDivergedError(RuntimeError):
    """A loss, gradient norm or weight became NaN or infinite; the message names the step."""


def stop_if_not_finite(value: float, what: str, where: str, hint: str = "") -> float:
    """``value``, or TrainingDivergedError ``"{what} is {value} at {where}; {hint}"`` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise TrainingDivergedError(f"{what} is {value} at {where}" + (f"; {hint}" if hint else ""))
    return value


@dataclass(frozen=True)
class Batch:
    """One step's data: ``data`` (what the loss reads), the ``tokens`` it holds (rows x length, of every rank) and its
    ``shape`` in words, for the log and the divergence message (e.g. ``"seq_len 64, 4 pairs, 64 rows"``)."""

    data: Any
    tokens: int
    shape: str = ""


@dataclass(frozen=True)
class Checkpoints:
    """Resumable checkpoints of a run in ``out_dir`` (:mod:`suite.train.checkpoint`, with the tokenizer files of
    ``tokenizer_dir``), every ``every`` steps and at the last; ``resume``: a verified checkpoint to continue from,
    whose trainer state (step, tokens, wall_s) is ``state``."""

    out_dir: Path
    every: int
    tokenizer_dir: Path | None = None
    resume: Path | None = None
    state: dict | None = None


@dataclass
class Fit:
    """A run as the loop keeps it: its per-step ``rows`` (step, tokens, loss, lr, tok_s, wall_s; a resumed run's
    earlier rows first), the training ``tokens`` so far, ``wall_s`` (training time; what ``after_step`` takes is not)
    and the step of the last checkpoint written (``saved``)."""

    rows: list[dict] = field(default_factory=list)
    tokens: int = 0
    wall_s: float = 0.0
    saved: int | None = None

    @property
    def final_loss(self) -> float:
        return self.rows[-1]["loss"] if self.rows else float("nan")

    def kept(self) -> str:
        """What a run stopped now leaves on disk."""
        return f"the checkpoint of step {self.saved} is kept" if self.saved else "no checkpoint was written"


Loss = Callable[[torch.nn.Module, Any], "torch.Tensor | tuple[torch.Tensor, torch.Tensor]"]


def fit(model: torch.nn.Module, batches: Callable[[int], Batch], loss: Loss, recipe: Recipe, *,
        name: str = "train", where: str = "", stop_after: int | None = None, progress: bool = True,
        log_every: int = 0, checkpoints: Checkpoints | None = None,
        after_step: Callable[[int, Fit], None] | None = None, compile: bool = False,
        ctx: distributed.Dist | None = None) -> Fit:
    """Train ``model`` (on its device, already wrapped for ``ctx``) for ``recipe.steps`` optimizer steps; return the
    :class:`Fit`.

    Step ``s`` (1-based) trains on ``batches(s - 1)``: ``loss(model, batch.data)`` is the scalar loss to minimise, or
    ``(loss to minimise, loss to report)`` (NIAH's answer loss beside an added next-token loss); with ``compile`` the
    loss gets the compiled model. ``stop_after``: train only the first steps of the schedule. ``name`` and ``where``
    (e.g. the run folder) label the progress bar, the log lines and the messages. ``after_step(step, fit)`` runs after
    each step, before its checkpoint (a held-out evaluation: its time is not training time). ``ctx``: this process's
    place in a torchrun job (default: the only process).

    Raises TrainingDivergedError naming the step (and, with ``checkpoints``, the checkpoint kept) when the loss or
    the gradient norm is NaN or infinite (before the optimizer step: nothing is updated), or when weights are at a
    checkpoint (not written).
    """
    ctx = ctx or distributed.Dist()
    last = stop_after or recipe.steps
    device = next(model.parameters()).device
    model.train()
    optimizer, forward = recipe.optimizer(model), _compiled(model, compile)
    scheduler = recipe.scheduler(optimizer)
    run, start, wall_before = Fit(), 0, 0.0
    if checkpoints is not None and checkpoints.resume is not None:
        ckpt_io.load_training_state(checkpoints.resume, optimizer, scheduler, model=model)
        start = checkpoints.state["step"]
        run = Fit(rows_until(checkpoints.out_dir / LOSS_CSV, start), checkpoints.state["tokens"],
                  checkpoints.state["wall_s"], start or None)
        wall_before = run.wall_s
    # a run whose rows are written waits for each step on a GPU, so that its tok_s is the step's own; the others keep
    # to the one host sync a step of the divergence check
    sync = checkpoints is not None and device.type == "cuda"
    label = ", ".join(filter(None, (name, where)))
    t0 = time.perf_counter()

    def save(step: int) -> None:
        bad = ckpt_io.non_finite(model.named_parameters())  # this rank's shard under FSDP2
        if distributed.mean(torch.tensor(float(bool(bad)), device=device), ctx) > 0:  # any rank's: all stop
            raise TrainingDivergedError(f"weights {bad[:3]} are not finite after step {step} of {recipe.steps} "
                                        f"({label}); not saved, {run.kept()}")
        model_state, optimizer_state = distributed.full_state(model, optimizer, ctx)  # collective
        if ctx.main:
            write_csv(run.rows, checkpoints.out_dir / LOSS_CSV)
            state = {"step": step, "tokens": run.tokens, "wall_s": wall_before + time.perf_counter() - t0}
            tokenizer = checkpoints.tokenizer_dir
            ckpt_io.save_checkpoint(checkpoints.out_dir, distributed.unwrap(model), optimizer, scheduler, state,
                                    tokenizer if tokenizer is not None and tokenizer.exists() else None, model_state,
                                    optimizer_state)
        run.saved = step
        distributed.barrier(ctx)

    bar = tqdm(total=last, initial=start, disable=not progress or not ctx.main, mininterval=1.0, desc=name)
    try:
        for step in range(start + 1, last + 1):
            t_step = time.perf_counter()
            batch = batches(step - 1)
            out = loss(forward, batch.data)
            minimised, reported = out if isinstance(out, tuple) else (out, out)
            minimised.backward()
            norm = clip_gradients(model.parameters(), recipe.grad_clip)
            loss_val, norm_val = _read(reported, norm, ctx)
            at = f"step {step} of {recipe.steps} ({', '.join(filter(None, (label, batch.shape)))})"
            hint = f"nothing was updated at this step; lower the lr ({recipe.lr}) or check the model and data" + \
                (f"; {run.kept()}" if checkpoints is not None else "")
            stop_if_not_finite(loss_val, "the loss", at, hint)
            stop_if_not_finite(norm_val, "the gradient norm", at, hint)
            step_lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            run.tokens += batch.tokens
            if sync:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t_step
            run.rows.append({"step": step, "tokens": run.tokens, "loss": loss_val, "lr": step_lr,
                             "tok_s": batch.tokens / dt, "wall_s": wall_before + time.perf_counter() - t0})
            bar.update(1)
            bar.set_postfix(loss=f"{loss_val:.3f}", tok_s=f"{batch.tokens / dt:.0f}")
            if log_every and ctx.main and (step % log_every == 0 or step == last):
                # "step N ... loss X ...": the lines tools/offline_gpu/mqar_control.py reads
                print(f"{at} loss {loss_val:.4f} lr {step_lr:.2e} {time.perf_counter() - t0:.0f}s", flush=True)
            if after_step is not None:
                t_hook = time.perf_counter()
                after_step(step, run)
                t0 += time.perf_counter() - t_hook  # evaluations are not training time
            if checkpoints is not None and (step % checkpoints.every == 0 or step == recipe.steps):
                save(step)
    finally:
        bar.close()
    run.wall_s = wall_before + time.perf_counter() - t0
    return run


def _read(reported: torch.Tensor, norm: torch.Tensor, ctx: distributed.Dist) -> tuple[float, float]:
    """The step's loss (its mean over ranks) and gradient norm as Python floats, read in one host sync."""
    total = distributed.total(reported.detach().float(), ctx)
    loss_sum, norm_val = torch.stack([total.reshape(()), norm.float().to(total.device)]).tolist()
    return loss_sum / ctx.world_size, norm_val


def rows_until(path: Path, step: int) -> list[dict]:
    """The rows of a per-step CSV up to ``step`` (a resume), or none."""
    if not step or not path.exists():
        return []
    return [r for r in read_csv(path).to_dict("records") if r["step"] <= step]


def _compiled(net, compile: bool):
    """The module the training step calls: ``net``, or ``torch.compile(net)``."""
    return torch.compile(net) if compile else net
