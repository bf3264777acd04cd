"""Small helpers shared by the suite's training, evaluation and benchmark modules."""
from __future__ import annotations

import argparse
import os
import sys

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def autocast(device: str | torch.device, dtype: str):
    """``torch.autocast`` to ``dtype`` ("bfloat16"/"float16") on ``device``'s type, weights staying float32; a
    no-op context for "float32". Raises ValueError for an unknown dtype name."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {list(DTYPES)}")
    kind = torch.device(device).type
    if dtype == "float32":
        return torch.autocast(device_type=kind, enabled=False)
    return torch.autocast(device_type=kind, dtype=DTYPES[dtype])


def kernels_summary(fallback: str = "none") -> str:
    """The attention kernels ``models.kernels`` ran since its last ``reset_usage()``, sorted and joined with "+"
    (e.g. ``fla-window+sdpa-flash``), or ``fallback`` when none ran through it (transformers models, recurrent
    layers) or ``models.kernels`` does not import. Fallbacks in use: "none" (GPU benchmark ``kernel`` columns),
    "torch" (the ``backend`` column of training runs), "fla-naive"/"fla-triton" (MQAR rows)."""
    try:
        from models.kernels import kernels_used
    except ImportError:
        return fallback
    return "+".join(sorted(kernels_used())) or fallback


def size_name(text: str) -> str:
    """argparse ``type=`` of a ``--size`` option: ``text`` when it names a size of ``models.sizes.SIZES``, else
    ``argparse.ArgumentTypeError`` listing the known sizes (argparse then exits 2 naming the option)."""
    from models.sizes import get_size

    try:
        get_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def arch_name(text: str, extra: tuple[str, ...] = ()) -> str:
    """argparse ``type=`` of an ``--arch`` option: ``text`` when it names an architecture of
    ``models.registry.ARCHS`` (or one of ``extra``, a CLI's own models), else ``argparse.ArgumentTypeError`` listing
    the known ones (argparse then exits 2 naming the option)."""
    from models.registry import ARCHS

    known = sorted(ARCHS) + list(extra)
    if text not in known:
        raise argparse.ArgumentTypeError(f"unknown architecture {text!r}; known: {', '.join(known)}")
    return text


def arch_names(text: str) -> list[str]:
    """argparse ``type=`` of an ``--archs`` option: ``"orthros,transformer"`` -> a list, each checked by
    :func:`arch_name`."""
    archs = [arch_name(a.strip()) for a in text.split(",") if a.strip()]
    if not archs:
        raise argparse.ArgumentTypeError(f"give at least one architecture, got {text!r}")
    return archs


def size_names(text: str) -> list[str]:
    """argparse ``type=`` of a ``--sizes`` option: ``"12M,25M"`` -> a list, each checked by :func:`size_name`."""
    sizes = [size_name(s.strip()) for s in text.split(",") if s.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError(f"give at least one size, got {text!r}")
    return sizes


def kernel_names(text: str) -> list[str]:
    """argparse ``type=`` of a ``--prefer-*`` option: a comma list (empty: none) of ``models.kernels.KERNELS``."""
    from models.kernels import KERNELS

    names = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in names if k not in KERNELS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown attention kernel(s) {unknown}; known: {', '.join(KERNELS)}")
    return names


def quiet_hf_progress_bars() -> list[str]:
    """Turn off the Hugging Face libraries' progress bars (``--no-progress``): the documented switch of each of
    ``huggingface_hub``, ``transformers`` and ``datasets`` that is imported already (none is imported for it), and
    ``HF_HUB_DISABLE_PROGRESS_BARS`` / ``HF_DATASETS_DISABLE_PROGRESS_BARS`` for one imported later (a variable the
    user set wins; transformers follows huggingface_hub's). The ``tokenizers`` trainers take ``show_progress=False``
    where the suite trains one. Returns the imported libraries switched off."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    done = []
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
        done.append("huggingface_hub")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        done.append("transformers")
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
        done.append("datasets")
    return done
