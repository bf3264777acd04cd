"""Small helpers shared by the suite's training, evaluation and benchmark modules."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

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


def number_list(text, cast=int, name: str = "values", *, minimum: float | None = None, maximum: float | None = None,
                allow_empty: bool = False, error: type[Exception] = ValueError) -> list:
    """A CLI list of numbers: ``"1,2,4"`` -> [1, 2, 4] with ``cast`` (int or float; blank items skipped, order kept).

    Raises ``error`` (ValueError; pass ``argparse.ArgumentTypeError`` for an argparse ``type=``) naming ``name`` and
    the text when an item is not a number of that kind, when none is given (unless ``allow_empty``), or when a value
    lies outside [``minimum``, ``maximum``] (None: no bound).
    """
    kind = "integers" if cast is int else "numbers"
    try:
        values = [cast(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise error(f"{name} must be comma-separated {kind}, got {text!r}") from None
    if not values and not allow_empty:
        raise error(f"{name} must hold at least one value, got {text!r}")
    if minimum is not None and any(v < minimum for v in values):
        raise error(f"{name} must be {kind} >= {minimum}, got {text!r}")
    if maximum is not None and any(v > maximum for v in values):
        raise error(f"{name} must be {kind} <= {maximum}, got {text!r}")
    return values


def int_list(text, name: str = "values", *, minimum: int | None = 1, allow_empty: bool = False,
             error: type[Exception] = ValueError) -> list[int]:
    """:func:`number_list` of integers, by default each >= 1."""
    return number_list(text, int, name, minimum=minimum, allow_empty=allow_empty, error=error)


def positive_int(text: str, minimum: int = 1) -> int:
    """argparse ``type=`` of a count (steps, batch size): an integer >= ``minimum`` (default 1), else
    ``argparse.ArgumentTypeError`` naming the value (argparse then exits 2 naming the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse ``type=`` of a count that may be 0 (warmup steps; a logging interval that 0 turns off)."""
    return positive_int(text, minimum=0)


def out_file(text: str) -> str:
    """argparse ``type=`` of an output file option (``--out``): :func:`check_writable` as a usage error."""
    return _writable(text, folder=False)


def out_folder(text: str) -> str:
    """argparse ``type=`` of an output folder option (``--out-dir``): :func:`check_writable` as a usage error."""
    return _writable(text, folder=True)


def _writable(text: str, folder: bool) -> str:
    try:
        check_writable(text, folder)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def check_writable(path: str | Path, folder: bool = False) -> None:
    """Raise ValueError naming ``path`` unless a file (``folder``: a folder) can be written there: no folder (file)
    of that name in the way, and the nearest existing folder on its path is a folder this process can create files
    in (tried with a temporary file, removed at once). For a CLI's output option, checked before any work, so that a
    bad path (``/proc/x.csv``, a path under a file) stops at once instead of after the training."""
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        raise ValueError(f"cannot write {path}: it is a {'file' if folder else 'folder'}")
    parent = path if path.is_dir() else path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"cannot write {path}: {parent} is a file, not a folder")
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as err:
        raise ValueError(f"cannot write {path}: cannot create files in {parent} ({err.strerror})") from None


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


@contextlib.contextmanager
def usage_errors(parser: argparse.ArgumentParser, *kinds: type[Exception]):
    """The command lines' one way to refuse bad input: inside the block, an exception of ``kinds`` (default
    ValueError) stops the program as argparse does for a bad argument, with ``PROG: error: MESSAGE`` on stderr
    (after the usage line), exit status 2 and no traceback. For a CLI ``main``'s checks of its arguments and input
    files (an unknown size, a missing checkpoint or data folder, a damaged input CSV); the library functions it calls
    keep raising, so a caller in Python still gets the exception."""
    kinds = kinds or (ValueError,)
    try:
        yield
    except kinds as err:
        parser.error(str(err))


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
