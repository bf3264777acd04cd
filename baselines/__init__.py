"""Baselines on the suite backbone; importing this package registers them with ``models.registry``
and with transformers' AutoConfig / AutoModelForCausalLM.

Architectures: transformer, swa, gdn, gla, retnet, linear_hybrid, orthros_h (see baselines/README.md).
"""
from models.registry import register_arch

from .linear import (GDNConfig, GDNForCausalLM, GLAConfig, GLAForCausalLM, LinearHybridConfig,
                     LinearHybridForCausalLM, OrthrosHConfig, OrthrosHForCausalLM, RetNetConfig, RetNetForCausalLM)
from .transformer import SWAConfig, SWAForCausalLM, TransformerConfig, TransformerForCausalLM, swa_window

register_arch("transformer", TransformerConfig, TransformerForCausalLM, "Transformer (full causal attention)")
register_arch("swa", SWAConfig, SWAForCausalLM, "sliding-window attention (window 512 or T/4)")
register_arch("gdn", GDNConfig, GDNForCausalLM, "Gated DeltaNet (FLA)", match_budget=True)
register_arch("gla", GLAConfig, GLAForCausalLM, "Gated Linear Attention (FLA)", match_budget=True)
register_arch("retnet", RetNetConfig, RetNetForCausalLM, "RetNet (FLA MultiScaleRetention)", match_budget=True)
register_arch("linear_hybrid", LinearHybridConfig, LinearHybridForCausalLM,
              "GDN + 1 full-attention layer in 4 (Qwen3.5 style)", match_budget=True)
register_arch("orthros_h", OrthrosHConfig, OrthrosHForCausalLM,
              "Orthros 1:3 GDN (GDN cross query bypasses the conv)", match_budget=True)

__all__ = ["TransformerConfig", "TransformerForCausalLM", "SWAConfig", "SWAForCausalLM", "swa_window",
           "GDNConfig", "GDNForCausalLM", "GLAConfig", "GLAForCausalLM", "RetNetConfig", "RetNetForCausalLM",
           "LinearHybridConfig", "LinearHybridForCausalLM", "OrthrosHConfig", "OrthrosHForCausalLM"]
