"""Command line of training: ``python -m suite.train.run``, the study config resolved into one
:class:`suite.train.lm.TrainConfig`, trained (:func:`suite.train.lm.train`) once per seed.

CLI: ``python -m suite.train.run --config default --arch orthros --size 3M --data-dir D --out-dir O``
(``--model DIR`` trains an HF checkpoint folder instead; ``--init-from DIR`` loads a checkpoint's
weights into the built model: Base CPT and conversion runs). ``--config`` (a profile name or study-config path)
gives the defaults: the ``train`` section's hyperparameters (``--recipe conversion``: the ``conversion`` section's
optimizer settings, ``extra_steps`` and ``base_steps`` as the data offset), the data section's retrieval settings,
the arch's window (:func:`suite.train.model.window_overrides`), device, dtype, profile and threads; a flag given
on the command line wins.

The pieces: :mod:`suite.train.lm` (the run: its settings, outputs and resume rules), :mod:`suite.train.loop` (the
training loop) and :mod:`suite.train.model` (the model settings from the study config).

Several GPUs: the same command under ``torchrun --standalone --nproc_per_node N -m suite.train.run ...``
trains data-parallel, FSDP2-sharded by default (``--parallel ddp`` replicates instead): each rank takes
``batch_size / N`` rows of the same global batch, rank 0 writes every output, and the metrics row records
``world_size`` (:mod:`suite.train.distributed`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from suite.cli import (
    config_values,
    device_name,
    fraction,
    in_file,
    int_list,
    nonnegative_float,
    nonnegative_int,
    out_folder,
    positive_float,
    positive_int,
    study,
    usage_errors,
)
from suite.common import DTYPES, arch_name, quiet_hf_progress_bars, size_name
from suite.data.batches import ORDERS
from suite.train import distributed
from suite.train.lm import TrainConfig, train
from suite.train.loop import TrainingDivergedError
from suite.train.model import window_overrides

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train a causal LM on the suite's corpus.")
    ap.add_argument("--config", type=study, default=None,
                    help="profile name or study-config path (defaults for the rest)")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out-dir", required=True, type=out_folder)
    ap.add_argument("--arch", help="architecture name for models.registry.build (with --model: only a label)")
    ap.add_argument("--model", help="HF checkpoint folder to continue training (Base CPT)")
    ap.add_argument("--size", type=size_name, help="model size name (models.sizes)")
    ap.add_argument("--init-from", help="checkpoint folder whose weights initialise the built model (conversion)")
    ap.add_argument("--override", nargs="*", default=[], help="model config overrides KEY=VALUE")
    ap.add_argument("--recipe", choices=["train", "conversion"], default="train",
                    help="which config section gives the hyperparameters: train (Table 5) or conversion (Table 6)")
    for name, typ in (("steps", positive_int), ("batch-size", positive_int), ("seq-len", positive_int),
                      ("lr", positive_float), ("warmup", nonnegative_int), ("min-lr-ratio", fraction),
                      ("weight-decay", nonnegative_float), ("save-every", positive_int), ("val-batches", positive_int),
                      ("retrieval-fraction", fraction)):
        ap.add_argument(f"--{name}", type=typ)
    ap.add_argument("--seed", type=_seed_list, help="seed, or comma-separated seeds trained one after the other in "
                                                    "this process (then --out-dir holds '{seed}'); default: the "
                                                    "config's first seed")
    ap.add_argument("--device", type=device_name, help="cpu, cuda, cuda:N (default: the config's device)")
    ap.add_argument("--dtype", choices=list(DTYPES))
    ap.add_argument("--profile", help="profile label for the provenance columns (default: the config's)")
    ap.add_argument("--data-offset", type=nonnegative_int,
                    help="first batch index of the stream (default: conversion.base_steps with --recipe conversion)")
    ap.add_argument("--overwrite", action="store_true", help="delete a previous run in --out-dir and train afresh")
    ap.add_argument("--restart-if-changed", action="store_true",
                    help="a checkpoint in --out-dir from other settings or code is deleted and training starts afresh "
                         "(default: stop, naming what differs); the DAG passes it")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--parallel", choices=distributed.PARALLEL, default="fsdp",
                    help="under torchrun: FSDP2 sharding (default) or DDP replication; ignored in one process")
    ap.add_argument("--order", choices=ORDERS, default="random",
                    help="data order: random crops (default) or epoch (non-overlapping windows, each read once an "
                         "epoch)")
    ap.add_argument("--eval-points", type=nonnegative_int, default=0,
                    help="held-out evaluations along the run, evenly spaced (evals.csv); 0: the final one only")
    ap.add_argument("--compile", action="store_true", help="run the training step through torch.compile")
    ap.add_argument("--record-divergence", action="store_true",
                    help="a run whose loss or gradient turns non-finite writes a metrics row with status 'diverged: "
                         "...' and exits 0 (a learning-rate sweep's high end) instead of stopping with an error")
    ap.add_argument("--lr-from", type=in_file,
                    help="a learning-rate pick (suite.train.lr_pick): the rate it picked for --arch, instead of --lr")
    args = ap.parse_args(argv)
    if not (args.arch or args.model):
        ap.error("give --arch (build a model) or --model (continue a checkpoint)")
    if args.model and args.override:
        ap.error("--override changes the config of a model built from --arch; it does not apply to --model")
    if not args.model:  # with --model, --arch is only a label
        with usage_errors(ap, argparse.ArgumentTypeError):
            arch_name(args.arch)
    if args.no_progress:
        quiet_hf_progress_bars()
    if args.lr_from:
        if args.lr is not None:
            ap.error("give --lr or --lr-from, not both")
        from suite.train.lr_pick import picked_lr

        with usage_errors(ap):
            args.lr = picked_lr(args.lr_from, args.arch)

    cfg: dict = args.config or {}  # the study config, loaded and validated by its type
    from suite.data.tokenizer import check_data_dir
    from suite.train.checkpoint import checkpoint_folder

    seeds, size = args.seed or cfg.get("seeds", [42])[:1], args.size or cfg.get("main_size")
    user_overrides: dict = {}
    # before a tokenizer load, a model build or a file in --out-dir: name the folder, file, key or value
    with usage_errors(ap, FileNotFoundError, NotADirectoryError, ValueError):
        check_data_dir(args.data_dir, ("train", "val"), corpus=True)
        for option, folder in (("--model", args.model), ("--init-from", args.init_from)):
            for seed in seeds if folder else ():
                try:
                    checkpoint_folder(folder.format(seed=seed))
                except (OSError, ValueError) as err:
                    raise type(err)(f"{option}: {err}") from None
        if not args.model:
            from models.registry import make_config

            if not size:
                raise ValueError("give --size or a --config whose main_size sets it")
            user_overrides = config_values(args.override)
            make_config(args.arch, size, **user_overrides)
    hp = dict(cfg.get("train", {}))
    if args.recipe == "conversion":
        conv = cfg.get("conversion", {})
        hp.update({k: v for k, v in conv.items() if k in ("lr", "warmup", "min_lr_ratio", "weight_decay")})
        if "extra_steps" in conv:
            hp["steps"] = conv["extra_steps"]
    data_cfg = cfg.get("data", {})
    pick = lambda name, default=None: getattr(args, name) if getattr(args, name) is not None else hp.get(name, default)
    missing = [f"--{name.replace('_', '-')}" for name in ("steps", "batch_size", "seq_len") if pick(name) is None]
    if missing:
        ap.error(f"give {', '.join(missing)} or a --config whose train section sets them")
    from suite.config import warmup_problem

    section = "conversion" if args.recipe == "conversion" else "train"
    problem = warmup_problem(pick("warmup", 0), pick("steps"), f"--warmup (or {section}.warmup)",
                             f"--steps (or the {section} recipe's steps)")
    if problem:
        ap.error(problem)
    from suite.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(Path(args.data_dir) / "tokenizer")
    retrieval = args.retrieval_fraction if args.retrieval_fraction is not None else \
        data_cfg.get("retrieval_fraction", 0.0)
    with usage_errors(ap):  # what would stop the run later: the device, a retrieval row, SWA's window
        try:
            device_name(args.device or cfg.get("device", "cpu"))
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"device (--device or the config's): {err}") from None
        if retrieval > 0:
            from suite.data.retrieval import shortest_seq_len

            need = shortest_seq_len(lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids))
            if pick("seq_len") < need:
                raise ValueError(f"seq_len {pick('seq_len')} (--seq-len or train.seq_len) cannot hold a retrieval "
                                 f"row (retrieval fraction {retrieval}): a needle, the question and the answer take "
                                 f"up to {need - 1} tokens with this tokenizer; give a length of at least {need}")
        from suite.data.tokenizer import load_tokens

        for split in ("train", "val"):  # the val split is read after the last step
            n = len(load_tokens(args.data_dir, split))
            if n <= pick("seq_len"):
                raise ValueError(f"the {split} split of {args.data_dir} has {n} tokens, too few for seq_len "
                                 f"{pick('seq_len')} (--seq-len or train.seq_len)")
        window = window_overrides(args.arch, cfg, pick("seq_len")) if not args.model else {}
        overrides = None if args.model else {"vocab_size": tokenizer.get_vocab_size(), **window, **user_overrides}
        model_config = _check_positions(args, pick, size, overrides, seeds)
    factory = None
    if not args.model:
        import functools

        from models.registry import build

        factory = functools.partial(build, args.arch, size, **overrides)  # built per seed
    data_offset = args.data_offset
    if data_offset is None:
        data_offset = cfg.get("conversion", {}).get("base_steps", 0) if args.recipe == "conversion" else 0
    if len(seeds) > 1 and "{seed}" not in args.out_dir:
        ap.error(f"--out-dir {args.out_dir!r} must hold '{{seed}}' when several seeds are given")
    device = distributed.init_from_env(args.device or cfg.get("device", "cpu"))  # torchrun: one rank per GPU
    ctx = distributed.context()
    try:
        with usage_errors(ap):  # every setting, this rank's device and rows, before a model is built or a file written
            config = TrainConfig(
                steps=pick("steps"), batch_size=pick("batch_size"), seq_len=pick("seq_len"), lr=pick("lr", 3e-4),
                warmup=pick("warmup", 0), min_lr_ratio=pick("min_lr_ratio", 0.1),
                weight_decay=pick("weight_decay", 0.05), grad_clip=hp.get("grad_clip", 1.0), seed=seeds[0],
                data_offset=data_offset, retrieval_fraction=retrieval,
                retrieval_max_keys=data_cfg.get("retrieval_max_keys", 4), order=args.order,
                val_batches=pick("val_batches", 8), eval_points=args.eval_points, compile=args.compile,
                dtype=args.dtype or cfg.get("dtype", "float32"), arch=args.arch or "checkpoint", size=size,
                overrides=overrides, profile=args.profile or cfg.get("profile", "default"), device=device,
                threads=cfg.get("threads"), parallel=args.parallel, save_every=pick("save_every"),
                progress=not args.no_progress, overwrite=args.overwrite, restart_if_changed=args.restart_if_changed)
            from suite.memory import check_fits, training_bytes

            element = 4 if config.dtype == "float32" else 2
            check_fits(training_bytes(model_config, max(1, config.batch_size // ctx.world_size), config.seq_len,
                                      element), f"{_seq_len_option(args, pick)} at batch {config.batch_size}", device)
        for seed in seeds:
            fmt = {"seed": seed}
            out_dir = args.out_dir.format(**fmt)
            run = dataclasses.replace(config, seed=seed,
                                      init_from=args.init_from.format(**fmt) if args.init_from else None)
            try:
                row = train(args.model.format(**fmt) if args.model else factory, args.data_dir, out_dir, run)
            except TrainingDivergedError as err:
                if not args.record_divergence:
                    raise
                _record_divergence(run, ctx, out_dir, err)
                continue
            keys = ("arch", "size", "n_params", "tokens", "train_loss", "val_loss", "val_ppl", "tok_s", "wall_s")
            if ctx.main:
                print(json.dumps({k: row.get(k) for k in keys + (("world_size",) if ctx.active else ())},
                                 default=str))
    finally:
        distributed.shutdown()


def _record_divergence(config: TrainConfig, ctx, out_dir: str, err: TrainingDivergedError) -> None:
    """The metrics row of a run that diverged (``--record-divergence``): its settings, no held-out loss, the error as
    its status; loss.csv as far as its last checkpoint (a header alone where none was written)."""
    if not ctx.main:
        return
    from suite.provenance import provenance, write_csv

    row = {"arch": config.arch, "size": config.size, "tokens": config.steps * config.batch_size * config.seq_len,
           "seq_len": config.seq_len, "batch_size": config.batch_size, "steps": config.steps, "lr": config.lr,
           "val_loss": None, "status": f"diverged: {err}",
           **provenance(config.profile, config.seed, config.dtype, "torch", config.device, None, ctx.world_size)}
    out = Path(out_dir)
    write_csv([row], out / "metrics.csv")
    if not (out / "loss.csv").exists():
        (out / "loss.csv").write_text("step,tokens,loss,lr,tok_s,wall_s\n")
    print(json.dumps({"arch": row["arch"], "lr": row["lr"], "status": row["status"]}))


def _seq_len_option(args, pick) -> str:
    return f"--seq-len {pick('seq_len')} (or the {'conversion' if args.recipe == 'conversion' else 'train'} recipe's)"


def _check_positions(args, pick, size, overrides, seeds):
    """The config of the model trained (``--model``: its folder's; else the one ``--arch``/``--size`` build);
    ValueError naming --seq-len, before a model is built or a file written, when the sequence length exceeds its
    positions (a base model's, for continued training)."""
    if args.model:
        from transformers import AutoConfig

        from models.registry import register_auto_classes

        register_auto_classes()
        where = f"--model {args.model.format(seed=seeds[0])}"
        config = AutoConfig.from_pretrained(args.model.format(seed=seeds[0]))
    else:
        from models.registry import make_config

        where, config = f"--arch {args.arch} --size {size}", make_config(args.arch, size, **overrides)
    if pick("seq_len") > config.max_position_embeddings:
        raise ValueError(f"{_seq_len_option(args, pick)}: exceeds the {config.max_position_embeddings} positions of "
                         f"{where} (max_position_embeddings)")
    return config


def _seed_list(text: str) -> list[int]:
    return int_list(text, "seeds", minimum=0, error=argparse.ArgumentTypeError)


if __name__ == "__main__":
    main()
