"""The random-weight models of the system benchmarks (paper Sec. 4.5-4.6): built on the target device and dtype."""
from __future__ import annotations

import torch


def build_bench_model(arch: str, size: str, device: str | torch.device, dtype: torch.dtype, max_len: int,
                      **overrides):
    """A random-weight model of ``arch`` at ``size`` built directly on ``device`` in ``dtype`` (eval mode).

    The system benchmarks use Qwen3's attention details (q/k norm, RoPE theta 1e6; for archs with attention
    layers, the others refuse them) and the size's reference vocabulary; ``max_len`` sets
    ``max_position_embeddings``. ``overrides`` win. Raises ValueError for an unknown arch or size.
    """
    from models.registry import ARCHS, build, known_archs
    from models.sizes import get_size

    kw = dict(vocab_size=get_size(size).ref_vocab, max_position_embeddings=max(max_len, 2048))
    if arch not in known_archs() or ARCHS[arch].config_cls.attention_layers:
        kw.update(qk_norm=True, rope_theta=1e6)
    kw.update(overrides)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = build(arch, size, **kw)
    finally:
        torch.set_default_dtype(previous)
    return model.to(device=device, dtype=dtype).eval()
