"""Model building for training: the network a run trains and the model settings it takes from the study config.

- :func:`build_model`: the network from a checkpoint folder (continued pretraining), a ``PreTrainedConfig`` or a
  zero-argument factory, optionally initialised from another checkpoint's weights (``init_from``: conversion);
- :func:`window_overrides`: the model-config window an arch takes from the study config;
- :func:`set_special_ids`: the suite tokenizer's bos/eos/pad ids written into the model config.
"""
from __future__ import annotations

import sys
from pathlib import Path

from suite.archs import ORTHROS_ARCHS
from suite.train import checkpoint as ckpt_io


def build_model(model, init_from: str | Path | None = None):
    """A model from ``model``: a checkpoint folder (``AutoModelForCausalLM.from_pretrained``), a
    ``PreTrainedConfig`` (``from_config``) or a zero-argument factory. ``init_from`` then loads a
    checkpoint's weights (shape-matching names; new parameters keep their initial values, e.g. Orthros's
    query scale-offsets when converting a Transformer). Raises ValueError when ``init_from`` shares no
    parameter name with the model."""
    from transformers import AutoModelForCausalLM, PreTrainedConfig

    if isinstance(model, (str, Path)):
        from models.registry import register_auto_classes

        register_auto_classes()
        net = ckpt_io.load_weights(AutoModelForCausalLM, model)
    elif isinstance(model, PreTrainedConfig):
        net = AutoModelForCausalLM.from_config(model)
    elif callable(model):
        net = model()
    else:
        raise ValueError(f"model must be a checkpoint folder, a PreTrainedConfig or a factory, got {type(model)}")
    if init_from is not None:
        from safetensors.torch import load_file

        path = Path(init_from) / ckpt_io.WEIGHTS
        try:
            source = load_file(str(path))
        except Exception as err:
            raise ValueError(f"cannot read checkpoint file {path}: {err}") from err
        own = net.state_dict()
        loaded = {k: v for k, v in source.items() if k in own and own[k].shape == v.shape}
        if not loaded:
            raise ValueError(f"{path} shares no parameter (name and shape) with {type(net).__name__}")
        net.load_state_dict(loaded, strict=False)
        kept = [k for k in own if k not in loaded]
        print(f"init_from {init_from}: loaded {len(loaded)} of {len(own)} tensors; kept initial values for "
              f"{len(kept)}: {kept[:8]}{' ...' if len(kept) > 8 else ''}", file=sys.stderr)
        if "lm_head.weight" not in source and getattr(net.config, "tie_word_embeddings", False):
            net.tie_weights()
    return net


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
