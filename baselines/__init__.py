"""Baselines on the suite backbone; importing this package registers them with transformers' AutoConfig /
AutoModelForCausalLM (``exist_ok=True``: a second import is harmless). Their architecture names are listed in
``models.registry.ARCHS`` (by ``module:attribute``, so that ``models/`` never imports this package).

Architectures: transformer, swa, gdn, gla, retnet, linear_hybrid, orthros_h (see baselines/README.md).
"""
from transformers import AutoConfig, AutoModelForCausalLM

from .linear import (
    GDNConfig,
    GDNForCausalLM,
    GLAConfig,
    GLAForCausalLM,
    LinearHybridConfig,
    LinearHybridForCausalLM,
    OrthrosHConfig,
    OrthrosHForCausalLM,
    RetNetConfig,
    RetNetForCausalLM,
)
from .transformer import SWAConfig, SWAForCausalLM, TransformerConfig, TransformerForCausalLM, swa_window

AUTO_CLASSES = ((TransformerConfig, TransformerForCausalLM), (SWAConfig, SWAForCausalLM), (GDNConfig, GDNForCausalLM),
                (GLAConfig, GLAForCausalLM), (RetNetConfig, RetNetForCausalLM),
                (LinearHybridConfig, LinearHybridForCausalLM), (OrthrosHConfig, OrthrosHForCausalLM))
for _config, _model in AUTO_CLASSES:
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModelForCausalLM.register(_config, _model, exist_ok=True)
del _config, _model

__all__ = ["AUTO_CLASSES", "TransformerConfig", "TransformerForCausalLM", "SWAConfig", "SWAForCausalLM", "swa_window",
           "GDNConfig", "GDNForCausalLM", "GLAConfig", "GLAForCausalLM", "RetNetConfig", "RetNetForCausalLM",
           "LinearHybridConfig", "LinearHybridForCausalLM", "OrthrosHConfig", "OrthrosHForCausalLM"]
