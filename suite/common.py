"""Small helpers shared by the suite's training, evaluation and benchmark modules."""
from __future__ import annotations

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
