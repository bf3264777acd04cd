"""The NIAH grid (RULER ``niah_single``, paper Sec. 4.4 / Fig. 3): for every (context length, depth) cell,
``trials`` prompts of exactly ``context_len`` tokens of held-out text with one needle, answered greedily with the
model's KV cache; one ``niah.csv`` row per cell. :mod:`suite.experiments.niah.run` is the command line.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from suite.common import autocast
from suite.data.needles import NeedleTask
from suite.provenance import provenance

NIAH_COLUMNS = ["arch", "size", "n_params", "context_len", "depth", "accuracy", "n_trials", "status", "train_len",
                "distance_min", "distance_max", "format", "value_digits", "max_new_tokens"]
MAX_HAYSTACK_CHARS = 20_000_000
ANSWER_MARGIN = 4  # generated tokens allowed beyond the question's last line and the answer


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
    text = haystack_text(path, max_chars)
    return np.asarray(raw_tokenizer(tokenizer).encode(text, add_special_tokens=False).ids, dtype=np.int64)


def haystack_text(path: str | Path, max_chars: int = MAX_HAYSTACK_CHARS) -> str:
    """The first ``max_chars`` characters of the haystack file; ValueError naming it when missing or blank."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"haystack file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        text = fh.read(max_chars)
    if not text.strip():
        raise ValueError(f"haystack file is empty: {path}")
    return text


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
