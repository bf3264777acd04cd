"""Train (or continue training) any HF causal LM on the study's token arrays.

The model is anything with ``model(input_ids=[B, T] int64, labels=[B, T] int64).loss`` (a scalar,
mean next-token cross-entropy in nats) and ``save_pretrained`` / ``from_pretrained``: a
``transformers`` model, or the suite's Orthros and baselines from ``models.registry.build``.

Recipe (the paper's Table 5 / Table 6 settings, scaled down in the study config): AdamW, linear warmup
then cosine decay to ``min_lr_ratio * lr`` (``transformers.get_cosine_with_min_lr_schedule_with_warmup``),
weight decay on matrices only (not on norms, biases, scalars), gradient clipping at 1.0.

Outputs in ``out_dir`` (keep it under a git-ignored folder such as ``work_dirs/``):

- ``loss.csv``: step, tokens, loss, lr, tok_s, wall_s (one row per step; tok/s of that step);
- ``checkpoint/``: HF model folder + tokenizer + optimizer/scheduler/RNG state, every ``save_every`` steps
  and at the end; an interrupted run resumes from it, a finished run is not recomputed;
- ``metrics.csv``: one row, final train loss (mean of the last 10 steps), val loss / perplexity on fixed
  val windows, tokens, n_params, tok/s, corpus sha256 and the provenance columns;
- ``run_config.json``: the run's settings (hyperparameters, arch, size, model, overrides, init_from, data,
  profile, dtype) and what it trains from: the corpus and tokenizer sha256, the sha256 of the starting weights
  (``--model`` / ``--init-from``) and ``code_sha256``, a digest of the repository code it runs
  (``suite.deps.source_digest``); a resume must match every one of them. ``--restart-if-changed`` (what the DAG
  passes: Snakemake reruns a job when its code, inputs or config values changed) then trains afresh instead.

CLI: ``python -m suite.train.run --config default --arch orthros --size 3M --data-dir D --out-dir O``
(``--model DIR`` trains an HF checkpoint folder instead; ``--init-from DIR`` loads a checkpoint's
weights into the built model: Base CPT and conversion runs).

Several GPUs: the same command under ``torchrun --standalone --nproc_per_node N -m suite.train.run ...``
trains data-parallel, FSDP2-sharded by default (``--parallel ddp`` replicates instead): each rank takes
``batch_size / N`` rows of the same global batch, rank 0 writes every output, and the metrics row records
``world_size`` (:mod:`suite.train.distributed`).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import get_cosine_with_min_lr_schedule_with_warmup

from suite.common import DTYPES, autocast
from suite.data.batches import TokenBatches, eval_windows
from suite.data.retrieval import RetrievalSampler
from suite.data.tokenizer import load_tokens
from suite.deps import source_digest
from suite.provenance import provenance, read_csv, write_csv, write_text
from suite.train import checkpoint as ckpt_io
from suite.train import distributed



class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message names the step."""


def build_model(model, init_from: str | Path | None = None):
    """A model from ``model``: a checkpoint folder (``AutoModelForCausalLM.from_pretrained``), a
    ``PreTrainedConfig`` (``from_config``) or a zero-argument factory. ``init_from`` then loads a
    checkpoint's weights (shape-matching names; new parameters keep their initial values, e.g. Orthros's
    query scale-offsets when converting a Transformer). Raises ValueError when ``init_from`` shares no
    parameter name with the model."""
    from transformers import AutoModelForCausalLM, PreTrainedConfig

    if isinstance(model, (str, Path)):
        from models.registry import register_auto_classes

        register_auto_classes()
        net = ckpt_io.load_weights(AutoModelForCausalLM, model)
    elif isinstance(model, PreTrainedConfig):
        net = AutoModelForCausalLM.from_config(model)
    elif callable(model):
        net = model()
    else:
        raise ValueError(f"model must be a checkpoint folder, a PreTrainedConfig or a factory, got {type(model)}")
    if init_from is not None:
        from safetensors.torch import load_file

        path = Path(init_from) / ckpt_io.WEIGHTS
        try:
            source = load_file(str(path))
        except Exception as err:
            raise ValueError(f"cannot read checkpoint file {path}: {err}") from err
        own = net.state_dict()
        loaded = {k: v for k, v in source.items() if k in own and own[k].shape == v.shape}
        if not loaded:
            raise ValueError(f"{path} shares no parameter (name and shape) with {type(net).__name__}")
        net.load_state_dict(loaded, strict=False)
        kept = [k for k in own if k not in loaded]
        print(f"init_from {init_from}: loaded {len(loaded)} of {len(own)} tensors; kept initial values for "
              f"{len(kept)}: {kept[:8]}{' ...' if len(kept) > 8 else ''}", file=sys.stderr)
        if "lm_head.weight" not in source and getattr(net.config, "tie_word_embeddings", False):
            net.tie_weights()
    return net


def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def make_optimizer(model, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on parameters of >= 2 dims only (betas 0.9/0.95, eps 1e-8)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95), eps=1e-8)


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
          restart_if_changed: bool = False) -> dict:
    """Train ``model`` for ``steps`` optimizer steps of [batch_size, seq_len] tokens; return the metrics row.

    ``model``: checkpoint folder, ``PreTrainedConfig`` or zero-argument factory returning a fresh model
    (called after seeding, so the init is reproducible). A folder means continued pretraining of that
    checkpoint; ``init_from`` loads a checkpoint's weights into a factory-built model (conversion).
    ``data_offset``: step s trains on batch ``data_offset + s - 1`` of the seed's stream, so continued
    pretraining (Base CPT, conversion) with ``data_offset = base steps`` sees tokens the base run did not.
    ``threads`` sets torch's CPU threads (1 is fastest for tiny models on a shared 2-core machine).
    ``lr`` is the peak learning rate, ``warmup`` the linear-warmup steps, ``min_lr_ratio`` the final lr
    as a fraction of ``lr``. ``dtype`` "bfloat16"/"float16" means autocast with float32 master weights.
    ``retrieval_fraction`` of the rows are synthetic retrieval sequences (``suite.data.retrieval``).

    ``backend`` (provenance column) defaults to the attention kernels ``models.backend`` used, else "torch".
    ``arch``, ``size`` and ``overrides`` (the model-config overrides the factory applies) label the run; with
    the other settings they go to run_config.json.

    Under torchrun (or any initialised process group of N > 1 ranks) every rank calls ``train`` with the
    same arguments and its own ``device``: ``batch_size`` is the global batch (a multiple of N), the model is
    sharded with FSDP2 (``parallel="fsdp"``) or replicated with DDP (``"ddp"``), and rank 0 alone writes
    files; every rank returns the metrics row.

    Resumes from ``<out_dir>/checkpoint`` when present: every run_config.json field must be the same (else
    ValueError naming the differing fields, and run_config.json is left untouched; ``overwrite=True`` starts
    afresh, and so does ``restart_if_changed=True`` when a field differs); returns the saved metrics when the run is
    finished. The fields include the code: ``code_sha256`` of the repository files this module runs, so a resume
    never continues a checkpoint of other code.
    Raises TrainingDivergedError naming the step when the loss is NaN/inf, ValueError naming a corrupt
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
    ctx = distributed.context()
    if batch_size % ctx.world_size:
        raise ValueError(f"batch_size {batch_size} is not a multiple of the world size {ctx.world_size}")
    if parallel not in distributed.PARALLEL:
        raise ValueError(f"parallel must be one of {distributed.PARALLEL}, got {parallel!r}")
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
                  "val_batches": val_batches,
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
    net = build_model(model, init_from if ckpt is None else None)
    if ckpt is not None:
        net = ckpt_io.load_weights(type(net), ckpt, check=False)  # sha256-verified in train()
    net.to(device).train()
    tokenizer_dir = data_dir / "tokenizer"
    _set_special_ids(net, tokenizer_dir)
    net = distributed.wrap(net, ctx, parallel)  # one process: net itself
    optimizer = make_optimizer(net, lr, run_config["weight_decay"])
    scheduler = get_cosine_with_min_lr_schedule_with_warmup(optimizer, warmup, steps,
                                                           min_lr_rate=run_config["min_lr_ratio"])
    start, tokens_done, wall_before = 0, 0, 0.0
    loss_rows: list[dict] = []
    if ckpt is not None:
        ckpt_io.load_training_state(ckpt, optimizer, scheduler, model=net)
        start, tokens_done, wall_before = info["step"], info["tokens"], info["wall_s"]
        if (out_dir / "loss.csv").exists():
            loss_rows = [r for r in read_csv(out_dir / "loss.csv").to_dict("records") if r["step"] <= start]

    train_tokens = load_tokens(data_dir, "train")
    sampler = RetrievalSampler.from_tokenizer_dir(train_tokens, tokenizer_dir, run_config["retrieval_max_keys"]) \
        if retrieval_fraction > 0 else None
    batches = TokenBatches(train_tokens, batch_size, seq_len, seed, sampler, retrieval_fraction)
    save_every = save_every or max(1, steps // 4)
    _reset_kernel_usage()
    t0 = time.perf_counter()

    def snapshot(step: int) -> None:
        model_state, optimizer_state = distributed.full_state(net, optimizer, ctx)  # collective
        if ctx.main:
            write_csv(loss_rows, out_dir / "loss.csv")
            state = {"step": step, "tokens": tokens_done, "wall_s": wall_before + time.perf_counter() - t0}
            ckpt_io.save_checkpoint(out_dir, distributed.unwrap(net), optimizer, scheduler, state,
                                    tokenizer_dir if tokenizer_dir.exists() else None, model_state, optimizer_state)
        distributed.barrier(ctx)

    bar = tqdm(total=steps, initial=start, disable=not progress or not ctx.main, mininterval=1.0,
               desc=f"train {arch or ''} {size or ''}".strip())
    for step in range(start + 1, steps + 1):
        t_step = time.perf_counter()
        x = batches.batch(data_offset + step - 1)  # the global batch; this rank trains on its rows
        x_rank = distributed.shard_rows(x, ctx).to(device)
        with autocast(device, dtype):
            loss = net(input_ids=x_rank, labels=x_rank).loss
        loss_val = distributed.mean(loss.detach(), ctx)
        if not math.isfinite(loss_val):
            bar.close()
            raise TrainingDivergedError(f"loss is {loss_val} at step {step} of {steps} (run {out_dir}); "
                                        f"lower lr ({lr}) or check the model")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), run_config["grad_clip"])
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
        if step % save_every == 0 or step == steps:
            snapshot(step)
    bar.close()

    val = eval_windows(load_tokens(data_dir, "val"), batch_size, seq_len, val_batches)
    val_loss = evaluate(net, [distributed.shard_rows(b, ctx) for b in val], device, dtype)
    if ctx.active:
        val_loss = distributed.mean(torch.tensor(val_loss), ctx)
    wall_s = wall_before + time.perf_counter() - t0
    frame = pd.DataFrame(loss_rows)
    train_loss = float(frame["loss"].tail(10).mean())
    train_wall = float(frame["wall_s"].iloc[-1]) if len(frame) else wall_s
    if backend is None:
        backend = _kernels_used()
    row = {"arch": arch, "size": size, "n_params": count_params(net), "tokens": tokens_done, "seq_len": seq_len,
           "batch_size": batch_size, "steps": steps, "lr": lr, "train_loss": train_loss, "val_loss": val_loss,
           "val_ppl": math.exp(val_loss), "val_tokens": val_batches * batch_size * seq_len,
           "tok_s": tokens_done / train_wall if train_wall > 0 else float("nan"),
           "retrieval_fraction": retrieval_fraction, "init_from": run_config["init_from"],
           "data_sha256": corpus["sha256"],
           **provenance(profile, seed, dtype, backend, device, wall_s, ctx.world_size)}
    if ctx.main:
        write_csv([row], out_dir / "metrics.csv")
    distributed.barrier(ctx)
    return row


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
    for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", "loss.csv", "metrics.csv", "run_config.json"):
        path = out_dir / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _file_sha256(path: Path) -> str | None:
    return ckpt_io.file_sha256(path) if path.is_file() else None


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
        from models.backend import reset_usage
    except ImportError:
        return
    reset_usage()


def _kernels_used() -> str:
    """The attention kernels models.backend ran during training ("blocked", "sdpa-flash+fla-window", ...),
    or "torch" when none went through it (transformers models, recurrent baselines)."""
    try:
        from models.backend import kernels_used
    except ImportError:
        return "torch"
    return "+".join(sorted(kernels_used())) or "torch"


def _set_special_ids(net, tokenizer_dir: Path) -> None:
    """Record bos/eos/pad ids of the suite tokenizer in the model config (for generation and lm-eval).
    They replace any defaults of the config class (e.g. LlamaConfig's bos=1, eos=2): training uses this
    tokenizer, so its ids are the only meaningful ones."""
    cfg_path = tokenizer_dir / "tokenizer.json"
    if not cfg_path.exists():
        return
    from suite.data.tokenizer import load_tokenizer, special_ids

    ids = special_ids(load_tokenizer(tokenizer_dir))
    for name in ("bos", "eos", "pad"):
        setattr(net.config, f"{name}_token_id", ids[name])
        if getattr(net, "generation_config", None) is not None:
            setattr(net.generation_config, f"{name}_token_id", ids[name])


def window_overrides(arch: str, cfg: dict, seq_len: int | None) -> dict:
    """Model-config window of an arch from the study config: the Orthros archs (``suite.archs.ORTHROS_ARCHS``:
    Orthros, its no-SO ablation, Orthros-H) get ``window``; SWA gets ``round(swa_window_ratio * seq_len)`` (paper:
    512 at 2048); others nothing."""
    from suite.archs import ORTHROS_ARCHS

    if not cfg:
        return {}
    if arch in ORTHROS_ARCHS:
        return {"window_size": cfg["window"]}
    if arch == "swa" and seq_len:
        return {"window_size": max(1, round(cfg["swa_window_ratio"] * seq_len))}
    return {}


def _parse_overrides(items: list[str]) -> dict:
    """``["KEY=VALUE", ...]`` -> dict; values read as YAML (``1e6`` is a float, ``8`` an int, ``silu`` a string)."""
    from suite.config import load_yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        key, val = item.split("=", 1)
        out[key] = load_yaml(val)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train a causal LM on the suite's corpus.")
    ap.add_argument("--config", default=None, help="profile name or study-config path (defaults for the rest)")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--arch", help="architecture name for models.registry.build (with --model: only a label)")
    ap.add_argument("--model", help="HF checkpoint folder to continue training (Base CPT)")
    ap.add_argument("--size", help="model size name (models.sizes)")
    ap.add_argument("--init-from", help="checkpoint folder whose weights initialise the built model (conversion)")
    ap.add_argument("--override", nargs="*", default=[], help="model config overrides KEY=VALUE")
    ap.add_argument("--recipe", choices=["train", "conversion"], default="train",
                    help="which config section gives the hyperparameters: train (Table 5) or conversion (Table 6)")
    for name, typ in (("steps", int), ("batch-size", int), ("seq-len", int), ("lr", float), ("warmup", int),
                      ("min-lr-ratio", float), ("weight-decay", float), ("save-every", int),
                      ("val-batches", int), ("retrieval-fraction", float)):
        ap.add_argument(f"--{name}", type=typ)
    ap.add_argument("--seed", type=_seed_list, help="seed, or comma-separated seeds trained one after the other in "
                                                    "this process (then --out-dir holds '{seed}'); default: the "
                                                    "config's first seed")
    ap.add_argument("--device", help="cpu, cuda, cuda:N (default: the config's device)")
    ap.add_argument("--dtype", choices=list(DTYPES))
    ap.add_argument("--profile", help="profile label for the provenance columns (default: the config's)")
    ap.add_argument("--data-offset", type=int,
                    help="first batch index of the stream (default: conversion.base_steps with --recipe conversion)")
    ap.add_argument("--overwrite", action="store_true", help="delete a previous run in --out-dir and train afresh")
    ap.add_argument("--restart-if-changed", action="store_true",
                    help="a checkpoint in --out-dir from other settings or code is deleted and training starts afresh "
                         "(default: stop, naming what differs); the DAG passes it")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--parallel", choices=distributed.PARALLEL, default="fsdp",
                    help="under torchrun: FSDP2 sharding (default) or DDP replication; ignored in one process")
    args = ap.parse_args(argv)
    if not (args.arch or args.model):
        ap.error("give --arch (build a model) or --model (continue a checkpoint)")
    if args.model and args.override:
        ap.error("--override changes the config of a model built from --arch; it does not apply to --model")

    cfg: dict = {}
    if args.config:
        from suite.config import load_config

        cfg = load_config(args.config)
    hp = dict(cfg.get("train", {}))
    if args.recipe == "conversion":
        conv = cfg.get("conversion", {})
        hp.update({k: v for k, v in conv.items() if k in ("lr", "warmup", "min_lr_ratio", "weight_decay")})
        if "extra_steps" in conv:
            hp["steps"] = conv["extra_steps"]
    data_cfg = cfg.get("data", {})
    pick = lambda name, default=None: getattr(args, name) if getattr(args, name) is not None else hp.get(name, default)
    if not args.model:
        from models.registry import build  # the lead's registry: build(arch, size, **overrides) -> HF model

        from suite.data.tokenizer import load_tokenizer

        vocab = load_tokenizer(Path(args.data_dir) / "tokenizer").get_vocab_size()
        overrides = {"vocab_size": vocab, **window_overrides(args.arch, cfg, pick("seq_len")),
                     **_parse_overrides(args.override)}
        model = lambda: build(args.arch, args.size or cfg.get("main_size"), **overrides)
    else:
        model, overrides = args.model, None
    data_offset = args.data_offset
    if data_offset is None:
        data_offset = cfg.get("conversion", {}).get("base_steps", 0) if args.recipe == "conversion" else 0
    seeds = args.seed or cfg.get("seeds", [42])[:1]
    if len(seeds) > 1 and "{seed}" not in args.out_dir:
        ap.error(f"--out-dir {args.out_dir!r} must hold '{{seed}}' when several seeds are given")
    device = distributed.init_from_env(args.device or cfg.get("device", "cpu"))  # torchrun: one rank per GPU
    ctx = distributed.context()
    try:
        for seed in seeds:
            fmt = {"seed": seed}
            _train_one(args, cfg, hp, data_cfg, pick, model, overrides, data_offset, seed, device, ctx,
                       args.out_dir.format(**fmt), args.model.format(**fmt) if args.model else None,
                       args.init_from.format(**fmt) if args.init_from else None)
    finally:
        distributed.shutdown()


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed or comma-separated seeds, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be non-negative integers, got {text!r}")
    return seeds


def _train_one(args, cfg, hp, data_cfg, pick, model, overrides, data_offset, seed, device, ctx, out_dir, model_dir,
               init_from) -> None:
    model = model_dir or model
    row = train(model, args.data_dir, out_dir, steps=pick("steps"), batch_size=pick("batch_size"),
                seq_len=pick("seq_len"), lr=pick("lr", 3e-4), warmup=pick("warmup", 0),
                min_lr_ratio=pick("min_lr_ratio", 0.1), weight_decay=pick("weight_decay", 0.05), seed=seed,
                profile=args.profile or cfg.get("profile", "default"), device=device,
                dtype=args.dtype or cfg.get("dtype", "float32"),
                retrieval_fraction=args.retrieval_fraction if args.retrieval_fraction is not None
                else data_cfg.get("retrieval_fraction", 0.0),
                retrieval_max_keys=data_cfg.get("retrieval_max_keys", 4), grad_clip=hp.get("grad_clip", 1.0),
                save_every=pick("save_every"), val_batches=pick("val_batches", 8), init_from=init_from,
                arch=args.arch or "checkpoint", size=args.size or cfg.get("main_size"), overrides=overrides,
                data_offset=data_offset, overwrite=args.overwrite, restart_if_changed=args.restart_if_changed,
                progress=not args.no_progress, threads=cfg.get("threads"), parallel=args.parallel)
    keys = ("arch", "size", "n_params", "tokens", "train_loss", "val_loss", "val_ppl", "tok_s", "wall_s")
    if ctx.main:
        print(json.dumps({k: row.get(k) for k in keys + (("world_size",) if ctx.active else ())}, default=str))


if __name__ == "__main__":
    main()
