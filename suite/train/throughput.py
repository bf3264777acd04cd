"""Training throughput in the rows: FLOPs of a model's training step and MFU against this device's matmul rate.

MFU = training FLOPs per second / the rate of a plain square bf16 (or the run's dtype) matmul measured on the same
device at the start of the run, as the suite's prefill rows measure theirs: a machine's own ceiling, not a datasheet's.
"""
from __future__ import annotations

import torch

from suite.cost_model import Shape, train_flops

# model types whose training step suite.cost_model.train_flops counts: attention models with the suite's backbone
# shape (Llama/Qwen/Mistral from transformers, the suite's Transformer/SWA and Orthros)
TRANSFORMER_TYPES = ("llama", "qwen2", "qwen3", "mistral", "suite_transformer")


def step_flops(config, batch_size: int, seq_len: int) -> int | None:
    """FLOPs of one training step of a model with HF ``config`` on [batch_size, seq_len] tokens, or None for a model
    type the cost model does not count (the linear-attention baselines)."""
    kind = getattr(config, "model_type", None)
    if kind == "orthros":  # Orthros and its w/o-SO ablation (the Orthros-H hybrid is a linear model type)
        arch, window = "orthros", config.window_size
    elif kind in TRANSFORMER_TYPES:
        arch, window = "transformer", getattr(config, "window_size", None)
    else:
        return None
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    shape = Shape(config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                  config.num_key_value_heads or config.num_attention_heads, head_dim, config.intermediate_size,
                  config.vocab_size)
    return train_flops(shape, seq_len, arch, window, batch_size)


def matmul_tflops(device, dtype: torch.dtype, n: int = 8192, repeats: int = 10) -> float | None:
    """TFLOP/s of an n x n x n matmul in ``dtype`` on a CUDA ``device`` (median of ``repeats`` after a warm-up); None
    on another device."""
    if torch.device(device).type != "cuda":
        return None
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    a @ b
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del a, b
    torch.cuda.empty_cache()
    return 2 * n**3 / sorted(times)[len(times) // 2] / 1e9
