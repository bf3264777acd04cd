"""Transformer and sliding-window (SWA) baselines on the suite backbone (Sec. 4.1 baselines).

Both use :class:`models.attention.Attention` (the Orthros mixer) single-stream, without the
scale-offset, so they run the same kernels as Orthros (``models.kernels``). The Transformer attends
all earlier tokens; SWA attends the last ``window_size`` tokens (the token itself included) and,
like Orthros' base stream, stores every K/V but reads only the window.
"""
from __future__ import annotations

from models.attention import Attention
from models.backbone import SuiteConfig, SuiteForCausalLM

SWA_WINDOW_RATIO = 0.25  # w / T of the paper's SWA: 512 at its 2048-token training length
PAPER_SEQ_LEN = 2048  # the paper's training length


def swa_window(seq_len: int, ratio: float = SWA_WINDOW_RATIO) -> int:
    """SWA window for a training length: ``round(ratio * seq_len)`` (512 at T = 2048 with the default 1/4).

    The one SWA window rule: training takes ``ratio`` from the study config's ``swa_window_ratio``
    (``suite.train.model.window_overrides``), the throughput benchmark uses the default, and
    :data:`SWA_DEFAULT_WINDOW` (an ``SWAConfig`` built without ``window_size``) is the rule at the paper's length.
    Short-context profiles train at T < 2048; keeping w/T fixed keeps SWA a windowed model there (a 512 window
    over 256 tokens would be full attention). Raises ValueError for a seq_len that is not an integer or whose
    window would be under one token (seq_len < 3 at 1/4).
    """
    if not isinstance(seq_len, int) or round(ratio * seq_len) < 1:
        raise ValueError(f"seq_len must be an integer with round({ratio} * seq_len) >= 1, got {seq_len!r}")
    return round(ratio * seq_len)


SWA_DEFAULT_WINDOW = swa_window(PAPER_SEQ_LEN)  # 512: the rule at the paper's training length


class TransformerConfig(SuiteConfig):
    """Full causal attention (``window_size`` must stay None)."""

    model_type = "suite_transformer"

    def __init__(self, window_size=None, **kwargs):
        if window_size is not None:
            raise ValueError(f"window_size must be None for the Transformer baseline, got {window_size!r} (use swa)")
        super().__init__(window_size=None, **kwargs)


class SWAConfig(SuiteConfig):
    """Sliding-window attention; ``window_size`` is w, the window actually used (default
    :data:`SWA_DEFAULT_WINDOW` = ``swa_window(2048)`` = 512)."""

    model_type = "suite_swa"

    def __init__(self, window_size: int = SWA_DEFAULT_WINDOW, **kwargs):
        if window_size is None:
            raise ValueError("window_size must be a positive integer for SWA, got None")
        super().__init__(window_size=window_size, **kwargs)


def _attention(config, layer_idx):
    return Attention(config, layer_idx, scale_offset=False)


class TransformerForCausalLM(SuiteForCausalLM):
    config_class = TransformerConfig
    two_stream = False
    make_mixer = staticmethod(_attention)


class SWAForCausalLM(SuiteForCausalLM):
    config_class = SWAConfig
    two_stream = False
    make_mixer = staticmethod(_attention)
