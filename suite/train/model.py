"""The model settings a run takes from the study config and the tokenizer.

A model is built by name with ``models.registry.build(arch, size, **overrides)`` and loaded from a checkpoint with
:func:`suite.train.checkpoint.load_model`; this module gives what a run sets in the model config:

- :func:`window_overrides`: the model-config window an arch takes from the study config;
- :func:`set_special_ids`: the suite tokenizer's bos/eos/pad ids written into the model config.
"""
from __future__ import annotations

from pathlib import Path

from suite.archs import ORTHROS_ARCHS


def window_overrides(arch: str, cfg: dict, seq_len: int | None) -> dict:
    """Model-config window of an arch from the study config: Orthros (and its no-SO ablation) get
    ``window``; SWA gets ``baselines.transformer.swa_window(seq_len, swa_window_ratio)``, i.e.
    ``round(swa_window_ratio * seq_len)`` (paper: 512 at 2048); others nothing."""
    if not cfg:
        return {}
    if arch in ORTHROS_ARCHS:
        return {"window_size": cfg["window"]}
    if arch == "swa" and seq_len:
        from baselines.transformer import swa_window

        return {"window_size": swa_window(seq_len, cfg["swa_window_ratio"])}
    return {}


def set_special_ids(net, tokenizer_dir: Path) -> None:
    """Record bos/eos/pad ids of the suite tokenizer in the model config (for generation and lm-eval); a tokenizer
    without the suite's special tokens (a pretrained model's own) leaves the config as it is.
    They replace any defaults of the config class (e.g. LlamaConfig's bos=1, eos=2): training uses this
    tokenizer, so its ids are the only meaningful ones."""
    cfg_path = tokenizer_dir / "tokenizer.json"
    if not cfg_path.exists():
        return
    from suite.data.tokenizer import load_tokenizer, special_ids

    ids = special_ids(load_tokenizer(tokenizer_dir))
    if ids["bos"] is None:  # a pretrained model's own tokenizer (suite.data.english): its config's ids stand
        return
    for name in ("bos", "eos", "pad"):
        setattr(net.config, f"{name}_token_id", ids[name])
        if getattr(net, "generation_config", None) is not None:
            setattr(net.generation_config, f"{name}_token_id", ids[name])
