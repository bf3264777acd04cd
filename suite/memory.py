"""Memory a job will need, checked before it allocates: a length that cannot fit is refused up front, naming the
option, what it needs and what the device has, instead of an allocator traceback (or the OOM killer) part way in.

The needs are lower bounds, counted from the model config alone (no model is built): tensors the computation
cannot avoid, whatever the attention kernel. A refused length can never fit; an accepted one may still not.

- :func:`training_bytes`: one training step (weights, gradients and AdamW's two moments; the logits of every token;
  one saved activation per layer);
- :func:`forward_bytes`: an inference forward (a layer's input and output hidden states; the keys and values of one
  attention layer, or of every layer when the cache is kept);
- :func:`available_bytes`: free memory of a CUDA device, or the memory this host (and its cgroup) has available;
- :func:`check_fits`: ValueError naming the option unless the need fits.
"""
from __future__ import annotations

import os
from pathlib import Path

GiB = 2**30


def _size(n: float) -> str:
    return f"{n / 2**40:.1f} TiB" if n >= 2**40 else f"{n / GiB:.2f} GiB"


def _attention_kv(config) -> int:
    """Key and value elements one token stores in one attention layer (0 for a model with no attention layer)."""
    if not getattr(config, "attention_layers", True):
        return 0
    heads = getattr(config, "num_key_value_heads", None) or getattr(config, "num_attention_heads", 0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // max(1, config.num_attention_heads or 1)
    return 2 * heads * head_dim


def _n_params(config) -> int:
    """Parameters of the embeddings and the LM head (a lower bound of the model's)."""
    tied = getattr(config, "tie_word_embeddings", False)
    return config.vocab_size * config.hidden_size * (1 if tied else 2)


def training_bytes(config, rows: int, seq_len: int, element: int = 4, logits: bool = True) -> tuple[int, str]:
    """``(bytes, what)``: a lower bound of one training step of ``rows`` sequences of ``seq_len`` tokens (per
    process) for a causal LM of transformers config ``config``, activations of ``element`` bytes (4: float32, 2:
    bfloat16 autocast): float32 embeddings and LM head with gradients and two AdamW moments, one hidden state
    ``[rows, seq_len, hidden]`` saved per layer, and (``logits``: a loss on every token) the logits
    ``[rows, seq_len, vocab]``."""
    tokens = rows * seq_len
    layers = config.num_hidden_layers + 1
    need = 16 * _n_params(config) + element * tokens * config.hidden_size * layers
    what = f"{layers} hidden states [{rows}, {seq_len}, {config.hidden_size}]"
    if logits:
        need += element * tokens * config.vocab_size
        what = f"logits [{rows}, {seq_len}, {config.vocab_size}], " + what
    return need, what + ", weights with their gradients and optimizer state"


def forward_bytes(config, rows: int, length: int, element: int = 4, cache: bool = False) -> tuple[int, str]:
    """``(bytes, what)``: a lower bound of an inference forward of ``rows`` sequences of ``length`` tokens: the
    input and output hidden states of a layer, and the keys and values of one attention layer (``cache``: of every
    attention layer, kept as the KV cache), ``element`` bytes each."""
    tokens = rows * length
    hidden = 2 * element * tokens * config.hidden_size
    interval = getattr(config, "full_attention_interval", 1) or 1  # hybrids: one attention layer in every interval
    attention = config.num_hidden_layers // interval
    kv = element * tokens * _attention_kv(config) * (attention if cache else min(1, attention))
    what = f"hidden states [{rows}, {length}, {config.hidden_size}]"
    if kv:
        what += f", keys and values of {'every' if cache else 'one'} attention layer"
    return hidden + kv + 4 * _n_params(config), what + ", weights"


def available_bytes(device: str) -> tuple[int, str]:
    """``(bytes, where)``: free memory of the CUDA device ``device``, or for ``cpu`` the memory available to new
    allocations on this host (Linux ``MemAvailable``, capped by this process's cgroup limit where one is set)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return free, f"{_size(free)} free of {_size(total)} on {device}"
    avail, source = None, "available on this host"
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    if avail is None:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit, used = Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")
    if limit.is_file() and used.is_file() and limit.read_text().strip().isdigit():
        room = int(limit.read_text()) - int(used.read_text())
        if room < avail:
            avail, source = room, "left under this process's cgroup memory limit"
    return avail, f"{_size(avail)} {source}"


def check_fits(need: tuple[int, str], option: str, device: str) -> None:
    """ValueError ``"{option}: needs at least N ({what}), but M ..."`` when the lower bound ``need`` (from
    :func:`training_bytes` or :func:`forward_bytes`) exceeds what ``device`` has (:func:`available_bytes`)."""
    n, what = need
    avail, where = available_bytes(device)
    if n > avail:
        raise ValueError(f"{option}: needs at least {_size(n)} ({what}), but {where}")
