"""Causal-LM training on the study's token arrays: :func:`train` runs one :class:`TrainConfig` in a run folder.

The model is anything with ``model(input_ids=[B, T] int64, labels=[B, T] int64).loss`` (a scalar, mean next-token
cross-entropy in nats) and ``save_pretrained`` / ``from_pretrained``: a ``transformers`` model, or the suite's
Orthros and baselines from ``models.registry.build``. :mod:`suite.train.run` is the command line;
:func:`suite.train.loop.fit` the training loop, given the next-token loss on batches of the train split.

Recipe (the paper's Table 5 / Table 6 settings, scaled down in the study config): AdamW, linear warmup then cosine
decay to ``min_lr_ratio * lr`` (``transformers.get_cosine_with_min_lr_schedule_with_warmup``), weight decay by
parameter role (matrices; not norms, biases, gates or the scale-offset; both from :mod:`suite.train.optim`),
gradient clipping at 1.0.

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
- ``run_config.json``: the run's settings (every :class:`TrainConfig` field but those of how this process runs it)
  and what it trains from: ``model`` (a checkpoint folder it continues), the corpus and tokenizer sha256, the sha256
  of the starting weights (``model`` / ``init_from``) and ``code_sha256``, a digest of the repository code
  ``python -m suite.train.run`` runs (``suite.deps.source_digest``); a resume must match every one of them.
  ``restart_if_changed`` (what the DAG passes: Snakemake reruns a job when its code, inputs or config values
  changed) then trains afresh instead.

Several GPUs: under ``torchrun`` every rank calls :func:`train`; each rank takes ``batch_size / N`` rows of the
same global batch, rank 0 writes every output, and the metrics row records ``world_size``
(:mod:`suite.train.distributed`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.common import DTYPES, autocast, kernels_summary
from suite.data.batches import ORDERS, TokenBatches, eval_windows
from suite.data.packages import sha256_of
from suite.data.retrieval import RetrievalSampler
from suite.data.tokenizer import load_tokens
from suite.deps import source_digest
from suite.provenance import provenance, read_csv, write_csv, write_text
from suite.train import checkpoint as ckpt_io
from suite.train import distributed
from suite.train.loop import Batch, Checkpoints, fit, rows_until, stop_if_not_finite
from suite.train.model import set_special_ids
from suite.train.optim import Recipe
from suite.train.throughput import matmul_tflops, step_flops

__all__ = ["TrainConfig", "eval_steps", "evaluate", "train"]


def _local(default):
    """A setting of how this process runs the job, not of the run: not in run_config.json, so a resume may change
    it."""
    return field(default=default, metadata={"local": True})


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One LM training run: ``steps`` optimizer steps of [``batch_size``, ``seq_len``] tokens.

    ``lr`` is the peak learning rate, ``warmup`` the linear-warmup steps (0, or fewer than ``steps``:
    :func:`suite.config.warmup_problem`), ``min_lr_ratio`` the final lr as a fraction of ``lr`` (:attr:`recipe`).
    ``data_offset``: step s trains on batch ``data_offset + s - 1`` of the seed's stream, so continued pretraining
    (Base CPT, conversion) with ``data_offset = base steps`` sees tokens the base run did not.
    ``retrieval_fraction`` of the rows are synthetic retrieval sequences (``suite.data.retrieval``).
    ``order``: ``"random"`` crops or ``"epoch"`` (non-overlapping windows read once an epoch;
    :class:`suite.data.batches.TokenBatches`). ``val_batches``: the fixed val windows of the held-out loss;
    ``eval_points``: held-out evaluations along the run (``evals.csv``), 0 for the final one only. ``compile``: the
    training forward and backward run through ``torch.compile`` (the evaluations and the saved model stay eager).
    ``dtype`` "bfloat16"/"float16" means autocast with float32 master weights.
    ``init_from`` loads a checkpoint's weights into a factory-built model (conversion). ``arch``, ``size`` and
    ``overrides`` (the model-config overrides the factory applies) label the run; ``profile`` is its provenance
    label.

    How this process runs it (not recorded): ``device``; ``threads`` (torch's CPU threads: 1 is fastest for tiny
    models on a shared 2-core machine); ``deterministic`` algorithms on a CPU; ``parallel`` (under torchrun: FSDP2
    sharding ``"fsdp"`` or DDP replication ``"ddp"``); ``save_every`` (a checkpoint every N steps, default a quarter
    of the run); ``progress`` (the bar); ``overwrite`` (start afresh); ``restart_if_changed`` (start afresh when the
    run folder holds a run of other settings, instead of stopping); ``backend`` (provenance column; default: the
    attention kernels ``models.kernels`` used, else "torch").

    Raises ValueError naming the setting for a bad value.
    """

    steps: int
    batch_size: int
    seq_len: int
    lr: float = 3e-4
    warmup: int = 0
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    seed: int = 42
    data_offset: int = 0
    retrieval_fraction: float = 0.0
    retrieval_max_keys: int = 4
    order: str = "random"
    val_batches: int = 8
    eval_points: int = 0
    compile: bool = False
    dtype: str = "float32"
    init_from: str | Path | None = None
    arch: str | None = None
    size: str | None = None
    overrides: dict | None = None
    profile: str = "default"
    device: str = _local("cpu")
    threads: int | None = _local(None)
    deterministic: bool = _local(True)
    parallel: str = _local("fsdp")
    save_every: int | None = _local(None)
    progress: bool = _local(True)
    overwrite: bool = _local(False)
    restart_if_changed: bool = _local(False)
    backend: str | None = _local(None)

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} not in {list(DTYPES)}")
        _ = self.recipe  # the optimizer settings and the warmup, checked by Recipe
        if self.parallel not in distributed.PARALLEL:
            raise ValueError(f"parallel must be one of {distributed.PARALLEL}, got {self.parallel!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        if self.order == "epoch" and self.retrieval_fraction > 0:
            raise ValueError(f"order 'epoch' takes no retrieval rows (retrieval_fraction {self.retrieval_fraction})")
        if not isinstance(self.eval_points, int) or not 0 <= self.eval_points <= self.steps:
            raise ValueError(f"eval_points must be an integer in [0, steps={self.steps}], got {self.eval_points!r}")

    @property
    def recipe(self) -> Recipe:
        """AdamW with weight decay by role, warmup then a cosine to ``min_lr_ratio`` of the peak, clipping."""
        return Recipe(lr=self.lr, weight_decay=self.weight_decay, steps=self.steps, schedule="cosine_to_min",
                      warmup=self.warmup, min_lr_ratio=self.min_lr_ratio, grad_clip=self.grad_clip)

    def recorded(self) -> dict:
        """The settings run_config.json records: every field but the local ones, as JSON reads them back."""
        return json.loads(json.dumps({f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                      if not f.metadata.get("local")}, default=str))


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


def train(model, data_dir: str | Path, out_dir: str | Path, config: TrainConfig) -> dict:
    """Train ``model`` as ``config`` says, in ``out_dir`` on the token arrays of ``data_dir``; return the metrics row.

    ``model``: a checkpoint folder (continued pretraining of it) or a zero-argument factory returning a fresh model
    (called after seeding, so the init is reproducible).

    Under torchrun (or any initialised process group of N > 1 ranks) every rank calls ``train`` with the same
    arguments and its own ``config.device``: ``batch_size`` is the global batch (a multiple of N), the model is
    sharded with FSDP2 or replicated with DDP (``config.parallel``), and rank 0 alone writes files; every rank returns
    the metrics row.

    Resumes from ``<out_dir>/checkpoint`` when present: every run_config.json field must be the same (else
    ValueError naming the differing fields, and run_config.json is left untouched; ``overwrite`` starts afresh, and
    so does ``restart_if_changed`` when a field differs); returns the saved metrics when the run is finished. The
    fields include the code: ``code_sha256`` of the repository files ``suite.train.run`` runs (this module among
    them), so a resume never continues a checkpoint of other code.
    Raises :class:`suite.train.loop.TrainingDivergedError` naming the step when the loss or the gradient norm is
    NaN/inf (checked before the optimizer step, so the weights stay finite and the last checkpoint, of finite
    weights, is kept for a resume), and when the validation loss is (no metrics.csv then); ValueError naming a
    missing corpus, a corrupt checkpoint file or a batch_size that is not a multiple of the world size.
    """
    ctx = distributed.context()
    if config.batch_size % ctx.world_size:
        raise ValueError(f"batch_size {config.batch_size} is not a multiple of the world size {ctx.world_size}")
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    if not (data_dir / "corpus.json").exists():
        raise ValueError(f"{data_dir / 'corpus.json'} does not exist: build the corpus and tokenizer first "
                         f"(python -m suite.data.corpus / suite.data.tokenizer --data-dir {data_dir})")
    corpus = json.loads((data_dir / "corpus.json").read_text())
    folder = str(model) if isinstance(model, (str, Path)) else None
    run_config = {**config.recorded(), "model": folder, "data_sha256": corpus["sha256"],
                  "tokenizer_sha256": _file_sha256(data_dir / "tokenizer" / "tokenizer.json"),
                  "base_sha256": _weights_sha256(folder or config.init_from),
                  "code_sha256": source_digest("suite.train.run")}
    if ctx.main:
        out_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(out_dir) if ctx.main else contextlib.nullcontext():
        ckpt, info, error = None, None, None
        if ctx.main:  # rank 0 checks the run folder; the others follow its verdict
            try:
                ckpt = _prepare_out_dir(out_dir, run_config, config.overwrite, config.restart_if_changed)
                info = ckpt_io.verify_checkpoint(ckpt) if ckpt is not None else None
            except ValueError as err:
                error = str(err)
        ckpt, info, error = distributed.broadcast((ckpt, info, error), ctx)
        if error is not None:
            raise ValueError(error)
        if info is not None and info["step"] >= config.steps and (out_dir / "metrics.csv").exists():
            return read_csv(out_dir / "metrics.csv").iloc[0].to_dict()
        if info is not None:
            print(f"resuming {out_dir} from its checkpoint at step {info['step']} of {config.steps}", file=sys.stderr)
        return _run(model, data_dir, out_dir, corpus, config, ckpt, info, ctx)


def _run(model, data_dir: Path, out_dir: Path, corpus: dict, config: TrainConfig, ckpt: Path | None,
         info: dict | None, ctx: distributed.Dist) -> dict:
    """The training of :func:`train` once its run folder is checked: from the checkpoint ``ckpt`` (trainer state
    ``info``) when there is one."""
    steps, batch_size, seq_len, device = config.steps, config.batch_size, config.seq_len, config.device
    if config.threads:
        torch.set_num_threads(config.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    if config.deterministic and torch.device(device).type == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)
    net = _network(model, config.init_from if ckpt is None else None)
    if ckpt is not None:  # sha256-verified in train()
        net = ckpt_io.load_model(ckpt, dtype=None, tokenizer=False, check=False, model_cls=type(net))[0]
    net.to(device).train()
    tokenizer_dir = data_dir / "tokenizer"
    set_special_ids(net, tokenizer_dir)
    net = distributed.wrap(net, ctx, config.parallel)  # one process: net itself

    train_tokens = load_tokens(data_dir, "train")
    sampler = RetrievalSampler.from_tokenizer_dir(train_tokens, tokenizer_dir, config.retrieval_max_keys) \
        if config.retrieval_fraction > 0 else None
    token_batches = TokenBatches(train_tokens, batch_size, seq_len, config.seed, sampler, config.retrieval_fraction,
                                 order=config.order)
    val = eval_windows(load_tokens(data_dir, "val"), batch_size, seq_len, config.val_batches)
    start = info["step"] if info is not None else 0
    eval_at, evals = eval_steps(steps, config.eval_points), rows_until(out_dir / "evals.csv", start)
    flops = step_flops(distributed.unwrap(net).config, batch_size, seq_len)
    peak = matmul_tflops(device, DTYPES[config.dtype]) if flops else None
    _reset_kernel_usage()
    held_out: dict[int, float] = {}  # step -> val loss

    def batches(i: int) -> Batch:  # the global batch; each rank trains on its rows
        x = token_batches.batch(config.data_offset + i)
        return Batch(x, x.numel())

    def next_token(forward, x: torch.Tensor) -> torch.Tensor:
        x = distributed.shard_rows(x, ctx).to(device)
        with autocast(device, config.dtype):
            return forward(input_ids=x, labels=x).loss

    def evaluate_at(step: int, run) -> None:
        if step not in eval_at and step != steps:
            return
        kept = "" if step == steps else f"{run.kept()}; "
        held_out[step] = _val_loss(net, val, config, ctx, f"step {step} of run {out_dir}",
                                   f"{kept}no metrics.csv written")
        if step in eval_at:
            evals.append({"step": step, "tokens": run.tokens, "val_loss": held_out[step]})
            if ctx.main:
                write_csv(evals, out_dir / "evals.csv")

    run = fit(net, batches, next_token, config.recipe, name=f"train {config.arch or ''} {config.size or ''}".strip(),
              where=f"run {out_dir}", progress=config.progress, after_step=evaluate_at, compile=config.compile,
              checkpoints=Checkpoints(out_dir, config.save_every or max(1, steps // 4), tokenizer_dir, ckpt, info),
              ctx=ctx)
    t_end = time.perf_counter()
    if start >= steps:  # resumed a finished run whose metrics row is missing: evaluate it once
        held_out[steps] = _val_loss(net, val, config, ctx, f"the end of run {out_dir} ({steps} steps)",
                                    "no metrics.csv written")
    wall_s = run.wall_s + time.perf_counter() - t_end
    val_loss = held_out[steps]
    frame = pd.DataFrame(run.rows)
    train_loss = float(frame["loss"].tail(10).mean())
    train_wall = float(frame["wall_s"].iloc[-1]) if len(frame) else wall_s
    backend = config.backend or kernels_summary("torch")  # the attention kernels models.kernels ran, else "torch"
    from models.sizes import count_parameters

    row = {"arch": config.arch, "size": config.size, "n_params": count_parameters(net), "tokens": run.tokens,
           "seq_len": seq_len, "batch_size": batch_size, "steps": steps, "lr": config.lr, "train_loss": train_loss,
           "val_loss": val_loss, "val_ppl": math.exp(val_loss), "val_tokens": config.val_batches * batch_size * seq_len,
           "tok_s": run.tokens / train_wall if train_wall > 0 else float("nan"),
           "order": config.order, "epochs": token_batches.epochs(steps), "compile": config.compile,
           "step_flops": flops, "mfu": _mfu(flops, frame, peak), "peak_tflops": peak,
           "retrieval_fraction": config.retrieval_fraction,
           "init_from": None if config.init_from is None else str(config.init_from), "data_sha256": corpus["sha256"],
           **provenance(config.profile, config.seed, config.dtype, backend, device, wall_s, ctx.world_size)}
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


def _val_loss(net, val: list[torch.Tensor], config: TrainConfig, ctx: distributed.Dist, where: str, hint: str) -> float:
    """The held-out loss on the fixed val windows (mean over ranks); TrainingDivergedError when it is not finite."""
    val_loss = evaluate(net, [distributed.shard_rows(b, ctx) for b in val], config.device, config.dtype)
    if ctx.active:
        val_loss = distributed.mean(torch.tensor(val_loss), ctx)
    return stop_if_not_finite(val_loss, "the validation loss", where, hint)


def eval_steps(steps: int, points: int) -> list[int]:
    """The ``points`` steps of a run of ``steps`` at which the held-out loss is measured: evenly spaced, the last
    one the final step (none for 0 points)."""
    return sorted({max(1, round(k * steps / points)) for k in range(1, points + 1)}) if points else []


def _mfu(flops: int | None, frame: pd.DataFrame, peak: float | None) -> float | None:
    """Model FLOPs utilisation over the run's steps after the first (compilation and warm-up): FLOPs a step x
    steps / their wall time / the matmul rate; None where either is unknown."""
    if not flops or not peak or len(frame) < 3:
        return None
    rest = frame.iloc[1:]
    seconds = float(rest["wall_s"].iloc[-1] - frame["wall_s"].iloc[0])
    return flops * len(rest) / seconds / (peak * 1e12) if seconds > 0 else None


@contextlib.contextmanager
def _exclusive(out_dir: Path):
    """Hold an exclusive lock on ``out_dir`` so two processes never train into the same run folder."""
    with open(out_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(f"another process is training in {out_dir}") from None
        yield


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
