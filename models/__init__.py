"""Orthros and the shared backbone. Importing this package registers the HF Auto classes."""
from .backbone import SuiteCache, SuiteConfig, SuiteForCausalLM
from .orthros import OrthrosConfig, OrthrosForCausalLM
from .sizes import SIZES, count_parameters, get_size

__all__ = ["SuiteCache", "SuiteConfig", "SuiteForCausalLM", "OrthrosConfig", "OrthrosForCausalLM", "SIZES",
           "count_parameters", "get_size"]
