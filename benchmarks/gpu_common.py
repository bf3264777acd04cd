"""Shared helpers of the GPU benchmarks: timing, errors against a reference, environment record, kernel usage,
incremental CSV output."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from benchmarks.targets import TARGETS
from models import kernels
from suite.common import kernels_summary
from suite.provenance import provenance, read_csv, write_csv


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, device, repeats: int = 3, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in ms over ``repeats`` calls after ``warmup`` calls (CUDA events on GPU)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        if torch.device(device).type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


class timed:
    """``with timed(device) as t: ...``: ``t.s`` is the wall time of the block in seconds, ``device`` synchronized
    (CUDA) before the clock starts and before it stops. A block that raises leaves ``t.s`` None (no final sync)."""

    def __init__(self, device):
        self.device, self.s = device, None

    def __enter__(self) -> "timed":
        sync(self.device)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            sync(self.device)
            self.s = time.perf_counter() - self._t0
        return False


def copy_bandwidth(device, nbytes: int | None = None) -> float:
    """Copy bandwidth in bytes/s counting read + write (``dst.copy_(src)`` moves 2 x nbytes); 256 MiB on CUDA."""
    nbytes = nbytes or (256 * 2**20 if torch.device(device).type == "cuda" else 2**22)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / (time_ms(lambda: dst.copy_(src), device, 10, 2) / 1e3)


def free(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def reset_peak(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device) -> float | None:
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return None


def errors(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype = torch.float64,
           floor: float | None = None) -> dict:
    """``{"rel_err": ||out - ref|| / ||ref|| (Frobenius), "max_abs_err": max |out - ref|}``, both tensors cast to
    ``dtype`` first and compared on their device; ``floor`` bounds the reference norm from below (None: no bound).
    The one error helper of the benchmarks (attn_kernels, fla_vs_naive, prefill_gpu, prefill_1m, e2e_gpu, engine)."""
    out, ref = out.to(dtype), ref.to(dtype)
    norm = ref.norm() if floor is None else ref.norm().clamp_min(floor)
    return {"rel_err": ((out - ref).norm() / norm).item(), "max_abs_err": (out - ref).abs().max().item()}


def model_kernels(model, device) -> str:
    """:func:`suite.common.kernels_summary` plus the FLA layers the model runs, e.g.
    ``sdpa-flash+fla-triton:GatedDeltaNet``."""
    layers = sorted({type(m.layer).__name__ for m in model.modules() if hasattr(m, "layer") and hasattr(m, "layer_idx")
                     and type(m.layer).__module__.startswith("fla.")})
    route = "fla-triton" if torch.device(device).type == "cuda" else "fla-naive"
    return "+".join([kernels_summary()] + [f"{route}:{name}" for name in layers])


def env_info(device) -> dict:
    """The GPU (column gpu_name; on a CPU also driver "none"); the library versions and a GPU's driver come with the
    provenance columns (:func:`suite.provenance.provenance`)."""
    if torch.device(device).type == "cuda":
        return {"gpu_name": torch.cuda.get_device_name(device)}
    return {"gpu_name": "none (cpu)", "driver": "none"}


PAIRS = {"transformer": "orthros", "linear_hybrid": "orthros_h"}  # baseline -> its Orthros counterpart


class RowWriter:
    """Collects result rows and rewrites the CSV after every row, so a killed run keeps what it measured.

    ``keep`` selects rows of an existing CSV to carry over (``--append`` runs); the rest are replaced. Pass/fail rows
    (a target or a check with its threshold) go through :meth:`target` into ``targets.csv`` beside the CSV.
    """

    def __init__(self, path: str | Path, common: dict, keep=None):
        self.path, self.common, self.rows, self.keep = Path(path), common, [], keep
        self.old = []
        if keep is not None and self.path.exists():
            self.old = [r for r in read_csv(self.path).to_dict("records") if keep(r)]
        self.start = time.perf_counter()
        self.targets: RowWriter | None = None

    def target(self, *, arch: str, method: str, target: str, value, threshold: float, status: str,
               **context) -> dict:
        """A pass/fail row of this benchmark: into ``targets.csv`` beside this CSV (``source`` names this CSV), not
        into this CSV. There, rows of other sources stay, and so do this source's that ``keep`` selects."""
        if self.targets is None:
            source, keep = self.path.name, self.keep
            self.targets = RowWriter(self.path.parent / TARGETS, self.common,
                                     keep=lambda r: r.get("source") != source or (keep is not None and keep(r)))
        return self.targets.add(source=self.path.name, arch=arch, method=method, target=target, value=value,
                                threshold=threshold, status=status, **context)

    def write(self) -> None:
        """Rewrite the CSV: measurement columns first, then environment and provenance columns."""
        frame = pd.DataFrame(self.old + self.rows)
        tail = [c for c in [*self.common["env"], *self.common["prov"]] if c in frame.columns]
        write_csv(frame[[c for c in frame.columns if c not in tail] + tail], self.path)

    def add(self, **row) -> dict:
        prov = dict(self.common["prov"])
        prov["wall_s"] = round(time.perf_counter() - self.start, 3)
        full = {**row, **self.common["env"], **prov}
        self.rows.append(full)
        self.write()
        return full


def common_columns(device, dtype_name: str, profile: str = "gpu") -> dict:
    return {"env": env_info(device), "prov": provenance(profile, 0, dtype_name, kernels.describe(device), str(device))}
