"""Multi-query associative recall (MQAR, Zoology recipe): data generator, train-then-evaluate, ``mqar.csv`` rows.

Sequence layout (length ``seq_len``): ``num_kv_pairs`` key-value pairs ``k1 v1 k2 v2 ...`` (keys drawn without
replacement from ``[1, vocab_size // 2)``, values from ``[vocab_size // 2, vocab_size)``), then every key is queried
once in the remaining ``seq_len - 2 * num_kv_pairs`` slots at even offsets ``2 * gap``, where the gaps are drawn
without replacement with probability ``p(gap = i) ∝ (i + 1) ** (power_a - 1)`` (power-law: most queries come soon
after the context, as repeated bigrams do in text). All other positions hold uniform random tokens.

``labels[b, t]`` is the token the model must output after reading ``input_ids[b, :t + 1]`` (already shifted, so do
not pass it to a Hugging Face model's ``labels=``): the paired value at each query position, ``-100`` elsewhere.
Accuracy counts only those answer positions.

CLI::

    python -m suite.eval.mqar --arch orthros --size mqar --seq-len 64,128,256 --kv-pairs 4,8,16 --steps 2000 \\
        --out results/smoke/mqar.csv --profile smoke
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from suite.provenance import provenance, write_csv

MQAR_COLUMNS = ["arch", "size", "n_params", "seq_len", "num_kv_pairs", "accuracy", "status"]


def mqar_data(vocab_size: int, seq_len: int, num_kv_pairs: int, num_examples: int, seed: int,
              power_a: float = 0.01, random_non_queries: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """MQAR examples as ``(input_ids, labels)``, both int64 tensors of shape ``[num_examples, seq_len]``.

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
    for row in range(num_examples):
        keys = rng.choice(np.arange(1, half), size=num_kv_pairs, replace=False)
        values = rng.choice(np.arange(half, vocab_size), size=num_kv_pairs, replace=False)
        inputs[row, 0:context:2], inputs[row, 1:context:2] = keys, values
        query_pos = context + 2 * rng.choice(space, size=num_kv_pairs, replace=False, p=gap_p)
        inputs[row, query_pos], labels[row, query_pos] = keys, values
    if random_non_queries:
        filler = inputs == 0
        inputs[filler] = rng.integers(0, vocab_size, size=int(filler.sum()))
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def _logits(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=input_ids)
    return out.logits if hasattr(out, "logits") else out


@torch.inference_mode()
def mqar_accuracy(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor,
                  batch_size: int = 64) -> float:
    """Fraction of answer positions (``labels != -100``) where the argmax of the model's logits equals the label.

    ``model(input_ids=[B, T])`` must return logits ``[B, T, V]`` (or an object with ``.logits``).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct = total = 0
    for start in range(0, len(input_ids), batch_size):
        ids, lab = input_ids[start:start + batch_size].to(device), labels[start:start + batch_size].to(device)
        pred = _logits(model, ids).argmax(-1)
        mask = lab != -100
        correct += int((pred[mask] == lab[mask]).sum())
        total += int(mask.sum())
    model.train(was_training)
    return correct / total


def train_and_eval(model_factory: Callable[[int, int], torch.nn.Module], seq_len: int, num_kv_pairs: int,
                   steps: int, *, vocab_size: int = 8192, batch_size: int = 64, lr: float = 1e-3,
                   weight_decay: float = 0.1, num_train: int | None = None, num_test: int = 1000, seed: int = 0,
                   power_a: float = 0.01, device: str = "cpu", log_every: int = 0) -> dict:
    """Train a fresh model on MQAR with AdamW (cosine LR decay) and measure held-out accuracy.

    ``model_factory(vocab_size, seq_len)`` returns an untrained causal LM (logits ``[B, T, V]``). Training data:
    ``num_train`` examples (default ``steps * batch_size``, i.e. no repeats) from ``seed``; test data: ``num_test``
    examples from ``seed + 10_000``. Loss: cross-entropy on answer positions only.
    Returns ``{"accuracy", "final_train_loss", "n_params", "train_s", "num_train", "num_test"}``.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps={steps} and batch_size={batch_size} must be >= 1")
    torch.manual_seed(seed)
    num_train = num_train or steps * batch_size
    train_x, train_y = mqar_data(vocab_size, seq_len, num_kv_pairs, num_train, seed, power_a)
    test_x, test_y = mqar_data(vocab_size, seq_len, num_kv_pairs, num_test, seed + 10_000, power_a)
    model = model_factory(vocab_size, seq_len).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    order = torch.randperm(num_train, generator=torch.Generator().manual_seed(seed))
    start, loss = time.perf_counter(), torch.tensor(float("nan"))
    for step in range(steps):
        idx = order[(torch.arange(batch_size) + step * batch_size) % num_train]
        x, y = train_x[idx].to(device), train_y[idx].to(device)
        logits = _logits(model, x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if log_every and step % log_every == 0:
            print(f"step {step} loss {loss.item():.4f}")
    train_s = time.perf_counter() - start
    return {"accuracy": mqar_accuracy(model, test_x, test_y), "final_train_loss": float(loss.item()),
            "n_params": sum(p.numel() for p in model.parameters()), "train_s": train_s, "num_train": num_train,
            "num_test": num_test}


def llama_factory(hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4) -> Callable[[int, int], torch.nn.Module]:
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
        from suite.eval.harness import import_project_models

        import_project_models()
        from models import registry

        return registry.build(arch, size, vocab_size=vocab_size, **overrides)
    return build


def run_grid(model_factory, seq_lens: list[int], kv_pairs: list[int], steps: int, *, arch: str, size: str,
             profile: str, seed: int = 0, backend: str = "torch", device: str = "cpu", **train_kwargs) -> list[dict]:
    """``train_and_eval`` for every (seq_len, num_kv_pairs) cell; one ``mqar.csv`` row per cell.

    A cell whose ``num_kv_pairs`` does not fit ``seq_len`` (``4 * kv > seq_len``) gets status ``"not run: ..."``.
    Extra columns: vocab_size, steps, batch_size, lr, num_train, num_test, final_train_loss.
    """
    rows = []
    for seq_len in seq_lens:
        for kv in kv_pairs:
            base = {"arch": arch, "size": size, "seq_len": seq_len, "num_kv_pairs": kv, "steps": steps,
                    "vocab_size": train_kwargs.get("vocab_size", 8192),
                    "batch_size": train_kwargs.get("batch_size", 64), "lr": train_kwargs.get("lr", 1e-3)}
            if 4 * kv > seq_len:
                rows.append(base | {"n_params": None, "accuracy": None,
                                    "status": f"not run: num_kv_pairs={kv} > seq_len/4={seq_len // 4}"}
                            | provenance(profile, seed, "float32", backend, device, None))
                continue
            out = train_and_eval(model_factory, seq_len, kv, steps, seed=seed, device=device, **train_kwargs)
            rows.append(base | {"n_params": out["n_params"], "accuracy": out["accuracy"], "status": "ok",
                                "num_train": out["num_train"], "num_test": out["num_test"],
                                "final_train_loss": out["final_train_loss"]}
                        | provenance(profile, seed, "float32", backend, device, out["train_s"]))
    return rows


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, help="registry arch (orthros, transformer, swa, gdn, gla, retnet) or "
                                                 "'llama' for the built-in small Llama reference")
    p.add_argument("--size", required=True, help="registry size name")
    p.add_argument("--seq-len", type=_int_list, default=[64, 128, 256])
    p.add_argument("--kv-pairs", type=_int_list, default=[4, 8, 16, 32, 64])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--num-test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="torch")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--out", required=True, help="CSV path, e.g. results/<profile>/mqar.csv")
    a = p.parse_args(argv)
    factory = llama_factory() if a.arch == "llama" else registry_factory(a.arch, a.size)
    rows = run_grid(factory, a.seq_len, a.kv_pairs, a.steps, arch=a.arch, size=a.size, profile=a.profile,
                    seed=a.seed, backend=a.backend, device=a.device, vocab_size=a.vocab_size,
                    batch_size=a.batch_size, lr=a.lr, num_test=a.num_test)
    write_csv(rows, a.out)
    for row in rows:
        print(row["seq_len"], row["num_kv_pairs"], row["accuracy"], row["status"])


if __name__ == "__main__":
    main()
