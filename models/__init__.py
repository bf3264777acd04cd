"""Orthros and the shared backbone. Importing this package registers its models with the HF Auto classes.

Each package registers its own classes (this one: Orthros; ``baselines/__init__.py``: the baselines) with
``exist_ok=True``, so importing a package twice (a reload, a second interpreter path) is harmless. Which package
serves which architecture name is ``models.registry.ARCHS``; ``models.registry.register_auto_classes()`` imports
them all (what loading a checkpoint by its ``model_type`` needs).
"""
from transformers import AutoConfig, AutoModelForCausalLM

from .backbone import SuiteCache, SuiteConfig, SuiteForCausalLM
from .orthros import OrthrosConfig, OrthrosForCausalLM
from .sizes import SIZES, count_parameters, get_size

AUTO_CLASSES = ((OrthrosConfig, OrthrosForCausalLM),)  # (config, causal LM) of each model_type this package serves
for _config, _model in AUTO_CLASSES:
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModelForCausalLM.register(_config, _model, exist_ok=True)
del _config, _model

__all__ = ["AUTO_CLASSES", "SuiteCache", "SuiteConfig", "SuiteForCausalLM", "OrthrosConfig", "OrthrosForCausalLM",
           "SIZES", "count_parameters", "get_size"]
