"""Resumable training checkpoints: an HF model folder plus optimizer / scheduler / RNG state.

Layout of ``<out_dir>/checkpoint/``: ``config.json`` + ``model.safetensors`` (``save_pretrained``, loadable
with ``from_pretrained``), the tokenizer files (so ``AutoTokenizer.from_pretrained`` works on the same
folder), ``trainer_state.json`` (step, tokens, wall_s: human-readable) and ``trainer_state.pt``
(optimizer, scheduler, RNG states). A checkpoint is written to ``checkpoint.tmp/`` and swapped in by
renames, so a kill at any moment leaves either the old or the new checkpoint complete.

Every checkpoint is loaded through :func:`load_model` (a training run's start and resume, NIAH, the CPU prefill
sweep) or, where lm-eval loads the folder itself, checked by :func:`check_folder` first: a missing, truncated or
half-written file is a ValueError naming that file, never a bare SafetensorError / JSONDecodeError.
:func:`load_matching` loads the weights of one checkpoint into a model of another architecture (conversion).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from suite.data.packages import sha256_of

STATE_JSON, STATE_PT, WEIGHTS = "trainer_state.json", "trainer_state.pt", "model.safetensors"


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(out_dir: str | Path, model, optimizer, scheduler, info: dict,
                    tokenizer_dir: str | Path | None = None, model_state: dict | None = None,
                    optimizer_state: dict | None = None) -> Path:
    """Atomically (re)write ``<out_dir>/checkpoint``. ``info`` (JSON-serialisable: step, tokens, wall_s,
    ...) goes to trainer_state.json. ``model_state`` / ``optimizer_state`` replace ``model.state_dict()`` /
    ``optimizer.state_dict()`` (the full states gathered from a sharded model, :mod:`suite.train.distributed`).
    Returns the checkpoint folder."""
    out_dir = Path(out_dir)
    final, tmp, old = out_dir / "checkpoint", out_dir / "checkpoint.tmp", out_dir / "checkpoint.old"
    shutil.rmtree(tmp, ignore_errors=True)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" bars would interleave with the training bar
    model.save_pretrained(tmp, state_dict=model_state)
    if tokenizer_dir is not None:
        for f in Path(tokenizer_dir).iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
    optimizer_state = optimizer.state_dict() if optimizer_state is None else optimizer_state
    torch.save({"optimizer": optimizer_state, "scheduler": scheduler.state_dict(), "rng": rng_state()},
               tmp / STATE_PT)
    info = {**info, "files_sha256": {f.name: sha256_of(f) for f in sorted(tmp.iterdir()) if f.name != STATE_JSON}}
    (tmp / STATE_JSON).write_text(json.dumps(info, indent=2))
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def non_finite(named_tensors) -> list[str]:
    """Names of the tensors in ``(name, tensor)`` pairs that hold a NaN or infinite value (a DTensor: its local
    shard), so that no checkpoint of such weights is written."""
    bad = []
    for name, tensor in named_tensors:
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        if not bool(torch.isfinite(local.detach()).all()):
            bad.append(name)
    return bad


def verify_checkpoint(ckpt: str | Path) -> dict:
    """Check every file listed in trainer_state.json against its recorded sha256; return the info dict.
    Raises ValueError naming the first missing or corrupt file."""
    ckpt = Path(ckpt)
    info = read_info(ckpt)
    for name, digest in info.get("files_sha256", {}).items():
        path = ckpt / name
        if not path.exists():
            raise ValueError(f"checkpoint file {path} is missing")
        if sha256_of(path) != digest:
            raise ValueError(f"corrupt checkpoint file {path}: sha256 differs from the one recorded in "
                             f"{ckpt / STATE_JSON}")
    return info


def find_checkpoint(out_dir: str | Path) -> Path | None:
    """The complete checkpoint folder of a run, or None. A kill between the two renames of
    ``save_checkpoint`` leaves only ``checkpoint.old``, which is then used."""
    for name in ("checkpoint", "checkpoint.old"):
        path = Path(out_dir) / name
        if (path / STATE_JSON).exists():
            return path
    return None


def read_info(ckpt: str | Path) -> dict:
    """trainer_state.json of a checkpoint. Raises ValueError naming the file when corrupt."""
    path = Path(ckpt) / STATE_JSON
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"corrupt checkpoint file {path}: {err}") from err


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # "name" or "owner/name", as the Hub spells them


def checkpoint_folder(path: str | Path, *, hub_ids: bool = False) -> Path:
    """``path`` as a Path when it is a folder: the check an evaluation CLI makes on ``--checkpoint`` before
    loading. Raises FileNotFoundError ``checkpoint not found: PATH`` when nothing is there (NotADirectoryError
    when it is a file), instead of the Hub's "Repo id must be in the form ..." that ``from_pretrained`` gives a
    missing local path. ``hub_ids=True`` (lm-eval's own ``pretrained=``) lets a name that can only be a Hub
    repository id (``name`` or ``owner/name``: no leading ``/``, ``.`` or ``~``) through to ``from_pretrained``.
    A folder's files are checked too (:func:`check_folder`: ValueError naming a truncated or corrupt one)."""
    text, path = str(path), Path(path)
    if path.is_dir():
        check_folder(path)
        return path
    if hub_ids and not path.exists() and HUB_ID.fullmatch(text) and ".." not in text:
        return path
    if path.exists():
        raise NotADirectoryError(f"checkpoint {text} is a file, not a checkpoint folder")
    raise FileNotFoundError(f"checkpoint not found: {text}")


def check_folder(folder: str | Path) -> None:
    """Check the files of a local HF model or tokenizer folder before loading it: every ``*.json`` must parse,
    every ``*.safetensors`` must have a complete header and data, and a suite checkpoint's files must match the
    sha256s in its trainer_state.json. Raises ValueError naming the first bad file. A path that is not a
    local folder (a Hub id) is left to ``from_pretrained``."""
    from safetensors import safe_open

    folder = Path(folder)
    if not folder.is_dir():
        return
    if (folder / STATE_JSON).exists():
        verify_checkpoint(folder)
    for path in sorted(folder.iterdir()):
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".safetensors":
                with safe_open(str(path), "pt"):
                    pass
        except Exception as err:  # JSONDecodeError, UnicodeDecodeError, SafetensorError
            raise ValueError(f"corrupt checkpoint file {path}: {err}") from err


def load_model(checkpoint: str | Path, tokenizer_dir: str | Path | None = None, dtype: str | None = "float32",
               device: str | None = None, *, tokenizer: bool = True, check: bool = True, model_cls=None,
               **model_kwargs):
    """``(model, tokenizer)`` of a checkpoint folder, the model in eval mode: the one loader of the suite's
    checkpoints (a training run's start and resume, NIAH, the CPU prefill sweep, ...).

    The folder's files are checked first (:func:`check_folder`; ``check=False`` where they were verified already).
    ``dtype`` names the weights' dtype ("float32", "bfloat16", "float16"; None: what ``from_pretrained`` picks);
    ``device`` moves the model there; ``model_cls`` loads it as that class (default ``AutoModelForCausalLM``, which
    knows every model type of the suite); ``model_kwargs`` go to ``from_pretrained`` (``max_position_embeddings``,
    ...). The tokenizer comes from ``tokenizer_dir`` (default: the checkpoint); ``tokenizer=False`` returns None for
    it. Raises ValueError naming the missing or corrupt file, or the folder that does not load."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.registry import register_auto_classes
    from suite.common import DTYPES

    register_auto_classes()
    if dtype is not None:
        model_kwargs["dtype"] = DTYPES[dtype]
    model = _from_pretrained(model_cls or AutoModelForCausalLM, checkpoint, check, **model_kwargs).eval()
    if device is not None:
        model = model.to(device)
    if not tokenizer:
        return model, None
    return model, _from_pretrained(AutoTokenizer, tokenizer_dir or checkpoint, check and tokenizer_dir is not None)


def _from_pretrained(cls, folder: str | Path, check: bool, **kwargs):
    """``cls.from_pretrained(folder, **kwargs)`` after :func:`check_folder` (unless ``check`` is False); ValueError
    naming the bad file, or the folder when loading fails. A model loads with its own layers (``use_kernels=False``
    unless given: transformers >= 5.25 would otherwise swap some for kernels it downloads from the Hub, which fails
    offline and runs other code than on a CPU)."""
    folder = Path(folder)
    if check:
        check_folder(folder)
    if hasattr(cls, "from_config") or hasattr(cls, "_from_config"):  # a model class, not a tokenizer's
        kwargs.setdefault("use_kernels", False)
    try:
        return cls.from_pretrained(str(folder), **kwargs)
    except Exception as err:
        files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else "not a folder"
        raise ValueError(f"cannot load {folder} (files: {files}): {err}") from err


def load_matching(model, checkpoint: str | Path) -> list[str]:
    """Load into ``model`` the weights of a checkpoint folder whose names and shapes match its own (conversion: a
    Transformer's weights into Orthros, whose query scale-offsets keep their initial values); return the names of the
    tensors that kept their initial values. A tied LM head is re-tied when the checkpoint has none. Raises ValueError
    when the weights file does not read, or shares no parameter with ``model``."""
    from safetensors.torch import load_file

    path = Path(checkpoint) / WEIGHTS
    try:
        source = load_file(str(path))
    except Exception as err:
        raise ValueError(f"cannot read checkpoint file {path}: {err}") from err
    own = model.state_dict()
    loaded = {k: v for k, v in source.items() if k in own and own[k].shape == v.shape}
    if not loaded:
        raise ValueError(f"{path} shares no parameter (name and shape) with {type(model).__name__}")
    model.load_state_dict(loaded, strict=False)
    if "lm_head.weight" not in source and getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    return [k for k in own if k not in loaded]


def load_training_state(ckpt: str | Path, optimizer, scheduler, model=None) -> None:
    """Restore optimizer, scheduler and RNG state from trainer_state.pt; with ``model`` (plain, DDP or
    FSDP-sharded) the optimizer state goes through :func:`suite.train.distributed.load_optimizer`, so a
    checkpoint resumes on any number of ranks. Raises ValueError naming the file when it is missing or corrupt."""
    from suite.train.distributed import load_optimizer

    path = Path(ckpt) / STATE_PT
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        if model is None:
            optimizer.load_state_dict(state["optimizer"])
        else:
            load_optimizer(model, optimizer, state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    except Exception as err:
        raise ValueError(f"corrupt checkpoint file {path}: {err}") from err
    set_rng_state(state["rng"])
