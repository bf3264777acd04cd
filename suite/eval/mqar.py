"""Multi-query associative recall (MQAR, Zoology recipe): data generator, train-then-evaluate, ``mqar.csv`` rows.

Sequence layout (length ``seq_len``): ``num_kv_pairs`` key-value pairs ``k1 v1 k2 v2 ...`` (keys drawn without
replacement from ``[1, vocab_size // 2)``, values from ``[vocab_size // 2, vocab_size)``), then every key is queried
once in the remaining ``seq_len - 2 * num_kv_pairs`` slots at even offsets ``2 * gap``, where the gaps are drawn
without replacement with probability ``p(gap = i) ∝ (i + 1) ** (power_a - 1)`` (power-law: most queries come soon
after the context, as repeated bigrams do in text). All other positions hold uniform random tokens.

``labels[b, t]`` is the token the model must output after reading ``input_ids[b, :t + 1]`` (already shifted, so do
not pass it to a Hugging Face model's ``labels=``): the paired value at each query position, ``-100`` elsewhere.
Accuracy counts only those answer positions; it is also split into answers near their value and answers more
than ``num_layers * (window - 1)`` tokens after it, which a sliding-window model cannot see (the negative control
of :mod:`suite.eval.controls`).

Departure from Zoology: the rows of one training batch share their query slots (keys, values and which key is
asked where stay random per row), so every model computes logits at the query slots only, and Orthros runs its
SFT regime (output-stream tokens only at answer positions, Sec. 3.2) instead of paying for T_out = T.

Training (Zoology's recipe): one model per (arch, size) is trained on a mixture of cells ``(seq_len, pairs)``, one
cell per step in turn, and evaluated at every cell of the grid; without ``--train-kv`` one model is trained per cell.

CLI (the default profile's cell: train at 4 pairs, evaluate at 2-16)::

    python -m suite.eval.mqar --arch orthros --size 1M --seq-len 64 --train-kv 4 --kv-pairs 2,4,8,16 --window 8 \\
        --vocab-size 256 --steps 800 --lr 3e-3 --out results/default/eval/mqar/orthros/1M/seed42.csv

A grid (the gpu profile): ``--size d64 --seq-len 128,256,512,1024 --kv-pairs 8,16,32,64,128,256 --train-kv
8/16,32,64/16,32,64,128/16,32,64,128,256`` trains one model on those 13 cells and evaluates it at all 18 cells with
``4 * pairs <= seq_len``.
"""
from __future__ import annotations

import argparse
import functools
import math
import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from suite.archs import WINDOWED_ARCHS
from suite.cli import (
    device_name,
    fraction,
    int_list,
    nonnegative_float,
    nonnegative_int,
    out_file,
    positive_float,
    positive_int,
    positive_ints,
)
from suite.common import arch_name, autocast, kernels_summary, size_name
from suite.provenance import provenance, write_csv

MQAR_COLUMNS = ["arch", "size", "n_params", "seq_len", "num_kv_pairs", "accuracy", "accuracy_near", "accuracy_far",
                "n_near", "n_far", "far_distance", "chance", "window", "status"]


def mqar_data(vocab_size: int, seq_len: int, num_kv_pairs: int, num_examples: int, seed: int,
              power_a: float = 0.01, random_non_queries: bool = True,
              shared_slots: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """MQAR examples as ``(input_ids, labels)``, both int64 tensors of shape ``[num_examples, seq_len]``.

    ``shared_slots``: every row of this call puts its queries in the same slots (drawn once; keys, values and
    which key is asked where stay per row). Batches drawn this way let a model compute logits at the query
    slots only (Orthros's SFT regime: output-stream tokens only at answer positions).

    Raises ValueError unless ``seq_len`` is even, ``4 * num_kv_pairs <= seq_len`` (room for the queries),
    ``num_kv_pairs < vocab_size // 2`` and ``power_a > 0``.
    """
    if seq_len % 2 or seq_len <= 0:
        raise ValueError(f"seq_len={seq_len} must be a positive even number")
    if num_kv_pairs < 1 or 4 * num_kv_pairs > seq_len:
        raise ValueError(f"num_kv_pairs={num_kv_pairs} must be >= 1 and <= seq_len / 4 = {seq_len // 4}")
    if num_kv_pairs >= vocab_size // 2 - 1:
        raise ValueError(f"vocab_size={vocab_size} too small for num_kv_pairs={num_kv_pairs} distinct keys")
    if num_examples < 1 or power_a <= 0:
        raise ValueError(f"num_examples={num_examples} must be >= 1 and power_a={power_a} > 0")
    rng = np.random.default_rng(seed)
    half, context = vocab_size // 2, 2 * num_kv_pairs
    space = (seq_len - context) // 2
    gap_p = np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    gap_p /= gap_p.sum()

    inputs = np.zeros((num_examples, seq_len), dtype=np.int64)
    labels = np.full((num_examples, seq_len), -100, dtype=np.int64)
    shared = context + 2 * rng.choice(space, size=num_kv_pairs, replace=False, p=gap_p) if shared_slots else None
    for row in range(num_examples):
        keys = rng.choice(np.arange(1, half), size=num_kv_pairs, replace=False)
        values = rng.choice(np.arange(half, vocab_size), size=num_kv_pairs, replace=False)
        inputs[row, 0:context:2], inputs[row, 1:context:2] = keys, values
        if shared is None:
            query_pos = context + 2 * rng.choice(space, size=num_kv_pairs, replace=False, p=gap_p)
        else:
            query_pos = rng.permutation(shared)
        inputs[row, query_pos], labels[row, query_pos] = keys, values
    if random_non_queries:
        filler = inputs == 0
        inputs[filler] = rng.integers(0, vocab_size, size=int(filler.sum()))
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def _logits(model: torch.nn.Module, input_ids: torch.Tensor, slots: torch.Tensor | None = None) -> torch.Tensor:
    """Logits ``[B, T_sel, V]`` at the query ``slots`` (bool ``[T]``), or ``[B, T, V]`` when ``slots`` is None.
    The suite's models compute only the selected rows (``output_mask``); other models are sliced."""
    from models.backbone import SuiteForCausalLM

    if slots is not None and isinstance(model, SuiteForCausalLM):
        return model(input_ids=input_ids, output_mask=slots).logits
    out = model(input_ids=input_ids)
    logits = out.logits if hasattr(out, "logits") else out
    return logits if slots is None else logits[:, slots]


def query_distances(input_ids: torch.Tensor, labels: torch.Tensor, num_kv_pairs: int) -> torch.Tensor:
    """For every answer position (``labels != -100``, row-major order): tokens from its value in the context
    (position ``2 i + 1`` of key ``i``) to the query, int64 ``[n_answers]``."""
    keys = input_ids[:, 0:2 * num_kv_pairs:2]                        # [B, kv]
    rows, cols = (labels != -100).nonzero(as_tuple=True)
    which = (keys[rows] == input_ids[rows, cols, None]).float().argmax(-1)
    return cols - (2 * which + 1)


@torch.inference_mode()
def mqar_accuracy(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor, num_kv_pairs: int,
                  far_distance: int | None = None, batch_size: int = 64) -> dict:
    """Accuracy at the answer positions (argmax of the logits == label), overall and split by distance.

    Returns ``{"accuracy", "accuracy_near", "accuracy_far", "n_near", "n_far"}``: "far" answers lie more than
    ``far_distance`` tokens after their value (beyond a sliding-window model's receptive field); the split
    entries are None without ``far_distance`` or when a side is empty. ``model(input_ids=[B, T])`` returns
    logits ``[B, T, V]`` (or an object with ``.logits``); rows of one batch may share query slots.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    hits, dists = [], []
    for start in range(0, len(input_ids), batch_size):
        ids, lab = input_ids[start:start + batch_size], labels[start:start + batch_size]
        slots = (lab != -100).any(0)
        pred = _logits(model, ids.to(device), slots).argmax(-1).cpu()
        sel = lab[:, slots]
        hits.append(pred[sel != -100] == sel[sel != -100])
        dists.append(query_distances(ids, lab, num_kv_pairs))
    model.train(was_training)
    hit, dist = torch.cat(hits).float(), torch.cat(dists)
    out = {"accuracy": float(hit.mean()), "accuracy_near": None, "accuracy_far": None, "n_near": None, "n_far": None}
    if far_distance is not None:
        far = dist > far_distance
        out.update(n_near=int((~far).sum()), n_far=int(far.sum()),
                   accuracy_near=float(hit[~far].mean()) if (~far).any() else None,
                   accuracy_far=float(hit[far].mean()) if far.any() else None)
    return out


def test_set(vocab_size: int, seq_len: int, num_kv_pairs: int, num_test: int, seed: int, power_a: float = 0.01,
             chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out MQAR examples in chunks of ``chunk`` rows that share query slots (see ``mqar_data``)."""
    parts = [mqar_data(vocab_size, seq_len, num_kv_pairs, min(chunk, num_test - i), seed + i, power_a,
                       shared_slots=True) for i in range(0, num_test, chunk)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


Cell = tuple[int, int]  # (seq_len, num_kv_pairs)


def train_and_eval(model_factory: Callable[[int, int], torch.nn.Module], mixture: list[Cell], steps: int, *,
                   vocab_size: int = 8192, batch_size: int = 64, lr: float = 1e-3, weight_decay: float = 0.1,
                   num_test: int = 1000, seed: int = 0, power_a: float = 0.01, eval_cells: list[Cell] | None = None,
                   far_distance: int | None = None, device: str = "cpu", dtype: str = "float32",
                   shared_slots: bool = True, log_every: int = 0, first_cell_frac: float = 0.0,
                   constant_tokens: bool = False, warmup: int = 0, stop_after: int | None = None) -> dict:
    """Train a fresh model on a mixture of MQAR cells with AdamW (``lr_factor``: linear warmup over ``warmup``
    steps, cosine decay over ``steps``); measure held-out accuracy.

    ``mixture``: the training cells ``(seq_len, num_kv_pairs)``; step ``s`` trains on ``batch_size`` fresh rows of
    cell ``mixture[s % len(mixture)]`` (Zoology's mixture, one cell a batch), drawn from ``(seed, s)``, whose rows
    share query slots (no example repeats); loss: cross-entropy on answer positions only. ``first_cell_frac``: the
    first ``round(first_cell_frac * steps)`` steps train on ``mixture[0]`` alone (a curriculum: the first cell, the
    profiles' easiest, forms the recall circuit before the long cells dilute it, as Zoology's mixtures weight their
    shortest cell), the rest cycle through the mixture. ``constant_tokens``: a step at ``seq_len`` T draws
    ``max(1, batch_size * T0 // T)`` rows, T0 the mixture's shortest seq_len (the same tokens a step, as Zoology's
    batch sizes halve per doubling). ``stop_after``: train only the first ``stop_after`` steps of that schedule, then
    evaluate (a calibration of the schedule's early phase, tools/offline_gpu/mqar_control.py; default: all ``steps``).
    ``model_factory(vocab_size, seq_len)`` returns an untrained causal LM (logits ``[B, T, V]``) for sequences up to
    the longest ``seq_len`` of the mixture and of ``eval_cells``. Held-out data: ``num_test`` examples per evaluated
    cell (``eval_cells``, default the training cells) from other seeds.
    Returns ``{"by_cell": {(seq_len, kv): mqar_accuracy dict}, "final_train_loss", "n_params", "train_s" (seconds),
    "num_train" (rows), "tokens" (training tokens, rows x seq_len summed over the steps), "num_test"}``.
    Raises ValueError for an empty mixture, ``steps`` or ``batch_size`` < 1, ``warmup`` < 0, ``stop_after`` outside
    [1, steps], or a cell the generator cannot fill.
    """
    if steps < 1 or batch_size < 1 or not mixture:
        raise ValueError(f"steps={steps}, batch_size={batch_size} must be >= 1 and the mixture non-empty ({mixture})")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} must be >= 0")
    if stop_after is not None and not 1 <= stop_after <= steps:
        raise ValueError(f"stop_after={stop_after} must be in [1, steps={steps}]")
    if not 0.0 <= first_cell_frac < 1.0:
        raise ValueError(f"first_cell_frac={first_cell_frac} must be in [0, 1)")
    eval_cells = eval_cells or list(mixture)
    for seq_len, kv in sorted(set(mixture) | set(eval_cells)):
        mqar_data(vocab_size, seq_len, kv, 1, 0, power_a)         # fail fast on a cell the generator cannot fill
    torch.manual_seed(seed)
    model = model_factory(vocab_size, max(t for t, _ in [*mixture, *eval_cells])).to(device)
    model.train()
    # fused on a GPU: one kernel a step instead of a few per parameter group (these models are launch-bound)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                            fused=torch.device(device).type == "cuda")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, warmup))
    first_steps, shortest = round(first_cell_frac * steps), min(t for t, _ in mixture)
    start, loss, num_train, tokens = time.perf_counter(), torch.tensor(float("nan")), 0, 0
    for step in range(steps if stop_after is None else stop_after):
        seq_len, kv = mixture[0] if step < first_steps else mixture[(step - first_steps) % len(mixture)]
        rows = max(1, batch_size * shortest // seq_len) if constant_tokens else batch_size
        num_train, tokens = num_train + rows, tokens + rows * seq_len
        x, y = mqar_data(vocab_size, seq_len, kv, rows, seed * 1_000_003 + step, power_a,
                         shared_slots=shared_slots)
        slots = (y != -100).any(0)
        with autocast(device, dtype):
            logits = _logits(model, x.to(device), slots)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y[:, slots].flatten().to(device), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if log_every and step % log_every == 0:
            print(f"step {step} seq_len {seq_len} kv {kv} rows {rows} loss {loss.item():.4f} "
                  f"{time.perf_counter() - start:.0f}s", flush=True)
    train_s = time.perf_counter() - start
    by_cell = {}
    for seq_len, kv in eval_cells:
        test_x, test_y = test_set(vocab_size, seq_len, kv, num_test, seed * 1_000_003 + 10_000_000, power_a)
        with autocast(device, dtype):
            by_cell[(seq_len, kv)] = mqar_accuracy(model, test_x, test_y, kv, far_distance)
    from models.sizes import count_parameters  # after the timed training: the import is not part of train_s

    return {"by_cell": by_cell, "final_train_loss": float(loss.item()), "n_params": count_parameters(model),
            "train_s": train_s, "num_train": num_train, "tokens": tokens, "num_test": num_test}


def lr_factor(step: int, steps: int, warmup: int = 0) -> float:
    """The learning-rate multiplier of training step ``step`` (0-based): ``(step + 1) / warmup`` during the first
    ``warmup`` steps (linear warmup; none at 0), times the cosine decay ``0.5 * (1 + cos(pi * step / steps))``."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    return ramp * 0.5 * (1 + math.cos(math.pi * step / steps))


def llama_factory(hidden_size: int = 64, num_layers: int = 2,
                  num_heads: int = 4) -> Callable[[int, int], torch.nn.Module]:
    """Factory for a small ``LlamaForCausalLM`` (a full-attention reference; used by tests and smoke runs)."""
    def build(vocab_size: int, seq_len: int) -> torch.nn.Module:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                          num_hidden_layers=num_layers, num_attention_heads=num_heads,
                          num_key_value_heads=num_heads, max_position_embeddings=seq_len)
        return LlamaForCausalLM(cfg)
    return build


def registry_factory(arch: str, size: str, **overrides) -> Callable[[int, int], torch.nn.Module]:
    """Factory over ``models.registry.build(arch, size, vocab_size=..., **overrides)`` (project models/baselines)."""
    def build(vocab_size: int, seq_len: int) -> torch.nn.Module:
        from models import registry

        return registry.build(arch, size, vocab_size=vocab_size, **overrides)
    return build


def kernel_label(device: str) -> str:
    """Which kernels the last run used (``models.kernels``'s attention kernels, or FLA's for the linear mixers)."""
    return kernels_summary("fla-naive" if torch.device(device).type == "cpu" else "fla-triton")


def train_kv_per_seq_len(seq_lens: list[int], train_kv: list[int] | list[list[int]]) -> dict[int, list[int]]:
    """The training pair counts at each ``seq_len``: ``train_kv`` is one list for every ``seq_len`` (each count used
    where it fits, ``4 * kv <= seq_len``) or one list per ``seq_len`` (aligned with ``seq_lens``; an empty list: that
    length is only evaluated). Raises ValueError when a per-length list has another length than ``seq_lens`` or holds
    a count that does not fit its ``seq_len``."""
    if not train_kv or not isinstance(train_kv[0], (list, tuple)):
        return {t: [kv for kv in train_kv if 4 * kv <= t] for t in seq_lens}
    if len(train_kv) != len(seq_lens):
        raise ValueError(f"train_kv has {len(train_kv)} per-seq_len lists for {len(seq_lens)} seq_lens {seq_lens}")
    for t, kvs in zip(seq_lens, train_kv):
        if any(4 * kv > t for kv in kvs):
            raise ValueError(f"train_kv {list(kvs)} at seq_len {t}: every count must be <= seq_len / 4 = {t // 4}")
    return {t: list(kvs) for t, kvs in zip(seq_lens, train_kv)}


def mixture_text(per_len: dict[int, list[int]]) -> str:
    """The training mixture as ``"256:16+32 512:32+64"`` (the ``train_mix`` column)."""
    return " ".join(f"{t}:{'+'.join(map(str, kvs))}" for t, kvs in per_len.items() if kvs)


def _groups(seq_lens: list[int], kv_pairs: list[int],
            per_len: dict[int, list[int]] | None) -> list[tuple[list[Cell], list[Cell], dict[int, list[int]]]]:
    """(training cells, evaluated cells, training counts per seq_len) of each model run_grid trains."""
    cells = [(t, kv) for t in seq_lens for kv in kv_pairs if 4 * kv <= t]
    if per_len is None:
        return [([cell], [cell], {cell[0]: [cell[1]]}) for cell in cells]
    mixture = [(t, kv) for t in seq_lens for kv in per_len[t]]
    return [(mixture, cells, per_len)] if mixture and cells else []


def run_grid(model_factory, seq_lens: list[int], kv_pairs: list[int], steps: int, *, arch: str, size: str,
             profile: str, seed: int = 0, device: str = "cpu", dtype: str = "float32",
             train_kv: list[int] | list[list[int]] | None = None, window: int | None = None,
             num_layers: int | None = None, **train_kwargs) -> list[dict]:
    """MQAR rows, one per (seq_len, num_kv_pairs) cell, in ``seq_lens`` x ``kv_pairs`` order.

    ``train_kv=None`` trains one model per cell. Otherwise one model is trained on the mixture of the training cells
    (``train_kv_per_seq_len``: one list for every seq_len, or one list per seq_len) and evaluated at every cell
    (Zoology's recipe; with one seq_len this is one model trained on those pair counts). ``window`` and
    ``num_layers`` describe the windowed models (``far_distance = num_layers * (window - 1)``: answers further than
    that from their value lie beyond a sliding-window model's receptive field); the split is reported for every
    arch. A cell whose pairs do not fit ``seq_len`` (``4 * kv > seq_len``) gets status ``"not run: ..."``. ``chance``
    = 2 / vocab_size (uniform guess over the value half of the vocabulary). Columns ``train_kv`` (the pair counts
    trained at the row's seq_len, ``"none"`` if the model saw none there) and ``train_mix`` (the whole mixture,
    ``mixture_text``). Raises ValueError as ``train_kv_per_seq_len`` and ``train_and_eval`` do.
    """
    from models.kernels import reset_usage

    vocab = train_kwargs.get("vocab_size", 8192)
    far = num_layers * (window - 1) if window and num_layers else None
    per_len = None if train_kv is None else train_kv_per_seq_len(seq_lens, train_kv)
    results = {}
    for mixture, evaluated, trained in _groups(seq_lens, kv_pairs, per_len):
        reset_usage()
        out = train_and_eval(model_factory, mixture, steps, seed=seed, device=device, dtype=dtype,
                             eval_cells=evaluated, far_distance=far, **train_kwargs)
        kernel = kernel_label(device)
        results.update({cell: (trained, out, kernel) for cell in evaluated})
    rows = []
    for seq_len in seq_lens:
        for kv in kv_pairs:
            base = {"arch": arch, "size": size, "seq_len": seq_len, "num_kv_pairs": kv, "steps": steps,
                    "vocab_size": vocab, "batch_size": train_kwargs.get("batch_size", 64),
                    "lr": train_kwargs.get("lr", 1e-3), "weight_decay": train_kwargs.get("weight_decay", 0.1),
                    "first_cell_frac": train_kwargs.get("first_cell_frac", 0.0),
                    "warmup": train_kwargs.get("warmup", 0), "stop_after": train_kwargs.get("stop_after"),
                    "constant_tokens": train_kwargs.get("constant_tokens", False),
                    "window": window, "num_layers": num_layers,
                    "far_distance": far, "chance": 2 / vocab}
            if (seq_len, kv) not in results:
                why = f"num_kv_pairs={kv} > seq_len/4={seq_len // 4}" if 4 * kv > seq_len else \
                    "no trainable pair count fits this seq_len"
                rows.append(base | {"n_params": None, "accuracy": None, "status": f"not run: {why}"}
                            | provenance(profile, seed, dtype, "none", device, None))
                continue
            trained, out, kernel = results[(seq_len, kv)]
            rows.append(base | {"n_params": out["n_params"], **out["by_cell"][(seq_len, kv)], "status": "ok",
                                "train_kv": "+".join(map(str, trained.get(seq_len, []))) or "none",
                                "train_mix": mixture_text(trained), "num_train": out["num_train"],
                                "tokens": out["tokens"],
                                "num_test": out["num_test"], "final_train_loss": out["final_train_loss"]}
                        | provenance(profile, seed, dtype, kernel, device, out["train_s"]))
    return rows


def _flat(groups: list) -> list[int]:
    return [kv for g in groups for kv in (g if isinstance(g, list) else [g])]


def kv_groups(text: str) -> list[int] | list[list[int]]:
    """``--train-kv``: ``"4,8"`` (the same pair counts at every seq_len) -> [4, 8]; ``"16,32/32,64"`` (one
    comma-separated group per seq_len, ``/`` between groups, a group may be empty) -> [[16, 32], [32, 64]]."""
    if "/" not in text:
        return _int_list(text)
    return [_int_list(group) for group in text.split("/")]


def _int_list(text: str) -> list[int]:
    return int_list(text, allow_empty=True, error=argparse.ArgumentTypeError)


def _seq_lens(text: str) -> list[int]:
    """argparse ``type=`` of ``--seq-len``: lengths >= 2, each even (a sequence is key-value pairs)."""
    lengths = int_list(text, minimum=2, error=argparse.ArgumentTypeError)
    odd = [t for t in lengths if t % 2]
    if odd:
        raise argparse.ArgumentTypeError(f"lengths must be even (a sequence is key-value pairs), got {odd}")
    return lengths


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, type=functools.partial(arch_name, extra=("llama",)),
                   help="registry arch (orthros, transformer, swa, gdn, gla, retnet) or 'llama' for the built-in "
                        "small Llama reference")
    p.add_argument("--size", type=size_name, required=True, help="model size name (models.sizes)")
    p.add_argument("--seq-len", type=_seq_lens, default=[64, 128, 256])
    p.add_argument("--kv-pairs", type=positive_ints, default=[4, 8, 16, 32, 64], help="pair counts evaluated")
    p.add_argument("--train-kv", type=kv_groups, default=None,
                   help="train one model on the mixture of these cells, evaluated at every cell: pair counts used at "
                        "every seq_len where they fit ('4,8'), or one group per seq_len ('16,32/32,64/64'); default: "
                        "one model per cell")
    p.add_argument("--window", type=positive_int, default=None,
                   help="sliding window w of orthros/orthros_noso/swa (default: the arch's own); also sets the "
                        "near/far split at num_layers * (w - 1) for every arch")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="share the input embedding and the output head (Zoology's models do; default: untied)")
    p.add_argument("--steps", type=positive_int, default=2000)
    p.add_argument("--vocab-size", type=positive_int, default=8192)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--first-cell-frac", type=fraction, default=0.0,
                   help="train the first FRAC of the steps on the mixture's first cell alone (the first --seq-len with "
                        "its first --train-kv count: the controls' cell), then cycle through the mixture (default 0)")
    p.add_argument("--constant-tokens", action="store_true",
                   help="rows a step scale as 1/seq_len: --batch-size rows at the mixture's shortest seq_len "
                        "(Zoology's batch sizes); default: --batch-size rows at every seq_len")
    p.add_argument("--weight-decay", type=nonnegative_float, default=0.1)
    p.add_argument("--warmup", type=nonnegative_int, default=0,
                   help="linear learning-rate warmup over the first N steps, then the cosine decay (default 0)")
    p.add_argument("--stop-after", type=positive_int, default=None,
                   help="train only the first N steps of the --steps schedule, then evaluate (calibration of the "
                        "schedule's early phase; default: all --steps)")
    p.add_argument("--num-test", type=positive_int, default=1000)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--device", type=device_name, default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="autocast dtype (weights stay float32)")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--log-every", type=nonnegative_int, default=0,
                   help="print the training loss every N steps (0: never)")
    p.add_argument("--out", required=True, type=out_file,
                   help="CSV path, e.g. results/<profile>/eval/mqar/<arch>/<size>/seed<s>.csv")
    a = p.parse_args(argv)
    if a.first_cell_frac >= 1.0:
        p.error(f"--first-cell-frac {a.first_cell_frac} must be in [0, 1)")
    if a.stop_after is not None and a.stop_after > a.steps:
        p.error(f"--stop-after {a.stop_after} must be <= --steps {a.steps}")
    try:
        if a.train_kv is not None:
            train_kv_per_seq_len(a.seq_len, a.train_kv)
    except ValueError as err:
        p.error(f"--train-kv: {err}")
    counts = [kv for kv in a.kv_pairs + _flat(a.train_kv or []) if 4 * kv <= max(a.seq_len)]  # cells that run
    if counts and max(counts) >= a.vocab_size // 2 - 1:  # keys and values are drawn from halves of the vocabulary
        p.error(f"--vocab-size {a.vocab_size} is too small for {max(counts)} distinct keys (pairs must be below "
                f"vocab_size / 2 - 1)")
    layers = None
    if a.arch == "llama":
        if a.tie_embeddings:
            p.error("--tie-embeddings: the built-in llama reference is untied")
        factory = llama_factory()
    else:
        from models.sizes import get_size

        layers = get_size(a.size).num_hidden_layers
        overrides = {"window_size": a.window} if a.window and a.arch in WINDOWED_ARCHS else {}
        factory = registry_factory(a.arch, a.size, **overrides, **({"tie_word_embeddings": True}
                                                                  if a.tie_embeddings else {}))
    rows = run_grid(factory, a.seq_len, a.kv_pairs, a.steps, arch=a.arch, size=a.size, profile=a.profile,
                    seed=a.seed, device=a.device, dtype=a.dtype, train_kv=a.train_kv, window=a.window,
                    num_layers=layers, vocab_size=a.vocab_size, batch_size=a.batch_size, lr=a.lr,
                    weight_decay=a.weight_decay, num_test=a.num_test, log_every=a.log_every,
                    first_cell_frac=a.first_cell_frac, constant_tokens=a.constant_tokens, warmup=a.warmup,
                    stop_after=a.stop_after)
    write_csv(rows, a.out)
    for row in rows:
        print(row["seq_len"], row["num_kv_pairs"], row["accuracy"], row.get("accuracy_far"), row["status"])


if __name__ == "__main__":
    main()
