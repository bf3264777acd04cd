"""Needle in a haystack (RULER ``niah_single``, paper Sec. 4.4 / Fig. 3): a dedicated retrieval run, then the grid.

Two steps, one process (``python -m suite.experiments.niah.run``):

1. **Train** (``--arch``/``--size``): a fresh model learns the retrieval task of :mod:`suite.data.needles` on
   train-split haystacks at ``--train-len`` tokens after a curriculum of shorter phases (``--curriculum
   LEN:FRAC:ROWS[:QUERIES],...``: the first FRAC of the steps at LEN tokens with ROWS rows of QUERIES needles
   each (default ``--queries``), and so on) with the loss on the answer tokens only: the SFT
   regime of Sec. 3.2, so Orthros carries an output-stream token only at answer positions
   (:mod:`suite.experiments.niah.train`).
   ``--checkpoint DIR`` instead evaluates an existing HF checkpoint (no training). ``--save-model DIR`` keeps the
   trained model, and a later run with the same training arguments and code evaluates it without training again
   (:mod:`suite.experiments.niah.saved`): an evaluation cut by a time cap resumes.
2. **Evaluate**: for every (context length, depth) cell, ``--trials`` prompts of exactly ``context_len`` tokens
   (held-out TEST text, one needle at the line boundary nearest the depth, then the question); the model
   greedily generates with its KV cache (``model.generate``, batch 1) a budget derived from the tokenizer (the
   question's last line plus the answer plus a margin). A trial is correct when the value occurs in the answer as a
   whole number (``12345670`` does not contain ``1234567``); the answer is the whole generation for RULER's format
   and its first line for the code and kv formats (:meth:`suite.data.needles.NeedleTask.correct`;
   :mod:`suite.experiments.niah.eval`).

Each row records ``distance_min``/``distance_max``: tokens from the needle's value to the answer position. A
sliding-window model of L layers and window w cannot read a value more than L*(w-1) tokens back: those cells
are the negative control of :mod:`suite.eval.controls`; cells with ``context_len <= train_len`` the positive one.

CLI::

    python -m suite.experiments.niah.run --arch orthros --size 1M --config default --data-dir D --haystack D/test.txt \\
        --format code --value-digits 2 --train-len 128 --steps 1000 --lengths 96,128,256,512,1024 \\
        --depths 0.1,0.5,0.9 --trials 8 --out results/default/eval/niah/orthros/1M/seed42.csv
"""
from __future__ import annotations

import argparse
import json
from argparse import ArgumentTypeError
from pathlib import Path

import torch

from suite.archs import ROPE_ARCHS
from suite.cli import (
    device_name,
    fraction,
    in_file,
    in_folder,
    nonnegative_float,
    nonnegative_int,
    number_list,
    out_file,
    out_folder,
    positive_float,
    positive_int,
    positive_ints,
    study,
    usage_errors,
)
from suite.common import arch_name, quiet_hf_progress_bars, size_name
from suite.data.needles import FORMATS, NeedleTask
from suite.experiments.niah.eval import haystack_ids, haystack_text, raw_tokenizer, run_niah
from suite.experiments.niah.train import check_curriculum, train_needle_model
from suite.provenance import write_csv
from suite.train.checkpoint import checkpoint_folder, load_model
from suite.train.optim import SCHEDULES, WSD_DECAY


def _depths(text: str) -> list[float]:
    return number_list(text, float, minimum=0, maximum=1, error=ArgumentTypeError)


def _phases(text: str) -> list[tuple]:
    """``LEN:FRAC:ROWS[:QUERIES],...`` -> ``[(len, frac, rows[, queries]), ...]``, checked by
    :func:`check_curriculum` (argparse errors name the phase)."""
    phases = []
    for item in filter(None, text.split(",")):
        fields = item.split(":")
        try:
            if len(fields) not in (3, 4):
                raise ValueError
            phases.append((int(fields[0]), float(fields[1]), *map(int, fields[2:])))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected LEN:FRAC:ROWS[:QUERIES],..., got {item!r} in {text!r}") from None
    try:
        check_curriculum(phases)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return phases


def _model_overrides(arch: str, vocab_size: int, cfg: dict | None, train_len: int,
                     rope_theta: float | None = None) -> dict:
    """The ``models.registry`` overrides of the fresh model a ``--arch`` run trains: the tokenizer's vocabulary, the
    windows of the study config ``cfg`` and the RoPE base of a model with RoPE."""
    from suite.train.model import window_overrides

    extra = {"rope_theta": rope_theta} if rope_theta is not None and arch in ROPE_ARCHS else {}
    return {"vocab_size": vocab_size, **window_overrides(arch, cfg or {}, train_len), **extra}


def _check_memory(a: argparse.Namespace, config) -> None:
    """ValueError naming the option, before any model is loaded or trained, when the longest ``--lengths`` prompt
    (or, for a fresh model, the largest training batch: ``--train-len`` x ``--batch-size`` or a curriculum phase)
    cannot fit in the device's memory (:mod:`suite.memory`, a lower bound from the model config)."""
    from suite.memory import check_fits, forward_bytes, training_bytes

    element = 4 if a.dtype == "float32" else 2
    check_fits(forward_bytes(config, 1, max(a.lengths), element), f"--lengths (longest {max(a.lengths)})", a.device)
    if a.checkpoint:
        return
    shapes = [(a.batch_size, a.train_len, "--train-len/--batch-size")]
    shapes += [(phase[2], phase[0], "--curriculum phase " + ":".join(map(str, phase))) for phase in a.curriculum]
    for rows, length, option in shapes:  # the answer loss scores a few positions: logits only with --lm-weight
        check_fits(training_bytes(config, rows, length, element, logits=bool(a.lm_weight)),
                   f"{option} ({rows} rows of {length} tokens)", a.device)


def _task(parser: argparse.ArgumentParser, a: argparse.Namespace, tokenizer, train_tokens) -> NeedleTask:
    """The needle task of the parsed arguments; a tokenizer that cannot write the format is a usage error."""
    try:
        return NeedleTask.from_tokenizer(a.format, raw_tokenizer(tokenizer), train_tokens, a.value_digits)
    except ValueError as err:
        digits = f" --value-digits {a.value_digits}" if a.value_digits is not None else ""
        parser.error(f"--format {a.format}{digits}: {err}")


def _check_lengths(parser: argparse.ArgumentParser, a: argparse.Namespace, task: NeedleTask) -> None:
    """Refuse, before any training, a ``--train-len`` or ``--curriculum`` phase too short to hold its needles,
    questions and answers (:meth:`NeedleTask.row_tokens` with the tokenizer in use) plus some haystack."""
    checks = [(a.train_len, a.queries, f"--train-len {a.train_len}")]
    for phase in a.curriculum:  # (len, frac, rows[, queries])
        checks.append((phase[0], phase[3] if len(phase) == 4 else a.queries,
                       "--curriculum phase " + ":".join(map(str, phase))))
    need: dict[int, int] = {}
    for length, queries, what in checks:
        if queries not in need:
            try:
                need[queries] = task.row_tokens(queries)
            except ValueError as err:  # more needles than the format has keys
                parser.error(f"{what}: {queries} needles a row: {err}")
        if length <= need[queries]:
            parser.error(f"{what} is too short for {queries} needles and questions of the {a.format} format: they take "
                         f"up to {need[queries]} tokens with this tokenizer; give a length above {need[queries]} "
                         "(or fewer --queries)")


# what a saved model was trained with (--save-model); "config" is the study config's values (the model's windows)
TRAINING_ARGS = ("arch", "size", "config", "format", "value_digits", "train_len", "steps", "batch_size", "lr",
                 "queries", "curriculum", "lm_weight", "replay", "schedule", "rope_theta", "seed", "dtype")


def _trained_model(a: argparse.Namespace, task: NeedleTask, tokenizer, train_tokens) -> tuple[torch.nn.Module, dict]:
    """``(model, summary columns)``: trained now, or loaded from ``--save-model`` when it holds this training."""
    from suite.experiments.niah.saved import load_trained, save_trained, training_stamp

    if a.save_model:  # the stamp (code digest, study config) is only needed to reuse or save a model
        stamp = training_stamp({k: getattr(a, k) for k in TRAINING_ARGS}, len(tokenizer), len(train_tokens))
        model, summary, why = load_trained(a.save_model, stamp, a.device)
        if model is not None:
            print(f"niah: evaluating the model trained before in {a.save_model} (same training arguments and code)")
            return model, summary
        print(f"niah: training ({why})")
    from models.registry import build

    model = build(a.arch, a.size, **_model_overrides(a.arch, len(tokenizer), a.config, a.train_len, a.rope_theta))
    fit = train_needle_model(model, task, train_tokens, seq_len=a.train_len, steps=a.steps,
                             batch_size=a.batch_size, lr=a.lr, n_queries=a.queries,
                             curriculum=a.curriculum, lm_weight=a.lm_weight, replay=a.replay,
                             schedule=a.schedule, seed=a.seed, device=a.device, dtype=a.dtype,
                             progress=not a.no_progress)
    summary = {"tokens": fit["tokens"], "seq_len": a.train_len, "steps": a.steps, "train_loss": fit["final_loss"],
               "lm_weight": a.lm_weight, "replay": a.replay, "schedule": a.schedule,
               "train_s": round(fit["train_s"], 1), "window": getattr(model.config, "window_size", None),
               "num_layers": model.config.num_hidden_layers,
               "rope_theta": model.config.rope_theta if a.arch in ROPE_ARCHS else None}
    if a.save_model:
        save_trained(model, a.save_model, stamp, summary)
    return model, summary


def _checkpoint_defaults(a) -> None:
    """Fill what the flags left unset: for a --checkpoint run, the arch, size and training length of the suite run
    that wrote it (``run_config.json`` beside the checkpoint folder: arch, size, seq_len), else ``checkpoint``,
    no size and 512; for a fresh model, a training length of 512."""
    run = {}
    if a.checkpoint:
        config = Path(a.checkpoint).parent / "run_config.json"
        if config.is_file():
            try:
                run = json.loads(config.read_text())
            except json.JSONDecodeError as e:
                raise SystemExit(f"{config}: not valid JSON ({e}); fix or remove it") from None
            if not isinstance(run, dict):
                raise SystemExit(f"{config}: expected a JSON object of run settings, got {type(run).__name__}")
        a.label_arch = a.label_arch or run.get("arch") or "checkpoint"
        a.size = a.size or run.get("size")
    if a.train_len is None:
        a.train_len = int(run.get("seq_len") or 512)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--arch", type=arch_name,
                     help="train a fresh model of this architecture (needs --size, --data-dir)")
    src.add_argument("--checkpoint", help="evaluate an HF checkpoint folder instead (no training)")
    p.add_argument("--size", type=size_name, default=None, help="model size name (models.sizes)")
    p.add_argument("--config", type=study, default=None,
                   help="study config (profile name or YAML) for the model windows")
    p.add_argument("--data-dir", default=None, help="data folder: tokenizer/ and tokens/train.npy")
    p.add_argument("--tokenizer", type=in_folder, default=None,
                   help="tokenizer dir (default: <data-dir>/tokenizer or the checkpoint)")
    p.add_argument("--haystack", required=True, type=in_file,
                   help="held-out text file (the TEST split, e.g. <data_dir>/test.txt)")
    p.add_argument("--format", choices=FORMATS, default="ruler")
    p.add_argument("--value-digits", type=positive_int, default=None,
                   help="digits of a needle's number (default 7; the rare format's values are word pieces: "
                        "not allowed)")
    p.add_argument("--train-len", type=positive_int, default=None,
                   help="training length in tokens (default 512: room for 3 needles and questions of the ruler "
                        "format with a BPE tokenizer; the code format needs far less, e.g. 128); a --checkpoint "
                        "run of the suite's training reads its seq_len from the run_config.json beside it")
    p.add_argument("--steps", type=positive_int, default=1000)
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--lr", type=positive_float, default=3e-3)
    p.add_argument("--queries", type=positive_int, default=3, help="needles (and questions) per training row")
    p.add_argument("--curriculum", type=_phases, default=[],
                   help="LEN:FRAC:ROWS[:QUERIES],... shorter phases first (e.g. 48:0.3:64: 30%% of the steps at 48 "
                        "tokens, 64 rows; 4096:0.2:8:16: then 20%% at 4096 tokens, 8 rows of 16 needles)")
    p.add_argument("--lm-weight", type=nonnegative_float, default=0.0,
                   help="weight of the next-token loss on every token added to the answer loss (default 0: answers "
                        "only, the SFT regime)")
    p.add_argument("--replay", type=fraction, default=0.0,
                   help="share of the steps after the first phase that repeat an earlier phase's shape (default 0)")
    p.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help=f"lr schedule of a fresh model: cosine over all steps (default) or warmup-stable-decay (the "
                        f"last {round(100 * WSD_DECAY)}%% of the steps decay)")
    p.add_argument("--rope-theta", type=positive_float, default=None,
                   help="RoPE base of a fresh model (default: the size's, 10000); the linear models have no RoPE")
    p.add_argument("--lengths", type=positive_ints, default=[1024, 4096], help="context lengths in tokens")
    p.add_argument("--depths", type=_depths, default=[0.0, 0.5, 1.0], help="needle depths in [0, 1]")
    p.add_argument("--trials", type=positive_int, default=4)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="autocast dtype (weights stay float32)")
    p.add_argument("--device", type=device_name, default="cpu")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--label-arch", default=None, help="arch column for --checkpoint runs (default: the arch of the "
                                                      "run_config.json beside the checkpoint, else 'checkpoint')")
    p.add_argument("--save-model", type=out_folder, default=None,
                   help="folder keeping the trained model; a rerun with the same training arguments and code loads "
                        "it instead of training (a fresh model only)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", required=True, type=out_file,
                   help="CSV path, e.g. results/<profile>/eval/niah/<arch>/<size>/seed<s>.csv")
    a = p.parse_args(argv)
    _checkpoint_defaults(a)
    if a.no_progress:
        quiet_hf_progress_bars()
    if a.checkpoint:
        given = [flag for flag, value in (("--rope-theta", a.rope_theta), ("--lm-weight", a.lm_weight or None),
                                          ("--replay", a.replay or None), ("--schedule", a.schedule))
                 if value is not None]
        if given:
            p.error(f"{', '.join(given)} shape a fresh model's training; a --checkpoint run trains nothing")
        if a.save_model:
            p.error("--save-model keeps a freshly trained model; a --checkpoint run trains none")
    a.schedule = a.schedule or "cosine"
    if a.format == "rare" and a.value_digits is not None:
        p.error(f"--value-digits {a.value_digits}: the rare format's values are word pieces, not numbers")
    if a.format != "rare" and a.value_digits is None:
        a.value_digits = 7
    if a.replay >= 1:
        p.error(f"--replay {a.replay} must be below 1")
    if a.save_model:
        from suite.experiments.niah.saved import check_folder

        with usage_errors(p):
            check_folder(a.save_model)
    from suite.data.tokenizer import check_data_dir, load_tokens

    with usage_errors(p, FileNotFoundError, NotADirectoryError, ValueError):  # before any load: name the missing folder
        if a.checkpoint:
            checkpoint_folder(a.checkpoint)
        if a.data_dir:  # tokens/train.npy, and the tokenizer unless --tokenizer or the checkpoint gives it
            check_data_dir(a.data_dir, tokenizer=not (a.checkpoint or a.tokenizer))
        haystack_text(a.haystack, max_chars=1 << 16)  # an empty haystack refused before any training

    torch.manual_seed(a.seed)
    extra = {}
    if a.checkpoint:
        from transformers import AutoConfig

        from models.registry import register_auto_classes

        register_auto_classes()
        with usage_errors(p):
            _check_memory(a, AutoConfig.from_pretrained(a.checkpoint))
        model, tokenizer = load_model(a.checkpoint, a.tokenizer, "float32", a.device)
        arch, train_len = a.label_arch, a.train_len
        # what the negative control reads: a needle beyond num_layers x (window - 1) tokens is out of a SWA's reach
        extra = {"window": getattr(model.config, "window_size", None), "num_layers": model.config.num_hidden_layers}
        train_tokens = load_tokens(a.data_dir, "train") if a.data_dir else None
        task = _task(p, a, tokenizer, train_tokens)
    else:
        if not (a.size and a.data_dir):
            p.error("--arch needs --size and --data-dir")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(a.tokenizer or str(Path(a.data_dir) / "tokenizer"))
        train_tokens = load_tokens(a.data_dir, "train")
        task = _task(p, a, tokenizer, train_tokens)
        _check_lengths(p, a, task)
        with usage_errors(p):
            from models.registry import make_config

            _check_memory(a, make_config(a.arch, a.size, **_model_overrides(a.arch, len(tokenizer), a.config,
                                                                            a.train_len, a.rope_theta)))
        model, extra = _trained_model(a, task, tokenizer, train_tokens)
        arch, train_len = a.arch, a.train_len
    hay = haystack_ids(tokenizer, a.haystack)
    from models.kernels import describe

    rows = run_niah(model, tokenizer, task, hay, a.lengths, a.depths, a.trials, seed=a.seed, arch=arch,
                    size=a.size or "", train_len=train_len, profile=a.profile, dtype=a.dtype,
                    backend=describe(a.device), device=a.device, extra=extra, progress=not a.no_progress)
    write_csv(rows, a.out)
    for row in rows:
        print(row["context_len"], row["depth"], row["accuracy"], row["status"])


if __name__ == "__main__":
    main()
