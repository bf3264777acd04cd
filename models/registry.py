"""Build any architecture of the suite by name and size: ``build("orthros", "6M", vocab_size=4096)``.

Orthros variants are registered here; the baselines (``transformer``, ``swa``, ``gdn``, ``gla``,
``retnet``, hybrids) register themselves from :mod:`baselines` on import.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .orthros import OrthrosConfig, OrthrosForCausalLM
from .sizes import get_size


@dataclass
class Arch:
    config_cls: type
    model_cls: type
    defaults: dict = field(default_factory=dict)
    describe: str = ""


ARCHS: dict[str, Arch] = {}

# RoPE (base 10000, no scaling) is computed on the fly, so the position limit costs nothing; 1M lets every
# model of the suite run NIAH to 128K and the 1M-token prefill benchmarks. Models trained at T = 256..2048
# are not expected to extrapolate that far: the NIAH grid measures where each architecture breaks down.
MAX_POSITIONS = 1 << 20


def register_arch(name: str, config_cls: type, model_cls: type, describe: str = "", **defaults) -> None:
    ARCHS[name] = Arch(config_cls, model_cls, defaults, describe)


register_arch("orthros", OrthrosConfig, OrthrosForCausalLM, "Orthros w/ SO (window 128)", scale_offset=True)
register_arch("orthros_noso", OrthrosConfig, OrthrosForCausalLM, "Orthros w/o SO (ablation)", scale_offset=False)


def _load_baselines() -> None:
    try:
        import baselines  # noqa: F401  (registers its architectures)
    except ImportError as err:  # pragma: no cover - only when baselines/ is broken
        if "baselines" not in str(err):
            raise


def known_archs() -> list[str]:
    _load_baselines()
    return sorted(ARCHS)


def make_config(arch: str, size: str, **overrides):
    """The HF config of ``arch`` at the named ``size``; ``overrides`` win over size and arch defaults.

    Raises:
        ValueError: unknown arch or size (listing the known ones), or a bad config value.
    """
    _load_baselines()
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(sorted(ARCHS))}")
    spec = ARCHS[arch]
    kwargs = {**get_size(size).config_kwargs(), "max_position_embeddings": MAX_POSITIONS, **spec.defaults, **overrides}
    return spec.config_cls(**kwargs)


def build(arch: str, size: str, **overrides):
    """A freshly initialised model of ``arch`` at ``size`` (see :func:`make_config`)."""
    config = make_config(arch, size, **overrides)
    return ARCHS[arch].model_cls(config)


def factory(arch: str, size: str, **overrides) -> Callable[[], object]:
    """A zero-argument callable building the model: what training and MQAR code take."""
    return lambda: build(arch, size, **overrides)
