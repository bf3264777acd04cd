"""Named model sizes: one registry for every architecture and profile.

A size fixes the backbone shape (hidden size, layers, query heads, KV heads, FFN width). Its name is
the Orthros parameter count at the size's reference vocabulary (untied embeddings): the paper's
ablation grid (Sec. 4.1, Table 7) uses a 32K vocabulary; the CPU sizes use this suite's 4K BPE
vocabulary. ``qwen3_8b`` is the Qwen3-8B shape the system benchmarks use (Sec. 4.5-4.6).

The paper does not list its ablation shapes; ours follow the GPT-3 / GLA / GDN convention
(hidden 768..4096, SwiGLU FFN about 8/3 of hidden, head dim 64..128).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Size:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    ref_vocab: int
    head_dim: int | None = None

    def config_kwargs(self) -> dict:
        """Keyword arguments for any of this suite's model configs."""
        kw = asdict(self)
        kw.pop("ref_vocab")
        kw["head_dim"] = self.head_dim or self.hidden_size // self.num_attention_heads
        return kw


SIZES: dict[str, Size] = {
    # CPU / single-GPU sizes (4K BPE vocabulary)
    "0.5M": Size(56, 2, 2, 2, 160, 4096),
    "1M": Size(96, 2, 4, 4, 256, 4096),
    "1.5M": Size(128, 2, 4, 4, 352, 4096),
    "2M": Size(128, 4, 4, 4, 384, 4096),
    "3M": Size(192, 4, 4, 4, 448, 4096),
    # two layers, as Zoology's MQAR models: the retrieval studies' shape. Measured on the CPU (MQAR, T=64, 4 pairs,
    # lr 1e-3, 500 steps): the 2-layer 1M Transformer reaches 0.997, the 4-layer 3M one stays at 0.25.
    "3.7M": Size(256, 2, 4, 4, 704, 4096),
    # Zoology's MQAR grid (d_model 64/128/256, 2 layers, head dim 64), named by d_model: their parameter count
    # depends mostly on the MQAR vocabulary (embeddings), so results carry the measured n_params. "d256" is the
    # shape of "3.7M".
    "d64": Size(64, 2, 1, 1, 176, 8192),
    "d128": Size(128, 2, 2, 2, 352, 8192),
    "d256": Size(256, 2, 4, 4, 704, 8192),
    "6M": Size(256, 5, 4, 4, 704, 4096),
    "12M": Size(384, 5, 6, 6, 1024, 4096),
    "25M": Size(512, 6, 8, 8, 1408, 4096),
    # the paper's ablation grid (Table 7), 32K vocabulary
    "160M": Size(768, 16, 12, 12, 2048, 32000),
    "360M": Size(1024, 24, 16, 16, 2816, 32000),
    "780M": Size(1536, 24, 16, 16, 4096, 32000),
    "1.3B": Size(2048, 24, 16, 16, 5632, 32000),
    "2.7B": Size(2560, 32, 20, 20, 6912, 32000),
    "6.8B": Size(4096, 32, 32, 32, 11008, 32000),
    # the system benchmarks' shape (Qwen3-8B: GQA 32/8, head dim 128, vocab 151936)
    "qwen3_8b": Size(4096, 36, 32, 8, 12288, 151936, head_dim=128),
}


def get_size(name: str) -> Size:
    """The named size. Raises ValueError listing the known names."""
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown size {name!r}; known sizes: {', '.join(SIZES)}") from None


def count_parameters(model) -> int:
    """Number of parameters of a torch module (works on meta-device models)."""
    return sum(p.numel() for p in model.parameters())
