"""The training loop: train (or continue training) any HF causal LM on the study's token arrays.

The model is anything with ``model(input_ids=[B, T] int64, labels=[B, T] int64).loss`` (a scalar,
mean next-token cross-entropy in nats) and ``save_pretrained`` / ``from_pretrained``: a
``transformers`` model, or the suite's Orthros and baselines from ``models.registry.build``
(:mod:`suite.train.run` is the command line).

Recipe (the paper's Table 5 / Table 6 settings, scaled down in the study config): AdamW, linear warmup
then cosine decay to ``min_lr_ratio * lr`` (``transformers.get_cosine_with_min_lr_schedule_with_warmup``),
weight decay by parameter role (matrices; not norms, biases, gates or the scale-offset; both from
:mod:`suite.train.optim`), gradient clipping at 1.0.

Outputs in ``out_dir`` (keep it under a git-ignored folder such as ``work_dirs/``):

- ``loss.csv``: step, tokens, loss, lr, tok_s, wall_s (one row per step; tok/s of that step);
- ``evals.csv`` (with ``eval_points``): step, tokens, val_loss at evenly spaced steps, the last one the final step,
  on the same fixed val windows as the metrics row (the held-out loss curve);
- ``checkpoint/``: HF model folder + tokenizer + optimizer/scheduler/RNG state, every ``save_every`` steps
  and at the end; an interrupted run resumes from it, a finished run is not recomputed;
- ``metrics.csv``: one row, final train loss (mean of the last 10 steps), val loss / perplexity on fixed
  val windows, tokens, n_params, tok/s, the data order and how many times it read the train split (``epochs``),
  training FLOPs a step, MFU against the device's measured matmul rate (CUDA; empty elsewhere), corpus sha256 and
  the provenance columns;
- ``run_config.json``: the run's settings (hyperparameters, arch, size, model, overrides, init_from, data,
  profile, dtype) and what it trains from: the corpus and tokenizer sha256, the sha256 of the starting weights
  (``--model`` / ``--init-from``) and ``code_sha256``, a digest of the repository code ``python -m
  suite.train.run`` runs (``suite.deps.source_digest``); a resume must match every one of them.
  ``--restart-if-changed`` (what the DAG passes: Snakemake reruns a job when its code, inputs or config values
  changed) then trains afresh instead.

Several GPUs: under ``torchrun`` every rank calls :func:`train`; each rank takes ``batch_size / N`` rows of the
same global batch, rank 0 writes every output, and the metrics row records ``world_size``
(:mod:`suite.train.distributed`).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from suite.common import DTYPES, autocast, kernels_summary
from suite.config import warmup_problem
from suite.data.batches import ORDERS, TokenBatches, eval_windows
from suite.data.packages import sha256_of
from suite.data.retrieval import RetrievalSampler
from suite.data.tokenizer import load_tokens
from suite.deps import source_digest
from suite.provenance import provenance, read_csv, write_csv, write_text
from suite.train import checkpoint as ckpt_io
from suite.train import distributed
from suite.train.model import set_special_ids
from suite.train.optim import TrainingDivergedError, adamw, clip_gradients, cosine_to_min_lr, stop_if_not_finite
from suite.train.throughput import matmul_tflops, step_flops

__all__ = ["TrainingDivergedError", "evaluate", "train"]


@torch.no_grad()
def evaluate(model, batches: list[torch.Tensor], device: str = "cpu", dtype: str = "float32") -> float:
    """Mean next-token loss (nats/token) of ``model`` over fixed LongTensor batches [B, T]."""
    was_training = model.training
    model.eval()
    losses = []
    for x in batches:
        x = x.to(device)
        with autocast(device, dtype):
            losses.append(float(model(input_ids=x, labels=x).loss))
    model.train(was_training)
    return float(np.mean(losses))


def train(model, data_dir: str | Path, out_dir: str | Path, *, steps: int, batch_size: int, seq_len: int,
          lr: float = 3e-4, warmup: int = 0, min_lr_ratio: float = 0.1, weight_decay: float = 0.05,
          grad_clip: float = 1.0, seed: int = 42, profile: str = "default", device: str = "cpu",
          dtype: str = "float32", retrieval_fraction: float = 0.0, retrieval_max_keys: int = 4,
          save_every: int | None = None, val_batches: int = 8, init_from: str | Path | None = None,
          arch: str | None = None, size: str | None = None, overrides: dict | None = None,
          backend: str | None = None, overwrite: bool = False, progress: bool = True, deterministic: bool = True,
          threads: int | None = None, data_offset: int = 0, parallel: str = "fsdp",
          restart_if_changed: bool = False, order: str = "random", eval_points: int = 0,
          compile: bool = False) -> dict:
    """Train ``model`` for ``steps`` optimizer steps of [batch_size, seq_len] tokens; return the metrics row.

    ``model``: checkpoint folder or zero-argument factory returning a fresh model
    (called after seeding, so the init is reproducible). A folder means continued pretraining of that
    checkpoint; ``init_from`` loads a checkpoint's weights into a factory-built model (conversion).
    ``data_offset``: step s trains on batch ``data_offset + s - 1`` of the seed's stream, so continued
    pretraining (Base CPT, conversion) with ``data_offset = base steps`` sees tokens the base run did not.
    ``threads`` sets torch's CPU threads (1 is fastest for tiny models on a shared 2-core machine).
    ``lr`` is the peak learning rate, ``warmup`` the linear-warmup steps (0, or fewer than ``steps``:
    :func:`suite.config.warmup_problem`), ``min_lr_ratio`` the final lr as a fraction of ``lr``. ``dtype``
    "bfloat16"/"float16" means autocast with float32 master weights.
    ``retrieval_fraction`` of the rows are synthetic retrieval sequences (``suite.data.retrieval``).
    ``order``: ``"random"`` crops or ``"epoch"`` (non-overlapping windows read once an epoch;
    :class:`suite.data.batches.TokenBatches`). ``eval_points``: held-out evaluations along the run (``evals.csv``),
    0 for the final one only. ``compile``: the training forward and backward run through ``torch.compile`` (the
    evaluations and the saved model stay eager).

    ``backend`` (provenance column) defaults to the attention kernels ``models.kernels`` used, else "torch".
    ``arch``, ``size`` and ``overrides`` (the model-config overrides the factory applies) label the run; with
    the other settings they go to run_config.json.

    Under torchrun (or any initialised process group of N > 1 ranks) every rank calls ``train`` with the
    same arguments and its own ``device``: ``batch_size`` is the global batch (a multiple of N), the model is
    sharded with FSDP2 (``parallel="fsdp"``) or replicated with DDP (``"ddp"``), and rank 0 alone writes
    files; every rank returns the metrics row.

    Resumes from ``<out_dir>/checkpoint`` when present: every run_config.json field must be the same (else
    ValueError naming the differing fields, and run_config.json is left untouched; ``overwrite=True`` starts
    afresh, and so does ``restart_if_changed=True`` when a field differs); returns the saved metrics when the run is
    finished. The fields include the code: ``code_sha256`` of the repository files ``suite.train.run`` runs (this
    module among them), so a resume never continues a checkpoint of other code.
    Raises TrainingDivergedError naming the step when the loss or the gradient norm is NaN/inf (checked before the
    optimizer step, so the weights stay finite and the last checkpoint, of finite weights, is kept for a resume), and
    at the end when the validation loss is (no metrics.csv then); ValueError naming a corrupt
    checkpoint file, a batch_size that is not a multiple of the world size, or an unknown ``parallel``.
    """
    for name, val in (("steps", steps), ("batch_size", batch_size), ("seq_len", seq_len)):
        if not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {list(DTYPES)}")
    if not (lr > 0 and 0 <= min_lr_ratio <= 1 and warmup >= 0 and weight_decay >= 0):
        raise ValueError(f"bad optimizer settings lr={lr}, min_lr_ratio={min_lr_ratio}, warmup={warmup}, "
                         f"weight_decay={weight_decay}")
    if warmup_problem(warmup, steps):
        raise ValueError(warmup_problem(warmup, steps))
    ctx = distributed.context()
    if batch_size % ctx.world_size:
        raise ValueError(f"batch_size {batch_size} is not a multiple of the world size {ctx.world_size}")
    if parallel not in distributed.PARALLEL:
        raise ValueError(f"parallel must be one of {distributed.PARALLEL}, got {parallel!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "epoch" and retrieval_fraction > 0:
        raise ValueError(f"order 'epoch' takes no retrieval rows (retrieval_fraction {retrieval_fraction})")
    if not isinstance(eval_points, int) or not 0 <= eval_points <= steps:
        raise ValueError(f"eval_points must be an integer in [0, steps={steps}], got {eval_points!r}")
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    if not (data_dir / "corpus.json").exists():
        raise ValueError(f"{data_dir / 'corpus.json'} does not exist: build the corpus and tokenizer first "
                         f"(python -m suite.data.corpus / suite.data.tokenizer --data-dir {data_dir})")
    corpus = json.loads((data_dir / "corpus.json").read_text())
    run_config = {"data_offset": data_offset, "steps": steps, "batch_size": batch_size, "seq_len": seq_len,
                  "lr": lr, "warmup": warmup, "min_lr_ratio": min_lr_ratio, "weight_decay": weight_decay,
                  "grad_clip": grad_clip, "seed": seed, "retrieval_fraction": retrieval_fraction,
                  "retrieval_max_keys": retrieval_max_keys, "init_from": None if init_from is None else str(init_from),
                  "model": str(model) if isinstance(model, (str, Path)) else None, "data_sha256": corpus["sha256"],
                  "arch": arch, "size": size, "overrides": overrides, "profile": profile, "dtype": dtype,
                  "val_batches": val_batches, "order": order, "eval_points": eval_points, "compile": compile,
                  "tokenizer_sha256": _file_sha256(data_dir / "tokenizer" / "tokenizer.json"),
                  "base_sha256": _weights_sha256(model if isinstance(model, (str, Path)) else init_from),
                  "code_sha256": source_digest("suite.train.run")}
    if ctx.main:
        out_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(out_dir) if ctx.main else contextlib.nullcontext():
        ckpt, info, error = None, None, None
        if ctx.main:  # rank 0 checks the run folder; the others follow its verdict
            try:
                ckpt = _prepare_out_dir(out_dir, run_config, overwrite, restart_if_changed)
                info = ckpt_io.verify_checkpoint(ckpt) if ckpt is not None else None
            except ValueError as err:
                error = str(err)
        ckpt, info, error = distributed.broadcast((ckpt, info, error), ctx)
        if error is not None:
            raise ValueError(error)
        if info is not None and info["step"] >= steps and (out_dir / "metrics.csv").exists():
            return read_csv(out_dir / "metrics.csv").iloc[0].to_dict()
        if info is not None:
            print(f"resuming {out_dir} from its checkpoint at step {info['step']} of {steps}", file=sys.stderr)
        return _train_loop(model, data_dir, out_dir, corpus, run_config, ckpt, info, init_from=init_from,
                           device=device, dtype=dtype, threads=threads, deterministic=deterministic,
                           save_every=save_every, progress=progress, val_batches=val_batches, backend=backend,
                           ctx=ctx, parallel=parallel)


@contextlib.contextmanager
def _exclusive(out_dir: Path):
    """Hold an exclusive lock on ``out_dir`` so two processes never train into the same run folder."""
    with open(out_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(f"another process is training in {out_dir}") from None
        yield


def _train_loop(model, data_dir: Path, out_dir: Path, corpus: dict, run_config: dict, ckpt, info, *, init_from,
                device, dtype, threads, deterministic, save_every, progress, val_batches, backend,
                ctx: distributed.Dist, parallel: str) -> dict:
    steps, batch_size, seq_len = run_config["steps"], run_config["batch_size"], run_config["seq_len"]
    lr, warmup, seed = run_config["lr"], run_config["warmup"], run_config["seed"]
    retrieval_fraction, data_offset = run_config["retrieval_fraction"], run_config["data_offset"]
    arch, size, profile = run_config["arch"], run_config["size"], run_config["profile"]

    if threads:
        torch.set_num_threads(threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    np.random.seed(seed)
    if deterministic and torch.device(device).type == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)
    net = _network(model, init_from if ckpt is None else None)
    if ckpt is not None:  # sha256-verified in train()
        net = ckpt_io.load_model(ckpt, dtype=None, tokenizer=False, check=False, model_cls=type(net))[0]
    net.to(device).train()
    tokenizer_dir = data_dir / "tokenizer"
    set_special_ids(net, tokenizer_dir)
    net = distributed.wrap(net, ctx, parallel)  # one process: net itself
    optimizer = adamw(net, lr, run_config["weight_decay"])
    scheduler = cosine_to_min_lr(optimizer, steps, warmup, run_config["min_lr_ratio"])
    start, tokens_done, wall_before = 0, 0, 0.0
    loss_rows: list[dict] = []
    if ckpt is not None:
        ckpt_io.load_training_state(ckpt, optimizer, scheduler, model=net)
        start, tokens_done, wall_before = info["step"], info["tokens"], info["wall_s"]
        loss_rows = _resumed_rows(out_dir / "loss.csv", start)

    train_tokens = load_tokens(data_dir, "train")
    sampler = RetrievalSampler.from_tokenizer_dir(train_tokens, tokenizer_dir, run_config["retrieval_max_keys"]) \
        if retrieval_fraction > 0 else None
    batches = TokenBatches(train_tokens, batch_size, seq_len, seed, sampler, retrieval_fraction,
                           order=run_config["order"])
    val = eval_windows(load_tokens(data_dir, "val"), batch_size, seq_len, val_batches)
    eval_at = eval_steps(steps, run_config["eval_points"])
    eval_rows = _resumed_rows(out_dir / "evals.csv", start)
    forward = _compiled(net, run_config["compile"])
    flops = step_flops(distributed.unwrap(net).config, batch_size, seq_len)
    peak = matmul_tflops(device, DTYPES[dtype]) if flops else None
    save_every = save_every or max(1, steps // 4)
    _reset_kernel_usage()
    t0 = time.perf_counter()

    saved = start or None  # the step of the checkpoint on disk

    def snapshot(step: int) -> None:
        nonlocal saved
        bad = ckpt_io.non_finite(net.named_parameters())  # this rank's shard under FSDP2
        if distributed.mean(torch.tensor(float(bool(bad)), device=device), ctx) > 0:  # any rank's: all stop
            raise TrainingDivergedError(f"weights {bad[:3]} are not finite after step {step} of {steps} (run "
                                        f"{out_dir}); not saved, " + (f"the checkpoint of step {saved} is kept"
                                                                      if saved else "no checkpoint was written"))
        model_state, optimizer_state = distributed.full_state(net, optimizer, ctx)  # collective
        if ctx.main:
            write_csv(loss_rows, out_dir / "loss.csv")
            state = {"step": step, "tokens": tokens_done, "wall_s": wall_before + time.perf_counter() - t0}
            ckpt_io.save_checkpoint(out_dir, distributed.unwrap(net), optimizer, scheduler, state,
                                    tokenizer_dir if tokenizer_dir.exists() else None, model_state, optimizer_state)
        saved = step
        distributed.barrier(ctx)

    bar = tqdm(total=steps, initial=start, disable=not progress or not ctx.main, mininterval=1.0,
               desc=f"train {arch or ''} {size or ''}".strip())
    for step in range(start + 1, steps + 1):
        t_step = time.perf_counter()
        x = batches.batch(data_offset + step - 1)  # the global batch; this rank trains on its rows
        x_rank = distributed.shard_rows(x, ctx).to(device)
        with autocast(device, dtype):
            loss = forward(input_ids=x_rank, labels=x_rank).loss
        loss_val = distributed.mean(loss.detach(), ctx)
        where = f"step {step} of {steps} (run {out_dir})"
        kept = f"the checkpoint of step {saved} is kept" if saved else "no checkpoint was written"
        try:
            stop_if_not_finite(loss_val, "loss", where, f"lower lr ({lr}) or check the model; {kept}")
            loss.backward()
            # before optimizer.step(): a NaN or infinite gradient never reaches the weights or a checkpoint
            clip_gradients(net.parameters(), run_config["grad_clip"], where,
                           f"nothing was updated at this step and {kept}; lower lr ({lr}) or check the data")
        except TrainingDivergedError:
            bar.close()
            raise
        step_lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        tokens_done += x.numel()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t_step
        loss_rows.append({"step": step, "tokens": tokens_done, "loss": loss_val, "lr": step_lr,
                          "tok_s": x.numel() / dt, "wall_s": wall_before + time.perf_counter() - t0})
        bar.update(1)
        bar.set_postfix(loss=f"{loss_val:.3f}", tok_s=f"{x.numel() / dt:.0f}")
        if step in eval_at or step == steps:
            t_eval = time.perf_counter()
            val_loss = evaluate(net, [distributed.shard_rows(b, ctx) for b in val], device, dtype)
            if ctx.active:
                val_loss = distributed.mean(torch.tensor(val_loss), ctx)
            stop_if_not_finite(val_loss, "the validation loss", f"step {step} of run {out_dir}",
                               "no metrics.csv written" if step == steps else f"{kept}; no metrics.csv written")
            t0 += time.perf_counter() - t_eval  # evaluations are not training time
            if step in eval_at:
                eval_rows.append({"step": step, "tokens": tokens_done, "val_loss": val_loss})
                if ctx.main:
                    write_csv(eval_rows, out_dir / "evals.csv")
        if step % save_every == 0 or step == steps:
            snapshot(step)
    bar.close()
    if start >= steps:  # resumed a finished run whose metrics row is missing: evaluate it once
        val_loss = evaluate(net, [distributed.shard_rows(b, ctx) for b in val], device, dtype)
        if ctx.active:
            val_loss = distributed.mean(torch.tensor(val_loss), ctx)
        stop_if_not_finite(val_loss, "the validation loss", f"the end of run {out_dir} ({steps} steps)",
                           "no metrics.csv written")
    wall_s = wall_before + time.perf_counter() - t0
    frame = pd.DataFrame(loss_rows)
    train_loss = float(frame["loss"].tail(10).mean())
    train_wall = float(frame["wall_s"].iloc[-1]) if len(frame) else wall_s
    if backend is None:
        backend = kernels_summary("torch")  # the attention kernels models.kernels ran, else "torch"
    from models.sizes import count_parameters

    row = {"arch": arch, "size": size, "n_params": count_parameters(net), "tokens": tokens_done, "seq_len": seq_len,
           "batch_size": batch_size, "steps": steps, "lr": lr, "train_loss": train_loss, "val_loss": val_loss,
           "val_ppl": math.exp(val_loss), "val_tokens": val_batches * batch_size * seq_len,
           "tok_s": tokens_done / train_wall if train_wall > 0 else float("nan"),
           "order": run_config["order"], "epochs": batches.epochs(steps), "compile": run_config["compile"],
           "step_flops": flops, "mfu": _mfu(flops, frame, peak), "peak_tflops": peak,
           "retrieval_fraction": retrieval_fraction, "init_from": run_config["init_from"],
           "data_sha256": corpus["sha256"],
           **provenance(profile, seed, dtype, backend, device, wall_s, ctx.world_size)}
    if ctx.main:
        write_csv([row], out_dir / "metrics.csv")
    distributed.barrier(ctx)
    return row


def _network(model, init_from: str | Path | None):
    """The network ``model`` names: a checkpoint folder (:func:`suite.train.checkpoint.load_model`) or a factory's
    fresh model; ``init_from`` then loads a checkpoint's weights into it (:func:`suite.train.checkpoint.load_matching`:
    shape-matching names; new parameters keep their initial values, e.g. Orthros's query scale-offsets when converting
    a Transformer)."""
    if isinstance(model, (str, Path)):
        net = ckpt_io.load_model(model, dtype=None, tokenizer=False)[0]
    elif callable(model):
        net = model()
    else:
        raise ValueError(f"model must be a checkpoint folder or a factory, got {type(model)}")
    if init_from is not None:
        kept = ckpt_io.load_matching(net, init_from)
        total = len(net.state_dict())
        print(f"init_from {init_from}: loaded {total - len(kept)} of {total} tensors; kept initial values for "
              f"{len(kept)}: {kept[:8]}{' ...' if len(kept) > 8 else ''}", file=sys.stderr)
    return net


def eval_steps(steps: int, points: int) -> list[int]:
    """The ``points`` steps of a run of ``steps`` at which the held-out loss is measured: evenly spaced, the last
    one the final step (none for 0 points)."""
    return sorted({max(1, round(k * steps / points)) for k in range(1, points + 1)}) if points else []


def _compiled(net, compile: bool):
    """The module the training step calls: ``net``, or ``torch.compile(net)``."""
    return torch.compile(net) if compile else net


def _mfu(flops: int | None, frame: pd.DataFrame, peak: float | None) -> float | None:
    """Model FLOPs utilisation over the run's steps after the first (compilation and warm-up): FLOPs a step x
    steps / their wall time / the matmul rate; None where either is unknown."""
    if not flops or not peak or len(frame) < 3:
        return None
    rest = frame.iloc[1:]
    seconds = float(rest["wall_s"].iloc[-1] - frame["wall_s"].iloc[0])
    return flops * len(rest) / seconds / (peak * 1e12) if seconds > 0 else None


def _resumed_rows(path: Path, start: int) -> list[dict]:
    """The rows of a per-step CSV of ``path`` up to step ``start`` (a resume), or none."""
    if not start or not path.exists():
        return []
    return [r for r in read_csv(path).to_dict("records") if r["step"] <= start]


def _prepare_out_dir(out_dir: Path, run_config: dict, overwrite: bool,
                     restart_if_changed: bool = False) -> Path | None:
    """Check that a checkpoint in ``out_dir`` comes from a run with exactly these settings (every field of
    ``run_config``; ValueError naming the differing ones, or a missing/corrupt run_config.json, and nothing
    written; with ``restart_if_changed`` the run is cleared instead, saying why on stderr), then write
    run_config.json; return the checkpoint to resume from, or None."""
    if overwrite:
        _clear_run(out_dir)
    ckpt = ckpt_io.find_checkpoint(out_dir)
    config_path = out_dir / "run_config.json"
    new = json.loads(json.dumps(run_config, default=str))  # as it reads back (tuples -> lists, Paths -> str)
    problem = _run_config_problem(out_dir, ckpt, config_path, new) if ckpt is not None else None
    if problem and not restart_if_changed:
        raise ValueError(f"{problem}; use another out_dir, overwrite=True or restart_if_changed=True")
    if problem:
        print(f"training afresh: {problem}", file=sys.stderr)
        _clear_run(out_dir)
        ckpt = None
    write_text(json.dumps(new, indent=2), config_path)
    return ckpt


def _run_config_problem(out_dir: Path, ckpt: Path, config_path: Path, new: dict) -> str | None:
    """Why the checkpoint ``ckpt`` cannot be resumed with the settings ``new``, or None when it can."""
    if not config_path.exists():
        return f"{config_path} is missing, so the settings of the checkpoint {ckpt} are unknown"
    try:
        old = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        return f"corrupt run config {config_path}: {err}"
    changed = {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}
    return f"{out_dir} holds a run with other settings {changed} (old, new)" if changed else None


def _clear_run(out_dir: Path) -> None:
    for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", "loss.csv", "evals.csv", "metrics.csv",
                 "run_config.json"):
        path = out_dir / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _file_sha256(path: Path) -> str | None:
    return sha256_of(path) if path.is_file() else None


def _weights_sha256(folder: str | Path | None) -> str | None:
    """sha256 of a checkpoint folder's weights (recorded in a suite checkpoint's trainer_state.json, else computed);
    None for no folder."""
    if folder is None:
        return None
    folder = Path(folder)
    if (folder / ckpt_io.STATE_JSON).exists():
        recorded = ckpt_io.read_info(folder).get("files_sha256", {}).get(ckpt_io.WEIGHTS)
        if recorded:
            return recorded
    return _file_sha256(folder / ckpt_io.WEIGHTS)


def _reset_kernel_usage() -> None:
    try:
        from models.kernels import reset_usage
    except ImportError:
        return
    reset_usage()
