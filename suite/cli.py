"""The command lines' one way to refuse bad input: exit status 2 with a message naming the option, file or value,
before anything is written (argparse's own usage error).

* argparse ``type=`` functions (:func:`positive_int`, :func:`positive_float`, :func:`in_file`, :func:`out_file`,
  :func:`device_name`, ...): each raises ``argparse.ArgumentTypeError``, and argparse prints
  ``PROG: error: argument --opt: MESSAGE`` and exits 2 while parsing;
* :func:`usage_errors`, for a check that needs several options or an input file's content.

No torch (a device is checked with torch imported then) and no model code here: the corpus and tokenizer jobs use
it too, and the DAG reruns a job when a file it imports changes. The types that know the models (``--size``,
``--arch``) are in :mod:`suite.common`.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
from pathlib import Path

ArgumentTypeError = argparse.ArgumentTypeError


@contextlib.contextmanager
def usage_errors(parser: argparse.ArgumentParser, *kinds: type[Exception]):
    """Inside the block, an exception of ``kinds`` (default ValueError) stops the program as argparse does for a bad
    argument, with ``PROG: error: MESSAGE`` on stderr (after the usage line), exit status 2 and no traceback. For a
    CLI ``main``'s checks of its arguments and input files (an unknown size, a missing checkpoint or data folder, a
    damaged input CSV); the library functions it calls keep raising, so a caller in Python still gets the
    exception."""
    kinds = kinds or (ValueError,)
    try:
        yield
    except kinds as err:
        parser.error(str(err))


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
    if cast is float and not all(math.isfinite(v) for v in values):
        raise error(f"{name} must be finite {kind}, got {text!r}")
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


def positive_ints(text: str) -> list[int]:
    """argparse ``type=`` of a comma list of counts or lengths (``--lengths 256,1024``): integers >= 1."""
    return int_list(text, error=ArgumentTypeError)


def int_pairs(text: str, sep: str, form: str) -> list[tuple[int, int]]:
    """argparse helper of a comma list of integer pairs joined by ``sep`` (``"131072/128,130048/1024"``), each
    integer >= 1; ``form`` names the expected form in the error (e.g. ``"INPUT/OUTPUT token counts"``)."""
    pairs = []
    for item in text.split(","):
        try:
            a, b = (int(x) for x in item.split(sep))
        except ValueError:
            raise ArgumentTypeError(f"expected {form}, got {item!r}") from None
        if a < 1 or b < 1:
            raise ArgumentTypeError(f"{item!r}: both numbers must be >= 1 ({form})")
        pairs.append((a, b))
    return pairs


def positive_int(text: str, minimum: int = 1) -> int:
    """argparse ``type=`` of a count (steps, batch size): an integer >= ``minimum`` (default 1), else
    ``argparse.ArgumentTypeError`` naming the value (argparse then exits 2 naming the option)."""
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse ``type=`` of a count that may be 0 (warmup steps, a seed; a logging interval that 0 turns off)."""
    return positive_int(text, minimum=0)


def _float(text: str, ok, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and ok(value)):
        raise ArgumentTypeError(f"must be {what}, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse ``type=`` of a rate, tolerance or time budget: a finite number > 0."""
    return _float(text, lambda v: v > 0, "a number > 0")


def nonnegative_float(text: str) -> float:
    """argparse ``type=`` of a weight or a decay that may be 0: a finite number >= 0."""
    return _float(text, lambda v: v >= 0, "a number >= 0")


def fraction(text: str) -> float:
    """argparse ``type=`` of a share: a number in [0, 1]."""
    return _float(text, lambda v: 0 <= v <= 1, "a number in [0, 1]")


def in_file(text: str) -> str:
    """argparse ``type=`` of an input file option: ``text`` when it names an existing file."""
    return _existing(text, folder=False)


def in_folder(text: str) -> str:
    """argparse ``type=`` of an input folder option: ``text`` when it names an existing folder (an empty ``''``,
    which Path reads as the current folder, is refused)."""
    return _existing(text, folder=True)


def in_path(text: str) -> str:
    """argparse ``type=`` of an input that may be a file or a folder: ``text`` when it exists."""
    return _existing(text, folder=None)


def _existing(text: str, folder: bool | None) -> str:
    what = {True: "folder", False: "file", None: "file or folder"}[folder]
    if not text.strip():
        raise ArgumentTypeError(f"give a {what}, got {text!r}")
    path = Path(text)
    if not path.exists():
        raise ArgumentTypeError(f"{text}: no such {what}")
    if folder is not None and path.is_dir() != folder:
        raise ArgumentTypeError(f"{text} is a {'file' if folder else 'folder'}, not a {what}")
    return text


def out_file(text: str) -> str:
    """argparse ``type=`` of an output file option (``--out``): :func:`check_writable` as a usage error."""
    return _writable(text, folder=False)


def out_folder(text: str) -> str:
    """argparse ``type=`` of an output folder option (``--out-dir``): :func:`check_writable` as a usage error."""
    return _writable(text, folder=True)


def _writable(text: str, folder: bool) -> str:
    if not text.strip():
        raise ArgumentTypeError(f"give a {'folder' if folder else 'file'} to write, got {text!r}")
    try:
        check_writable(text, folder)
    except ValueError as err:
        raise ArgumentTypeError(str(err)) from None
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


def device_name(text: str) -> str:
    """argparse ``type=`` of a ``--device`` option: ``cpu``, ``cuda`` or ``cuda:N`` of a GPU this machine has."""
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ArgumentTypeError(f"{text!r} is not a device: cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise ArgumentTypeError(f"{text!r}: the suite runs on cpu or cuda")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            raise ArgumentTypeError(f"{text!r}: no CUDA device on this machine")
        if device.index is not None and device.index >= count:
            raise ArgumentTypeError(f"{text!r}: this machine has {count} CUDA device(s)")
    return text


def study(text: str) -> dict:
    """argparse ``type=`` of a ``--config`` option whose command reads the study config: the config ``text`` names (a
    profile name or a YAML path), loaded and validated here, once (``suite.config.load_config``), else its
    ConfigError as a usage error."""
    from suite.config import ConfigError, load_config

    try:
        return load_config(text)
    except ConfigError as err:
        raise ArgumentTypeError(str(err)) from None


def study_config(text: str) -> str:
    """argparse ``type=`` of a ``--config`` option kept as the name given: ``text`` when it names a study config that
    loads and validates (:func:`study`)."""
    study(text)
    return text


def config_values(items: list[str]) -> dict:
    """``["KEY=VALUE", ...]`` (``--override``) -> dict; values read as YAML (``1e6`` is a float, ``8`` an int,
    ``true`` a bool, ``silu`` a string). ValueError naming an item without ``=``."""
    from suite.config import load_yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        key, val = item.split("=", 1)
        out[key] = load_yaml(val)
    return out
