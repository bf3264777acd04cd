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
