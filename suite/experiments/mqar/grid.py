"""The MQAR grid: ``mqar.csv`` rows, one per (seq_len, num_kv_pairs) cell, from one model per training mixture
(:func:`suite.experiments.mqar.train.train_and_eval`) or one model per cell.
"""
from __future__ import annotations

import torch

from suite.common import kernels_summary
from suite.experiments.mqar.data import Cell
from suite.experiments.mqar.train import train_and_eval
from suite.provenance import provenance

MQAR_COLUMNS = ["arch", "size", "n_params", "seq_len", "num_kv_pairs", "accuracy", "accuracy_near", "accuracy_far",
                "n_near", "n_far", "far_distance", "chance", "window", "status"]


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
