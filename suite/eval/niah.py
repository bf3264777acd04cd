"""Needle in a haystack (RULER ``niah_single``, paper Sec. 4.4 / Fig. 3): a dedicated retrieval run, then the grid.

Two steps, one process (``python -m suite.eval.niah``):

1. **Train** (``--arch``/``--size``): a fresh model learns the retrieval task of :mod:`suite.data.needles` on
   train-split haystacks at ``--train-len`` tokens after a curriculum of shorter phases (``--curriculum
   LEN:FRAC:ROWS[:QUERIES],...``: the first FRAC of the steps at LEN tokens with ROWS rows of QUERIES needles
   each (default ``--queries``), and so on) with the loss on the answer tokens only: the SFT
   regime of Sec. 3.2, so Orthros carries an output-stream token only at answer positions.
   ``--checkpoint DIR`` instead evaluates an existing HF checkpoint (no training). ``--save-model DIR`` keeps the
   trained model, and a later run with the same training arguments and code evaluates it without training again
   (:mod:`suite.eval.niah_saved`): an evaluation cut by a time cap resumes.
2. **Evaluate**: for every (context length, depth) cell, ``--trials`` prompts of exactly ``context_len`` tokens
   (held-out TEST text, one needle at the line boundary nearest the depth, then the question); the model
   greedily generates with its KV cache (``model.generate``, batch 1) a budget derived from the tokenizer (the
   question's last line plus the answer plus a margin). A trial is correct when the value occurs in the answer as a
   whole number (``12345670`` does not contain ``1234567``); the answer is the whole generation for RULER's format
   and its first line for the code and kv formats (:meth:`suite.data.needles.NeedleTask.correct`).

Each row records ``distance_min``/``distance_max``: tokens from the needle's value to the answer position. A
sliding-window model of L layers and window w cannot read a value more than L*(w-1) tokens back: those cells
are the negative control of :mod:`suite.eval.controls`; cells with ``context_len <= train_len`` the positive one.

CLI::

    python -m suite.eval.niah --arch orthros --size 1M --config default --data-dir D --haystack D/test.txt \\
        --format code --value-digits 2 --train-len 128 --steps 1000 --lengths 96,128,256,512,1024 \\
        --depths 0.1,0.5,0.9 --trials 8 --out results/default/eval/niah/orthros/1M/seed42.csv
"""
from __future__ import annotations

import argparse
import math
import time
from argparse import ArgumentTypeError
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

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
    study_config,
    usage_errors,
)
from suite.common import arch_name, autocast, quiet_hf_progress_bars, size_name
from suite.data.needles import FORMATS, NeedleTask
from suite.provenance import provenance, write_csv
from suite.train.checkpoint import checkpoint_folder, load_model

NIAH_COLUMNS = ["arch", "size", "n_params", "context_len", "depth", "accuracy", "n_trials", "status", "train_len",
                "distance_min", "distance_max", "format", "value_digits", "max_new_tokens"]
MAX_HAYSTACK_CHARS = 20_000_000
ANSWER_MARGIN = 4  # generated tokens allowed beyond the question's last line and the answer
SCHEDULES = ("cosine", "wsd")
WSD_DECAY = 0.2  # share of the steps over which the "wsd" schedule decays


def raw_tokenizer(tokenizer):
    """The ``tokenizers.Tokenizer`` behind an HF fast tokenizer (or the object itself)."""
    return getattr(tokenizer, "backend_tokenizer", tokenizer)


def prefix_ids(tokenizer) -> list[int]:
    """Token ids the tokenizer itself puts before any text (a BOS for BOS-trained HF checkpoints, [] for the
    suite's tokenizer, whose models never saw one)."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return list(tokenizer("", add_special_tokens=True)["input_ids"])
    return list(tokenizer.encode("", add_special_tokens=True).ids)


def haystack_ids(tokenizer, path: str | Path, max_chars: int = MAX_HAYSTACK_CHARS) -> np.ndarray:
    """Token ids (int64 ``[n_tokens]``) of the first ``max_chars`` characters of a text file.

    Raises ValueError when the file is missing or empty.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"haystack file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        text = fh.read(max_chars)
    if not text.strip():
        raise ValueError(f"haystack file is empty: {path}")
    return np.asarray(raw_tokenizer(tokenizer).encode(text, add_special_tokens=False).ids, dtype=np.int64)


def answer_budget(task: NeedleTask, key: str, value: str, margin: int = ANSWER_MARGIN) -> int:
    """Generated tokens allowed for one answer: the question's last line (a model may restate it), the answer
    and ``margin``, all counted with the task's tokenizer."""
    last_line = task.templates.question.format(key=key).rsplit("? ", 1)[-1]
    return len(task.encode(last_line)) + len(task.answer_ids(value)) + margin


@torch.inference_mode()
def generate_answer(model, tokenizer, prompt_ids: list[int], max_new_tokens: int) -> str:
    """Greedy continuation (decoded text of the new tokens) of one prompt, batch 1, using the model's cache."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    eos = getattr(model.config, "eos_token_id", None) if hasattr(model, "config") else None
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, use_cache=True, pad_token_id=eos if eos is not None else 0)
    return tokenizer.decode(out[0, len(prompt_ids):].tolist(), skip_special_tokens=True)


def lr_schedule(opt: torch.optim.Optimizer, schedule: str, steps: int, warmup: int):
    """The lr schedule of :func:`train_needle_model` (a ``torch.optim.lr_scheduler.LambdaLR``, stepped once a step).

    ``"cosine"``: factor ``min(1, (s + 1) / warmup) * (1 + cos(pi * s / steps)) / 2`` at step ``s``. ``"wsd"``:
    ``transformers.get_wsd_schedule``: a linear warmup ``s / warmup`` (step 0 at lr 0, the peak one step later than
    the cosine's), the peak lr, then a cosine to 0 over the last ``WSD_DECAY * steps`` steps. Raises ValueError for
    an unknown schedule.
    """
    if schedule == "wsd":
        from transformers import get_wsd_schedule

        n_warmup = min(warmup, steps - 1)
        n_decay = min(steps - n_warmup, max(1, round(WSD_DECAY * steps)))
        return get_wsd_schedule(opt, n_warmup, num_decay_steps=n_decay, num_training_steps=steps)
    if schedule != "cosine":
        raise ValueError(f"schedule={schedule!r}; known: {SCHEDULES}")
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup)) * 0.5 * (1 + math.cos(math.pi * s / steps)))


def train_needle_model(model, task: NeedleTask, hay: np.ndarray, *, seq_len: int, steps: int, batch_size: int,
                       lr: float, n_queries: int = 3, curriculum: list[tuple] = (),
                       warmup: int = 30, weight_decay: float = 0.05, lm_weight: float = 0.0, replay: float = 0.0,
                       schedule: str = "cosine", seed: int = 0, device: str = "cpu", dtype: str = "float32",
                       progress: bool = True) -> dict:
    """Train ``model`` in place on retrieval rows (loss on answer tokens only); returns
    ``{"final_loss", "tokens", "train_s"}``. ``curriculum``: phases ``(length, fraction of the steps, rows)`` or
    ``(length, fraction, rows, queries)`` run first, in order (queries default to ``n_queries``); the remaining
    steps use ``seq_len``, ``batch_size`` and ``n_queries``. More queries per row give a long row more supervised
    answers for the same compute. ``lm_weight`` > 0 adds that weight times the next-token loss on every token
    (the haystack too: the PT regime, so Orthros's output stream then covers every position), which gives the
    copy circuit a dense signal; 0 keeps the SFT regime (answer tokens only). ``replay`` in [0, 1): after the first
    phase, that share of the steps (drawn at random) repeats an earlier phase's shape instead, so the short rows that
    built the copy circuit keep training it while the context grows. ``schedule``: ``"cosine"`` (linear warmup
    times a cosine over all steps) or ``"wsd"`` (warmup-stable-decay, ``transformers.get_wsd_schedule``: the peak lr
    until the last :data:`WSD_DECAY` of the steps, then a cosine to 0), so the long phases at the end of a curriculum
    train at the peak lr. Raises ValueError for bad settings or a non-finite loss (naming the step)."""
    if steps < 1 or batch_size < 1 or n_queries < 1:
        raise ValueError(f"steps={steps}, batch_size={batch_size} and n_queries={n_queries} must be >= 1")
    if not lm_weight >= 0:
        raise ValueError(f"lm_weight={lm_weight} must be >= 0")
    if not 0 <= replay < 1:
        raise ValueError(f"replay={replay} must be in [0, 1)")
    check_curriculum(curriculum)
    curriculum = [tuple(p) + (n_queries,) * (4 - len(p)) for p in curriculum]
    phases, end = [], 0
    for n, frac, rows, q in curriculum:
        end += int(frac * steps)
        phases.append((end, n, rows, q))
    torch.manual_seed(seed)
    model.to(device).train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    sched = lr_schedule(opt, schedule, steps, warmup)
    start, tokens, loss_val = time.perf_counter(), 0, float("nan")
    bar = tqdm(range(steps), desc="niah train", disable=not progress, mininterval=2.0)
    for step in bar:
        rng = np.random.default_rng([seed, step])
        now = next((i for i, (until, *_) in enumerate(phases) if step < until), len(phases))
        if now and replay and rng.random() < replay:
            now = int(rng.integers(now))
        T, rows, queries = phases[now][1:] if now < len(phases) else (seq_len, batch_size, n_queries)
        seqs = [task.training_sequence(rng, hay, T, queries) for _ in range(rows)]
        x_np = np.stack([s for s, _ in seqs])
        labels_np = np.full_like(x_np, -100)
        for row, (_, positions) in enumerate(seqs):  # on the host: one copy per step, not one sync per row
            labels_np[row, positions] = x_np[row, np.asarray(positions) + 1]
        x, labels = torch.from_numpy(x_np).to(device), torch.from_numpy(labels_np).to(device)
        if lm_weight:
            with autocast(device, dtype):
                logits = model(input_ids=x).logits
            scored = labels != -100
            loss = F.cross_entropy(logits[scored].float(), labels[scored])
            lm = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x[:, 1:].flatten())
            total = loss + lm_weight * lm
        else:
            mask = (labels != -100).any(0)
            with autocast(device, dtype):
                logits = model(input_ids=x, output_mask=mask).logits
            loss = total = F.cross_entropy(logits.flatten(0, 1).float(), labels[:, mask].flatten(), ignore_index=-100)
        loss_val = float(loss.detach())
        if not math.isfinite(loss_val):
            raise ValueError(f"NIAH training loss is {loss_val} at step {step}; lower the lr ({lr})")
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        tokens += x.numel()
        bar.set_postfix(loss=f"{loss_val:.3f}")
        if not progress and (step % max(1, steps // 40) == 0 or step == steps - 1):  # the rule's log: a loss curve
            print(f"niah train step {step}/{steps} T={T} rows={rows} queries={queries} answer_loss={loss_val:.4f} "
                  f"lr={sched.get_last_lr()[0]:.2e} {time.perf_counter() - start:.0f}s", flush=True)
    model.eval()
    return {"final_loss": loss_val, "tokens": tokens, "train_s": time.perf_counter() - start}


def run_niah(model, tokenizer, task: NeedleTask, hay: np.ndarray, lengths: list[int], depths: list[float],
             trials: int, *, seed: int = 0, arch: str = "", size: str = "", train_len: int | None = None,
             profile: str = "smoke", dtype: str = "float32", backend: str = "hf", device: str = "cpu",
             extra: dict | None = None, progress: bool = True) -> list[dict]:
    """Accuracy per (context_len, depth) cell over ``trials`` needles; one ``niah.csv`` row per cell.

    ``hay``: held-out token ids [n_tokens]. Cells that cannot be built (haystack too short, context too small
    for needle and question) get status ``"not run: <why>"`` and accuracy None. ``wall_s`` = seconds for the
    cell. ``extra`` columns (scale, training settings) are copied into every row.
    """
    if trials < 1:
        raise ValueError(f"trials={trials} must be >= 1")
    prefix = prefix_ids(tokenizer)
    from models.sizes import count_parameters

    n_params = count_parameters(model)
    model.eval()
    rows = []
    cells = [(li, n, di, d) for li, n in enumerate(lengths) for di, d in enumerate(depths)]
    for li, context_len, di, depth in tqdm(cells, desc="niah eval", disable=not progress, mininterval=2.0):
        rng = np.random.default_rng([seed, li, di])
        base = {"arch": arch, "size": size, "n_params": n_params, "context_len": context_len, "depth": depth,
                "n_trials": trials, "train_len": train_len,
                "within_train_len": train_len is not None and context_len <= train_len, "format": task.fmt,
                "value_digits": task.value_digits, **(extra or {})}
        start, correct, example, status, distances, budget = time.perf_counter(), 0, "", "ok", [], 0
        try:
            for _ in range(trials):
                prompt = task.eval_prompt(rng, hay, context_len - len(prefix), depth)
                budget = answer_budget(task, prompt.key, prompt.value)
                with autocast(device, dtype):
                    text = generate_answer(model, tokenizer, prefix + prompt.ids, budget)
                correct += task.correct(text, prompt.value)
                distances.append(prompt.distance)
                example = example or text
        except ValueError as err:
            status = f"not run: {err}"
        if not progress:  # the rule's log: how far the evaluation got and what each cell cost
            print(f"niah eval context={context_len} depth={depth} correct={correct}/{trials} status={status} "
                  f"{time.perf_counter() - start:.1f}s", flush=True)
        rows.append(base | {"accuracy": correct / trials if status == "ok" else None, "status": status,
                            "distance_min": min(distances) if status == "ok" else None,
                            "distance_max": max(distances) if status == "ok" else None,
                            "max_new_tokens": budget or None, "example_output": example}
                    | provenance(profile, seed, dtype, backend, device, time.perf_counter() - start))
    return rows


def check_curriculum(phases) -> None:
    """Raise ValueError unless every phase ``(len, frac, rows[, queries])`` has len, rows and queries >= 1 and frac
    in (0, 1), the fractions summing to below 1 (the remaining steps train at the final length)."""
    for phase in phases:
        if len(phase) not in (3, 4) or min(phase[0], *phase[2:]) < 1 or not 0 < phase[1] < 1:
            raise ValueError(f"curriculum phase {tuple(phase)}: LEN, ROWS and QUERIES must be >= 1 and FRAC in (0, 1)")
    if sum(p[1] for p in phases) >= 1:
        raise ValueError(f"curriculum {[tuple(p) for p in phases]}: the fractions must sum to below 1 (the rest "
                         "trains at the final length)")


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


def _build(arch: str, size: str, vocab_size: int, config: str | None, train_len: int,
           rope_theta: float | None = None):
    from models.registry import build
    from suite.train.model import window_overrides

    cfg = {}
    if config:
        from suite.config import load_config

        cfg = load_config(config)
    extra = {"rope_theta": rope_theta} if rope_theta is not None and arch in ROPE_ARCHS else {}
    return build(arch, size, vocab_size=vocab_size, **window_overrides(arch, cfg, train_len), **extra)


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


TRAINING_ARGS = ("arch", "size", "config", "format", "value_digits", "train_len", "steps", "batch_size", "lr",
                 "queries", "curriculum", "lm_weight", "replay", "schedule", "rope_theta", "seed", "dtype")


def _trained_model(a: argparse.Namespace, task: NeedleTask, tokenizer, train_tokens) -> tuple[torch.nn.Module, dict]:
    """``(model, summary columns)``: trained now, or loaded from ``--save-model`` when it holds this training."""
    from suite.eval.niah_saved import load_trained, save_trained, training_stamp

    if a.save_model:  # the stamp (code digest, study config) is only needed to reuse or save a model
        args = {k: getattr(a, k) for k in TRAINING_ARGS}
        if a.config:  # the model's windows come from the study config: any change to it trains again
            from suite.config import load_config

            args["study_config"] = load_config(a.config)
        stamp = training_stamp(args, len(tokenizer), len(train_tokens))
        model, summary, why = load_trained(a.save_model, stamp, a.device)
        if model is not None:
            print(f"niah: evaluating the model trained before in {a.save_model} (same training arguments and code)")
            return model, summary
        print(f"niah: training ({why})")
    model = _build(a.arch, a.size, len(tokenizer), a.config, a.train_len, a.rope_theta)
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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--arch", type=arch_name,
                     help="train a fresh model of this architecture (needs --size, --data-dir)")
    src.add_argument("--checkpoint", help="evaluate an HF checkpoint folder instead (no training)")
    p.add_argument("--size", type=size_name, default=None, help="model size name (models.sizes)")
    p.add_argument("--config", type=study_config, default=None,
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
    p.add_argument("--train-len", type=positive_int, default=512,
                   help="training length in tokens (default 512: room for 3 needles and questions of the ruler "
                        "format with a BPE tokenizer; the code format needs far less, e.g. 128)")
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
    p.add_argument("--label-arch", default=None, help="arch column for --checkpoint runs")
    p.add_argument("--save-model", type=out_folder, default=None,
                   help="folder keeping the trained model; a rerun with the same training arguments and code loads "
                        "it instead of training (a fresh model only)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", required=True, type=out_file,
                   help="CSV path, e.g. results/<profile>/eval/niah/<arch>/<size>/seed<s>.csv")
    a = p.parse_args(argv)
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
        from suite.eval.niah_saved import check_folder

        with usage_errors(p):
            check_folder(a.save_model)
    from suite.data.tokenizer import check_data_dir, load_tokens

    with usage_errors(p, FileNotFoundError, NotADirectoryError, ValueError):  # before any load: name the missing folder
        if a.checkpoint:
            checkpoint_folder(a.checkpoint)
        if a.data_dir:  # tokens/train.npy, and the tokenizer unless --tokenizer or the checkpoint gives it
            check_data_dir(a.data_dir, tokenizer=not (a.checkpoint or a.tokenizer))

    torch.manual_seed(a.seed)
    extra = {}
    if a.checkpoint:
        model, tokenizer = load_model(a.checkpoint, a.tokenizer, "float32", a.device)
        arch, train_len = a.label_arch or "checkpoint", a.train_len
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
