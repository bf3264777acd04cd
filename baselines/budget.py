"""Parameter budgets: match every baseline's total to Orthros at the same size.

GLA/GDN-style accounting (README): each mixer keeps FLA's documented expansion ratios, so a
mixer can hold more (RetNet ~8 d^2, GDN ~6 d^2) or fewer parameters than attention (4 d^2 with
MHA); the difference moves into the SwiGLU MLP width (3 * d * intermediate_size per layer), rounded
to a multiple of 8. The reference is Orthros' attention mixer (with its scale-offset vectors).
"""
from __future__ import annotations

import torch

from models.sizes import count_parameters

MLP_MULTIPLE = 8


def mixer_parameters(config, make_mixer) -> int:
    """Parameters of all ``num_hidden_layers`` mixers ``make_mixer(config, i)``, counted on the meta device."""
    with torch.device("meta"):
        return sum(count_parameters(make_mixer(config, i)) for i in range(config.num_hidden_layers))


def orthros_mixer_parameters(config) -> int:
    from models.attention import Attention

    return mixer_parameters(config, lambda c, i: Attention(c, i, scale_offset=True))


def matched_intermediate_size(config, make_mixer) -> int:
    """The MLP width that gives ``config``'s architecture Orthros' total at ``config.intermediate_size``.

    Raises:
        ValueError: when the mixers are so large that no positive MLP width matches.
    """
    delta = orthros_mixer_parameters(config) - mixer_parameters(config, make_mixer)
    width = config.intermediate_size + delta / (3 * config.hidden_size * config.num_hidden_layers)
    matched = MLP_MULTIPLE * round(width / MLP_MULTIPLE)
    if matched < MLP_MULTIPLE:
        raise ValueError(f"intermediate_size={config.intermediate_size} is too small to absorb the mixer "
                         f"parameters of {config.model_type} (matched width {width:.0f})")
    return matched
