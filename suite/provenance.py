"""Provenance columns carried by every results row, and atomic CSV / text writing.

Every row in ``results/`` records where it came from: git commit, profile, device,
kernel backend, dtype, seed, wall time (seconds), the number of processes (``world_size``: 1 unless
the run was launched by torchrun over several GPUs/ranks) and the versions of the libraries its numbers depend on
(torch, Triton, transformers, FLA; the driver and CUDA on a GPU). ``write_csv`` / ``write_text`` write to a
temporary file and rename it, so an interrupted job never leaves a half-written file.
"""
from __future__ import annotations

import csv
import functools
import gzip
import io
import os
import platform
import re
import subprocess
import zlib
from importlib import metadata
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

PROVENANCE_COLUMNS = ["commit", "profile", "device", "backend", "dtype", "seed", "wall_s", "world_size"]
# read back as text whatever they look like: pandas would read the short hash 5638e28 as the float 5.638e+31
TEXT_COLUMNS = ("commit", "profile", "device", "backend", "dtype")


OUTPUT_PATHS = ("results", "paper_tables", "figures", "report.html")  # what runs write; not code


def git_commit(repo: str | Path | None = None) -> str:
    """Short commit hash of the working tree, suffixed ``-dirty`` when tracked files other than run outputs
    (``OUTPUT_PATHS``) differ; ``unknown`` outside git.

    ``repo`` (default: the project root, the folder above ``suite/``) must be the top level of its git
    checkout: a copy of the tree that is no checkout of its own (an archive unpacked inside another
    repository) records ``unknown``, never the enclosing repository's commit.
    ``SUITE_COMMIT`` in the environment wins: machines that get a copy of the tree without ``.git``
    (e.g. an offline GPU host that received the files alone) are told the commit by the command that starts them.
    """
    if os.environ.get("SUITE_COMMIT"):
        return os.environ["SUITE_COMMIT"]
    repo = Path(repo).resolve() if repo else Path(__file__).resolve().parents[1]
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.strip()
        if Path(top).resolve() != repo:
            return "unknown"
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout.strip()
        # only code counts: a run rewrites tracked results/tables/figures itself
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){p}" for p in OUTPUT_PATHS)], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# vendor marks and words that name no model, dropped from a CPU model name (cpu_model)
CPU_NAME_NOISE = re.compile(r"\((?:R|TM|tm|r)\)|\b(?:CPU|Processor|\d+-Core)\b|@.*$")


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU model, shortened: the first ``model name`` of ``cpuinfo`` (Linux) without vendor marks, clock and
    filler words (``Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz`` -> ``Intel Xeon Platinum 8480+``, ``AMD EPYC
    7763 64-Core Processor`` -> ``AMD EPYC 7763``), else ``platform.processor()``; "" when neither names one."""
    name = ""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            name = next((line.split(":", 1)[1] for line in fh if line.startswith("model name") and ":" in line), "")
    except OSError:
        pass
    name = name.strip() or platform.processor()
    return " ".join(CPU_NAME_NOISE.sub(" ", name).split())


def device_name(device: str = "cpu") -> str:
    """Human-readable device: the GPU name for CUDA devices, else ``cpu:<machine>x<cores>`` followed by the CPU
    model where it is known: ``cpu:x86_64x2 (AMD EPYC 7763)`` (rows written before the model was added read
    ``cpu:x86_64x2``)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    machine, model = platform.machine() or "unknown", cpu_model()
    return f"cpu:{machine}x{os.cpu_count()}" + (f" ({model})" if model and model != machine else "")


# the libraries a row's numbers depend on besides torch, by distribution name (importlib.metadata reads the installed
# version without importing the library: importing FLA alone takes ~30 s on a CPU host)
SOFTWARE = {"triton": ("triton",), "transformers": ("transformers",), "fla": ("flash-linear-attention", "fla-core")}
SOFTWARE_COLUMNS = ["torch", *SOFTWARE, "driver", "cuda"]


@functools.lru_cache(maxsize=None)
def _installed(dists: tuple[str, ...]) -> str:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "absent"


@functools.lru_cache(maxsize=None)
def _driver() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, check=True, timeout=20).stdout.split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def software_versions(device: str = "cpu") -> dict:
    """torch / triton / transformers / FLA versions (``absent`` where not installed), and on CUDA devices the GPU
    driver and the CUDA version torch was built with (``SOFTWARE_COLUMNS``)."""
    import torch

    versions = {"torch": torch.__version__, **{name: _installed(dists) for name, dists in SOFTWARE.items()}}
    if str(device).startswith("cuda"):
        versions.update(driver=_driver(), cuda=torch.version.cuda)
    return versions


def provenance(profile: str, seed: int | None, dtype: str, backend: str, device: str = "cpu",
               wall_s: float | None = None, world_size: int = 1) -> dict:
    """The provenance columns (``PROVENANCE_COLUMNS``), then the library versions (``software_versions``), as a
    dict ready to merge into a results row.

    ``world_size``: processes (ranks) that produced the row, e.g. 2 for ``torchrun --nproc_per_node 2``.
    Raises ValueError when it is not a positive integer.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    return {"commit": git_commit(), "profile": profile, "device": device_name(device), "backend": backend,
            "dtype": dtype, "seed": seed, "wall_s": None if wall_s is None else round(float(wall_s), 3),
            "world_size": world_size, **software_versions(device)}


def write_csv(rows: Iterable[Mapping] | pd.DataFrame, path: str | Path) -> Path:
    """Write rows to ``path`` atomically (temp file + rename). Parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    # a name of this process's own, created as any file is (mkstemp's would leave the result 0600)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_text(text: str, path: str | Path) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (temp file + rename). Parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def check_whole(path: Path, data: bytes) -> None:
    """ValueError naming ``path`` unless ``data`` (its bytes) is a whole CSV as :func:`write_csv` writes one: ending
    in a newline, every row with the header's number of fields. pandas reads a file cut short (a copy or a write that
    stopped) without a word, filling its last row's missing cells as empty; a file cut at a line's end cannot be
    told from a shorter one."""
    if data and not data.endswith(b"\n"):
        raise ValueError(f"truncated CSV {path}: its last line has no line end (a file cut short?)")
    rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace"), newline=""))
    header = next(rows, [])
    for i, row in enumerate(rows, 1):
        if row and len(row) != len(header):
            raise ValueError(f"damaged CSV {path} row {i}: {len(row)} fields where the header has {len(header)}")


def read_csv(path: str | Path) -> pd.DataFrame:
    """Read a results CSV, its ``TEXT_COLUMNS`` as strings (a commit hash such as ``5638e28`` is not a number, and a
    device ``n/a`` or ``NA`` is not missing: only an empty cell is).

    A ``.gz`` path is a gzip-compressed CSV (the per-document outcomes kept in git). A missing file raises
    FileNotFoundError; an empty, cut short (:func:`check_whole`) or corrupt one ValueError naming it (and the data
    row, 1 = the first after the header, where one is short or long)."""
    path = Path(path)
    try:
        data = path.read_bytes()  # once: the checks and both parses read these bytes
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        check_whole(path, data)
        frame = pd.read_csv(io.BytesIO(data), dtype=dict.fromkeys(TEXT_COLUMNS, str))
        text = [c for c in TEXT_COLUMNS if c in frame.columns]
        if text and len(frame):
            as_written = pd.read_csv(io.BytesIO(data), usecols=text, dtype=str, keep_default_na=False)
            frame[text] = as_written[text].where(as_written[text] != "")  # usecols keeps the file's order
        return frame
    except FileNotFoundError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            gzip.BadGzipFile, EOFError, zlib.error) as err:  # the last three: a damaged .gz
        raise ValueError(f"corrupt CSV {path}: {err}") from err
