"""Needle in a haystack (RULER ``niah_single`` style) over held-out text; rows for ``results/{profile}/niah.csv``.

Paper Sec. 4.4, Fig. 3 (context length x needle depth heat map). A prompt of exactly ``context_len`` tokens is:
haystack tokens from the TEST split (a random window per trial), with ``"\\n" + NEEDLE_TEMPLATE + "\\n"`` inserted at
token offset ``round(depth * haystack_len)`` (depth 0 = start, 1 = just before the question), then
``"\\n" + QUESTION_TEMPLATE``. The templates and key words come from :mod:`suite.data.retrieval` so evaluation uses
the exact strings of the retrieval training mix. The model greedily generates ``max_new_tokens`` tokens with its
KV cache (``model.generate``, batch 1, ``torch.inference_mode``); a trial is correct when the 7-digit VALUE occurs
verbatim in the generated text (RULER's string match).

CLI::

    python -m suite.eval.niah --checkpoint DIR --tokenizer DIR --haystack data/test.txt --lengths 1024,4096 \\
        --depths 0,0.5,1 --trials 2 --out results/smoke/niah.csv --profile smoke --arch orthros --size 6M
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from suite.data.retrieval import NEEDLE_TEMPLATE, QUESTION_TEMPLATE, make_needles
from suite.provenance import provenance, write_csv

NIAH_COLUMNS = ["arch", "size", "n_params", "context_len", "depth", "accuracy", "n_trials", "status"]
MAX_HAYSTACK_CHARS = 20_000_000


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


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
    return np.asarray(_encode(tokenizer, text), dtype=np.int64)


def build_prompt(tokenizer, hay: np.ndarray, context_len: int, depth: float, key: str, value: str,
                 rng: np.random.Generator) -> list[int]:
    """Prompt token ids, exactly ``context_len`` long, with the needle for (key, value) at ``depth`` in [0, 1].

    Raises ValueError when ``depth`` is outside [0, 1], the needle and question do not fit ``context_len``, or
    the haystack is shorter than the haystack part of the prompt.
    """
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth={depth} must be in [0, 1]")
    needle = _encode(tokenizer, "\n" + NEEDLE_TEMPLATE.format(key=key, value=value) + "\n")
    question = _encode(tokenizer, "\n" + QUESTION_TEMPLATE.format(key=key))
    hay_len = context_len - len(needle) - len(question)
    if hay_len < 0:
        raise ValueError(f"context_len={context_len} cannot hold the needle and question "
                         f"({len(needle) + len(question)} tokens)")
    if len(hay) < hay_len:
        raise ValueError(f"haystack has {len(hay)} tokens, fewer than the {hay_len} needed for "
                         f"context_len={context_len}")
    start = int(rng.integers(0, len(hay) - hay_len + 1))
    window = hay[start:start + hay_len].tolist()
    cut = int(round(depth * hay_len))
    return window[:cut] + needle + window[cut:] + question


@torch.inference_mode()
def generate_answer(model, tokenizer, prompt_ids: list[int], max_new_tokens: int = 10) -> str:
    """Greedy continuation (decoded text of the new tokens) of one prompt, batch 1, using the model's cache."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, use_cache=True, pad_token_id=pad)
    return tokenizer.decode(out[0, len(prompt_ids):], skip_special_tokens=True)


def run_niah(model, tokenizer, haystack: str | Path | np.ndarray, lengths: list[int], depths: list[float],
             trials: int, *, seed: int = 0, max_new_tokens: int = 10, arch: str = "", size: str = "",
             profile: str = "smoke", dtype: str = "float32", backend: str = "hf", device: str = "cpu") -> list[dict]:
    """Accuracy per (context_len, depth) cell over ``trials`` needles; one ``niah.csv`` row per cell.

    ``haystack``: a text file path or pre-tokenized ids. Cells that cannot be built (haystack too short, context
    too small for needle + question) get status ``"not run: <why>"``. ``wall_s`` = seconds for the cell's trials.
    Extra columns: max_new_tokens, example_output (first trial's generation).
    """
    if trials < 1:
        raise ValueError(f"trials={trials} must be >= 1")
    hay = haystack if isinstance(haystack, np.ndarray) else haystack_ids(tokenizer, haystack)
    n_params = sum(p.numel() for p in model.parameters())
    model.eval()
    rows = []
    for li, context_len in enumerate(lengths):
        for di, depth in enumerate(depths):
            rng = np.random.default_rng([seed, li, di])
            base = {"arch": arch, "size": size, "n_params": n_params, "context_len": context_len, "depth": depth,
                    "n_trials": trials, "max_new_tokens": max_new_tokens}
            start, correct, example, status = time.perf_counter(), 0, "", "ok"
            try:
                for trial in range(trials):
                    (key, value), = make_needles(rng, 1)
                    prompt = build_prompt(tokenizer, hay, context_len, depth, key, value, rng)
                    text = generate_answer(model, tokenizer, prompt, max_new_tokens)
                    correct += int(value in text)
                    example = example or text
            except ValueError as err:
                status = f"not run: {err}"
            wall = time.perf_counter() - start
            rows.append(base | {"accuracy": correct / trials if status == "ok" else None, "status": status,
                                "example_output": example}
                        | provenance(profile, seed, dtype, backend, device, wall))
    return rows


def load_model(checkpoint: str | Path, tokenizer_dir: str | Path | None = None, dtype: str = "float32",
               device: str = "cpu"):
    """``(model, tokenizer)`` from a checkpoint dir (``suite.train.checkpoint.load_pretrained``: the project's Auto
    classes registered; ValueError naming a missing or corrupt file)."""
    from suite.train.checkpoint import load_pretrained

    model, tokenizer = load_pretrained(checkpoint, tokenizer_dir, dtype=getattr(torch, dtype))
    return model.to(device), tokenizer


def _list(cast):
    def parse(text: str):
        try:
            return [cast(v) for v in text.split(",") if v]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
    return parse


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--tokenizer", default=None, help="tokenizer dir (default: the checkpoint)")
    p.add_argument("--haystack", required=True, help="held-out text file (the TEST split, e.g. <data_dir>/test.txt)")
    p.add_argument("--lengths", type=_list(int), default=[1024, 4096], help="context lengths in tokens")
    p.add_argument("--depths", type=_list(float), default=[0.0, 0.5, 1.0])
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="hf")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--arch", default="")
    p.add_argument("--size", default="")
    p.add_argument("--out", required=True, help="CSV path, e.g. results/<profile>/niah.csv")
    a = p.parse_args(argv)
    model, tokenizer = load_model(a.checkpoint, a.tokenizer, a.dtype, a.device)
    rows = run_niah(model, tokenizer, a.haystack, a.lengths, a.depths, a.trials, seed=a.seed,
                    max_new_tokens=a.max_new_tokens, arch=a.arch, size=a.size, profile=a.profile, dtype=a.dtype,
                    backend=a.backend, device=a.device)
    write_csv(rows, a.out)
    for row in rows:
        print(row["context_len"], row["depth"], row["accuracy"], row["status"])


if __name__ == "__main__":
    main()
