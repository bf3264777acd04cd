"""Every architecture of the suite by name: ``build("orthros", "6M", vocab_size=4096)``.

``ARCHS`` is the one table of architectures, the Orthros variants and the baselines (``transformer``, ``swa``,
``gdn``, ``gla``, ``retnet``, the hybrids) alike. An entry names its config and model classes as
``"module:attribute"`` strings (as lm-eval's ``MODEL_MAPPING`` names its models); :func:`resolve` imports a class
when it is first needed, i.e. when a model of that architecture is configured or built.

Why names rather than imports: ``baselines/`` builds on ``models/`` (backbone, attention), so ``models/`` must not
import ``baselines/`` (that was an import cycle; ``tests/test_registry.py`` checks the package layering). The
table lets this module list the baselines without importing them: reading it imports nothing, and the baselines'
modules are imported by dotted name, from this table, only inside :func:`resolve` and :func:`register_auto_classes`
(the only place ``models/`` reaches ``baselines/``). ``suite.deps`` follows the table's ``module:attribute`` names,
so the DAG's code inputs of a job that builds models still hold the baselines' files.

Loading a checkpoint goes through the HF Auto classes instead, which know a ``model_type`` once the package serving
it has been imported (each package registers its own classes on import: ``models/__init__.py``,
``baselines/__init__.py``); :func:`register_auto_classes` imports every package of the table.
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field

from .sizes import get_size

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Arch:
    """One architecture: its config and causal-LM classes as ``"module:attribute"``, a one-line description,
    whether a study config may list it (``study``: ``suite/config_schema.json``'s ``$defs/arch`` enum, used by
    ``archs`` and ``niah.archs``) and the config defaults :func:`make_config` passes."""

    config: str
    model: str
    describe: str
    study: bool
    defaults: dict = field(default_factory=dict)

    @property
    def config_cls(self) -> type:
        return resolve(self.config)

    @property
    def model_cls(self) -> type:
        return resolve(self.model)


# Not in a study config's `archs` (study=False): `orthros_noso` is the SO ablation's variant (the DAG trains it at the
# `ablation_sizes`, workflows/eval.smk), `linear_hybrid` and `orthros_h` are the GPU system benchmarks' Table 4 pair.
ARCHS: dict[str, Arch] = {
    "orthros": Arch("models.orthros:OrthrosConfig", "models.orthros:OrthrosForCausalLM",
                    "Orthros w/ SO (window 128)", study=True, defaults={"scale_offset": True}),
    "orthros_noso": Arch("models.orthros:OrthrosConfig", "models.orthros:OrthrosForCausalLM",
                         "Orthros w/o SO (ablation)", study=False, defaults={"scale_offset": False}),
    "transformer": Arch("baselines.transformer:TransformerConfig", "baselines.transformer:TransformerForCausalLM",
                        "Transformer (full causal attention)", study=True),
    "swa": Arch("baselines.transformer:SWAConfig", "baselines.transformer:SWAForCausalLM",
                "sliding-window attention (window 512 or T/4)", study=True),
    "gdn": Arch("baselines.linear:GDNConfig", "baselines.linear:GDNForCausalLM",
                "Gated DeltaNet (FLA)", study=True, defaults={"match_budget": True}),
    "gla": Arch("baselines.linear:GLAConfig", "baselines.linear:GLAForCausalLM",
                "Gated Linear Attention (FLA)", study=True, defaults={"match_budget": True}),
    "retnet": Arch("baselines.linear:RetNetConfig", "baselines.linear:RetNetForCausalLM",
                   "RetNet (FLA MultiScaleRetention)", study=True, defaults={"match_budget": True}),
    "linear_hybrid": Arch("baselines.linear:LinearHybridConfig", "baselines.linear:LinearHybridForCausalLM",
                          "GDN + 1 full-attention layer in 4 (Qwen3.5 style)", study=False,
                          defaults={"match_budget": True}),
    "orthros_h": Arch("baselines.linear:OrthrosHConfig", "baselines.linear:OrthrosHForCausalLM",
                      "Orthros 1:3 GDN (GDN cross query bypasses the conv)", study=False,
                      defaults={"match_budget": True}),
}

# RoPE (base 10000, no scaling) is computed on the fly, so the position limit costs nothing; 1M lets every
# model of the suite run NIAH to 128K and the 1M-token prefill benchmarks. Models trained at T = 256..2048
# are not expected to extrapolate that far: the NIAH grid measures where each architecture breaks down.
MAX_POSITIONS = 1 << 20


def resolve(target: str):
    """The object a ``"module:attribute"`` name points to, importing its module."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def packages() -> list[str]:
    """The top-level packages serving the table's architectures (``baselines``, ``models``)."""
    return sorted({target.split(".")[0] for arch in ARCHS.values() for target in (arch.config, arch.model)})


def register_auto_classes() -> list[str]:
    """Import every package of the table, so that ``AutoConfig`` / ``AutoModelForCausalLM`` know all the suite's
    model types (each package registers its classes on import). Returns the packages imported; one that does not
    import is logged and left out (a plain Llama checkpoint needs none of them)."""
    done = []
    for name in packages():
        try:
            importlib.import_module(name)
            done.append(name)
        except ImportError as err:
            log.warning("could not import %s: %s", name, err)
    return done


def known_archs() -> list[str]:
    return sorted(ARCHS)


def make_config(arch: str, size: str, **overrides):
    """The HF config of ``arch`` at the named ``size``; ``overrides`` win over size and arch defaults.

    Raises:
        ValueError: unknown arch or size (listing the known ones), or a bad config value.
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(sorted(ARCHS))}")
    spec = ARCHS[arch]
    kwargs = {**get_size(size).config_kwargs(), "max_position_embeddings": MAX_POSITIONS, **spec.defaults, **overrides}
    return spec.config_cls(**kwargs)


def build(arch: str, size: str, **overrides):
    """A freshly initialised model of ``arch`` at ``size`` (see :func:`make_config`)."""
    config = make_config(arch, size, **overrides)
    return ARCHS[arch].model_cls(config)
