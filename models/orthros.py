"""Orthros (arXiv 2610.13735): HF config and causal LM, ``model_type="orthros"`` (registered with the HF Auto
classes by ``models/__init__.py``).

Each layer runs the base stream (sliding window w, builds the full per-layer K/V) and the output
stream (full causal cross-attention over that K/V at the original position), sharing W_Q/K/V/O,
the FFN and the norms (Sec. 3.1, Eqs. 4-5, Algorithms 1-2). Logits and loss come only from the
output stream. See :class:`models.backbone.SuiteForCausalLM` for the regimes.
"""
from __future__ import annotations

from .attention import Attention
from .backbone import SuiteConfig, SuiteForCausalLM


class OrthrosConfig(SuiteConfig):
    """Orthros config. ``window_size`` is w (default 128, the paper's); ``scale_offset`` toggles SO.

    Raises:
        ValueError: naming the field, for a window < 1, a window past ``max_position_embeddings``,
        or a malformed shape.
    """

    model_type = "orthros"

    def __init__(self, window_size: int = 128, scale_offset: bool = True, **kwargs):
        if window_size is None:
            raise ValueError("window_size must be a positive integer for Orthros, got None")
        self.scale_offset = bool(scale_offset)
        super().__init__(window_size=window_size, **kwargs)


class OrthrosForCausalLM(SuiteForCausalLM):
    """Orthros causal LM: two streams per layer, logits from the output stream only."""

    config_class = OrthrosConfig
    two_stream = True

    @staticmethod
    def make_mixer(config, layer_idx):
        return Attention(config, layer_idx, scale_offset=config.scale_offset)
